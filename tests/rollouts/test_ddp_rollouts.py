"""Two DDP processes on CPU take the same dynamic-sampling decisions for streams, environments and rollout
functions: the same rounds with the same number of prompts, different prompts, the same gathered metrics and
weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_environments import tool_model_dir  # noqa: F401

SCRIPT = Path(__file__).parent / "ddp_rollout_kinds.py"
DDP_CONFIG = Path(__file__).parents[2] / "recipes" / "accelerate_configs" / "ddp.yaml"


def launch(kind: str, model_dir: str, directory: Path) -> list[dict]:
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(DDP_CONFIG),
        "--num_processes", "2", "--mixed_precision", "no", "--main_process_port", "0",
        str(SCRIPT), kind, model_dir, str(directory),
    ]  # fmt: skip
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-6000:]
    return [json.loads(path.read_text()) for path in sorted(directory.glob("rank*.json"))]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["stream", "environment", "rollout_func"])
def test_two_processes_take_the_same_decisions(tmp_path, tiny_model_dir, tool_model_dir, kind):  # noqa: F811
    model_dir = tool_model_dir if kind == "environment" else tiny_model_dir
    first, second = launch(kind, model_dir, tmp_path)
    assert first["num_processes"] == second["num_processes"] == 2
    assert first["round_sizes"] == second["round_sizes"]  # same rounds, same prompts per round
    assert len(first["round_sizes"]) > 3  # refill rounds ran
    for mine, theirs in zip(first["round_prompts"], second["round_prompts"], strict=True):
        if kind != "environment":  # the environment's games share no prompt text across processes either
            assert not set(mine) & set(theirs)
    dynamic = [[{k: v for k, v in e.items() if k.startswith("dynamic_sampling/")} for e in r["log_history"]]
               for r in (first, second)]  # fmt: skip
    assert dynamic[0] == dynamic[1]
    assert first["refill_state"] == second["refill_state"]
    assert first["parameter_digest"] == second["parameter_digest"]
