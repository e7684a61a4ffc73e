"""Every registered verifier (but `code`, tested with its sandbox) in short DAPOTrainer runs on the tiny model.

The rewards come from a YAML recipe through `build_reward_funcs`. After training, the completions of the last
generation batch are scored again, directly, and must get the rewards the trainer logged for them: the
trainer called each verifier with the right completions and dataset columns (plain-text and conversational).
"""

from __future__ import annotations

import math
import re

import pytest
import yaml
from datasets import Dataset

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.rewards import build_reward_funcs, call_reward

from conftest import tiny_training_settings

pytestmark = pytest.mark.slow

RECIPE = r"""
reward_funcs:
  - math
  - dapo_answer
  - boxed
  - gsm8k
  - name: multiple_choice
    kwargs: {reference_column: choice}
  - exact_match
  - numeric:rel_tol=0.01
  - think_format
  - name: regex_format
    weight: 0.1
    kwargs: {pattern: '\d', match: search}
  - json_valid
  - name: json_schema
    kwargs: {schema: {type: object}}
  - name: soft_overlong
    weight: 0.5
    kwargs: {max_length: 12, buffer_length: 4}
  - repetition:ngram_size=2,unit=tokens
"""
TEXT_REWARDS = ["math", "dapo_answer", "boxed", "gsm8k", "multiple_choice", "exact_match", "numeric",
                "think_format", "regex_format", "json_valid", "json_schema"]  # fmt: skip
LENGTH_REWARDS = ["soft_overlong", "repetition"]  # scored from token ids


def make_dataset(num_prompts: int, conversational: bool) -> Dataset:
    prompts = [f"{i}+{i}=" for i in range(num_prompts)]
    if conversational:
        prompts = [[{"role": "user", "content": prompt}] for prompt in prompts]
    return Dataset.from_dict(
        {
            "prompt": prompts,
            "solution": [str(2 * i) for i in range(num_prompts)],
            "choice": ["ABCD"[i % 4] for i in range(num_prompts)],
        }
    )


def prompt_index(prompt) -> int:
    text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
    return int(re.search(r"(\d+)\+", text).group(1))


@pytest.mark.parametrize("conversational", [False, True], ids=["plain", "conversational"])
def test_each_verifier_in_a_short_dapo_run(tiny_model_dir, tmp_path, conversational):
    reward_funcs, reward_weights = build_reward_funcs(yaml.safe_load(RECIPE)["reward_funcs"])
    dataset = make_dataset(8, conversational)
    config = DAPOConfig(
        **tiny_training_settings(
            tmp_path,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=12,
            max_steps=2,
            learning_rate=1e-3,
            dynamic_sampling=False,  # random tiny-model rewards need not vary within groups
            soft_overlong_punishment=False,  # the test adds `soft_overlong` itself
            reward_weights=reward_weights,
        )
    )
    trainer = DAPOTrainer(model=tiny_model_dir, reward_funcs=reward_funcs, args=config, train_dataset=dataset)
    trainer.train()

    logged = {key for entry in trainer.state.log_history for key in entry}
    for name in TEXT_REWARDS + LENGTH_REWARDS:
        assert f"rewards/{name}/mean" in logged, name
        key = f"rewards/{name}/mean"
        values = [entry[key] for entry in trainer.state.log_history if key in entry]
        assert all(math.isfinite(value) for value in values), name

    prompts = list(trainer._logs["prompt"])
    completions = list(trainer._logs["completion"])
    assert len(completions) == 8
    if conversational:
        assert isinstance(completions[0], list) and completions[0][-1]["role"] == "assistant"
    indices = [prompt_index(prompt) for prompt in prompts]
    columns = {"solution": [dataset[i]["solution"] for i in indices], "choice": [dataset[i]["choice"] for i in indices]}
    funcs = dict(zip([func.__name__ for func in reward_funcs], reward_funcs))
    for name in TEXT_REWARDS:
        rescored = call_reward(funcs[name], prompts=prompts, completions=completions, **columns)
        trained = list(trainer._logs["rewards"][name])
        assert [None if math.isnan(value) else value for value in trained] == rescored, name
    for name in LENGTH_REWARDS:
        assert all(-1.0 <= value <= 0.0 for value in trainer._logs["rewards"][name]), name
