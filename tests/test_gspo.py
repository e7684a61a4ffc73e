"""GSPOConfig defaults and validation; GSPOTrainer and GSPO-token training on the tiny local model.

The objective itself (loss and gradient against the paper's formulas) is checked in test_objectives.py.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, TrlParser

from trl_ext.trainers.gspo import GSPOConfig, GSPOTrainer

from conftest import make_prompt_dataset, tiny_training_settings


def small_config(tmp_path, **overrides) -> GSPOConfig:
    settings = {"per_device_train_batch_size": 4, "num_generations": 2, **overrides}
    return GSPOConfig(**tiny_training_settings(tmp_path, **settings))


def gspo_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "GSPOConfig" in str(w.message)]


# ---------------------------------------------------------------------------------------------------- defaults


@pytest.mark.parametrize("gradient_accumulation_steps", [1, 3])
def test_defaults_are_the_papers(tmp_path, gradient_accumulation_steps):
    config = small_config(tmp_path, gradient_accumulation_steps=gradient_accumulation_steps)
    assert config.importance_sampling_level == "sequence"
    assert config.loss_type == "grpo"  # per-sequence averaging: every completion weighs the same
    assert (config.epsilon, config.epsilon_high) == (3e-4, 4e-4)
    assert config.beta == 0.0
    assert config.num_iterations == 1
    # One rollout batch, split into 4 mini-batches of one optimiser update each.
    assert config.steps_per_generation == 4 * gradient_accumulation_steps
    assert config.generation_batch_size == 4 * 4 * gradient_accumulation_steps
    assert config.updates_per_generation == 4
    # TRL's condition for computing π_old at generation time (generation not aligned with the updates).
    assert config.gradient_accumulation_steps % (config.steps_per_generation * config.num_iterations) != 0


def test_paper_defaults_raise_no_warning(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        small_config(tmp_path)
    assert gspo_warnings(record) == []


def test_explicit_generation_batch_size_is_kept(tmp_path):
    config = small_config(tmp_path, generation_batch_size=8)
    assert config.steps_per_generation == 2
    assert config.updates_per_generation == 2


def test_num_iterations_makes_reused_batch_off_policy(tmp_path):
    # One mini-batch per rollout, but reused for a second pass: that pass is off-policy, so GSPO is not degenerate.
    config = small_config(tmp_path, steps_per_generation=1, num_iterations=2)
    assert config.updates_per_generation == 2


def test_gspo_token_is_selectable_from_the_command_line(tmp_path):
    (config,) = TrlParser(GSPOConfig).parse_args_and_config(
        ["--output_dir", str(tmp_path), "--importance_sampling_level", "sequence_token", "--use_cpu", "--bf16=false"]
    )
    assert config.importance_sampling_level == "sequence_token"
    assert config.epsilon == 3e-4


# ---------------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("loss_type", ["dapo", "bnpo", "dr_grpo", "cispo", "luspo"])
def test_length_weighted_loss_is_refused(tmp_path, loss_type):
    with pytest.raises(ValueError, match=rf"loss_type='{loss_type}'.*length.*Set loss_type='grpo'"):
        small_config(tmp_path, loss_type=loss_type)


@pytest.mark.parametrize("loss_type", ["sapo", "vespo"])
def test_other_losses_are_refused(tmp_path, loss_type):
    with pytest.raises(ValueError, match=rf"loss_type='{loss_type}' is not GSPO's clipped objective"):
        small_config(tmp_path, loss_type=loss_type)


def test_token_level_ratio_is_refused(tmp_path):
    with pytest.raises(ValueError, match="importance_sampling_level='token'.*'sequence'.*'sequence_token'"):
        small_config(tmp_path, importance_sampling_level="token")


@pytest.mark.parametrize(
    "overrides",
    [
        dict(steps_per_generation=1),  # TRL's default: one on-policy update per rollout
        dict(generation_batch_size=4),  # the same, set through the generation batch
        dict(gradient_accumulation_steps=4, steps_per_generation=2),  # two rollouts per update
        dict(gradient_accumulation_steps=2, steps_per_generation=2),
    ],
)
def test_on_policy_schedule_is_refused(tmp_path, overrides):
    with pytest.raises(ValueError, match=r"steps_per_generation .*identically 1.*Leave steps_per_generation"):
        small_config(tmp_path, **overrides)


def test_token_level_clip_range_warns(tmp_path):
    with pytest.warns(UserWarning, match=r"epsilon=0\.2.*almost never clip.*epsilon=3e-4"):
        small_config(tmp_path, epsilon=0.2, epsilon_high=0.28)


def test_trainer_refuses_a_grpo_config(tiny_model_dir, tmp_path):
    config = GRPOConfig(output_dir=str(tmp_path), importance_sampling_level="sequence", use_cpu=True, bf16=False)
    with pytest.raises(TypeError, match="pass a GSPOConfig"):
        GSPOTrainer(model=tiny_model_dir, reward_funcs=digit_reward, args=config, train_dataset=make_prompt_dataset(8))


# ---------------------------------------------------------------------------------------------------- training


def digit_reward(completions, **kwargs):
    """Varies between completions of the random tiny model, so advantages are non-zero."""
    return [float(sum(character.isdigit() for character in completion)) for completion in completions]


def train_gspo(tiny_model_dir, tmp_path, **overrides) -> GSPOTrainer:
    # One rollout of 8 prompts × 2 completions, split into 4 updates of 4 completions each.
    config = small_config(tmp_path, max_steps=4, learning_rate=5e-2, **overrides)
    trainer = GSPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        reward_funcs=digit_reward,
        args=config,
        train_dataset=make_prompt_dataset(8),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    trainer.train()
    return trainer


def logged(trainer, name) -> list[float]:
    return [entry[name] for entry in trainer.state.log_history if name in entry]


@pytest.mark.slow
@pytest.mark.parametrize("level", ["sequence", "sequence_token"])
def test_trains_with_off_policy_updates(tiny_model_dir, tmp_path, level):
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    trainer = train_gspo(tiny_model_dir, tmp_path, importance_sampling_level=level)

    assert trainer.state.global_step == 4
    changed = [not torch.equal(initial[k], v) for k, v in trainer.model.state_dict().items() if k in initial]
    assert any(changed), "training must update the model"

    ratio_min, ratio_max = logged(trainer, "gspo/seq_ratio/min"), logged(trainer, "gspo/seq_ratio/max")
    assert len(ratio_min) == len(ratio_max) == 4
    # The first update is on-policy: π_old, computed at generation time, is the current model.
    assert ratio_min[0] == pytest.approx(1.0, abs=1e-5) and ratio_max[0] == pytest.approx(1.0, abs=1e-5)
    # Updates 2 to 4 reuse the same rollout after the model moved: the sequence ratio departs from 1.
    assert max(max(abs(lo - 1), abs(hi - 1)) for lo, hi in zip(ratio_min[1:], ratio_max[1:])) > 1e-4
    for name in ("gspo/seq_ratio/mean", "gspo/clip_ratio/low", "gspo/clip_ratio/high"):
        assert len(logged(trainer, name)) == 4
    for value in logged(trainer, "gspo/clip_ratio/low") + logged(trainer, "gspo/clip_ratio/high"):
        assert 0.0 <= value <= 1.0
    assert all(torch.isfinite(torch.tensor(logged(trainer, "loss"))))


def test_a_reward_reading_a_missing_column_fails_before_training(tmp_path, tiny_model_dir):
    from trl_ext.rewards import get_reward

    with pytest.raises(ValueError, match="'solution'"):
        GSPOTrainer(
            tiny_model_dir,
            reward_funcs=get_reward("math"),
            args=small_config(tmp_path),
            train_dataset=make_prompt_dataset(),
        )
