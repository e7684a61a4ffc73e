"""`trl-ext plot`: curves from a real DAPO run's trainer_state.json, panels skipped when their metrics are absent."""

from __future__ import annotations

import json
import shutil

import matplotlib.image
import pytest

from trl_ext.plotting import PANELS, collect_series, load_log_history, panels_with_data, plot_training_curves

ALL_PANELS = [panel.title for panel in PANELS]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A short real DAPO run of the built-in tiny model, with held-out pass@1 logged before and after."""
    from trl_ext import DAPOConfig, DAPOTrainer
    from trl_ext.evaluation import PassAtKCallback
    from trl_ext.rewards import get_reward
    from trl_ext.tasks import make_arithmetic_dataset, resolve_model_path

    output_dir = tmp_path_factory.mktemp("dapo-run")
    task = make_arithmetic_dataset(num_train=256, num_test=8)
    reward = get_reward("exact_match", extract="none", normalize=False)
    args = DAPOConfig(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        max_steps=3,
        logging_steps=1,
        learning_rate=1e-4,
        per_device_train_batch_size=16,
        num_generations=4,
        max_completion_length=8,
        overlong_buffer_length=4,
        dynamic_sampling_max_rounds=4,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = DAPOTrainer(
        model=resolve_model_path("builtin:tiny-arithmetic"),
        reward_funcs=reward,
        args=args,
        train_dataset=task["train"],
    )
    trainer.add_callback(PassAtKCallback(trainer, task["test"], reward, num_samples=2))
    trainer.train()
    trainer.save_state()
    return output_dir


def test_plot_of_a_real_run_has_every_panel(run_dir, tmp_path):
    png, panels = plot_training_curves(run_dir, output=tmp_path / "curves.png")
    assert panels == ALL_PANELS
    image = matplotlib.image.imread(png)
    assert png.stat().st_size > 10_000
    assert image.shape[0] > image.shape[1] * 0.7  # three rows of two panels
    assert image[..., :3].std() > 0.05  # something was drawn


def test_the_run_logged_what_the_panels_draw(run_dir):
    series = collect_series(load_log_history(run_dir))
    for key in (
        "reward",
        "entropy",
        "completions/mean_length",
        "clip_ratio/high_mean",
        "dynamic_sampling/groups_kept_fraction",
        "dynamic_sampling/generation_rounds",
        "dynamic_sampling/informative_groups_per_1k_tokens",
        "dynamic_sampling/generation_budget_used",
        "dynamic_sampling/prompts_stopped",
        "eval/pass@1",
    ):
        assert key in series, key
    assert series["eval/pass@1"][0] == [0, 3]


def test_panels_without_data_are_skipped(run_dir, tmp_path):
    state = json.loads((run_dir / "trainer_state.json").read_text())
    state["log_history"] = [
        {key: value for key, value in record.items() if not key.startswith(("dynamic_sampling/", "entropy"))}
        for record in state["log_history"]
    ]
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    png, panels = plot_training_curves(tmp_path)
    assert panels == ["Reward and accuracy", "Response length", "Clip fractions"] + (
        ["Dynamic sampling"] if any("frac_reward_zero_std" in r for r in state["log_history"]) else []
    )
    assert png == tmp_path / "training_curves.png" and png.stat().st_size > 0


def test_grpo_style_logs_show_zero_std_fraction_in_the_dynamic_sampling_panel():
    history = [
        {"step": 1, "reward": 0.5, "frac_reward_zero_std": 0.25},
        {"step": 2, "reward": 0.6, "frac_reward_zero_std": 0.5},
    ]
    chosen = panels_with_data(collect_series(history))
    assert [(panel.title, primary) for panel, primary, _ in chosen] == [
        ("Reward and accuracy", ["reward"]),
        ("Dynamic sampling", ["frac_reward_zero_std"]),
    ]


def test_dapo_logs_show_the_generated_zero_std_fraction_beside_trls():
    history = [
        {"step": 1, "dynamic_sampling/generated_zero_std_fraction": 0.75, "frac_reward_zero_std": 0.0},
        {"step": 2, "dynamic_sampling/generated_zero_std_fraction": 0.5, "frac_reward_zero_std": 0.0},
    ]
    chosen = panels_with_data(collect_series(history))
    assert [(panel.title, primary) for panel, primary, _ in chosen] == [
        ("Dynamic sampling", ["dynamic_sampling/generated_zero_std_fraction", "frac_reward_zero_std"]),
    ]


def test_collect_series_skips_non_numeric_and_non_finite_values():
    history = [{"step": 1, "reward": float("nan"), "loss": 1.0, "note": "x", "flag": True}, {"step": 2, "reward": 1.0}]
    assert collect_series(history) == {"loss": ([1], [1.0]), "reward": ([2], [1.0])}


def test_falls_back_to_the_latest_checkpoint(run_dir, tmp_path):
    for step in (1, 3):
        (tmp_path / f"checkpoint-{step}").mkdir()
    shutil.copy(run_dir / "trainer_state.json", tmp_path / "checkpoint-3" / "trainer_state.json")
    (tmp_path / "checkpoint-1" / "trainer_state.json").write_text(json.dumps({"log_history": []}))
    assert load_log_history(tmp_path) == load_log_history(run_dir)


def test_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No trainer_state.json"):
        load_log_history(tmp_path)
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 1.0}]}))
    with pytest.raises(ValueError, match="none of the metrics"):
        plot_training_curves(tmp_path)


def test_cli_plot(run_dir, tmp_path, capsys):
    from trl_ext.cli import main

    assert main(["plot", str(run_dir), "--output", str(tmp_path / "cli.png")]) == 0
    assert (tmp_path / "cli.png").stat().st_size > 0
    assert "Dynamic sampling" in capsys.readouterr().out
