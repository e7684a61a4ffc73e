"""Dynamic sampling decisions (DAPO, arXiv 2503.14476, section 3.2), as pure functions.

A prompt group whose G completions all get the same verifier outcome has all-zero advantages and gives no
gradient. Dynamic sampling drops such groups and generates for fresh prompts until the batch holds only
informative groups. These functions decide which groups to keep and how many prompts to request; the sampler
(`trl_ext.sampling.sampler.DynamicSampler`) runs them, and the trainers only wire the sampler into TRL (see
`trl_ext.trainers.dynamic_sampling_trainer.DynamicSamplingTrainer`, the base of `DAPOTrainer` and `GSPOTrainer`).
"""

from __future__ import annotations

import math
from collections import deque

import torch


def filter_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
    """Weighted sum of the reward functions that decide informativeness.

    Args:
        rewards_per_func: `(N, F)` rewards of `N` completions from `F` reward functions; NaN where a function
            could not judge a completion.
        weights: `(F,)` reward weights.
        used: `(F,)` bool, the functions that count (e.g. every function but the overlong penalty).

    Returns:
        `(N,)` filter reward; NaN for a completion that none of the used functions could judge.
    """
    selected = rewards_per_func[:, used]
    summed = (selected * weights[used].to(selected.device)).nansum(dim=1)
    unjudged = torch.isnan(selected).all(dim=1)
    return summed.masked_fill(unjudged, float("nan"))


def informative_group_mask(rewards: torch.Tensor, group_size: int, atol: float = 1e-6) -> torch.Tensor:
    """Which prompt groups have non-zero reward variance.

    Args:
        rewards: `(num_groups * group_size,)` filter rewards, the completions of one prompt contiguous; NaN
            values (unjudged completions) are ignored.
        group_size: completions per prompt (G).
        atol: rewards closer than this count as equal.

    Returns:
        `(num_groups,)` bool: True where the judged rewards of the group are not all equal. A group with fewer
        than two judged completions is uninformative.
    """
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}.")
    grouped = rewards.view(-1, group_size)
    judged = ~torch.isnan(grouped)
    highest = torch.where(judged, grouped, -torch.inf).max(dim=1).values
    lowest = torch.where(judged, grouped, torch.inf).min(dim=1).values
    return (judged.sum(dim=1) >= 2) & (highest - lowest > atol)


def groups_to_keep(informative: torch.Tensor, needed: int) -> torch.Tensor:
    """Indices of the first `needed` informative groups, in order (fewer if there are not enough).

    Args:
        informative: `(num_groups,)` bool mask from `informative_group_mask`.
        needed: how many groups the batch still lacks.
    """
    return informative.nonzero(as_tuple=True)[0][: max(needed, 0)]


def spare_groups_to_fill(spare_groups: list[torch.Tensor], shortfall: int) -> list[torch.Tensor]:
    """Uninformative groups that complete the batch when the rounds ran out, earliest rounds first.

    Args:
        spare_groups: for each round, `(s,)` indices of the uninformative groups held from it.
        shortfall: how many groups the batch still lacks.

    Returns:
        For each round, the `(f,)` indices of its spare groups that go into the batch.
    """
    filling = []
    for spare in spare_groups:
        chosen = spare[: max(shortfall, 0)]
        shortfall -= len(chosen)
        filling.append(chosen)
    return filling


def _binomial_at_least(successes: int, trials: int, probability: float) -> float:
    """P(X >= successes) for X ~ Binomial(trials, probability), as one minus the lower tail (log space)."""
    if successes <= 0:
        return 1.0
    if successes > trials:
        return 0.0
    log_p, log_q = math.log(probability), math.log1p(-probability)
    log_terms = [
        math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1) + k * log_p + (trials - k) * log_q
        for k in range(successes)
    ]
    peak = max(log_terms)
    return max(0.0, 1.0 - math.exp(peak) * sum(math.exp(term - peak) for term in log_terms))


def prompts_to_request(groups_needed: int, keep_rate: float, confidence: float, max_prompts: int) -> int:
    """How many prompts to generate so that enough groups survive the filter in one round.

    The smallest `n` such that, if each group is kept independently with probability `keep_rate`, at least
    `groups_needed` of `n` groups are kept with probability `confidence`; capped at `max_prompts`. At a steady
    keep rate this makes one round per step the common case, at a cost of about `1/keep_rate` prompts per
    kept group (plus a margin that shrinks as the batch grows).

    Args:
        groups_needed: informative groups the batch still lacks (per process).
        keep_rate: estimated probability that a group is informative, in (0, 1].
        confidence: target probability of filling the batch in this round, in (0, 1).
        max_prompts: upper bound on the request (memory of one generation round).
    """
    if groups_needed <= 0:
        return 0
    if keep_rate >= 1.0:
        return min(groups_needed, max_prompts)
    if keep_rate <= 0.0:
        return max_prompts
    low, high = groups_needed, max_prompts
    if _binomial_at_least(groups_needed, high, keep_rate) < confidence:
        return max_prompts
    while low < high:  # P(X >= k) grows with the number of trials, so bisect on it
        middle = (low + high) // 2
        if _binomial_at_least(groups_needed, middle, keep_rate) >= confidence:
            high = middle
        else:
            low = middle + 1
    return low


class KeepRateEstimator:
    """Fraction of informative groups over the most recent generation rounds.

    Pooled over a sliding window of rounds so the estimate follows the policy as training makes groups easier
    (or harder), without reacting to a single unlucky round.
    """

    def __init__(self, window: int = 4):
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}.")
        self._rounds: deque[tuple[int, int]] = deque(maxlen=window)

    def update(self, informative_groups: int, groups: int) -> None:
        if groups > 0:
            self._rounds.append((informative_groups, groups))

    def state_dict(self) -> list[list[int]]:
        """The window, `[informative_groups, groups]` per round, for a checkpoint."""
        return [list(counts) for counts in self._rounds]

    @staticmethod
    def pooled_state(windows: list[list[list[int]]]) -> list[list[int]]:
        """One window pooling the windows of several processes, round by round (most recent rounds aligned).

        Used when a run resumes on another number of processes: every new process starts from the pooled rate.
        """
        depth = max((len(window) for window in windows), default=0)
        pooled = [[0, 0] for _ in range(depth)]
        for window in windows:
            for offset, (informative, groups) in enumerate(window):
                pooled[depth - len(window) + offset][0] += int(informative)
                pooled[depth - len(window) + offset][1] += int(groups)
        return pooled

    def load_state_dict(self, window: list[list[int]]) -> None:
        self._rounds.clear()
        self._rounds.extend((int(informative), int(groups)) for informative, groups in window)

    def estimate(self) -> float | None:
        """The pooled keep rate, or None before any round was seen."""
        if not self._rounds:
            return None
        kept = sum(informative for informative, _ in self._rounds)
        seen = sum(groups for _, groups in self._rounds)
        return kept / seen


def prompts_for_processes(
    deficits: list[int], keep_rates: list[float | None], confidence: float, max_prompts: int
) -> int:
    """Prompts every process generates for in the next round: enough for the process that needs most.

    Keep rates are tracked per process (processes may see very different ones); each process aims at the confidence
    that makes all of them fill their batch together with probability `confidence`. An unknown keep rate is 1.
    """
    per_process_confidence = confidence ** (1 / len(deficits))
    return max(
        prompts_to_request(deficit, 1.0 if rate is None else rate, per_process_confidence, max_prompts)
        for deficit, rate in zip(deficits, keep_rates, strict=True)
    )


def filter_reward_mask(names: list[str], judging: list[bool], wanted: str | None) -> list[bool]:
    """Which reward functions decide informativeness: the one named `wanted`, or else every judging one.

    Raises a ValueError naming the setting when `wanted` is not a reward function's name, or when no function judges
    (only shaping penalties, which must never make a group look informative).
    """
    if wanted is not None:
        if wanted not in names:
            raise ValueError(
                f"dynamic_sampling_filter_reward={wanted!r} is not one of the trainer's reward functions: "
                f"{names}. Use one of these names, or None for the weighted sum of all of them."
            )
        return [name == wanted for name in names]
    if not any(judging):
        raise ValueError(
            "Dynamic sampling needs a reward that judges answers, but the only reward functions are shaping "
            f"penalties ({names}). Add a verifier reward, or set `dynamic_sampling=False` in DAPOConfig."
        )
    return list(judging)
