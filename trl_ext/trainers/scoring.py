"""Pure functions behind the dynamic-sampling trainers' scoring (`DynamicSamplingTrainer`, the base of `DAPOTrainer`
and `GSPOTrainer`): which rows count as judged, and merged generation metrics."""

from __future__ import annotations

import torch

# Names of TRL's shaping rewards (`trl.rewards`): they shape a reward, they never judge an answer.
TRL_SHAPING_REWARD_NAMES = frozenset({"soft_overlong_punishment_reward", "repetition_penalty_reward"})
# TRL's cosine-scaled reward judges the answer but scales it by length: it varies within almost every group.
TRL_CONTINUOUS_REWARD_NAMES = frozenset({"cosine_scaled_reward"})


def is_shaping_reward(reward_func) -> bool:
    """Whether a reward function only shapes (a length or repetition penalty) and never judges an answer."""
    return bool(getattr(reward_func, "shaping", False)) or getattr(reward_func, "__name__", None) in (
        TRL_SHAPING_REWARD_NAMES
    )


def mark_unjudged_completions(
    rewards_per_func: torch.Tensor, judging: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Make a completion that no judging reward could score unscorable for every reward function.

    TRL leaves a completion out of the advantages only when *every* reward function returned `None` (NaN); a
    shaping reward that always returns a number (the overlong punishment) would otherwise turn "cannot judge"
    into a zero summed with the penalty, i.e. "wrong".

    Args:
        rewards_per_func: `(N, F)` rewards, NaN where a function returned `None`.
        judging: `(F,)` bool, the functions that judge answers (every function but the shaping ones).

    Returns:
        `(N, F)` rewards with whole rows set to NaN where every judging function returned `None`, and the `(N,)`
        bool mask of those rows. Without any judging function nothing is marked.
    """
    judging = judging.to(rewards_per_func.device)
    if not judging.any():
        return rewards_per_func, torch.zeros(rewards_per_func.size(0), dtype=torch.bool, device=rewards_per_func.device)
    unjudged = torch.isnan(rewards_per_func[:, judging]).all(dim=1)
    return rewards_per_func.masked_fill(unjudged.unsqueeze(1), float("nan")), unjudged


# How each of TRL's per-round generation metrics combines over rounds of different sizes: weighted by the rows
# of the round (`rows`), by its terminated rows (`terminated`), by its tool calls (`calls`), or as an extreme.
_GENERATION_METRICS = {
    "completions/mean_length": "rows",
    "completions/clipped_ratio": "rows",
    "completions/min_length": "min",
    "completions/max_length": "max",
    "completions/mean_terminated_length": "terminated",
    "completions/min_terminated_length": "min_terminated",
    "completions/max_terminated_length": "max_terminated",
    "tools/call_frequency": "rows",
    "tools/failure_frequency": "calls",
}


def merge_generation_metrics(per_round: dict[str, list[float]], rows: list[int]) -> dict[str, float]:
    """One value per metric for all the completions generated over several rounds, each weighted by its samples.

    TRL appends its completion metrics once per generation; averaging those entries would give a round of 8 rows
    the weight of a round of 64. This recombines them exactly.

    Args:
        per_round: metric name -> one value per round, as TRL logged it for that round (all processes).
        rows: completions generated in each round, over all processes.

    Returns:
        metric name -> the value over every generated completion.
    """
    merged = {}
    total_rows = sum(rows)
    clipped = per_round.get("completions/clipped_ratio")
    terminated = [n * (1.0 - c) for n, c in zip(rows, clipped, strict=True)] if clipped else rows
    calls = per_round.get("tools/call_frequency")
    for name, values in per_round.items():
        how = _GENERATION_METRICS.get(name)
        if how is None or len(values) != len(rows):
            continue
        if how == "rows":
            merged[name] = sum(n * v for n, v in zip(rows, values)) / total_rows
        elif how == "min":
            merged[name] = min(values)
        elif how == "max":
            merged[name] = max(values)
        elif how == "calls":
            weights = [n * f for n, f in zip(rows, calls or [0.0] * len(rows))]
            merged[name] = sum(w * v for w, v in zip(weights, values)) / sum(weights) if sum(weights) else 0.0
        else:  # TRL logs 0 for a round in which no completion terminated: leave such rounds out
            live = [(w, v) for w, v in zip(terminated, values) if w > 0.5]
            if not live:
                merged[name] = 0.0
            elif how == "terminated":
                merged[name] = sum(w * v for w, v in live) / sum(w for w, _ in live)
            elif how == "min_terminated":
                merged[name] = min(v for _, v in live)
            else:
                merged[name] = max(v for _, v in live)
    return merged
