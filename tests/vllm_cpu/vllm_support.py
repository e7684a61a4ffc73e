"""What the vLLM tests share: the availability check, a tiny model wide enough for vLLM's CPU attention, and the
environment and launchers of the processes that run vLLM.

Every trainer runs in a process of its own: a colocated vLLM engine leaves `torch.distributed` initialised and
`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` set, which would leak into the tests after it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

VLLM_AVAILABLE = importlib.util.find_spec("vllm") is not None
requires_vllm = pytest.mark.skipif(
    not VLLM_AVAILABLE,
    reason="vLLM is not installed: these tests run in a virtual environment of their own (.ci/vllm, "
    "docs/contributing.md)",
)

HERE = Path(__file__).parent
REPO = HERE.parents[1]
DDP_CONFIG = REPO / "recipes" / "accelerate_configs" / "ddp.yaml"
GROUP = 4
STEPS = 4
NUM_PROMPTS = 64
# vLLM's CPU attention needs a head dimension of at least 32: 128 wide with 2 heads gives 64.
WIDE_MODEL = {"hidden_size": 128, "num_heads": 2}


def informative(prompt_id: int) -> bool:
    """A quarter of the prompts is informative: the keep rate is 0.25, so most steps need a refill or a carry."""
    return prompt_id % 4 == 1


def save_wide_tiny_model(directory: Path) -> Path:
    """The package's tiny character-level Llama, 128 wide with 2 attention heads, saved to `directory`."""
    from trl_ext.tiny import save_tiny_model

    return save_tiny_model(directory, **WIDE_MODEL)


def vllm_environment() -> dict:
    """The environment of a process that runs vLLM on CPU: offline, a 1 GiB KV cache unless set otherwise, no OpenMP
    core binding (the processes share the cores)."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CUDA_VISIBLE_DEVICES": "",
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind"),
        "OMP_NUM_THREADS": "1",
        "TQDM_DISABLE": "1",
    }


def _check(result: subprocess.CompletedProcess, what: str) -> None:
    assert result.returncode == 0, f"{what} failed:\n{result.stdout[-3000:]}\n{result.stderr[-8000:]}"


def run_script(script: str, arguments: list[str], environment: dict, timeout: float = 900) -> None:
    """Run `tests/vllm_cpu/<script>` with this interpreter in a process of its own."""
    command = [sys.executable, str(HERE / script), *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, check=False)
    _check(result, " ".join(command[1:]))


def launch_two_processes(script: str, arguments: list[str], environment: dict, timeout: float = 900) -> None:
    """`accelerate launch --multi_gpu --num_processes 2` of `tests/vllm_cpu/<script>` on CPU (the processes talk over
    gloo: the script sets `use_cpu`)."""
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(DDP_CONFIG), "--multi_gpu",
        "--num_processes", "2", "--mixed_precision", "no", "--main_process_port", "0",
        str(HERE / script), *arguments,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, check=False)
    _check(result, "accelerate launch " + script)


def read_reports(directory: Path, pattern: str) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(directory.glob(pattern))]
