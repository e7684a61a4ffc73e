"""The README's main command: `accelerate launch recipes/dapo.py` with no arguments learns, offline, on CPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trl_ext.plotting import PANELS, collect_series, load_log_history, panels_with_data

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.mark.slow
def test_default_dapo_job_improves_held_out_accuracy(tmp_path):
    output_dir = tmp_path / "default"
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        str(RECIPES / "dapo.py"),
        "--output_dir",
        str(output_dir),
    ]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    match = re.search(r"pass@1 before ([\d.]+) -> after ([\d.]+)", result.stdout)
    assert match, result.stdout[-3000:]
    before, after = map(float, match.groups())
    print(f"default job: {elapsed:.0f} s, held-out pass@1 before {before:.3f} -> after {after:.3f}")
    assert 0.15 <= before <= 0.5  # the warm start gets some problems right: groups mix right and wrong answers
    assert after >= before + 0.15, (before, after)
    assert elapsed < 600, f"the default job took {elapsed:.0f} s; it must stay under 10 minutes on 2 CPU cores"

    assert (output_dir / "training_curves.png").stat().st_size > 0
    drawn = [panel.title for panel, _, _ in panels_with_data(collect_series(load_log_history(output_dir)))]
    assert drawn == [panel.title for panel in PANELS]
