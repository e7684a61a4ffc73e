"""Dynamic sampling with a `rollout_func`: extra per-row fields stay with their completion across rounds, fields that
are not per-row are refused by name, and carried rows take the rollout's own log-probs instead of a forward."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings
from transformers import GenerationConfig

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer

GROUP = 4


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def prompt_id(text: str) -> int:
    return int(re.match(r"(\d+)\+", text).group(1))


class SamplingRollout:
    """A rollout function sampling from the trainer's own model, one prompt at a time, returning the sampled tokens'
    log-probs (or None) and per-row extra fields: a fingerprint of the completion and the prompt's id."""

    def __init__(self, return_logprobs: bool = True, extra=None):
        self.return_logprobs = return_logprobs
        self.extra = extra  # replaces the per-row extra fields, to return malformed ones
        self.logprobs_by_completion: dict[tuple, list[float]] = {}

    def __call__(self, prompts, trainer):
        tokenizer, model = trainer.processing_class, trainer.accelerator.unwrap_model(trainer.model)
        config = GenerationConfig(
            do_sample=True,
            top_k=0,  # no warper: the scores are the model's own distribution
            top_p=1.0,
            temperature=1.0,
            max_new_tokens=trainer.args.max_completion_length,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        prompt_ids, completion_ids, logprobs = [], [], []
        with torch.no_grad():
            for prompt in prompts:
                ids = tokenizer(prompt)["input_ids"]
                out = model.generate(
                    torch.tensor([ids]),
                    generation_config=config,
                    output_scores=True,
                    return_dict_in_generate=True,
                )
                completion = out.sequences[0, len(ids) :].tolist()
                scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
                prompt_ids.append(ids)
                completion_ids.append(completion)
                logprobs.append(scores[: len(completion)].tolist())
                self.logprobs_by_completion[(prompt_id(prompt), tuple(completion))] = logprobs[-1]
        extra = self.extra or {
            "fingerprint": [f"{prompt_id(p)}:{c}" for p, c in zip(prompts, completion_ids, strict=True)],
            "source_id": [prompt_id(p) for p in prompts],
        }
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs if self.return_logprobs else None,
            **extra,
        }


def informative_odd_ids(prompts, completions, completion_ids, id, fingerprint, source_id, **kwargs):
    """Odd ids: `0.1 * id + position in the group` (informative); even ids: 0 for the whole group. Every row's extra
    fields must be its own completion's: a row mixed up with another fails here."""
    for i, ids, fp, source in zip(id, completion_ids, fingerprint, source_id, strict=True):
        assert source == i and fp == f"{i}:{list(ids)}", (i, source, fp, ids)
    return [0.0 if i % 2 == 0 else 0.1 * i + index % GROUP for index, i in enumerate(id)]


def make_trainer(tmp_path, model_dir, rollout, trainer_cls=DAPOTrainer, config_cls=DAPOConfig, **overrides):
    settings = {
        "per_device_train_batch_size": 8,
        "num_generations": GROUP,
        "max_steps": 3,
        "learning_rate": 1e-2,
        **({"soft_overlong_punishment": False} if config_cls is DAPOConfig else {}),
        **overrides,
    }
    config = config_cls(**tiny_training_settings(tmp_path, **settings))
    return trainer_cls(
        model_dir,
        reward_funcs=informative_odd_ids,
        args=config,
        train_dataset=make_prompt_dataset(64),
        rollout_func=rollout,
    )


def record_scoring(trainer):
    """Every `(inputs, completion_ids)` that reward scoring sees: each round, and the assembled batch."""
    seen = []
    calculate = trainer._calculate_rewards

    def recording(inputs, prompts, completions, completion_ids_list):
        seen.append(([dict(row) for row in inputs], [list(ids) for ids in completion_ids_list]))
        return calculate(inputs, prompts, completions, completion_ids_list)

    trainer._calculate_rewards = recording
    return seen


def count_no_grad_forward_rows(trainer):
    """Rows through log-prob forwards outside the training forward, and rows trained (kept, fillers excluded)."""
    counts = {"no_grad": 0, "kept": 0}
    forward = trainer._get_per_token_logps_and_entropies

    def counting(model, input_ids, *args, **kwargs):
        if not torch.is_grad_enabled():
            counts["no_grad"] += input_ids.size(0)
        return forward(model, input_ids, *args, **kwargs)

    train_on = trainer.train_on

    def training_on(batch):
        counts["kept"] += batch.num_kept_rows
        return train_on(batch)

    trainer._get_per_token_logps_and_entropies = counting
    trainer.train_on = training_on
    return counts


def test_extra_fields_stay_with_their_completion_and_carried_rows_use_the_rollouts_log_probs(
    tmp_path, tiny_model_dir
):
    rollout = SamplingRollout()
    trainer = make_trainer(tmp_path, tiny_model_dir, rollout)
    seen = record_scoring(trainer)
    carried_logps = []
    take = trainer.sampler.carry.take
    trainer.sampler.carry.take = lambda *args: carried_logps.append(take(*args)) or carried_logps[-1]
    trainer.train()

    rounds = [entry for entry in trainer.state.log_history if "dynamic_sampling/generation_rounds" in entry]
    assert sum(entry["dynamic_sampling/carried_groups"] for entry in rounds) > 0
    # Every scoring, the assembled batch included, saw each row's extra fields with its own completion (the reward
    # asserts it), and the assembled batches hold only informative (odd) groups.
    assembled = [inputs for inputs, _ in seen if len(inputs) == 8]
    assert len(assembled) >= 3
    for inputs, completion_ids in seen:
        assert all(row["fingerprint"] == f"{row['id']}:{ids}" for row, ids in zip(inputs, completion_ids))
    # Carried rows' behaviour log-probs are the rollout's own, not a forward's.
    for taken, _ in carried_logps:
        for group in taken:
            for ids, logps in zip(group.payload["rows"]["completion_ids"], group.payload["logps"], strict=True):
                source = group.prompt_index
                assert torch.equal(logps, torch.tensor(rollout.logprobs_by_completion[(source, tuple(ids))]))


@pytest.mark.slow
def test_rollout_log_probs_remove_the_carry_forward(tmp_path, tiny_model_dir):
    """Forward rows per kept row (reference forward with beta > 0, plus the carried rows' behaviour forwards)."""
    ratios = {}
    for return_logprobs in (True, False):
        trainer = make_trainer(
            tmp_path / str(return_logprobs), tiny_model_dir, SamplingRollout(return_logprobs), beta=0.04
        )
        counts = count_no_grad_forward_rows(trainer)
        trainer.train()
        carried = sum(e.get("dynamic_sampling/carried_groups", 0) for e in trainer.state.log_history)
        assert carried > 0
        ratios[return_logprobs] = counts["no_grad"] / counts["kept"]
    assert ratios[True] <= 1.05  # only TRL's reference forward of the kept rows
    assert ratios[False] > 1.05  # carried rows cost one behaviour forward each


@pytest.mark.parametrize(
    "extra, field",
    [({"batch_note": "same for all"}, "batch_note"), ({"scores": [1.0, 2.0]}, "scores")],
)
def test_extra_fields_that_are_not_per_row_are_refused_by_name(tmp_path, tiny_model_dir, extra, field):
    trainer = make_trainer(tmp_path, tiny_model_dir, SamplingRollout(extra=extra), max_steps=1)
    with pytest.raises(ValueError, match=f"field '{field}'"):
        trainer.train()


def test_gspo_trains_with_a_rollout_func(tmp_path, tiny_model_dir):
    """GSPOTrainer (TRL's loop with GSPO's sequence ratio, no dynamic sampling) with the same rollout."""
    trainer = make_trainer(tmp_path, tiny_model_dir, SamplingRollout(), GSPOTrainer, GSPOConfig, max_steps=2)
    seen = record_scoring(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    assert all(row["fingerprint"] == f"{row['id']}:{ids}" for inputs, c in seen for row, ids in zip(inputs, c))
