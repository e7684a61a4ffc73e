"""Shared fixtures: a tiny random causal LM with a local tokenizer, and small in-code datasets. Nothing is downloaded."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from pathlib import Path

import pytest
import torch
from datasets import Dataset

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from trl_ext.tiny import save_tiny_model  # noqa: E402


def pytest_addoption(parser):
    parser.addoption(
        "--trl-suite",
        choices=("ci", "full"),
        default="ci",
        help="TRL's GRPO tests in tests/trl_suite: 'ci' runs a subset covering every configuration family, 'full' "
        "every test against TRL's GRPOTrainer and both DAPOTrainer variants.",
    )
    parser.addoption(
        "--trl-source",
        default=None,
        help="TRL source checkout whose tests/test_grpo_trainer.py tests/trl_suite runs (or TRL_EXT_TRL_SOURCE); "
        "without one those tests are not collected.",
    )


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


@contextlib.contextmanager
def transformers_logs(caplog, level=logging.WARNING):
    """Capture what transformers-style loggers (ours and TRL's) emit, which do not propagate by default."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_propagation()
    try:
        with caplog.at_level(level):
            yield
    finally:
        hf_logging.disable_propagation()


@pytest.fixture
def prompt_dataset() -> Dataset:
    return make_prompt_dataset()


# ---------------------------------------------------------------------------------------------- sandbox tests
# Here rather than in tests/sandbox/conftest.py: test modules import this file as `conftest`, which a second
# conftest module would shadow.

SANDBOX_TESTS = Path(__file__).parent / "sandbox"
# tests/vllm_cpu skip where vLLM is not installed; CI's vLLM stage sets TRL_EXT_VLLM_TESTS_MUST_RUN=1.
MUST_RUN = {
    SANDBOX_TESTS: "TRL_EXT_SANDBOX_TESTS_MUST_RUN",
    Path(__file__).parent / "vllm_cpu": "TRL_EXT_VLLM_TESTS_MUST_RUN",
}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With TRL_EXT_SANDBOX_TESTS_MUST_RUN=1 (CI) a skipped sandbox test is a failure: a green run must mean the
    isolation was tested on this machine, not skipped. TRL_EXT_VLLM_TESTS_MUST_RUN=1 does the same for
    tests/vllm_cpu (CI's vLLM stage)."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped:
        return
    for directory, variable in MUST_RUN.items():
        if directory in Path(str(item.path)).parents and os.environ.get(variable) == "1":
            report.outcome = "failed"
            report.longrepr = f"{directory.name} test skipped, which {variable}=1 forbids: {report.longrepr}"


@pytest.fixture
def listener():
    """Port of a TCP server on 127.0.0.1 that a sandboxed program must not reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def one_torch_thread():
    """One intra-op thread for the test: tiny models gain nothing from a second one, and on a loaded machine its
    synchronisation costs 10x or more."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
