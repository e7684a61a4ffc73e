"""Statistics of a paired-seed comparison of training runs: tokens to a target, censored at the budget.

Every arm of a benchmark runs the same seeds (same initialisation, same prompt order), so arms are compared seed by
seed. A run that never reaches the target is *censored*: it needed more than the tokens it spent (its budget, the
cap). Medians rank a censored run above every run that reached the target; a median, an interval end or a ratio that
falls on a censored run is reported as "more than" the cap (`None` here, with `censored=True`).
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Censored:
    """A run's tokens to the target: `value` if it was reached, else the budget spent without reaching it."""

    value: float
    reached: bool

    def rank(self) -> tuple[int, float]:
        return (0, self.value) if self.reached else (1, self.value)


def censored_median(values: list[Censored]) -> Censored:
    """The median (mean of the two middle values for an even count); censored if either middle value is."""
    ranked = sorted(values, key=Censored.rank)
    middle = ranked[(len(ranked) - 1) // 2 : len(ranked) // 2 + 1]
    if all(value.reached for value in middle):
        return Censored(statistics.fmean(value.value for value in middle), True)
    return Censored(max(value.value for value in middle), False)


def bootstrap_median_interval(
    values: list[Censored], resamples: int = 4000, confidence: float = 0.95, seed: int = 0
) -> tuple[Censored, Censored]:
    """Percentile bootstrap interval of the censored median over seeds (resampled with replacement)."""
    generator = random.Random(seed)
    medians = sorted(
        (censored_median([generator.choice(values) for _ in values]) for _ in range(resamples)), key=Censored.rank
    )
    low = medians[int((1 - confidence) / 2 * resamples)]
    high = medians[min(resamples - 1, int((1 + confidence) / 2 * resamples))]
    return low, high


def paired_ratio(arm: Censored, baseline: Censored) -> tuple[float, str]:
    """`arm / baseline` for one seed, with what is known of it: `"="` exact, `"<"` an upper bound (the baseline was
    censored, so it needed more), `">"` a lower bound (the arm was censored), `"?"` unknown (both censored)."""
    ratio = arm.value / baseline.value
    if arm.reached and baseline.reached:
        return ratio, "="
    if arm.reached:
        return ratio, "<"
    if baseline.reached:
        return ratio, ">"
    return ratio, "?"


def describe(value: Censored, unit: float = 1000.0, suffix: str = "k") -> str:
    text = f"{value.value / unit:.1f}{suffix}"
    return text if value.reached else f"> {text}"
