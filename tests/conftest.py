"""Shared fixtures: a tiny random causal LM with a local tokenizer, and small in-code datasets. Nothing is downloaded."""

from __future__ import annotations

import os

import pytest
from datasets import Dataset

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from trl_ext.tiny import save_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """Directory holding a tiny random Llama-architecture model and its character tokenizer."""
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny-model")))


def tiny_training_settings(tmp_path, **overrides) -> dict:
    """Arguments for a GRPOConfig-family config that trains the tiny model in seconds on CPU, offline."""
    settings = dict(
        output_dir=str(tmp_path / "out"),
        max_completion_length=8,
        report_to="none",
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        seed=0,
    )
    settings.update(overrides)
    return settings


def make_prompt_dataset(num_prompts: int = 16) -> Dataset:
    """Plain-text prompts, each with an integer `id` column the tests' rewards can key on."""
    return Dataset.from_dict(
        {"prompt": [f"{i}+{i}=" for i in range(num_prompts)], "id": list(range(num_prompts))}
    )


@pytest.fixture
def prompt_dataset() -> Dataset:
    return make_prompt_dataset()
