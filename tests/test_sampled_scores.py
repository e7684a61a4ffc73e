"""The sampled tokens' log-probs recorded while `transformers` generates: equal to TRL's training forward, used as
carried groups' behaviour log-probs, and replaced by a forward where a model changes its logits after the output
layer."""

from __future__ import annotations

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings, transformers_logs
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.trainers import trl_bridge
from trl_ext.trainers.sampled_scores import SampledTokenScores, scores_agree

GROUP = 4


def forward_log_probs(model, prompt_ids, completion_ids, temperature):
    """TRL's definition: the completion tokens' log-probs of `logits / temperature`, no truncation."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    logits = model(input_ids=ids).logits[:, prompt_ids.size(1) - 1 : -1] / temperature
    return torch.log_softmax(logits.float(), dim=-1).gather(2, completion_ids.unsqueeze(2)).squeeze(2)


@pytest.mark.parametrize("top_k", [0, 5])  # the policy's log-probs, whatever the sampler truncated to
def test_recorded_log_probs_equal_the_forward(tiny_model_dir, top_k):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt_ids = torch.tensor([tokenizer("12+3=")["input_ids"]] * 3)
    with torch.no_grad(), SampledTokenScores(model, temperature=0.7) as recorder:
        output = model.generate(
            prompt_ids, do_sample=True, temperature=0.7, top_k=top_k, max_new_tokens=6, min_new_tokens=6
        )
    completion_ids = output[:, prompt_ids.size(1) :]
    recorded = recorder.log_probs(completion_ids.tolist())
    with torch.no_grad():
        expected = forward_log_probs(model, prompt_ids, completion_ids, 0.7)
    assert torch.allclose(torch.tensor(recorded), expected, atol=1e-5)
    # Shorter completions (cut at their end of sequence) take the first values of their steps.
    cut = recorder.log_probs([row[:3] for row in completion_ids.tolist()])
    assert torch.allclose(torch.tensor(cut), expected[:, :3], atol=1e-5)


def test_recording_refuses_two_generate_calls_and_foreign_completions(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompt_ids = torch.tensor([[3, 4, 5]])
    with torch.no_grad(), SampledTokenScores(model, temperature=1.0) as recorder:
        first = model.generate(prompt_ids, do_sample=True, max_new_tokens=4, min_new_tokens=4)
        model.generate(prompt_ids, do_sample=True, max_new_tokens=4, min_new_tokens=4)
    assert recorder.log_probs(first[:, 3:].tolist()) is None  # which call's steps? none are trusted
    with torch.no_grad(), SampledTokenScores(model, temperature=1.0) as recorder:
        output = model.generate(prompt_ids, do_sample=True, max_new_tokens=4, min_new_tokens=4)
    assert recorder.log_probs([output[0, 3:].tolist() + [1]]) is None  # longer than what was generated
    assert recorder.log_probs(output[:, 3:].tolist() * 2) is None  # other rows
    # The hooks are gone after the context.
    assert not model._forward_pre_hooks and not model.get_output_embeddings()._forward_hooks


def test_scores_agree_within_the_tolerance_only():
    values = torch.tensor([-1.0, -2.0, -0.5])
    assert scores_agree([(values, values + 5e-4)])
    assert not scores_agree([(values, values + 5e-3)])
    assert not scores_agree([(values, values[:2])])


def id_and_position_reward(prompts, completions, id, **kwargs):
    """Odd ids informative, even ids uninformative: about half the groups are surplus or dropped."""
    return [0.0 if i % 2 == 0 else 0.1 * i + index % GROUP for index, i in enumerate(id)]


def carrying_trainer(tmp_path, model_dir):
    config = DAPOConfig(
        **tiny_training_settings(
            tmp_path,
            per_device_train_batch_size=8,
            num_generations=GROUP,
            max_steps=4,
            soft_overlong_punishment=False,
            dynamic_sampling_carry_max_staleness=1,
        )
    )
    return DAPOTrainer(
        model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(64)
    )


def count_carry_forwards(trainer) -> list[int]:
    rows = []
    forward = trainer._policy_log_probs
    trainer._policy_log_probs = lambda prompt_ids, *args: rows.append(prompt_ids.size(0)) or forward(prompt_ids, *args)
    return rows


def test_carried_groups_use_the_recorded_log_probs_after_one_check(tmp_path, tiny_model_dir):
    trainer = carrying_trainer(tmp_path, tiny_model_dir)
    forwarded = count_carry_forwards(trainer)
    carried = []
    add = trainer.sampler.carry.add
    trainer.sampler.carry.add = lambda groups: carried.append(list(groups)) or add(groups)
    trainer.train()
    surplus = [groups for groups in carried if groups]
    assert len(surplus) >= 2  # the check, then at least one batch that relies on it
    assert trainer._recorded_scores_agree is True
    assert sum(forwarded) == GROUP * len(surplus[0])  # one forward, for the first surplus groups only
    # What a carried group holds is what it was generated with: its recorded log-probs, one per token.
    for group in surplus[-1]:
        for row, logps in enumerate(group.payload["logps"]):
            assert logps.tolist() == pytest.approx(group.payload["rows"]["policy_logprobs"][row], abs=1e-7)


def test_recorded_log_probs_that_disagree_with_the_forward_are_replaced_by_a_forward(
    tmp_path, tiny_model_dir, caplog, monkeypatch
):
    # A recorder off by a temperature stands for a model that changes its logits after the output layer (as Gemma 2
    # soft-caps them): the first check finds the difference and every carried row takes a forward from then on.
    monkeypatch.setattr(
        trl_bridge, "SampledTokenScores", lambda model, temperature: SampledTokenScores(model, 1.5 * temperature)
    )
    trainer = carrying_trainer(tmp_path, tiny_model_dir)
    forwarded = count_carry_forwards(trainer)
    carried = []
    add = trainer.sampler.carry.add
    trainer.sampler.carry.add = lambda groups: carried.append(len(groups)) or add(groups)
    with transformers_logs(caplog):
        trainer.train()
    assert trainer._recorded_scores_agree is False
    assert "differ from the training forward" in caplog.text
    assert sum(forwarded) == GROUP * sum(carried)  # every carried row took a forward
