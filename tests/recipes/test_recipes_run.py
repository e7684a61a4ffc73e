"""Each recipe trains for real for 2 steps: in-process (DAPO, GSPO, GRPO), with QLoRA on CPU, and under a
2-process `accelerate launch` (gloo) with dynamic sampling."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

# Two optimizer steps on a tiny batch, a small held-out set, no plot unless asked.
SHORT_RUN = [
    "--max_steps",
    "2",
    "--logging_steps",
    "1",
    "--per_device_train_batch_size",
    "8",
    "--num_generations",
    "4",
    "--heldout_prompts",
    "8",
    "--heldout_samples",
    "2",
    "--plot",
    "false",
    "--report_to",
    "none",
]


def run_recipe(name: str, output_dir: Path, *args: str, monkeypatch) -> None:
    """Run `recipes/<name>.py` as a script in this process, `__main__` block included."""
    monkeypatch.setattr(sys, "argv", [str(RECIPES / f"{name}.py"), *args, "--output_dir", str(output_dir)])
    runpy.run_path(str(RECIPES / f"{name}.py"), run_name="__main__")


def log_history(output_dir: Path) -> list[dict]:
    return json.loads((output_dir / "trainer_state.json").read_text())["log_history"]


def before_after_figures(text: str) -> tuple[float, float]:
    line = next(line for line in text.splitlines() if "before" in line and "after" in line)
    before = float(line.split("before ")[1].split()[0])
    after = float(line.split("after ")[1].split()[0].rstrip(";"))
    return before, after


def test_dapo_recipe_default_config_two_steps(tmp_path, monkeypatch, capsys):
    output_dir = tmp_path / "dapo"
    run_recipe("dapo", output_dir, *SHORT_RUN, "--dynamic_sampling_max_rounds", "4", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    before, after = before_after_figures(out)
    assert 0.0 <= before <= 1.0 and 0.0 <= after <= 1.0
    history = log_history(output_dir)
    assert max(record["step"] for record in history) == 2
    assert any("dynamic_sampling/groups_kept_fraction" in record for record in history)
    assert [record["step"] for record in history if "eval/pass@1" in record] == [0, 2]
    assert (output_dir / "model.safetensors").is_file()


def test_dapo_recipe_with_the_adaptive_config_two_steps(tmp_path, monkeypatch, capsys):
    """The README's adaptive command, shortened: `recipes/dapo.py --config recipes/configs/dapo_adaptive.yaml`."""
    output_dir = tmp_path / "dapo-adaptive"
    config = str(RECIPES / "configs" / "dapo_adaptive.yaml")
    run_recipe("dapo", output_dir, "--config", config, *SHORT_RUN, monkeypatch=monkeypatch)
    before_after_figures(capsys.readouterr().out)
    history = log_history(output_dir)
    assert max(record["step"] for record in history) == 2
    assert any("dynamic_sampling/informative_groups_per_1k_tokens" in record for record in history)
    # The arguments the trainer saved with the model: the recipe ran in the adaptive mode.
    import torch

    arguments = torch.load(output_dir / "training_args.bin", weights_only=False)
    assert arguments.dynamic_sampling_mode == "adaptive" and arguments.dynamic_sampling_max_skip_probability == 0.9


def test_gspo_recipe_two_steps(tmp_path, monkeypatch, capsys):
    output_dir = tmp_path / "gspo"
    run_recipe(
        "gspo", output_dir, *SHORT_RUN, "--steps_per_generation", "2", "--plot", "true", monkeypatch=monkeypatch
    )
    out = capsys.readouterr().out
    before_after_figures(out)
    assert (output_dir / "training_curves.png").stat().st_size > 0


def test_grpo_recipe_on_a_local_model_folder(tiny_model_dir, tmp_path, monkeypatch, capsys):
    output_dir = tmp_path / "grpo"
    run_recipe("grpo", output_dir, *SHORT_RUN, "--model_name_or_path", tiny_model_dir, monkeypatch=monkeypatch)
    before_after_figures(capsys.readouterr().out)
    assert any("reward" in record for record in log_history(output_dir))


def test_dapo_recipe_with_qlora_on_cpu(tmp_path, monkeypatch, capsys):
    """bitsandbytes NF4 base weights on CPU, LoRA adapters trained, KL to the base with the adapter disabled."""
    output_dir = tmp_path / "qlora"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_recipe(
            "dapo",
            output_dir,
            *SHORT_RUN,
            "--load_in_4bit",
            "--use_peft",
            "--lora_r",
            "8",
            "--lora_alpha",
            "16",
            "--lora_dropout",
            "0",
            "--lora_target_modules",
            "q_proj",
            "v_proj",
            "--learning_rate",
            "1e-3",
            "--beta",
            "0.04",
            "--dynamic_sampling_max_rounds",
            "4",
            monkeypatch=monkeypatch,
        )
    # Backpropagating through a bitsandbytes kernel without a backward would silently cut the gradients.
    assert not [w for w in caught if "autograd kernel was not registered" in str(w.message)]
    before_after_figures(capsys.readouterr().out)
    history = log_history(output_dir)
    assert any("kl" in record for record in history)  # beta > 0: the reference is the base model, adapter off
    saved = sorted(path.name for path in output_dir.iterdir())
    assert "adapter_model.safetensors" in saved and "adapter_config.json" in saved
    assert "model.safetensors" not in saved  # only the adapter is saved, not the quantized base


def test_lora_reference_policy_is_the_base_with_the_adapter_disabled(tiny_model_dir, tmp_path):
    from peft import LoraConfig

    from trl_ext import DAPOConfig, DAPOTrainer
    from trl_ext.rewards import get_reward
    from trl_ext.tasks import make_arithmetic_dataset

    args = DAPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        beta=0.04,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        report_to="none",
    )
    trainer = DAPOTrainer(
        model=tiny_model_dir,
        reward_funcs=get_reward("exact_match"),
        args=args,
        train_dataset=make_arithmetic_dataset(num_train=8, num_test=1)["train"],
        peft_config=LoraConfig(r=4, target_modules=["q_proj"], lora_dropout=0.0),
    )
    assert trainer.ref_model is None  # no second copy: TRL computes reference log-probs with the adapter disabled
    assert hasattr(trainer.model, "disable_adapter")


def test_two_process_accelerate_launch_with_dynamic_sampling(tmp_path):
    output_dir = tmp_path / "ddp"
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(RECIPES / "accelerate_configs" / "ddp.yaml"),
        # Without a GPU the DDP config starts 2 processes joined over gloo. (`--cpu` would start only one:
        # accelerate runs a single process for it unless mpirun is configured.)
        "--num_processes",
        "2",
        "--mixed_precision",
        "no",
        "--main_process_port",
        "0",
        str(RECIPES / "dapo.py"),
        *SHORT_RUN,
        "--dynamic_sampling",
        "true",
        "--dynamic_sampling_max_rounds",
        "4",
        "--output_dir",
        str(output_dir),
        "--log_level",
        "info",
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    # 8 completions per process and step, 2 processes
    assert re.search(
        r"Total train batch size \(w. parallel, distributed & accumulation\) = 16", result.stdout + result.stderr
    )
    before_after_figures(result.stdout)
    assert result.stdout.count("before") == 1  # printed by the main process only
    history = log_history(output_dir)
    kept = [record for record in history if "dynamic_sampling/groups_kept_fraction" in record]
    assert kept and max(record["step"] for record in history) == 2
    # both processes evaluated a share of the held-out prompts; the gathered result covers all 8
    assert [record["step"] for record in history if "eval/pass@1" in record] == [0, 2]


def test_before_after_line_format():
    assert before_after_figures("held-out (8 prompts x 2 samples): pass@1 before 0.125 -> after 0.500") == (0.125, 0.5)
