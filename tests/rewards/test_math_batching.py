"""`math` verifies each distinct (reference, final answer) pair of a batch once, and keeps verdicts across
calls in a bounded cache; verdicts are those of one verification per completion."""

from __future__ import annotations

import pickle

import pytest

from trl_ext.rewards import get_reward
from trl_ext.rewards.math import (
    FinalAnswer,
    MathReward,
    MathVerifier,
    VerdictCache,
    chunks_by_reference,
    distinct_items,
    extract_final_answer,
    verify_math_answer,
)


def test_distinct_items_keeps_first_seen_order_and_maps_back():
    keys = ["b", "a", "b", "c", "a"]
    distinct, index = distinct_items(keys)
    assert distinct == ["b", "a", "c"] and index == [0, 1, 0, 2, 1]
    assert [distinct[i] for i in index] == keys
    assert distinct_items([]) == ([], [])


def test_final_answer_ignores_the_reasoning_but_not_the_boxes():
    assert extract_final_answer("First try.\n" + r"\boxed{4}") == extract_final_answer(r"Other words \boxed{4}")
    assert extract_final_answer(r"\boxed{4}") != extract_final_answer(r"\boxed{5}")
    # Several boxes: a reference with several answers reads them all, so the boxes are part of the key.
    assert extract_final_answer(r"\boxed{2} and \boxed{3}") != extract_final_answer(r"\boxed{1}, \boxed{3}")
    # No marked answer: the whole text is searched for an anchored one, so the whole text is the key.
    unmarked = extract_final_answer("a long line of reasoning without any marked answer in it")
    assert unmarked == FinalAnswer(text=None, unmarked="a long line of reasoning without any marked answer in it")


def test_verdict_cache_is_bounded_least_recently_used():
    cache = VerdictCache(2)
    cache.put("a", True)
    cache.put("b", False)
    assert cache.get("a") == (True, True)  # "a" is now the most recent
    cache.put("c", None)
    assert cache.get("b") == (False, None) and cache.get("a") == (True, True) and cache.get("c") == (True, None)
    assert len(cache) == 2
    off = VerdictCache(0)
    off.put("a", True)
    assert off.get("a") == (False, None)


class CountingPool:
    """The real pool, counting the tasks it is handed and the answers in them."""

    def __init__(self, pool):
        self.pool, self.items, self.tasks = pool, 0, 0
        self.num_workers = pool.num_workers

    def map(self, fn, items, timeout):
        items = list(items)
        self.tasks += len(items)
        self.items += sum(len(answer) if isinstance(answer, tuple) else 1 for _, answer in items)
        return self.pool.map(fn, items, timeout)


def test_a_group_verifies_each_distinct_answer_once_with_unchanged_verdicts():
    reward = get_reward("math", num_workers=1, asynchronous=False)
    counting = CountingPool(reward.pool())
    reward.pool = lambda: counting
    reference = r"\frac{1}{2}"
    finals = [r"\boxed{0.5}", r"\boxed{\frac12}", r"\boxed{0.6}", "Answer: 1/2"]
    completions = [f"Attempt {i}: some reasoning. " + finals[i % 4] for i in range(16)]
    scores = reward(completions=completions, solution=[reference] * 16)
    assert scores == [1.0 if verify_math_answer(reference, c) else 0.0 for c in completions]
    assert scores[:4] == [1.0, 1.0, 0.0, 1.0]
    assert counting.items == 4 and counting.tasks == 1  # one reference: its answers travel as one task
    # The next step sees the same answers again: no verification at all; a new one is verified.
    assert reward(completions=completions[:3] + [r"\boxed{2/4}"], solution=[reference] * 4) == [1.0, 1.0, 0.0, 1.0]
    assert counting.items == 5
    # Different references never share a verdict.
    assert reward(completions=[r"\boxed{0.5}"] * 2, solution=[reference, "0.6"]) == [1.0, 0.0]
    reward.pool().pool.close()


def test_chunks_by_reference_groups_and_bounds_the_tasks():
    assert chunks_by_reference(["a", "b", "a", "a", "c", "a"], 2) == [[0, 2], [3, 5], [1], [4]]
    assert chunks_by_reference(["a"] * 3, 8) == [[0, 1, 2]]
    assert chunks_by_reference([], 4) == []


class WithoutSignalLimits(MathReward):
    """`math` whose workers have no math-verify time limits: only the pool's hard limit stops a hang."""

    def _verifier(self):
        return MathVerifier()


def test_a_hung_answer_costs_its_task_mates_time_not_their_verdicts():
    reward = WithoutSignalLimits(timeout=2.0, num_workers=1)
    tower = r"\boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}"
    scores = reward(completions=[r"\boxed{5}", tower, r"\boxed{6}", r"\boxed{10/2}"], solution=["5"] * 4)
    assert scores == [1.0, 0.0, 0.0, 1.0]  # the task was killed; its answers were verified one by one
    assert reward.pool().restarts == 2
    reward.pool().close()


def test_timeouts_are_not_cached():
    reward = get_reward("math", timeout=2.0, num_workers=1, asynchronous=False, on_timeout="skip")
    tower = r"\boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}"
    assert reward(completions=[tower, tower], solution=["5", "5"]) == [None, None]
    assert len(reward._cache) == 0
    reward.pool().close()


def test_cache_size_is_validated_and_does_not_travel_in_pickles():
    with pytest.raises(ValueError, match="cache_size"):
        get_reward("math", cache_size=-1)
    reward = get_reward("math", num_workers=1, asynchronous=False, cache_size=8)
    assert reward(completions=[r"\boxed{2}"], solution=["2"]) == [1.0]
    copy = pickle.loads(pickle.dumps(reward))
    assert len(reward._cache) == 1 and len(copy._cache) == 0 and copy.cache_size == 8
    reward.pool().close()


@pytest.mark.slow
def test_throughput_benchmark_quick_run_keeps_verdicts(tmp_path):
    """The benchmark's smoke mode: both batch shapes, the same verdicts pooled (deduplicated) and one at a time
    (the script asserts it), and fewer distinct pairs than completions on the realistic batch only."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import verifier_throughput

    verifier_throughput.main(["--quick", "--out", str(tmp_path / "throughput.json")])
    results = json.loads((tmp_path / "throughput.json").read_text())["results"]
    assert set(results) == {"realistic", "all-distinct"}
    realistic, distinct = results["realistic"], results["all-distinct"]
    assert realistic["distinct_pairs_per_batch"] < realistic["completions"] / 2
    assert distinct["distinct_pairs_per_batch"] >= 0.9 * distinct["completions"]
    for entry in results.values():
        assert entry["math, pooled"]["verdicts_matching_construction"] == 1.0
