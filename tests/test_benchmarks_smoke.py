"""Smoke runs of the benchmarks (`--quick`: a few steps each), so the scripts cannot rot.

Each test runs a script's `main` in this process on the tiny local model and checks what the JSON says, not the
speed: the quick runs are too short for timings to mean anything.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

pytestmark = pytest.mark.slow


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_overhead_quick_runs_identical_computations(tmp_path):
    import overhead

    overhead.main(["--quick", "--out", str(tmp_path / "overhead.json")])
    result = read(tmp_path / "overhead.json")
    summary = result["summary"]
    assert summary["median_ratio"] > 0 and summary["target_ratio"] == 1.02
    # Same config, weights and seed: DAPOTrainer with its additions off must compute exactly what GRPOTrainer does.
    assert summary["max_loss_difference"] == 0.0
    run = result["repeats"][0]["runs"]
    assert len(run["grpo"]["step_seconds"]) == len(run["dapo"]["step_seconds"]) == 3


def test_dynamic_sampling_quick_fills_batches_and_records_every_round(tmp_path):
    import dynamic_sampling

    dynamic_sampling.main(["--quick", "--out", str(tmp_path / "ds.json")])
    runs = {run["scheme"]: run for run in read(tmp_path / "ds.json")["runs"]}
    assert set(runs) == {"adaptive", "verl", "resample"}
    groups = 8  # --quick
    for run in runs.values():
        assert len(run["steps"]) == 3
        for step in run["steps"]:
            assert step["sequences_generated"] == 4 * sum(sampled for _, sampled in step["rounds_detail"])
            assert step["kept_groups"] <= groups
    # verl generates a fixed 3x batch per round; the resample loop one batch per round.
    assert all(sampled == 3 * groups for step in runs["verl"]["steps"] for _, sampled in step["rounds_detail"])
    assert all(sampled == groups for step in runs["resample"]["steps"] for _, sampled in step["rounds_detail"])
    assert runs["adaptive"]["all_steps"]["filled_fraction"] == 1.0


def test_controlled_reward_fixes_the_keep_rate_exactly():
    import dynamic_sampling

    ids = list(range(1000))
    chosen = dynamic_sampling.informative_ids(ids, 0.25, salt="0")
    assert len(chosen) == 250 and chosen == dynamic_sampling.informative_ids(ids, 0.25, salt="0")
    reward = dynamic_sampling.ControlledReward(chosen, group_size=4)
    informative_id, other_id = min(chosen), min(set(ids) - chosen)
    rewards = reward(prompts=None, completions=[""] * 8, id=[informative_id] * 4 + [other_id] * 4)
    assert rewards == [0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0]


def test_memory_quick_measures_each_method_in_its_own_process(tmp_path):
    import memory

    memory.main(["--quick", "--out", str(tmp_path / "memory.json")])
    results = {r["method"]: r for r in read(tmp_path / "memory.json")["results"]}
    assert set(results) == {"full", "lora", "qlora"}
    assert results["full"]["trainable_parameters"] == results["full"]["parameters"]
    assert results["lora"]["trainable_parameters"] < results["full"]["trainable_parameters"] / 2
    # 4-bit weights take less room than the float32 ones.
    assert results["qlora"]["parameter_bytes"] < results["lora"]["parameter_bytes"] / 2
    for r in results.values():
        assert r["headline_measure"] == "rss"
        assert set(r["train_peak_increase_bytes"]) == {"anonymous", "rss"}
        assert r["train_peak_increase_bytes"]["rss"] > 0


def test_sample_efficiency_quick_writes_curves_and_plot(tmp_path, tiny_model_dir):
    import sample_efficiency

    out = tmp_path / "se.json"
    sample_efficiency.main(["--quick", "--model-path", tiny_model_dir, "--methods", "grpo", "gspo", "--out", str(out)])
    result = read(out)
    assert out.with_suffix(".png").stat().st_size > 0
    for run in result["runs"]:
        steps = [point["step"] for point in run["curve"]]
        tokens = [point["tokens"] for point in run["curve"]]
        assert steps[0] == 0 and steps[-1] == 2 and tokens[0] == 0
        assert tokens == sorted(tokens) and tokens[-1] > 0


def test_sample_efficiency_merges_arms_run_apart(tmp_path, tiny_model_dir):
    import sample_efficiency

    for method in ("grpo", "dapo-minibatches"):
        sample_efficiency.main(["--quick", "--model-path", tiny_model_dir, "--methods", method,
                                "--out", str(tmp_path / f"{method}.json")])
    merged = tmp_path / "merged.json"
    sample_efficiency.main(["--merge", str(tmp_path / "grpo.json"), str(tmp_path / "dapo-minibatches.json"),
                            "--out", str(merged)])
    result = read(merged)
    assert [run["method"] for run in result["runs"]] == ["grpo", "dapo-minibatches"]
    assert [row["method"] for row in result["summary"]] == ["grpo", "dapo-minibatches"]
    assert result["settings"]["merged_from"] == ["grpo.json", "dapo-minibatches.json"]
    assert merged.with_suffix(".png").stat().st_size > 0


def test_code_in_process_judges_every_row_right(tmp_path):
    import code_in_process

    out = tmp_path / "in_process.json"
    code_in_process.main(["--batch", "1", "--out", str(out)])
    results = read(out)["results"]
    assert [row["row"] for row in results] == list(code_in_process.ROWS)
    assert all(row["scored_1"] == row["programs"] == 1 for row in results)
    code_in_process.main(["--batch", "1", "--rows", "pandas, two calls", "--out", str(out)])
    assert [row["row"] for row in read(out)["results"]] == ["pandas, two calls"]


def test_snapshot_cost_measures_each_figure(tmp_path):
    import subprocess

    out = tmp_path / "snapshot_cost.json"
    subprocess.run([sys.executable, str(BENCHMARKS / "snapshot_cost.py"), "--repeats", "5", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    figures = read(out)["milliseconds"]
    assert len(figures) == 4 and all(milliseconds > 0 for milliseconds in figures.values())


def test_gpu_variant_dry_run_on_cpu(tmp_path):
    """The GPU script's own step (the supervised warm start) and its hand-off to the sample-efficiency benchmark,
    with a tiny model on CPU; the overhead and memory parts only forward arguments to the scripts tested above."""
    import gpu

    arguments = ["--device", "cpu", "--model", "tiny-128", "--quick", "--parts", "sample_efficiency"]
    results = gpu.main(arguments + ["--out-dir", str(tmp_path)])
    result = results["sample_efficiency"]
    assert 0.0 <= result["warm_start_pass@1"] <= 1.0
    assert {run["method"] for run in result["runs"]} == {"dapo", "grpo", "gspo"}
    assert (tmp_path / "sample_efficiency.json").is_file() and (tmp_path / "sample_efficiency.png").is_file()


def test_code_sandbox_side_by_side_measures_every_path():
    import code_sandbox

    for program, paths in (("python", ["fresh", "reused (default)"]),
                           ("cpp-bits", ["fresh", "reused", "reused + precompiled headers (default)"])):
        rows = code_sandbox.side_by_side("auto", program, batch=2, workers=2, repeats=1)
        assert [row["path"] for row in rows] == paths and rows[0]["sequential_ratio_to_fresh"] == 1.0
        assert all(row["sequential_runs_per_s"] > 0 and row["parallel_runs_per_s"] > 0 for row in rows)


def test_code_sandbox_floor_compares_judging_with_a_bare_interpreter():
    import code_sandbox

    floor = code_sandbox.bare_interpreter_floor(batch=2, repeats=1)
    assert floor["bare_python_programs_per_s"] > 0 and floor["judged_programs_per_s"] > 0
    assert floor["ratio_judged_to_bare"] == floor["judged_programs_per_s"] / floor["bare_python_programs_per_s"]


def test_judge_service_quick_measures_every_arm(tmp_path):
    import judge_service

    judge_service.main(["--quick", "--out", str(tmp_path / "judge.json")])
    result = read(tmp_path / "judge.json")
    narrow = {f"{n} server(s) x 1 worker" for n in (1, 2, 4)}
    assert len(result["throughput"]) == 5 and {"local", *narrow} < set(result["throughput"])
    assert result["throughput"]["local"]["ratio_to_local"] == 1.0
    assert result["latency"]["jobs"] == 8 and result["latency"]["p99_seconds"] >= result["latency"]["p50_seconds"]
    assert result["client_overhead"]["served_ms_per_job"] > 0
