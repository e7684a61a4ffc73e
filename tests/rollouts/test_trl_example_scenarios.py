"""Offline adaptations of TRL's GRPO example scenarios not covered elsewhere in tests/rollouts, trained with
`DAPOTrainer` and dynamic sampling on: tiny local models of the same kind, local data, the scenarios' trainer
arguments. (Environments, tools, rollout functions, streaming and vision have their own test modules.)"""

from __future__ import annotations

import pytest
from conftest import make_prompt_dataset, tiny_training_settings
from test_environments import GuessingGame, first_guess, game_dataset, tool_model_dir  # noqa: F401
from test_streaming import informative_odd_ids

from trl_ext import DAPOConfig, DAPOTrainer


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def rounds_logged(trainer) -> list[float]:
    key = "dynamic_sampling/generation_rounds"
    return [entry[key] for entry in trainer.state.log_history if key in entry]


@pytest.mark.slow
def test_continuous_batching_generation(tmp_path, tiny_model_dir):
    """`grpo_continuous_batching.py`: transformers' paged (continuous-batching) generation."""
    config = DAPOConfig(
        **tiny_training_settings(
            tmp_path, per_device_train_batch_size=8, num_generations=4, max_steps=1, use_transformers_paged=True
        )
    )
    dataset = make_prompt_dataset(32)
    trainer = DAPOTrainer(tiny_model_dir, reward_funcs=informative_odd_ids, args=config, train_dataset=dataset)
    trainer.train()
    assert trainer.state.global_step == 1 and rounds_logged(trainer)


def score(environments, completions, **kwargs):
    """Like the 2048 example's reward: the environment's score, read through `environments=`. Here the score is
    whether the completion's first digit, played in the environment, found the secret."""
    scores = []
    for environment, completion in zip(environments, completions, strict=True):
        guess = first_guess(completion)
        if guess is not None:
            environment.guess(guess)
        scores.append(float(environment.secret in environment.guesses))
    return scores


@pytest.mark.slow
def test_environment_game_scored_through_environments(tmp_path, tool_model_dir):  # noqa: F811
    """`grpo_2048.py`: an environment game whose reward function reads each rollout's environment, with the example's
    batch of 4 and 2 accumulation steps."""
    config = DAPOConfig(
        **tiny_training_settings(
            tmp_path,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=2,
            num_generations=4,
            max_completion_length=12,
            max_steps=2,
            log_completions=True,
            num_completions_to_print=2,
        )
    )
    trainer = DAPOTrainer(
        tool_model_dir, reward_funcs=score, args=config, train_dataset=game_dataset(), environment_factory=GuessingGame
    )
    trainer.train()
    assert trainer.state.global_step == 2 and rounds_logged(trainer)
