"""The offline code job: `accelerate launch recipes/dapo.py --config recipes/configs/dapo_code_default.yaml` trains
the built-in tiny model on the built-in code task (HumanEval's schema, programs run against the tests in the
sandbox by the `code` reward) and reports held-out pass@1 before and after; then `trl-ext plot` and `trl-ext eval`
on its output, as a user goes on."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trl_ext.rewards import call_reward, get_reward
from trl_ext.tasks import code_problems, make_code_dataset, resolve_model_path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "recipes" / "configs" / "dapo_code_default.yaml"
# Held-out pass@1 gain the full job must show: it measured 0.354 -> 0.522 in three runs and 0.463 in a fourth; the
# margin is for other machines and Python builds.
MIN_GAIN = 0.05


def test_code_task_is_deterministic_disjoint_and_in_humaneval_schema():
    first, second = make_code_dataset(), make_code_dataset()
    assert first["train"]["prompt"] == second["train"]["prompt"] and len(first["test"]) == 200
    assert not set(first["train"]["prompt"]) & set(first["test"]["prompt"])
    assert first["test"].column_names == ["task_id", "prompt", "canonical_solution", "test", "entry_point"]
    row = first["test"][0]
    assert row["prompt"].startswith('def f(x):\n    """Return x ') and row["canonical_solution"].startswith(
        "    return x "
    )
    assert make_code_dataset(seed=1)["test"]["prompt"] != first["test"]["prompt"]


def test_the_canonical_body_passes_the_tests_and_near_misses_fail():
    rows = make_code_dataset(num_train=4, num_test=4)["test"]
    other_operator = {"+": "-", "-": "+", "*": "+"}
    right, wrong_operator, wrong_constant = [], [], []
    for body in rows["canonical_solution"]:
        _, _, operator, constant = body.split()
        right.append(body)
        wrong_operator.append(f"    return x {other_operator[operator]} {constant}\n")
        wrong_constant.append(f"    return x {operator} {int(constant) + 1}\n")
    columns = {name: list(rows[name]) * 3 for name in ("prompt", "test", "entry_point")}
    reward = get_reward("code", timeout=4.0)
    scores = call_reward(reward, completions=right + wrong_operator + wrong_constant, **columns)
    assert scores == [1.0] * 4 + [0.0] * 8, scores


def test_code_task_arguments_fail_early():
    with pytest.raises(ValueError, match="exceeds the 2997 distinct problems"):
        make_code_dataset(num_train=3000)
    with pytest.raises(ValueError, match=r"unknown operations \['divided'\]"):
        code_problems(operations=("plus", "divided"))
    assert len(code_problems(max_constant=10, operations=("times",))) == 10


def test_the_builtin_code_model_ships_with_the_package():
    assert (Path(resolve_model_path("builtin:tiny-code")) / "model.safetensors").is_file()


@pytest.mark.slow
def test_the_checkpoint_script_builds_a_model_the_recipe_loads(tmp_path):
    output_dir = tmp_path / "tiny-code"
    result = run(
        [
            sys.executable,
            str(ROOT / "scripts" / "make_code_checkpoint.py"),
            "--output-dir",
            str(output_dir),
            "--steps",
            "3",
            "--eval-prompts",
            "4",
        ],
        timeout=600,
    )
    assert re.search(
        r"held-out pass@1 \(sampled, temperature 1\.0, programs run against the tests\): [\d.]+", result.stdout
    )
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {path.name for path in output_dir.iterdir()}


def test_code_recipe_runs_a_few_steps_in_process(tmp_path, monkeypatch, capsys):
    output_dir = tmp_path / "code"
    arguments = [
        "--config",
        str(CONFIG),
        "--output_dir",
        str(output_dir),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "16",
        "--steps_per_generation",
        "1",
        "--heldout_prompts",
        "8",
        "--heldout_samples",
        "2",
        "--plot",
        "false",
    ]  # the config's heldout_steps: 0 stays
    monkeypatch.setattr(sys, "argv", [str(ROOT / "recipes" / "dapo.py"), *arguments])
    runpy.run_path(str(ROOT / "recipes" / "dapo.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert re.search(r"held-out \(8 prompts x 2 samples\): pass@1 before [\d.]+ -> after [\d.]+", out), out[-2000:]
    history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    assert any("rewards/code/mean" in entry for entry in history)


def run(command: list[str], timeout: int) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    result = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=timeout, env=environment, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


@pytest.mark.slow
def test_the_code_job_learns_and_the_cli_plots_and_evaluates_its_output(tmp_path):
    output_dir = tmp_path / "code-job"
    start = time.monotonic()
    result = run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            str(ROOT / "recipes" / "dapo.py"),
            "--config",
            str(CONFIG),
            "--output_dir",
            str(output_dir),
        ],
        timeout=1200,
    )
    elapsed = time.monotonic() - start
    match = re.search(r"pass@1 before ([\d.]+) -> after ([\d.]+)", result.stdout)
    assert match, result.stdout[-3000:]
    before, after = map(float, match.groups())
    print(f"code job: {elapsed:.0f} s, held-out pass@1 before {before:.3f} -> after {after:.3f}")
    assert 0.1 <= before <= 0.6  # the warm start writes some right programs: groups mix passes and failures
    assert after >= before + MIN_GAIN, (before, after)
    assert elapsed < 900, f"the code job took {elapsed:.0f} s"

    plot = run([sys.executable, "-m", "trl_ext.cli", "plot", str(output_dir)], timeout=300)
    assert (output_dir / "training_curves.png").stat().st_size > 0 and "Wrote" in plot.stdout
    report = tmp_path / "eval.json"
    run(
        [
            sys.executable,
            "-m",
            "trl_ext.cli",
            "eval",
            "--model",
            str(output_dir),
            "--dataset",
            "builtin:code-functions",
            "--reward",
            "code",
            "--num-prompts",
            "50",
            "--n",
            "4",
            "--max-new-tokens",
            "24",
            "--output",
            str(report),
        ],
        timeout=600,
    )
    evaluated = json.loads(report.read_text())
    assert len(evaluated["num_correct"]) == 50 and evaluated["pass@1"] > before - 0.1
