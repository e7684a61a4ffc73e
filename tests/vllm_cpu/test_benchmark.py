"""Smoke run of benchmarks/vllm_colocate.py (`--quick`), so the script cannot rot: it checks the JSON, not speed."""

from __future__ import annotations

import json
import math

import pytest
from vllm_support import REPO, requires_vllm, run_script, vllm_environment

pytestmark = [requires_vllm, pytest.mark.slow]


def test_vllm_benchmark_quick_measures_overhead_and_dynamic_sampling(tmp_path):
    out = tmp_path / "vllm_colocate.json"
    run_script(str(REPO / "benchmarks" / "vllm_colocate.py"), ["--quick", "--out", str(out)], vllm_environment())
    result = json.loads(out.read_text())
    summary = result["overhead"]["summary"]
    assert summary["median_ratio"] > 0 and summary["target_ratio"] == 1.02
    assert summary["max_loss_difference"] == 0.0  # same seeds, same engines: the two trainers compute the same
    pair = result["overhead"]["repeats"][0]["runs"]
    assert len(pair["grpo"]["step_seconds"]) == len(pair["dapo"]["step_seconds"]) == 3
    (run,) = result["runs"]
    assert run["keep_rate"] == 0.5 and len(run["steps"]) == 3
    assert all(step["kept_groups"] == 8 for step in run["steps"])  # --quick trains 8 groups per step
    figures = run["all_steps"]
    assert figures["rounds_per_step"] >= 1 and figures["sequences_per_kept_times_p"] > 0
    assert math.isfinite(figures["forward_rows_per_kept"]) and figures["forward_rows_per_kept"] >= 0.0
    assert result["machine"]["vllm"]
