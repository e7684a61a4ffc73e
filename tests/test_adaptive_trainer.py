"""The adaptive sampling mode in the trainers: its advantages, its metrics, resume, GSPO, and bad settings."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings
from test_dapo_trainer import (
    GROUP,
    batch_prompt_ids,
    interrupted_and_resumed,
    metric_history,
    record_batches,
    varied_reward_for_odd_ids,
)

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer


def adaptive_config(tmp_path, config_class=DAPOConfig, **overrides):
    settings = {
        "per_device_train_batch_size": 8,
        "num_generations": GROUP,
        "max_steps": 2,
        "learning_rate": 1e-3,
        "dynamic_sampling": True,
        "dynamic_sampling_mode": "adaptive",
        **overrides,
    }
    return config_class(**tiny_training_settings(tmp_path, **settings))


def first_visit_then_always_wrong(prompts, completions, id, **kwargs):
    """Odd ids: right once (the first completion of a prompt's first group), then always wrong; even ids: 0."""
    rewards = []
    for index, i in enumerate(id):
        seen = first_visit_then_always_wrong.seen
        rewards.append(1.0 if i % 2 and i not in seen and index % GROUP == 0 else 0.0)
        if index % GROUP == GROUP - 1:
            seen.add(i)
    return rewards


def test_advantages_are_the_leave_one_out_baseline_without_std(tmp_path, tiny_model_dir):
    """First visit, no history: A_i = R_i - mean of the group's others. Rewards 4k..4k+3 give (R - mean) * G/(G-1)
    = [-2, -2/3, 2/3, 2], not TRL's std-normalised [-1.16, -0.39, 0.39, 1.16]."""
    config = adaptive_config(tmp_path, max_steps=1, soft_overlong_punishment=False)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(64)
    )
    batches = record_batches(trainer)
    trainer.train()
    advantages = batches[0]["advantages"].view(-1, GROUP)
    expected = torch.tensor([-2.0, -2 / 3, 2 / 3, 2.0])
    assert torch.allclose(advantages, expected.expand_as(advantages), atol=1e-5)
    for name in (
        "dynamic_sampling/informative_groups_per_1k_tokens",
        "dynamic_sampling/generation_budget_used",
        "dynamic_sampling/uninformative_tokens",
        "dynamic_sampling/sampler_seconds",
    ):
        assert metric_history(trainer, name), name
    assert metric_history(trainer, "dynamic_sampling/generation_budget_used")[0] >= 1.0


def test_all_wrong_groups_of_prompts_solved_before_train_with_negative_advantages(tmp_path, tiny_model_dir):
    """Once a prompt has had a success, its all-wrong groups are no longer dropped: they reach the loss, every
    completion pushed down. DAPO's filter would drop each of them."""
    first_visit_then_always_wrong.seen = set()
    config = adaptive_config(
        tmp_path, max_steps=6, soft_overlong_punishment=False, dynamic_sampling_max_skip_probability=0.0
    )
    trainer = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=first_visit_then_always_wrong,
        args=config,
        train_dataset=make_prompt_dataset(8),  # 4 odd prompts, revisited every few steps
    )
    batches = record_batches(trainer)
    trainer.train()
    all_pushed_down = [
        group
        for batch in batches
        for group in batch["advantages"].view(-1, GROUP)
        if (group < 0).all()
    ]
    assert all_pushed_down, "no all-wrong group of a prompt solved before was trained"
    for batch in batches:  # and every trained group carries a gradient
        groups = batch["advantages"].view(-1, GROUP)
        trained = batch["completion_mask"].view(-1, GROUP, batch["completion_mask"].size(1)).sum(dim=(1, 2)) > 0
        assert (groups[trained].abs().amax(dim=1) > 0).all()


def test_resume_takes_the_uninterrupted_runs_decisions(tmp_path, tiny_model_dir):
    dataset = make_prompt_dataset(16)

    def trainer_for(run, **overrides):
        config = adaptive_config(tmp_path / run, **overrides)
        return DAPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=dataset)

    uninterrupted, full_batches, resumed, resumed_batches, checkpoint = interrupted_and_resumed(tmp_path, trainer_for)
    state = json.loads((checkpoint / "dynamic_sampling_state.json").read_text())
    assert state["beliefs"]["evidence"]  # the pass-rate beliefs are in the checkpoint
    assert resumed.sampler.beliefs.state_dict() == uninterrupted.sampler.beliefs.state_dict()
    for full, again in zip(full_batches[1:], resumed_batches, strict=True):
        assert sorted(batch_prompt_ids(resumed, again)) == sorted(batch_prompt_ids(uninterrupted, full))
        assert torch.allclose(again["advantages"].sort().values, full["advantages"].sort().values, atol=1e-6)


@pytest.mark.parametrize("level", ["sequence", "sequence_token"])
def test_gspo_trains_with_the_adaptive_mode(tmp_path, tiny_model_dir, level):
    config = adaptive_config(tmp_path, GSPOConfig, importance_sampling_level=level, max_steps=2)
    trainer = GSPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(32)
    )
    batches = record_batches(trainer)
    trainer.train()
    assert trainer.sampler.beliefs is not None and len(trainer.sampler.beliefs) > 0
    advantages = batches[0]["advantages"].view(-1, GROUP)
    expected = torch.tensor([-2.0, -2 / 3, 2 / 3, 2.0])
    assert torch.allclose(advantages, expected.expand_as(advantages), atol=1e-5)
    assert metric_history(trainer, "gspo/seq_ratio/mean")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"dynamic_sampling_mode": "knapsack"}, "dynamic_sampling_mode"),
        ({"dynamic_sampling": False}, "dynamic_sampling=True"),
        ({"dynamic_sampling_history_decay": 1.0}, "dynamic_sampling_history_decay"),
        ({"dynamic_sampling_history_decay": -0.1}, "dynamic_sampling_history_decay"),
        ({"dynamic_sampling_max_skip_probability": 1.0}, "dynamic_sampling_max_skip_probability"),
    ],
)
@pytest.mark.parametrize("config_class", [DAPOConfig, GSPOConfig])
def test_bad_adaptive_settings_fail_at_construction_naming_the_field(tmp_path, config_class, overrides, field):
    with pytest.raises(ValueError, match=field):
        adaptive_config(tmp_path, config_class, **overrides)


def test_the_adaptive_mode_sets_its_own_skip_cap_and_dapo_keeps_its_default(tmp_path):
    assert adaptive_config(tmp_path).dynamic_sampling_max_skip_probability == 0.9
    assert DAPOConfig(**tiny_training_settings(tmp_path)).dynamic_sampling_max_skip_probability == 0.0
    assert DAPOConfig(**tiny_training_settings(tmp_path)).dynamic_sampling_mode == "filter"
