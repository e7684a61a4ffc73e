"""GSPOTrainer with dynamic sampling (`GSPOConfig(dynamic_sampling=True)`): the sampler and bridge DAPOTrainer uses.

GSPO without it is covered by test_gspo.py (unchanged) and test_objectives.py (loss and gradient).
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings
from trl import TrlParser

from trl_ext import DAPOConfig, GSPOConfig, GSPOTrainer
from trl_ext.sampling import DynamicSampler
from trl_ext.trainers.trl_bridge import DYNAMIC_SAMPLING_STATE_FILE, FRESH_OLD_LOGPS

GROUP = 4


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def small_config(tmp_path, **overrides) -> GSPOConfig:
    # GSPO's default schedule: one generation batch of 4 x 4 completions (4 groups) feeds 4 updates of one group.
    settings = {"per_device_train_batch_size": 4, "num_generations": GROUP, "dynamic_sampling": True, **overrides}
    return GSPOConfig(**tiny_training_settings(tmp_path, **settings))


def varied_reward_for_odd_ids(prompts, completions, id, **kwargs):
    """Constant for even prompt ids (uninformative groups); different for each completion of odd ids."""
    return [0.0 if i % 2 == 0 else float(index) for index, i in enumerate(id)]


def prompt_id(text: str) -> int:
    return int(re.match(r"(\d+)\+", text).group(1))


def record_batches(trainer) -> list[dict]:
    batches = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(generate(inputs)) or batches[-1]
    return batches


def logged(trainer, name) -> list[float]:
    return [entry[name] for entry in trainer.state.log_history if name in entry]


def make_trainer(tmp_path, tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, **overrides) -> GSPOTrainer:
    config = small_config(tmp_path, **{"max_steps": 8, "learning_rate": 5e-2, **overrides})
    return GSPOTrainer(tiny_model_dir, reward_funcs=reward_funcs, args=config, train_dataset=make_prompt_dataset(32))


# ---------------------------------------------------------------------------------------------------- config


def test_dynamic_sampling_is_off_by_default_and_on_by_choice(tmp_path):
    assert small_config(tmp_path, dynamic_sampling=False).dynamic_sampling is False
    assert GSPOConfig(**tiny_training_settings(tmp_path)).dynamic_sampling is False
    config = small_config(tmp_path)
    assert config.dynamic_sampling is True
    # Defaults resolved as DAPOConfig resolves them: a carried group waits for the next generation batch (4 updates).
    assert config.dynamic_sampling_carry_max_staleness == 4
    assert config.dynamic_sampling_carry_max_groups == 4
    assert config.updates_per_generation == 4  # GSPOConfig's own (a float when fractional) is kept
    (parsed,) = TrlParser(GSPOConfig).parse_args_and_config(
        ["--output_dir", str(tmp_path), "--dynamic_sampling", "true", "--use_cpu", "--bf16=false"]
    )
    assert parsed.dynamic_sampling is True


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"dynamic_sampling_max_rounds": 0}, "dynamic_sampling_max_rounds"),
        ({"dynamic_sampling_on_exhausted": "skip"}, "dynamic_sampling_on_exhausted"),
        ({"dynamic_sampling_confidence": 0.0}, "dynamic_sampling_confidence"),
        ({"dynamic_sampling_max_oversampling": 0.5}, "dynamic_sampling_max_oversampling"),
        ({"dynamic_sampling_max_skip_probability": 1.0}, "dynamic_sampling_max_skip_probability"),
        ({"dynamic_sampling_carry_max_staleness": -1}, "dynamic_sampling_carry_max_staleness"),
        ({"dynamic_sampling_carry_max_groups": -1}, "dynamic_sampling_carry_max_groups"),
    ],
)
def test_invalid_settings_fail_at_construction_naming_the_field(tmp_path, overrides, field):
    with pytest.raises(ValueError, match=field):
        small_config(tmp_path, **overrides)


def test_unknown_filter_reward_fails_at_construction_listing_names(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match=r"dynamic_sampling_filter_reward='accuracy'.*varied_reward_for_odd_ids"):
        make_trainer(tmp_path, tiny_model_dir, dynamic_sampling_filter_reward="accuracy")


@pytest.mark.parametrize("config_class,default", [(DAPOConfig, True), (GSPOConfig, False)])
def test_each_config_documents_every_dynamic_sampling_field_with_its_default(config_class, default):
    doc = inspect.getdoc(config_class)
    names = [field.name for field in dataclasses.fields(config_class) if field.name.startswith("dynamic_sampling")]
    assert len(names) >= 9
    for field in dataclasses.fields(config_class):
        if field.name in names:
            value = f'"{field.default}"' if isinstance(field.default, str) else repr(field.default)
            assert f"\n    {field.name} (`" in doc and f"defaults to `{value}`):" in doc, field.name
            assert field.metadata.get("help"), field.name
    assert f"dynamic_sampling (`bool`, *optional*, defaults to `{default}`)" in doc


# ---------------------------------------------------------------------------------------------------- training


@pytest.mark.parametrize("level", ["sequence", "sequence_token"])
def test_only_informative_groups_reach_the_loss(tmp_path, tiny_model_dir, level):
    trainer = make_trainer(tmp_path, tiny_model_dir, importance_sampling_level=level)
    assert type(trainer.sampler) is DynamicSampler
    batches = record_batches(trainer)
    initial = {name: value.clone() for name, value in trainer.model.state_dict().items()}
    trainer.train()

    assert trainer.state.global_step == 8 and len(batches) == 2  # two generation batches of 4 updates
    for batch in batches:
        assert batch["completion_ids"].size(0) == 16  # the whole generation batch, 4 groups
        texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
        ids = [prompt_id(text) for text in texts]
        trained = batch["completion_mask"].sum(-1) > 0
        for group in range(0, len(ids), GROUP):
            rows = slice(group, group + GROUP)
            assert len(set(ids[rows])) == 1  # whole groups
            # Informative (odd id), or a filler that trains on nothing.
            assert ids[group] % 2 == 1 or not trained[rows].any(), ids
            if ids[group] % 2 == 1:
                assert (batch["advantages"][rows] != 0).all()
    assert any(not torch.equal(initial[k], v) for k, v in trainer.model.state_dict().items())

    rounds = logged(trainer, "dynamic_sampling/generation_rounds")
    assert len(rounds) == 2 and rounds[0] >= 2  # the first batch met uninformative groups with nothing known yet
    for name in ("prompts_sampled", "groups_kept_fraction", "carried_groups", "rounds_exhausted"):
        assert len(logged(trainer, f"dynamic_sampling/{name}")) == 2, name
    ratio_min, ratio_max = logged(trainer, "gspo/seq_ratio/min"), logged(trainer, "gspo/seq_ratio/max")
    assert len(ratio_min) == len(ratio_max) == 8
    # The first update is on-policy; later ones (and carried groups) are not.
    assert ratio_min[0] == pytest.approx(1.0, abs=1e-5) and ratio_max[0] == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 < ratio < float("inf") for ratio in ratio_min + ratio_max)
    assert all(torch.isfinite(torch.tensor(logged(trainer, "loss"))))


def test_checkpoint_holds_the_sampler_state_and_resumes(tmp_path, tiny_model_dir):
    first = make_trainer(tmp_path, tiny_model_dir, max_steps=4, save_strategy="steps", save_steps=4)
    first.train()
    checkpoint = tmp_path / "out" / "checkpoint-4"
    assert (checkpoint / DYNAMIC_SAMPLING_STATE_FILE).exists()

    resumed = make_trainer(tmp_path, tiny_model_dir, max_steps=8)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 8
    assert resumed.sampler.keep_rates[0].estimate() is not None  # restored: the first batch knew nothing


def judges_odd_ids_only(prompts, completions, id, **kwargs):
    """Cannot judge even ids (None); completions of odd ids score their position."""
    return [None if i % 2 == 0 else float(index % GROUP) for index, i in enumerate(id)]


def length_bonus(completions, **kwargs):
    return [0.01 * len(completion) for completion in completions]


length_bonus.shaping = True  # shapes a reward, never judges an answer


@pytest.mark.parametrize("dynamic_sampling", [True, False])
def test_rows_no_judging_reward_scored_stay_unscorable(tmp_path, tiny_model_dir, dynamic_sampling):
    trainer = make_trainer(
        tmp_path, tiny_model_dir, reward_funcs=[judges_odd_ids_only, length_bonus], dynamic_sampling=dynamic_sampling
    )
    assert trainer._judging.tolist() == [True, False]
    if dynamic_sampling:
        assert trainer.sampler.settings.filter_used.tolist() == [True, False]
    inputs = [{"prompt": f"{i}+{i}=", "id": i} for i in (2, 3)]
    rewards = trainer._calculate_rewards(inputs, [row["prompt"] for row in inputs], ["ab", "abc"], [[1, 2], [1, 2, 3]])
    assert torch.isnan(rewards[0]).all()  # the shaping reward's number does not make the row judged
    assert rewards[1].tolist() == pytest.approx([1.0, 0.03])


def test_fresh_rows_take_old_log_probs_from_the_training_forward_before_gspo_token_uses_them(
    tmp_path, tiny_model_dir
):
    """The bridge's overrides run inside GSPO's: in a batch holding a carried group, a fresh row's old log-probs
    come from the training forward (ratio exactly 1), the carried row keeps its behaviour policy's."""
    trainer = make_trainer(tmp_path, tiny_model_dir, importance_sampling_level="sequence_token")
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by TRL's training step
    prompt_ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    completion_ids = torch.tensor([[11, 12, 13, 14], [15, 16, 17, 18]])
    ones = torch.ones_like
    current = trainer._policy_log_probs(prompt_ids, ones(prompt_ids), completion_ids, ones(completion_ids))
    old = torch.zeros_like(current)
    old[0] = current[0] - 0.1  # row 0 carried: generated by a policy that gave each token e^-0.1 its probability
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": ones(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": ones(completion_ids),
        "advantages": torch.tensor([1.0, -1.0]),
        "old_per_token_logps": old,
        FRESH_OLD_LOGPS: torch.tensor([False, True]),
        "num_items_in_batch": torch.tensor(8),
    }
    loss = trainer._compute_loss(trainer.model, inputs)
    assert torch.isfinite(loss)
    metrics = trainer._metrics["train"]
    assert metrics["gspo/seq_ratio/min"][-1] == pytest.approx(1.0, abs=1e-5)  # the fresh row
    assert metrics["gspo/seq_ratio/max"][-1] == pytest.approx(torch.tensor(0.1).exp().item(), abs=1e-4)
    assert torch.allclose(old[1], current[1], atol=1e-5)  # filled by the bridge from the training forward
