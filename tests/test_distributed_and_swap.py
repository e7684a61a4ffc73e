"""End-to-end run in a fresh process: the GRPO -> DAPO swap of a TRL script.

The multi-process runs (DDP, FSDP2, ZeRO-2/3) are in tests/distributed/.
"""

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
