"""Dynamic sampling with `tools=` (multi-turn tool calling): every round runs TRL's tool loop, and each kept row's
tool mask, tool results and parsed completion stay with its own completion."""

from __future__ import annotations

import json

import pytest
from conftest import tiny_training_settings
from datasets import Dataset
from tool_model import call, save_tool_calling_model

from trl_ext import DAPOConfig, DAPOTrainer

GROUP = 4
CITIES = ["Paris", "Lyon", "Nice", "Lille"]


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def weather(city: str) -> str:
    """
    The weather in a city.

    Args:
        city: The city.
    """
    return f"{city} sun {len(city)}"


def prompt(case: int) -> list[dict]:
    return [{"role": "user", "content": f"Case {case}: weather in {CITIES[case % 4]}?"}]


def called_cities(completion) -> list[str]:
    cities = []
    for message in completion:
        for tool_call in message.get("tool_calls") or []:
            arguments = tool_call["function"]["arguments"]
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            cities.append(arguments.get("city"))
    return cities


def right_city(prompts, completions, city, **kwargs):
    """1 when the completion's first call asks for the row's city, else 0; fails when a row's columns are not its
    prompt's."""
    for text, row_city in zip(prompts, city, strict=True):
        assert f"weather in {row_city}?" in text[-1]["content"]
    return [float(called_cities(c)[:1] == [row_city]) for c, row_city in zip(completions, city, strict=True)]


@pytest.fixture(scope="module")
def weather_model(tmp_path_factory) -> str:
    """Taught to answer every case with a `weather` call for one of the four cities, at random."""
    conversations = [prompt(case) for case in range(8) for _ in CITIES]
    answers = [call("weather", json.dumps({"city": name})) for _ in range(8) for name in CITIES]
    return save_tool_calling_model(tmp_path_factory.mktemp("weather-model"), conversations, [weather], answers)


@pytest.mark.slow
def test_tool_rows_keep_their_own_tool_results_and_masks(tmp_path, weather_model):
    dataset = Dataset.from_dict(
        {"prompt": [prompt(case) for case in range(32)], "city": [CITIES[case % 4] for case in range(32)]}
    )
    settings = {
        "per_device_train_batch_size": 8,
        "num_generations": GROUP,
        "max_completion_length": 96,
        "max_steps": 3,
        "learning_rate": 1e-3,
        "soft_overlong_punishment": False,
    }
    config = DAPOConfig(**tiny_training_settings(tmp_path, **settings))
    trainer = DAPOTrainer(weather_model, reward_funcs=right_city, args=config, train_dataset=dataset, tools=[weather])
    scored = []
    calculate = trainer._calculate_rewards

    def recording(inputs, prompts, completions, completion_ids_list):
        rewards = calculate(inputs, prompts, completions, completion_ids_list)
        if trainer._assembled is not None:
            scored.append((completions, rewards, trainer._assembled.rows.generation()))
        return rewards

    trainer._calculate_rewards = recording
    trainer.train()
    history = trainer.state.log_history
    assert any(entry.get("tools/call_frequency", 0) > 0.5 for entry in history)
    assert not any(entry.get("dynamic_sampling/rounds_exhausted", 0) for entry in history)
    tokenizer = trainer.processing_class
    for completions, rewards, generation in scored:
        _, completion_ids, tool_mask, _, _, _, _, _ = generation
        kept = len(completions)  # no batch here needs fillers (checked below)
        grouped = rewards[:kept, 0].view(-1, GROUP)
        assert bool((grouped.max(dim=1).values > grouped.min(dim=1).values).all())
        for completion, ids, mask in zip(completions, completion_ids, tool_mask, strict=True):
            # The tokens the mask marks as tool output are this completion's own tool results, and nothing else.
            tool_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
            results = [str(message["content"]) for message in completion if message["role"] == "tool"]
            assert all(result in tool_text for result in results), (tool_text, results)
            assert bool(tool_text) == bool(results), (tool_text, completion)
            own = [weather(city) for city in called_cities(completion) if city in CITIES]
            assert all(any(result in tool_text for result in own) for _ in results), (tool_text, own)
            # The tokens the model wrote are this completion's own turns: its calls and what it wrote after them.
            model_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
            for message in completion:
                if message["role"] == "assistant" and message.get("content"):
                    assert message["content"].strip() in model_text, (message, model_text)
            assert all(city in model_text for city in called_cities(completion) if city), (completion, model_text)
