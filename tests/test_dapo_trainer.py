"""DAPOTrainer on the tiny local model: defaults, validation, dynamic sampling, overlong shaping, resume."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings, transformers_logs
from trl import GRPOConfig

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.sampling import DynamicSampler, filter_rewards, informative_group_mask

GROUP = 4


def small_config(tmp_path, **overrides) -> DAPOConfig:
    settings = {
        "per_device_train_batch_size": 8,
        "num_generations": GROUP,
        "max_steps": 3,
        "learning_rate": 1e-3,
        **overrides,
    }
    return DAPOConfig(**tiny_training_settings(tmp_path, **settings))


def prompt_id(text: str) -> int:
    return int(re.match(r"(\d+)\+", text).group(1))


def varied_reward_for_odd_ids(prompts, completions, id, **kwargs):
    """Constant for even prompt ids (uninformative groups); different for each completion of odd ids."""
    return [0.0 if i % 2 == 0 else float(index) for index, i in enumerate(id)]


def constant_reward(completions, **kwargs):
    return [1.0] * len(completions)


def metric_history(trainer, name):
    return [entry[name] for entry in trainer.state.log_history if name in entry]


def record_batches(trainer):
    """Keep each generation batch the trainer hands to the loss (the real method still runs)."""
    batches = []
    generate = trainer._generate_and_score_completions

    def recording(inputs):
        batch = generate(inputs)
        batches.append(batch)
        return batch

    trainer._generate_and_score_completions = recording
    return batches


def batch_prompt_ids(trainer, batch):
    texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    return [prompt_id(text) for text in texts]


# ---------------------------------------------------------------------------------------------------- config


def test_defaults_are_dapo_settings(tmp_path):
    config = DAPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False)
    assert (config.epsilon, config.epsilon_high) == (0.2, 0.28)
    assert config.loss_type == "dapo"
    assert config.beta == 0.0
    assert config.scale_rewards == "group"
    assert config.dynamic_sampling is True
    assert config.dynamic_sampling_filter_reward is None
    assert config.dynamic_sampling_max_rounds == 10
    assert config.dynamic_sampling_on_exhausted == "warn"
    assert config.dynamic_sampling_confidence == 0.95
    # Measured on the built-in task (benchmarks/RESULTS.md): the prompt history lowered final pass@1 (opt-in);
    # carrying surplus groups reached the target with fewer generated tokens (on, one update of staleness).
    assert config.dynamic_sampling_max_skip_probability == 0.0
    assert config.dynamic_sampling_carry_max_staleness == 1
    assert config.soft_overlong_punishment is True
    assert config.overlong_buffer_length == round(0.2 * config.max_completion_length)
    assert config.overlong_penalty_factor == 1.0
    assert config.mask_truncated_completions is False


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"dynamic_sampling_max_rounds": 0}, "dynamic_sampling_max_rounds"),
        ({"dynamic_sampling_on_exhausted": "skip"}, "dynamic_sampling_on_exhausted"),
        ({"dynamic_sampling_confidence": 1.0}, "dynamic_sampling_confidence"),
        ({"dynamic_sampling_max_oversampling": 0.5}, "dynamic_sampling_max_oversampling"),
        ({"overlong_buffer_length": 9}, "overlong_buffer_length"),
        ({"overlong_buffer_length": 0}, "overlong_buffer_length"),
        ({"overlong_penalty_factor": -1.0}, "overlong_penalty_factor"),
        ({"dynamic_sampling_max_skip_probability": 1.0}, "dynamic_sampling_max_skip_probability"),
        ({"dynamic_sampling_carry_max_staleness": -1}, "dynamic_sampling_carry_max_staleness"),
        ({"dynamic_sampling_carry_max_groups": -1}, "dynamic_sampling_carry_max_groups"),
    ],
)
def test_invalid_settings_fail_at_construction_naming_the_field(tmp_path, overrides, field):
    with pytest.raises(ValueError, match=field):
        small_config(tmp_path, **overrides)


def test_unknown_filter_reward_fails_at_construction_listing_names(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, dynamic_sampling_filter_reward="accuracy")
    with pytest.raises(ValueError, match=r"dynamic_sampling_filter_reward='accuracy'.*constant_reward"):
        DAPOTrainer(tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset())


def test_grpo_config_is_refused_with_the_fix(tmp_path, tiny_model_dir):
    config = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, num_generations=GROUP)
    with pytest.raises(TypeError, match="DAPOConfig"):
        DAPOTrainer(tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset())


def test_trainer_does_not_modify_the_users_config_or_reward_list(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, reward_weights=[2.0])
    reward_funcs = [varied_reward_for_odd_ids]
    trainer = DAPOTrainer(tiny_model_dir, reward_funcs=reward_funcs, args=config, train_dataset=make_prompt_dataset())
    assert config.reward_weights == [2.0] and reward_funcs == [varied_reward_for_odd_ids]
    assert trainer.reward_func_names == ["varied_reward_for_odd_ids", "soft_overlong_punishment"]
    assert trainer.reward_weights.tolist() == [2.0, 1.0]


# ---------------------------------------------------------------------------------------------- overlong


def test_overlong_punishment_is_a_logged_reward_excluded_from_the_filter(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=1, overlong_buffer_length=4, overlong_penalty_factor=0.5)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset()
    )
    trainer.train()
    assert metric_history(trainer, "rewards/soft_overlong_punishment/mean")
    assert trainer.sampler.settings.filter_used.tolist() == [True, False]
    # An all-correct group whose lengths differ: the punishment varies, the filter reward does not.
    rewards_per_func = torch.tensor([[1.0, 0.0], [1.0, -0.5], [1.0, -1.0], [1.0, 0.0]])
    filtered = filter_rewards(
        rewards_per_func, trainer.sampler.settings.filter_weights, trainer.sampler.settings.filter_used
    )
    assert not informative_group_mask(filtered, GROUP).item()


def test_overlong_punishment_can_be_switched_off(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, soft_overlong_punishment=False)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset()
    )
    assert trainer.reward_func_names == ["varied_reward_for_odd_ids"]


# ---------------------------------------------------------------------------------------- dynamic sampling


def test_only_informative_groups_reach_the_loss_and_the_batch_is_full(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=4)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(32)
    )
    batches = record_batches(trainer)
    trainer.train()

    assert len(batches) == 4
    for batch in batches:
        assert batch["completion_ids"].size(0) == config.per_device_train_batch_size  # exactly the batch size
        ids = batch_prompt_ids(trainer, batch)
        assert all(i % 2 == 1 for i in ids), ids  # no zero-variance (even id) group
        assert sorted(ids.count(i) for i in set(ids)) == [GROUP] * (len(ids) // GROUP)  # whole groups
        assert batch["num_items_in_batch"] == batch["completion_mask"].sum()  # normaliser of the kept rows
        assert (batch["advantages"] != 0).any()
    rounds = metric_history(trainer, "dynamic_sampling/generation_rounds")
    assert rounds[0] >= 2  # the first batch had uninformative groups and nothing was known yet
    assert metric_history(trainer, "dynamic_sampling/rounds_exhausted") == [0.0] * 4


def test_kept_groups_keep_their_own_advantages(tmp_path, tiny_model_dir):
    """Advantages equal the group-normalised rewards of each kept group, as GRPO computes them."""
    config = small_config(tmp_path, max_steps=1, soft_overlong_punishment=False)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(32)
    )
    batches = record_batches(trainer)
    trainer.train()
    # Rewards inside an odd-id group are the completion's row index in its round: 4k, 4k+1, 4k+2, 4k+3.
    # Whatever k, group normalisation gives the same advantages: (r - mean) / (std + 1e-4).
    centred = torch.tensor([-1.5, -0.5, 0.5, 1.5])
    expected = centred / (centred.std() + 1e-4)
    advantages = batches[0]["advantages"].view(-1, GROUP)
    assert torch.allclose(advantages, expected.expand_as(advantages), atol=1e-5)


def test_adaptive_oversampling_reaches_about_one_round_per_step(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=10, per_device_train_batch_size=16)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(64)
    )
    trainer.train()
    rounds = metric_history(trainer, "dynamic_sampling/generation_rounds")
    kept = metric_history(trainer, "dynamic_sampling/groups_kept_fraction")
    assert rounds[0] >= 2  # nothing is known about the keep rate at the first step
    steady_rounds, steady_kept = rounds[1:], kept[1:]
    assert sum(steady_rounds) / len(steady_rounds) <= 1.4  # 4 groups a step: noisy, yet about one round
    assert 0.15 <= sum(steady_kept) / len(steady_kept) <= 0.5  # keep rate ~0.5, modest over-sampling


def test_exhausted_rounds_warn_log_a_metric_and_still_train(tmp_path, tiny_model_dir, caplog):
    # The overlong punishment (on by default) varies within groups, yet filler groups must not train.
    config = small_config(tmp_path, max_steps=2, dynamic_sampling_max_rounds=2)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset()
    )
    batches = record_batches(trainer)
    with transformers_logs(caplog):
        trainer.train()
    assert "dynamic_sampling_max_rounds" in caplog.text
    assert metric_history(trainer, "dynamic_sampling/rounds_exhausted") == [1.0, 1.0]
    # After 34 groups without an informative one (2 rounds of the first step, 1 of the second), dynamic sampling
    # backs off: no further round in that step.
    assert metric_history(trainer, "dynamic_sampling/generation_rounds") == [2.0, 1.0]
    assert metric_history(trainer, "dynamic_sampling/backoff") == [0.0, 1.0]
    assert all(batch["completion_ids"].size(0) == 8 for batch in batches)
    assert all((batch["advantages"] == 0).all() for batch in batches)


def test_exhausted_rounds_raise_when_configured(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, dynamic_sampling_max_rounds=3, dynamic_sampling_on_exhausted="raise")
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset()
    )
    with pytest.raises(RuntimeError, match="dynamic_sampling_max_rounds"):
        trainer.train()


def test_filter_on_one_named_reward(tmp_path, tiny_model_dir):
    """Filtering on a constant reward ignores a second, varying one: every round comes up empty."""
    config = small_config(
        tmp_path, max_steps=1, dynamic_sampling_max_rounds=2, dynamic_sampling_filter_reward="constant_reward"
    )
    trainer = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=[constant_reward, varied_reward_for_odd_ids],
        args=config,
        train_dataset=make_prompt_dataset(),
    )
    trainer.train()
    assert metric_history(trainer, "dynamic_sampling/generated_zero_std_fraction") == [1.0]


def test_dynamic_sampling_off_behaves_like_grpo(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=1, dynamic_sampling=False)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset()
    )
    trainer.train()
    assert not metric_history(trainer, "dynamic_sampling/generation_rounds")


def test_evaluation_is_never_filtered(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, per_device_eval_batch_size=8, soft_overlong_punishment=False)
    dataset = make_prompt_dataset()
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=dataset, eval_dataset=dataset
    )
    calls = []
    next_batch = trainer.sampler.next_batch
    trainer.sampler.next_batch = lambda *args, **kwargs: calls.append(args) or next_batch(*args, **kwargs)
    metrics = trainer.evaluate()
    assert calls == []
    assert metrics["eval_frac_reward_zero_std"] == 1.0  # every eval group is uninformative, and all were scored
    assert not any(key.startswith("eval_dynamic_sampling") for key in metrics)


def test_a_subclass_picks_its_own_sampler(tmp_path, tiny_model_dir):
    class WholeBatchEveryRound(DynamicSampler):
        def _prompts_for(self, deficits, max_prompts) -> int:
            return max_prompts

    class Trainer(DAPOTrainer):
        sampler_class = WholeBatchEveryRound

    config = small_config(tmp_path, soft_overlong_punishment=False, dynamic_sampling_max_oversampling=2.0)
    trainer = Trainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset()
    )
    trainer.train()
    assert type(trainer.sampler) is WholeBatchEveryRound
    # Every round asked for twice the batch's groups (the most over-sampling allows).
    rounds = metric_history(trainer, "dynamic_sampling/generation_rounds")
    assert metric_history(trainer, "dynamic_sampling/prompts_sampled") == [2 * 2 * r for r in rounds]


def interrupted_and_resumed(tmp_path, trainer_for):
    """Three steps uninterrupted, and one step, a checkpoint, then the rest resumed from it; `trainer_for(run,
    **overrides)` builds a trainer whose output lives under `tmp_path / run`. Returns the uninterrupted trainer and its
    batches, the resumed trainer and its batches, and the checkpoint."""
    uninterrupted = trainer_for("full", max_steps=3)
    full_batches = record_batches(uninterrupted)
    uninterrupted.train()

    interrupted = trainer_for("first", max_steps=1, save_strategy="steps", save_steps=1)
    interrupted.train()
    checkpoint = tmp_path / "first" / "out" / "checkpoint-1"
    assert (checkpoint / "dynamic_sampling_state.json").exists()

    resumed = trainer_for("first", max_steps=3)
    resumed_batches = record_batches(resumed)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 3
    return uninterrupted, full_batches, resumed, resumed_batches, checkpoint


def test_checkpoint_and_resume_draw_the_same_batches(tmp_path, tiny_model_dir):
    dataset = make_prompt_dataset(32)

    def trainer_for(run, **overrides):
        config = small_config(tmp_path / run, **overrides)
        return DAPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=dataset)

    uninterrupted, full_batches, resumed, resumed_batches, _ = interrupted_and_resumed(tmp_path, trainer_for)
    assert resumed.sampler.keep_rates[0].estimate() is not None
    # Steps 2 and 3 use the same prompts as in the run that was never interrupted, the groups carried over from
    # step 1 (restored from the checkpoint) included, with the same completions.
    history = resumed.state.log_history  # step 1's entry comes from the checkpoint
    carried = [entry["dynamic_sampling/carried_groups"] for entry in history if "loss" in entry and entry["step"] > 1]
    assert carried[0] > 0
    for full, again in zip(full_batches[1:], resumed_batches, strict=True):
        assert sorted(batch_prompt_ids(resumed, again)) == sorted(batch_prompt_ids(uninterrupted, full))
    carried_rows = int(carried[0]) * 4
    for name in ("prompt_ids", "completion_ids", "old_per_token_logps"):
        assert torch.equal(resumed_batches[0][name][:carried_rows], full_batches[1][name][:carried_rows]), name


def test_generations_within_one_optimiser_step_draw_different_refill_prompts(tmp_path, tiny_model_dir):
    config = small_config(
        tmp_path,
        max_steps=2,
        gradient_accumulation_steps=2,
        steps_per_generation=1,
        dynamic_sampling_carry_max_staleness=0,
    )
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(32)
    )
    keys = []
    take = trainer.sampler.refills.take
    trainer.sampler.refills.take = lambda key, *args: keys.append(key) or take(key, *args)
    trainer.train()
    # 2 steps x 2 generations, each with its own key; the first draws nothing in its first round (no keep rate yet).
    assert len(set(keys)) >= 3


def test_a_users_own_overlong_punishment_is_not_added_twice(tmp_path, tiny_model_dir):
    from trl_ext.rewards import get_reward

    user_punishment = get_reward("soft_overlong", max_length=8, buffer_length=4)
    trainer = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=[varied_reward_for_odd_ids, user_punishment],
        args=small_config(tmp_path),
        train_dataset=make_prompt_dataset(),
    )
    assert trainer.reward_funcs[1] is user_punishment and len(trainer.reward_funcs) == 2
    assert trainer.sampler.settings.filter_used.tolist() == [True, False]


def test_a_reward_reading_a_missing_column_fails_before_training(tmp_path, tiny_model_dir):
    from trl_ext.rewards import get_reward

    with pytest.raises(ValueError, match="'solution'"):
        DAPOTrainer(
            tiny_model_dir,
            reward_funcs=get_reward("math"),
            args=small_config(tmp_path),
            train_dataset=make_prompt_dataset(),
        )


def test_filler_groups_do_not_count_as_kept(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=1, dynamic_sampling_max_rounds=2)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset()
    )
    trainer.train()
    assert metric_history(trainer, "dynamic_sampling/groups_kept_fraction") == [0.0]
