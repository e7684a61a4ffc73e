"""The math verifier stays bounded in time: pathological input, hard kills, calls from non-main threads."""

from __future__ import annotations

import threading
import time

import pytest

from trl_ext.rewards import TimeoutPool, call_reward, get_reward
from trl_ext.rewards.math import TIMED_OUT, MathVerifier

MARGIN = 5.0  # seconds: worker start-up is excluded from the limit, but CI machines are small and shared
POWER_TOWER = r"The answer is \boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}"


@pytest.fixture(scope="module")
def math_pool():
    """One private worker with math-verify loaded, shared by the tests that time it."""
    with TimeoutPool(1) as pool:
        pool.map(MathVerifier(), [("1", r"\boxed{1}")], timeout=300)
        yield pool


def warm_up(reward):
    """Start the shared workers and load math-verify in them, outside the timed part."""
    call_reward(reward, completions=[r"\boxed{1}", r"\boxed{2}"], solution=["1", "2"])


def test_power_tower_returns_within_the_timeout():
    reward = get_reward("math", timeout=3.0)
    warm_up(reward)
    start = time.monotonic()
    scores = call_reward(reward, completions=[POWER_TOWER, r"\boxed{4}"], solution=["5", "4"])
    assert time.monotonic() - start < 3.0 + MARGIN
    assert scores == [0.0, 1.0]


def test_timeout_can_be_scored_as_cannot_judge():
    reward = get_reward("math", timeout=3.0, on_timeout="skip", scoring="dapo")
    assert call_reward(reward, completions=[POWER_TOWER, r"\boxed{3}"], solution=["5", "4"]) == [None, -1.0]


def test_math_verify_own_limit_reports_a_timeout_not_a_wrong_answer(math_pool):
    outcome = math_pool.map(MathVerifier(parsing_timeout=1, verify_timeout=1), [("5", POWER_TOWER)], timeout=60)[0]
    assert outcome.ok and outcome.value == TIMED_OUT


def test_hard_timeout_kills_a_verification_that_ignores_signals(math_pool):
    """Without math-verify's own (signal) limits the worker hangs on the tower; the pool kills it."""
    restarts = math_pool.restarts
    start = time.monotonic()
    outcomes = math_pool.map(MathVerifier(), [("5", POWER_TOWER)], timeout=2.0)
    assert time.monotonic() - start < 2.0 + MARGIN
    assert outcomes[0].status == "timeout"
    assert math_pool.restarts == restarts + 1
    # The replacement worker verifies normally.
    assert math_pool.map(MathVerifier(), [("1/2", r"\boxed{0.5}")], timeout=300)[0].value is True


@pytest.mark.parametrize("asynchronous", [False, True])
def test_called_from_a_non_main_thread_still_times_out(asynchronous):
    """TRL runs async rewards on an event-loop thread; signal-based timeouts would fail there."""
    reward = get_reward("math", timeout=3.0, asynchronous=asynchronous)
    result = {}

    def run():
        start = time.monotonic()
        result["scores"] = call_reward(reward, completions=[POWER_TOWER, r"\boxed{0.5}"], solution=["5", r"\frac12"])
        result["elapsed"] = time.monotonic() - start

    warm_up(reward)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert result["scores"] == [0.0, 1.0]
    assert result["elapsed"] < 3.0 + MARGIN


def test_private_pool_is_sized_and_does_not_travel_with_pickles():
    import pickle

    reward = get_reward("math", num_workers=1, asynchronous=False)
    assert reward(completions=[r"\boxed{2}", r"\boxed{3}"], solution=["2", "2"]) == [1.0, 0.0]
    assert reward.pool().num_workers == 1 and len(reward.pool()._all) == 1
    copy = pickle.loads(pickle.dumps(reward))
    assert copy._pool is None and repr(copy) == repr(reward)  # a copy starts its own pool when first called
    reward.pool().close()
