"""The summary and the printed report of `adaptive_sim.py`: statistics over seeds, the arms' table and its notes.

Kept apart from the simulation so that `adaptive_sim.py` holds the world, the source, the runs and the checks.
"""

from __future__ import annotations

import numpy as np
from _common import format_table

# The metrics that are also reported as ratios to dapo, paired per seed (the same world and draws in both arms).
RATIO_METRICS = (
    "informative_trained_per_1k_tokens",
    "informative_generated_per_1k_tokens",
    "pg_signal_per_1k_tokens",
    "tokens_per_step",
)


def per_run_metrics(totals: dict) -> dict:
    """One run's totals as rates: per 1k generated tokens, per step, or fractions."""
    tokens, steps = totals["generated_tokens"], totals["steps"]
    return {
        "informative_trained_per_1k_tokens": 1000 * totals["informative_trained"] / tokens,
        "informative_generated_per_1k_tokens": 1000 * totals["informative_generated"] / tokens,
        "pg_signal_per_1k_tokens": 1000 * totals["pg_signal"] / tokens,
        "tokens_per_step": tokens / steps,
        "uninformative_tokens_per_step": totals["uninformative_tokens"] / steps,
        "uninformative_token_fraction": totals["uninformative_tokens"] / tokens,
        "prompts_skipped_per_step": totals["prompts_skipped"] / steps,
        "rounds_per_step": totals["rounds"] / steps,
        "groups_generated_per_step": totals["groups_generated"] / steps,
        "informative_trained_per_step": totals["informative_trained"] / steps,
        "filled_fraction": 1 - totals["exhausted_steps"] / steps,
        "mean_pass_rate_end": totals["mean_pass_rate_end"],
    }


def bootstrap(values: np.ndarray, resamples: int = 10_000, seed: int = 0) -> list[float]:
    """A percentile bootstrap 95% interval of the mean over seeds."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def describe_values(values: np.ndarray) -> dict:
    return {"mean": float(values.mean()), "ci95": bootstrap(values), "per_seed": values.tolist()}


def summarise(metrics_per_seed: dict[str, list[dict]]) -> dict:
    """Per arm and metric: mean, bootstrap interval, per-seed values; ratios to dapo paired per seed."""
    summary = {}
    for arm, runs in metrics_per_seed.items():
        entry = {name: describe_values(np.array([run[name] for run in runs])) for name in runs[0]}
        for name in RATIO_METRICS:
            ratios = np.array([run[name] / base[name] for run, base in zip(runs, metrics_per_seed["dapo"])])
            entry[f"{name}_ratio_to_dapo"] = describe_values(ratios)
        summary[arm] = entry
    return summary


def with_interval(statistic: dict, digits: int) -> str:
    low, high = statistic["ci95"]
    return f"{statistic['mean']:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def arms_table(summary: dict, arm_names: list[str], drift: bool) -> str:
    """One row per arm; with drift, also the mean pass rate the arm's own training reached."""
    headers = [
        "arm", "inf. trained / 1k tok [95% CI]", "x dapo [95% CI]", "inf. generated / 1k tok", "signal x dapo",
        "tokens / step", "uninf. tokens / step", "skipped / step", "rounds / step", "filled",
    ] + (["mean p at end"] if drift else [])  # fmt: skip
    rows = []
    for name in arm_names:
        entry = summary[name]
        rows.append([
            name,
            with_interval(entry["informative_trained_per_1k_tokens"], 3),
            with_interval(entry["informative_trained_per_1k_tokens_ratio_to_dapo"], 2),
            entry["informative_generated_per_1k_tokens"]["mean"],
            entry["pg_signal_per_1k_tokens_ratio_to_dapo"]["mean"],
            entry["tokens_per_step"]["mean"],
            entry["uninformative_tokens_per_step"]["mean"],
            entry["prompts_skipped_per_step"]["mean"],
            entry["rounds_per_step"]["mean"],
            entry["filled_fraction"]["mean"],
        ] + ([entry["mean_pass_rate_end"]["mean"]] if drift else []))  # fmt: skip
    return format_table(headers, rows)


def run_description(args, world: dict, num_seeds: int, oracle: dict) -> str:
    """The scenario in one sentence, with the oracle's threshold and the sweep that chose it."""
    sweep = ", ".join(f"{t}: {v:.3f}" for t, v in oracle["sweep_informative_trained_per_1k_tokens"].items())
    return (
        f"{'drifting' if args.drift else 'static'} pass rates; {num_seeds} seeds x {args.steps} steps of "
        f"{args.groups} x {args.group_size}; {args.prompts} prompts, mix {args.mix} "
        f"(mean p {world['mean_pass_rate']:.3f}, mean chance of a mixed group "
        f"{world['mean_chance_of_a_mixed_group']:.3f}). Oracle threshold t = {oracle['threshold']} "
        f"(sweep on seeds {oracle['tuning_seeds']}: {sweep})."
    )


def target_note(target_ratio: float, adaptive_ratio: dict, wall_seconds: float, arm: str = "adaptive-pilot") -> str:
    low, high = adaptive_ratio["ci95"]
    return (
        f"Issue target: >= {target_ratio}x DAPO's informative groups per 1k tokens (on the sparse "
        f"environment); here {arm} reaches {adaptive_ratio['mean']:.2f}x [{low:.2f}, {high:.2f}]. Wall time "
        f"{wall_seconds:.0f} s."
    )
