"""Every rollout kind with GSPO: `GSPOTrainer` (TRL's loop with GSPO's sequence ratio), `GSPOTrainer` with dynamic
sampling on and in the adaptive mode, `DAPOTrainer` in the adaptive mode, and `DAPOTrainer` with GSPO's settings and
dynamic sampling on (the `gspo.py` recipe with the class names swapped)."""

from __future__ import annotations

import pytest
from conftest import make_prompt_dataset, tiny_training_settings
from test_environments import GuessingGame, game_dataset, play_first_digit, tool_model_dir  # noqa: F401
from test_rollout_func import SamplingRollout, informative_odd_ids
from test_streaming import informative_odd_ids as informative_odd_stream_ids
from test_vision import image_dataset, images_match_ids, vlm_dir  # noqa: F401

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer

# GSPO's sequence-level ratio and its tiny clip range (arXiv 2507.18071), as TRL's gspo.py example sets them.
GSPO_SETTINGS = {"importance_sampling_level": "sequence", "loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4}
VARIANTS = {
    "gspo_trainer": (GSPOTrainer, GSPOConfig, {}),
    "gspo_dynamic_sampling": (GSPOTrainer, GSPOConfig, {"dynamic_sampling": True}),
    # The adaptive mode (pass-rate beliefs, estimate skip, history baseline) on every rollout kind.
    "gspo_adaptive": (GSPOTrainer, GSPOConfig, {"dynamic_sampling": True, "dynamic_sampling_mode": "adaptive"}),
    "dapo_adaptive": (DAPOTrainer, DAPOConfig, {"dynamic_sampling_mode": "adaptive", "soft_overlong_punishment": False}),
    # Two updates per generation batch, so that the sequence ratio moves away from 1 and its clip can act.
    "dapo_with_gspo_ratio": (
        DAPOTrainer,
        DAPOConfig,
        {**GSPO_SETTINGS, "steps_per_generation": 2, "soft_overlong_punishment": False},
    ),
}


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def train(tmp_path, variant, model, reward_funcs, dataset, **kwargs):
    trainer_cls, config_cls, settings = VARIANTS[variant]
    config = config_cls(
        **tiny_training_settings(
            tmp_path,
            per_device_train_batch_size=8,
            num_generations=4,
            max_steps=2,
            max_completion_length=8,
            **settings,
        )
    )
    trainer = trainer_cls(model, reward_funcs=reward_funcs, args=config, train_dataset=dataset, **kwargs)
    trainer.train()
    assert trainer.state.global_step == 2
    sampled = any("dynamic_sampling/generation_rounds" in entry for entry in trainer.state.log_history)
    assert sampled == config.dynamic_sampling
    return trainer


@pytest.mark.parametrize("variant", VARIANTS)
def test_rollout_func(tmp_path, tiny_model_dir, variant):
    rollout = SamplingRollout()
    train(tmp_path, variant, tiny_model_dir, informative_odd_ids, make_prompt_dataset(64), rollout_func=rollout)


@pytest.mark.parametrize("variant", VARIANTS)
def test_stream(tmp_path, tiny_model_dir, variant):
    stream = make_prompt_dataset(64).to_iterable_dataset()
    train(tmp_path, variant, tiny_model_dir, informative_odd_stream_ids, stream)


@pytest.mark.parametrize("variant", VARIANTS)
def test_environment(tmp_path, tool_model_dir, variant):  # noqa: F811
    train(tmp_path, variant, tool_model_dir, play_first_digit, game_dataset(), environment_factory=GuessingGame)


@pytest.mark.parametrize("variant", VARIANTS)
def test_vision(tmp_path, vlm_dir, variant):  # noqa: F811
    train(tmp_path, variant, vlm_dir, images_match_ids, image_dataset())
