"""`tool_call` in a short DAPO run, with the calls parsed the way TRL parses them for tool-calling models.

The tiny model gets TRL's Qwen2.5 chat template and its response schema, so `GRPOTrainer._generate` turns each
completion into an assistant message through `parse_response`: a well-formed `<tool_call>` block becomes a
`tool_calls` field, a broken one stays text. A few supervised steps first teach the model to answer with a call,
so its samples mix right calls, wrong arguments and broken JSON: the reward varies within groups and dynamic
sampling keeps them.
"""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
import trl
from datasets import Dataset
from trl.chat_template_utils import add_response_schema

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.rewards import build_reward_funcs, call_reward, completion_text
from trl_ext.tasks import warm_start
from trl_ext.tiny import build_char_tokenizer, build_tiny_causal_lm

from conftest import tiny_training_settings

pytestmark = pytest.mark.slow

CITIES = ["Paris", "Lyon", "Nice", "Lille"]


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def message_text(prompt_) -> str:
    return prompt_ if isinstance(prompt_, str) else completion_text(prompt_[-1:])


def prompt(city: str) -> list[dict]:
    return [{"role": "system", "content": "Use tools."}, {"role": "user", "content": f"Weather in {city}?"}]


def expected_call(city: str) -> dict:
    return {"name": "weather", "arguments": {"city": city}}


def tool_calling_tokenizer():
    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen2_5.jinja")) as file:
        tokenizer.chat_template = file.read()
    return add_response_schema(tokenizer)


def warm_started_model(tokenizer, directory) -> str:
    """A tiny model taught, in a few supervised steps, to answer each prompt with a Hermes `<tool_call>` block."""
    prompts = [
        tokenizer.apply_chat_template(prompt(city), tokenize=False, add_generation_prompt=True) for city in CITIES
    ]
    answers = [f"<tool_call>\n{json.dumps(expected_call(city))}\n</tool_call>" for city in CITIES]
    torch.manual_seed(0)
    model = warm_start(build_tiny_causal_lm(tokenizer), tokenizer, prompts, answers, steps=80, learning_rate=1e-2,
                       batch_size=4)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def test_tool_call_reward_in_a_short_dapo_run(tmp_path):
    tokenizer = tool_calling_tokenizer()
    model_dir = warm_started_model(tokenizer, tmp_path / "model")
    dataset = Dataset.from_dict(
        {
            "prompt": [prompt(city) for city in CITIES] * 2,
            "expected_calls": [json.dumps(expected_call(city)) for city in CITIES] * 2,
        }
    )
    reward_funcs, reward_weights = build_reward_funcs(
        [{"name": "tool_call", "kwargs": {"reference_column": "expected_calls"}}]
    )
    config = DAPOConfig(
        **tiny_training_settings(
            tmp_path,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=80,  # a call is 76 characters
            max_steps=2,
            learning_rate=1e-3,
            soft_overlong_punishment=False,
            dynamic_sampling_max_rounds=4,
            reward_weights=reward_weights,
        )
    )
    trainer = DAPOTrainer(
        model=model_dir, processing_class=tokenizer, reward_funcs=reward_funcs, args=config, train_dataset=dataset
    )
    before = {name: parameter.detach().clone() for name, parameter in trainer.model.named_parameters()}
    trainer.train()

    means = [
        entry["rewards/tool_call/mean"] for entry in trainer.state.log_history if "rewards/tool_call/mean" in entry
    ]
    assert len(means) == 2
    assert any(mean is not None and math.isfinite(mean) and 0.0 < mean < 1.0 for mean in means), means
    assert any(not torch.equal(parameter, before[name]) for name, parameter in trainer.model.named_parameters()), (
        "training left the weights unchanged"
    )

    # The completions of the last step, as TRL handed them to the reward: assistant messages, with a `tool_calls`
    # field where `parse_response` read a call. Scoring them again gives what the trainer logged (rows of filler
    # groups, which dynamic sampling logs as NaN, aside).
    completions = list(trainer._logs["completion"])
    logged = list(trainer._logs["rewards"]["tool_call"])
    cities = [next(city for city in CITIES if city in message_text(p)) for p in trainer._logs["prompt"]]
    rescored = call_reward(
        reward_funcs[0], completions=completions, expected_calls=[json.dumps(expected_call(c)) for c in cities]
    )
    scored = [(value, again) for value, again in zip(logged, rescored) if not math.isnan(value)]
    assert scored and all(value == again for value, again in scored), (logged, rescored)
    assert any(completion[0].get("tool_calls") and value == 1.0 for completion, value in zip(completions, logged)), (
        completions
    )
