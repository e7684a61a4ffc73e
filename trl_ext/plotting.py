"""Training curves from a run's `trainer_state.json`: `trl-ext plot OUTPUT_DIR` writes
`OUTPUT_DIR/training_curves.png`.

Each panel lists the log keys it draws; a panel none of whose keys were logged is left out, so the same
command works for GRPO, DAPO and GSPO runs, with or without held-out evaluation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Panel:
    """One subplot: `patterns` are regular expressions matched in full against log keys, in legend order.

    Keys matching `secondary` go on a right-hand axis (for counts next to fractions).
    """

    title: str
    ylabel: str
    patterns: tuple[str, ...]
    secondary: tuple[str, ...] = ()
    secondary_ylabel: str = ""


PANELS = (
    # Held-out pass@k is drawn; `eval/mean_reward` is not, as it equals pass@1 for a 1/0 verifier.
    Panel("Reward and accuracy", "reward / accuracy", (r"reward", r"rewards/.+/mean", r"eval/pass@\d+")),
    Panel(
        "Response length", "tokens", (r"completions/mean_length", r"completions/min_length", r"completions/max_length")
    ),
    Panel("Entropy", "nats per token", (r"entropy",)),
    Panel(
        "Clip fractions",
        "fraction of tokens",
        (r"clip_ratio/low_mean", r"clip_ratio/high_mean", r"clip_ratio/region_mean"),
    ),
    Panel(
        "Dynamic sampling",
        "fraction of groups",
        (
            r"dynamic_sampling/groups_kept_fraction",
            r"dynamic_sampling/(generated_)?zero_std_fraction",  # before 0.1: zero_std_fraction
            r"frac_reward_zero_std",
        ),
        secondary=(r"dynamic_sampling/generation_rounds",),
        secondary_ylabel="generation rounds",
    ),
    Panel(
        "Signal per generated token",
        "informative groups per 1k tokens",
        (r"dynamic_sampling/informative_groups_per_1k_tokens",),
        secondary=(
            r"dynamic_sampling/generation_budget_used",
            r"dynamic_sampling/prompts_skipped",
            r"dynamic_sampling/prompts_stopped",
            r"dynamic_sampling/prompts_extended",
        ),
        secondary_ylabel="budget used / prompts skipped, stopped, extended",
    ),
)


def load_log_history(run: str | Path) -> list[dict]:
    """The `log_history` of a run: `run` is a `trainer_state.json`, an output directory, or a checkpoint directory.

    An output directory without its own `trainer_state.json` (saved by `trainer.save_state()`) falls back to its
    latest `checkpoint-<step>/trainer_state.json`.
    """
    path = Path(run)
    if path.is_dir():
        candidates = [path / "trainer_state.json"]
        checkpoints = sorted(path.glob("checkpoint-*/trainer_state.json"), key=lambda p: _checkpoint_step(p.parent))
        candidates += reversed(checkpoints)
        found = [candidate for candidate in candidates if candidate.is_file()]
        if not found:
            raise FileNotFoundError(
                f"No trainer_state.json in {path} or its checkpoint-* folders. Pass the run's output_dir; the recipes "
                "write it at the end of training (trainer.save_state())."
            )
        path = found[0]
    with open(path) as file:
        state = json.load(file)
    if "log_history" not in state:
        raise ValueError(f"{path} has no 'log_history'; is it a transformers trainer_state.json?")
    return state["log_history"]


def _checkpoint_step(directory: Path) -> int:
    match = re.fullmatch(r"checkpoint-(\d+)", directory.name)
    return int(match.group(1)) if match else -1


def collect_series(log_history: Sequence[Mapping]) -> dict[str, tuple[list[int], list[float]]]:
    """`{key: (steps, values)}` for every numeric key in the log history, skipping missing and non-finite values."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for record in log_history:
        step = record.get("step")
        if step is None:
            continue
        for key, value in record.items():
            if key in ("step", "epoch") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value):
                continue
            steps, values = series.setdefault(key, ([], []))
            steps.append(step)
            values.append(float(value))
    return series


def _matching(patterns: Sequence[str], keys: Sequence[str]) -> list[str]:
    matched = []
    for pattern in patterns:
        matched += sorted(key for key in keys if re.fullmatch(pattern, key) and key not in matched)
    return matched


def panels_with_data(
    series: Mapping[str, tuple], panels: Sequence[Panel] = PANELS
) -> list[tuple[Panel, list[str], list[str]]]:
    """The panels that have at least one logged key, each with its `(primary keys, secondary keys)`."""
    keys = list(series)
    chosen = []
    for panel in panels:
        primary, secondary = _matching(panel.patterns, keys), _matching(panel.secondary, keys)
        if primary or secondary:
            chosen.append((panel, primary, secondary))
    return chosen


def plot_training_curves(
    run: str | Path, output: str | Path | None = None, title: str | None = None
) -> tuple[Path, list[str]]:
    """Draw the curves of `run` (see `load_log_history`) into a PNG; returns `(png path, panel titles drawn)`.

    The PNG goes to `output`, by default `training_curves.png` in the run directory.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = Path(run)
    series = collect_series(load_log_history(run))
    chosen = panels_with_data(series)
    if not chosen:
        raise ValueError(
            f"{run}: the log history has none of the metrics to plot (reward, completion lengths, entropy, clip "
            "ratios, dynamic sampling). Was training run with logging_steps set and at least one logging step?"
        )
    if output is None:
        output = (run if run.is_dir() else run.parent) / "training_curves.png"
    output = Path(output)

    columns = 2 if len(chosen) > 1 else 1
    rows = math.ceil(len(chosen) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 3.6 * rows), squeeze=False)
    for axis, (panel, primary, secondary) in zip(axes.flat, chosen, strict=False):
        for key in primary:
            steps, values = series[key]
            held_out = key.startswith("eval/")
            style = "o-" if len(steps) < 20 or held_out else "-"
            axis.plot(steps, values, style, markersize=3, linewidth=2.0 if held_out else 1.2, label=key)
        axis.set_title(panel.title)
        axis.set_xlabel("step")
        axis.set_ylabel(panel.ylabel)
        axis.grid(alpha=0.3)
        handles, labels = axis.get_legend_handles_labels()
        if secondary:
            twin = axis.twinx()
            for key in secondary:
                steps, values = series[key]
                twin.plot(steps, values, "--", color="tab:gray", linewidth=1.0, label=key)
            twin.set_ylabel(panel.secondary_ylabel)
            more_handles, more_labels = twin.get_legend_handles_labels()
            handles, labels = handles + more_handles, labels + more_labels
        axis.legend(handles, labels, fontsize=7, loc="best")
    for axis in list(axes.flat)[len(chosen) :]:
        axis.set_visible(False)
    figure.suptitle(title or f"Training curves: {run.resolve().name}")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return output, [panel.title for panel, _, _ in chosen]
