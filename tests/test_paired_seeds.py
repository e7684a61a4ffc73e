"""Statistics of paired-seed benchmarks (`benchmarks/paired_seeds.py`): censored medians, intervals and ratios."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from paired_seeds import Censored, bootstrap_median_interval, censored_median, describe, paired_ratio  # noqa: E402


def test_a_censored_run_ranks_above_every_run_that_reached_the_target():
    reached = [Censored(10.0, True), Censored(30.0, True), Censored(20.0, True)]
    assert censored_median(reached) == Censored(20.0, True)
    # A run that spent 5 tokens without reaching the target needed more than any run that reached it.
    assert censored_median([*reached, Censored(5.0, False)]) == Censored(25.0, True)
    assert censored_median([Censored(10.0, True), Censored(40.0, False), Censored(50.0, False)]) == Censored(40.0, False)
    assert describe(Censored(50_000.0, False)) == "> 50.0k" and describe(Censored(1500.0, True)) == "1.5k"


def test_paired_ratios_say_what_is_known_of_them():
    assert paired_ratio(Censored(5.0, True), Censored(10.0, True)) == (0.5, "=")
    assert paired_ratio(Censored(5.0, True), Censored(10.0, False)) == (0.5, "<")  # the baseline needed more
    assert paired_ratio(Censored(20.0, False), Censored(10.0, True)) == (2.0, ">")
    assert paired_ratio(Censored(20.0, False), Censored(10.0, False))[1] == "?"


def test_the_bootstrap_interval_holds_the_median_and_is_reproducible():
    values = [Censored(float(value), True) for value in (12, 15, 9, 20, 14, 11, 30, 13)]
    low, high = bootstrap_median_interval(values, resamples=2000, seed=1)
    assert low.value <= censored_median(values).value <= high.value
    assert (low, high) == bootstrap_median_interval(values, resamples=2000, seed=1)
    _, censored_high = bootstrap_median_interval([*values[:4], *(Censored(40.0, False) for _ in range(4))])
    assert not censored_high.reached
