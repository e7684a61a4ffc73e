"""The shipped accelerate configs, launched for real on two CPU processes with dynamic sampling on.

Each test copies a config from recipes/accelerate_configs/ into a temporary directory, changing only what a CPU
machine needs (CPU_OVERRIDES), launches tests/scripts/distributed_dynamic_sampling.py with it, and checks that
both processes took the same decisions although their keep rates differ, that the weights agree, and that the
step-2 checkpoint reloads and resumes.

What runs where, on CPU (accelerate 1.15, torch 2.13, DeepSpeed 0.19):
- ddp.yaml: DDP over gloo.
- zero2.yaml, zero3.yaml: DeepSpeed's CPU accelerator over gloo (`DS_ACCELERATOR=cpu`, `ddp_backend="gloo"`).
- single_gpu.yaml: one process, no distributed back-end.
- fsdp2.yaml: accelerate enables FSDP only on GPU-class devices; under `use_cpu=True` it trains with DDP and
  ignores the FSDP settings without a warning. The test checks that fallback explicitly, and checks the config as
  far as a CPU allows: the launcher's FSDP2 settings, the plugin accelerate builds from them, the layers it wraps,
  and FSDP2 sharding of the model over gloo.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from accelerate.commands.config.config_args import load_config_from_file
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "recipes" / "accelerate_configs"
SCRIPTS = ROOT / "tests" / "scripts"
# What a CPU machine needs, and nothing else: two processes (the shipped files say 8 GPUs), full precision (bf16
# autocast is a GPU setting), and a free port so parallel test runs do not collide.
CPU_OVERRIDES = {"num_processes": 2, "mixed_precision": "no", "main_process_port": 0}
ROUNDS = "dynamic_sampling/generation_rounds"
needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="DeepSpeed not installed: pip install -e '.[dev]'"
)

# The digest the training script computes, loaded from the same file so both sides hash alike.
_digest_spec = importlib.util.spec_from_file_location("parameter_digest", SCRIPTS / "parameter_digest.py")
_digest_module = importlib.util.module_from_spec(_digest_spec)
_digest_spec.loader.exec_module(_digest_module)
state_dict_digest = _digest_module.state_dict_digest


def cpu_config(name: str, directory: Path, overrides: dict) -> Path:
    """The shipped config `name` with `overrides` applied, written to `directory`; every other key is kept."""
    shipped = yaml.safe_load((CONFIGS / name).read_text())
    path = directory / name
    path.write_text(yaml.safe_dump({**shipped, **overrides}))
    derived, original = load_config_from_file(str(path)), load_config_from_file(str(CONFIGS / name))
    assert derived.to_dict() == {**original.to_dict(), **overrides}
    return path


def launch(
    name: str, directory: Path, model_dir: str, overrides: dict = CPU_OVERRIDES, **environment: str
) -> tuple[list[dict], Path]:
    """Run the script under config `name`; returns each process's report and the output dir."""
    output_dir = directory / "out"
    output_dir.mkdir(parents=True)
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(cpu_config(name, directory, overrides)),
        str(SCRIPTS / "distributed_dynamic_sampling.py"), model_dir, str(output_dir),
    ]  # fmt: skip
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",  # CPU on every machine, so the figures below hold everywhere
        **environment,
    }
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    if result.returncode != 0:
        # The cause of a crash (an abort message, a traceback) can be far from the launcher's summary at the end.
        causes = [line for line in result.stderr.splitlines() if re.search(r"terminate|what\(\)|Error|abort", line)]
        pytest.fail("\n".join(causes[-40:]) + "\n" + result.stdout[-2000:] + result.stderr[-4000:])
    reports = [json.loads(path.read_text()) for path in sorted(output_dir.glob("rank*.json"))]
    assert len(reports) == overrides["num_processes"]
    return reports, output_dir


def dynamic_sampling_metrics(history: list[dict]) -> list[dict]:
    return [{key: value for key, value in entry.items() if key.startswith("dynamic_sampling/")} for entry in history]


def check_processes_stayed_in_step(ranks: list[dict]):
    """Both processes ran the same rounds and logged the same gathered metrics, though their keep rates differ."""
    for rank, report in enumerate(ranks):
        assert report["backend"]["num_processes"] == 2 and report["backend"]["torch_backend"] == "gloo"
        assert report["batch_sizes"] == [8, 8], f"process {rank}: every trained batch is full"
        assert report["resumed_batch_sizes"] == [8], f"process {rank}: one more step after resuming"
        assert "multiple of num_generations=4" in report["invalid_batch_error"]
    # Process 1 trains only on prompts with id % 4 == 0 (keep rate ~0.25); process 0 on any prompt.
    assert all(i % 4 == 0 for ids in ranks[1]["batch_ids"] for i in ids)
    assert any(i % 4 for ids in ranks[0]["batch_ids"] for i in ids)
    history = ranks[0]["log_history"]
    rounds = [entry[ROUNDS] for entry in history if ROUNDS in entry]
    assert len(rounds) == 2 and rounds[0] >= 2  # process 1 needed a refill round, and process 0 ran it too
    assert ranks[0]["scored_rows"] == ranks[1]["scored_rows"]  # same rounds, same number of prompts per round
    assert len(ranks[0]["scored_rows"]) == sum(rounds)
    assert dynamic_sampling_metrics(history) == dynamic_sampling_metrics(ranks[1]["log_history"])
    # The script turns on carried groups: process 0's surplus was carried and trained the next step.
    assert sum(entry.get("dynamic_sampling/carried_groups", 0) for entry in history) > 0
    for key in ("loss", "reward", "num_tokens", "grad_norm"):
        logged = [[entry.get(key) for entry in report["log_history"]] for report in ranks]
        assert logged[0] == logged[1], f"gathered {key} differs between processes"
    resumed = [entry for entry in ranks[0]["resumed_log_history"] if "loss" in entry]
    assert [entry["step"] for entry in resumed] == [1, 2, 3]  # the resumed run continued the checkpoint's history
    assert all(torch.isfinite(torch.tensor([entry["loss"] for entry in resumed])))
    assert dynamic_sampling_metrics(ranks[0]["resumed_log_history"][:2]) == dynamic_sampling_metrics(history[:2])


def check_checkpoints(ranks: list[dict], output_dir: Path):
    """The step-2 checkpoint holds the trained weights, and the run resumed from it trained on."""
    checkpoint = AutoModelForCausalLM.from_pretrained(output_dir / "checkpoint-2")
    assert state_dict_digest(checkpoint.state_dict()) == ranks[0]["parameter_digest"]
    assert (output_dir / "checkpoint-2" / "dynamic_sampling_state.json").exists()
    resumed = AutoModelForCausalLM.from_pretrained(output_dir / "checkpoint-3")
    assert state_dict_digest(resumed.state_dict()) == ranks[0]["resumed_parameter_digest"]
    assert ranks[0]["resumed_parameter_digest"] != ranks[0]["parameter_digest"]


def max_weight_difference(first: Path, second: Path) -> float:
    weights = [AutoModelForCausalLM.from_pretrained(path).state_dict() for path in (first, second)]
    return max((weights[0][name] - weights[1][name]).abs().max().item() for name in weights[0])


@pytest.mark.parametrize(
    ("environment", "metric"),
    [
        ({"DYNAMIC_SAMPLING_PILOT": "2"}, "dynamic_sampling/prompts_stopped"),
        ({"DYNAMIC_SAMPLING_PILOT": "2", "DYNAMIC_SAMPLING_EXTENSIONS": "1"}, "dynamic_sampling/prompts_extended"),
    ],
    ids=["pilot", "extensions"],
)
def test_ddp_adaptive_mode_with_the_pilot_keeps_processes_in_step(tmp_path, tiny_model_dir, environment, metric):
    """Process 1 stops prompts after their pilot that process 0 commits (with extensions: the processes' all-equal
    groups get 4 more completions, in different numbers per process); every call still generates as many rows on
    both (TRL gathers the rewards), and both take the same decisions, before and after resuming."""
    ranks, _ = launch("ddp.yaml", tmp_path, tiny_model_dir, **environment)
    for rank, report in enumerate(ranks):
        assert report["batch_sizes"] == [8, 8] and report["resumed_batch_sizes"] == [8], rank
    assert ranks[0]["scored_rows"] == ranks[1]["scored_rows"]
    assert {rows % 2 for rows in ranks[0]["scored_rows"]} == {0} and min(ranks[0]["scored_rows"]) < 8  # pilots
    history = ranks[0]["log_history"]
    assert dynamic_sampling_metrics(history) == dynamic_sampling_metrics(ranks[1]["log_history"])
    assert sum(entry.get(metric, 0) for entry in history) > 0
    for key in ("loss", "reward", "grad_norm"):
        logged = [[entry.get(key) for entry in report["log_history"]] for report in ranks]
        assert logged[0] == logged[1], f"gathered {key} differs between processes"
    assert dynamic_sampling_metrics(ranks[0]["resumed_log_history"][:2]) == dynamic_sampling_metrics(history[:2])


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory, tiny_model_dir) -> tuple[list[dict], Path]:
    return launch("ddp.yaml", tmp_path_factory.mktemp("ddp"), tiny_model_dir)


@pytest.mark.slow
def test_ddp_config_keeps_processes_in_step(ddp_run, tiny_model_dir):
    ranks, output_dir = ddp_run
    for report in ranks:
        assert report["backend"]["distributed_type"] == "MULTI_CPU"
        assert report["backend"]["model_wrapper"] == "DistributedDataParallel"
    check_processes_stayed_in_step(ranks)
    # Data parallel: both processes hold the same weights after every update.
    assert ranks[0]["parameter_digest"] == ranks[1]["parameter_digest"]
    assert ranks[0]["resumed_parameter_digest"] == ranks[1]["resumed_parameter_digest"]
    check_checkpoints(ranks, output_dir)
    assert max_weight_difference(output_dir / "checkpoint-2", Path(tiny_model_dir)) > 1e-3  # training moved them


@pytest.mark.slow
def test_fsdp2_config_on_cpu(tmp_path, tiny_model_dir):
    ranks, output_dir = launch("fsdp2.yaml", tmp_path, tiny_model_dir)
    shipped = yaml.safe_load((CONFIGS / "fsdp2.yaml").read_text())["fsdp_config"]
    for rank, report in enumerate(ranks):
        environment = report["backend"]["launcher_environment"]
        assert environment["ACCELERATE_USE_FSDP"] == "true"
        assert environment["FSDP_VERSION"] == str(shipped["fsdp_version"]) == "2"
        assert environment["FSDP_STATE_DICT_TYPE"] == shipped["fsdp_state_dict_type"]
        assert environment["FSDP_AUTO_WRAP_POLICY"] == shipped["fsdp_auto_wrap_policy"]
        sharding = report["backend"]["fsdp2_sharding"]
        assert sharding["fsdp_version"] == 2 and sharding["state_dict_type"] == "FULL_STATE_DICT"
        assert sharding["reshard_after_forward"] is shipped["fsdp_reshard_after_forward"] is True
        assert sharding["wrapped_layers"] == ["LlamaDecoderLayer", "LlamaDecoderLayer"]  # one FSDP unit per layer
        assert sharding["logits_match_unsharded"], f"process {rank}"
        assert sharding["local_parameter_fraction"] == 0.5  # each process holds half of every parameter
        # accelerate 1.15 does not route CPU training through FSDP: it falls back to DDP. If this fails, accelerate
        # now shards on CPU: assert FSDP here (model_wrapper "FSDPLlamaForCausalLM") instead of the fallback.
        assert (report["backend"]["distributed_type"], report["backend"]["model_wrapper"]) == (
            "MULTI_CPU",
            "DistributedDataParallel",
        )
    sharding = ranks[0]["backend"]["fsdp2_sharding"]  # the full state dict is gathered on process 0
    assert sharding["full_state_dict_digest"] == sharding["unsharded_digest"]
    check_processes_stayed_in_step(ranks)
    check_checkpoints(ranks, output_dir)


@pytest.mark.slow
@needs_deepspeed
@pytest.mark.parametrize("name", ["zero2.yaml", "zero3.yaml"])
def test_deepspeed_configs_on_cpu(name, tmp_path, tiny_model_dir, ddp_run):
    ranks, output_dir = launch(name, tmp_path, tiny_model_dir, DS_ACCELERATOR="cpu")
    stage = yaml.safe_load((CONFIGS / name).read_text())["deepspeed_config"]["zero_stage"]
    for report in ranks:
        assert report["backend"]["distributed_type"] == "DEEPSPEED"
        assert report["backend"]["model_wrapper"] == "DeepSpeedEngine"
        assert report["backend"]["zero_stage"] == stage
    check_processes_stayed_in_step(ranks)
    if stage == 2:  # optimizer states and gradients sharded, parameters replicated
        assert ranks[0]["parameter_digest"] == ranks[1]["parameter_digest"]
    else:  # parameters sharded: only process 0 receives the gathered weights
        assert ranks[1]["parameter_digest"] is None
    check_checkpoints(ranks, output_dir)
    # The same run as DDP, up to the order of floating-point reductions.
    ddp_output = ddp_run[1]
    for checkpoint in ("checkpoint-2", "checkpoint-3"):
        assert max_weight_difference(output_dir / checkpoint, ddp_output / checkpoint) < 1e-4


@pytest.mark.slow
def test_single_gpu_config_on_cpu(tmp_path, tiny_model_dir):
    one_process = {"mixed_precision": "no", "num_processes": 1}  # the shipped value, stated for the count check
    ranks, output_dir = launch("single_gpu.yaml", tmp_path, tiny_model_dir, one_process)
    (report,) = ranks
    assert report["backend"]["distributed_type"] == "NO" and report["backend"]["num_processes"] == 1
    assert report["batch_sizes"] == [8, 8] and report["resumed_batch_sizes"] == [8]
    assert [entry["step"] for entry in report["resumed_log_history"] if "loss" in entry] == [1, 2, 3]
    check_checkpoints(ranks, output_dir)
