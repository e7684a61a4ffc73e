"""End-to-end runs in fresh processes: two-process dynamic sampling, and the GRPO -> DAPO swap of a TRL script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run(command: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=OFFLINE)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return result


@pytest.mark.slow
def test_two_processes_with_different_keep_rates_stay_in_step(tmp_path, tiny_model_dir):
    run(
        [
            sys.executable, "-m", "accelerate.commands.launch",
            # The multi-process launcher; with use_cpu=True the processes talk over gloo, no GPU needed.
            "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no",
            str(SCRIPTS / "ddp_dynamic_sampling.py"), tiny_model_dir, str(tmp_path),
        ]
    )  # fmt: skip
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for rank, result in enumerate(ranks):
        assert result["batch_sizes"] == [8, 8, 8, 8], f"rank {rank}"
        assert "multiple of num_generations=4" in result["invalid_batch_error"]
    # Process 1 keeps only prompts with id % 4 == 0; process 0 keeps everything.
    assert all(i % 4 == 0 for ids in ranks[1]["batch_ids"] for i in ids)
    rounds = [entry["dynamic_sampling/generation_rounds"] for entry in ranks[0]["log_history"] if "dynamic_sampling/generation_rounds" in entry]
    assert len(rounds) == 4 and rounds[0] >= 2  # process 1 needed more rounds, and process 0 ran them too
    assert ranks[0]["scored_rows"] == ranks[1]["scored_rows"]  # same rounds, same prompts per round
    assert len(ranks[0]["scored_rows"]) > 4  # refill rounds happened
    decisions = [
        [{k: v for k, v in entry.items() if k.startswith("dynamic_sampling/")} for entry in result["log_history"]]
        for result in ranks
    ]
    assert decisions[0] == decisions[1]  # every process took the same global decisions


@pytest.mark.slow
def test_swapping_grpo_for_dapo_in_a_trl_script_is_the_only_edit(tmp_path, tiny_model_dir):
    grpo_script = (SCRIPTS / "grpo_example.py").read_text()
    dapo_script = (
        grpo_script.replace("from trl import GRPOConfig, GRPOTrainer", "from trl_ext import DAPOConfig, DAPOTrainer")
        .replace("GRPOConfig(", "DAPOConfig(")
        .replace("GRPOTrainer(", "DAPOTrainer(")
    )
    changed = [line for line in dapo_script.splitlines() if line not in grpo_script.splitlines()]
    assert len(changed) == 3  # the import and the two class names
    script = tmp_path / "dapo_example.py"
    script.write_text(dapo_script)
    run([sys.executable, str(script), tiny_model_dir, str(tmp_path / "out")])
    state = json.loads(next((tmp_path / "out").glob("checkpoint-*/trainer_state.json")).read_text())
    assert state["global_step"] == 2
    assert any("dynamic_sampling/generation_rounds" in entry for entry in state["log_history"])
    assert (tmp_path / "out" / "model.safetensors").exists()
