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
        "dynamic_sampling_pilot_size": 0,  # the pilot's own tests are below; these read whole-group rounds
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


@pytest.mark.parametrize("pilot", [0, 2])
def test_resume_takes_the_uninterrupted_runs_decisions(tmp_path, tiny_model_dir, pilot):
    dataset = make_prompt_dataset(16)

    def trainer_for(run, **overrides):
        config = adaptive_config(tmp_path / run, dynamic_sampling_pilot_size=pilot, **overrides)
        return DAPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=dataset)

    uninterrupted, full_batches, resumed, resumed_batches, checkpoint = interrupted_and_resumed(tmp_path, trainer_for)
    state = json.loads((checkpoint / "dynamic_sampling_state.json").read_text())
    assert state["beliefs"]["evidence"]  # the pass-rate beliefs are in the checkpoint
    assert resumed.sampler.beliefs.state_dict() == uninterrupted.sampler.beliefs.state_dict()
    if pilot:  # the population prior and the yield that decide commits are in the checkpoint too
        assert state["pilot"]["yield"][1] > 0
        assert resumed.sampler.pilot.state_dict() == uninterrupted.sampler.pilot.state_dict()
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
        ({"dynamic_sampling_pilot_size": GROUP}, "dynamic_sampling_pilot_size"),
        ({"dynamic_sampling_pilot_size": -1}, "dynamic_sampling_pilot_size"),
        ({"dynamic_sampling_pilot_size": 2, "dynamic_sampling_mode": "filter"}, "dynamic_sampling_pilot_size"),
        (
            {"dynamic_sampling_pilot_size": 2, "use_vllm": True, "vllm_mode": "server"},
            "dynamic_sampling_pilot_size=2 .* vllm_mode='colocate'",
        ),
        ({"dynamic_sampling_extensions": -1}, "dynamic_sampling_extensions must be at least 0"),
        ({"dynamic_sampling_extensions": 1}, "dynamic_sampling_extensions=1 .* dynamic_sampling_pilot_size > 0"),
        (
            {"dynamic_sampling_extensions": 1, "dynamic_sampling_pilot_size": 2,
             "dynamic_sampling_history_baseline": False},
            "dynamic_sampling_extensions=1 .* dynamic_sampling_history_baseline=True",
        ),
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


def test_the_pilot_is_on_by_default_in_the_adaptive_mode_with_four_or_more_generations(tmp_path):
    assert adaptive_config(tmp_path, dynamic_sampling_pilot_size=None).dynamic_sampling_pilot_size == 2
    two = adaptive_config(tmp_path, dynamic_sampling_pilot_size=None, num_generations=2)
    assert two.dynamic_sampling_pilot_size == 0
    assert DAPOConfig(**tiny_training_settings(tmp_path)).dynamic_sampling_pilot_size == 0
    # vLLM's server mode asks for num_generations completions per prompt: the default pilot is off there.
    server = adaptive_config(tmp_path, dynamic_sampling_pilot_size=None, use_vllm=True, vllm_mode="server")
    assert server.dynamic_sampling_pilot_size == 0


def mixed_right_or_wrong(prompts, completions, id, **kwargs):
    """A pool as RL data often is: ids 4k+1 mixed (the first completion of each prompt in a call is right, so a
    pilot of 2 is mixed), ids 4k+3 always right, even ids always wrong."""
    first = [index == 0 or id[index - 1] != i for index, i in enumerate(id)]
    return [float(i % 4 == 3 or (i % 4 == 1 and is_first)) for i, is_first in zip(id, first, strict=True)]


@pytest.mark.parametrize("config_class, trainer_class", [(DAPOConfig, DAPOTrainer), (GSPOConfig, GSPOTrainer)])
def test_the_pilot_trains_whole_groups_and_stops_prompts_that_stay_wrong(
    tmp_path, tiny_model_dir, config_class, trainer_class
):
    """Each prompt's group is generated as a pilot of 2 and a commit of 2; prompts that are always wrong or always
    right are stopped after their pilot once the pool's prior, their history and the yield say the rest is not worth
    its tokens. Every trained group holds one prompt's 4 completions, all of them from prompts 4k+1."""
    config = adaptive_config(
        tmp_path,
        config_class,
        max_steps=6,
        dynamic_sampling_pilot_size=2,
        dynamic_sampling_max_skip_probability=0.0,  # decided prompts come back and are piloted, not skipped
        **({"soft_overlong_punishment": False} if config_class is DAPOConfig else {}),
    )
    trainer = trainer_class(
        tiny_model_dir, reward_funcs=mixed_right_or_wrong, args=config, train_dataset=make_prompt_dataset(16)
    )
    batches = record_batches(trainer)
    trainer.train()
    assert trainer.sampler.pilot is not None
    for batch in batches:
        prompts = batch["prompt_ids"].view(-1, GROUP, batch["prompt_ids"].size(1))
        assert (prompts == prompts[:, :1]).all()  # the pilot and the commit of one prompt form each group
        trained = batch["completion_mask"].sum(dim=1) > 0
        ids = [i for i, kept in zip(batch_prompt_ids(trainer, batch), trained.tolist(), strict=True) if kept]
        assert ids and all(i % 4 == 1 for i in ids)  # only the mixed prompts are informative
    assert sum(metric_history(trainer, "dynamic_sampling/prompts_stopped")) > 0
    generated = metric_history(trainer, "dynamic_sampling/tokens_generated")
    assert all(value > 0 for value in generated)
    # TRL's completion metrics, logged once per generation call, are merged over the pilot and commit calls.
    assert len(metric_history(trainer, "completions/mean_length")) == len(generated)


def right_only_in_a_whole_group_call(prompts, completions, id, **kwargs):
    """Ids 4k+1 are right once per call that generates a whole group of G for them (an extension: pilots and
    commits run 2 at a time), on its first completion; every other completion is wrong."""
    runs = [index == 0 or id[index - 1] != i for index, i in enumerate(id)]
    starts = [index for index, first in enumerate(runs) if first] + [len(id)]
    rewards = [0.0] * len(id)
    for start, end in zip(starts, starts[1:]):
        rewards[start] = float(id[start] % 4 == 1 and end - start == GROUP)
    return rewards


@pytest.mark.parametrize("config_class, trainer_class", [(DAPOConfig, DAPOTrainer), (GSPOConfig, GSPOTrainer)])
def test_an_extended_group_trains_as_one_group_of_twice_g(tmp_path, tiny_model_dir, config_class, trainer_class):
    """The all-wrong groups of prompts 4k+1 get G more completions, one of them right: each such prompt's 8
    completions fill two slots of the batch, one after the other, with the leave-one-out advantages over the 8 (first
    visit, no history): 1 for the success and -1/7 for each of the 7 failures (GSPO's rollout of 4 steps holds four
    such prompts, DAPO's one)."""
    config = adaptive_config(
        tmp_path,
        config_class,
        max_steps=2,
        dynamic_sampling_pilot_size=2,
        dynamic_sampling_extensions=1,
        dynamic_sampling_max_skip_probability=0.0,
        **({"soft_overlong_punishment": False} if config_class is DAPOConfig else {}),
    )
    trainer = trainer_class(
        tiny_model_dir, reward_funcs=right_only_in_a_whole_group_call, args=config,
        train_dataset=make_prompt_dataset(16),
    )  # fmt: skip
    batches = record_batches(trainer)
    trainer.train()
    expected = torch.tensor([-1 / 7] * GROUP + [1.0] + [-1 / 7] * (GROUP - 1))
    for batch in batches:
        ids = batch_prompt_ids(trainer, batch)
        for start in range(0, len(ids), 2 * GROUP):
            assert len(set(ids[start : start + 2 * GROUP])) == 1 and ids[start] % 4 == 1  # one prompt's 8
            assert torch.allclose(batch["advantages"][start : start + 2 * GROUP].cpu(), expected, atol=1e-5)
    assert len(batches) >= 1 and sum(metric_history(trainer, "dynamic_sampling/prompts_extended")) >= 1


def test_an_explicit_pilot_with_a_rollout_func_is_refused_and_a_default_one_turned_off(tmp_path, tiny_model_dir):
    def rollout_func(prompts, trainer):
        raise AssertionError("not called: the trainer is only built")

    dataset = make_prompt_dataset(16)
    config = adaptive_config(tmp_path, dynamic_sampling_pilot_size=2)
    with pytest.raises(ValueError, match="dynamic_sampling_pilot_size=2 .* rollout_func"):
        DAPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=dataset,
                    rollout_func=rollout_func)  # fmt: skip
    config = adaptive_config(tmp_path, dynamic_sampling_pilot_size=None)
    trainer = DAPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=dataset,
                          rollout_func=rollout_func)  # fmt: skip
    assert trainer.sampler.pilot is None and trainer.args.dynamic_sampling_pilot_size == 0
    config = adaptive_config(tmp_path, dynamic_sampling_pilot_size=None, dynamic_sampling_extensions=1)
    with pytest.raises(ValueError, match="rollout_func.* dynamic_sampling_extensions=0"):
        DAPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=dataset,
                    rollout_func=rollout_func)  # fmt: skip
