"""TimeoutPool: hard per-item wall-clock limits, recovery after hung or crashed workers, any calling thread."""

from __future__ import annotations

import os
import sys
import threading
import types
import time

import pytest

from timeout_pool_jobs import behave, child_then_spin, slow_worker_pid, square, worker_pid
from trl_ext.rewards.pool import TimeoutPool, run_with_timeout_pool

MARGIN = 3.0  # seconds of slack for a loaded 2-core CI machine


@pytest.fixture(scope="module")
def pool():
    with TimeoutPool(2) as pool:
        pool.map(square, [0, 1], timeout=60)  # start both workers outside the timed tests
        yield pool


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child that is not reaped yet is a zombie: dead for our purposes.
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split(")")[-1].split()[0] != "Z"


def test_results_in_order(pool):
    outcomes = pool.map(square, range(50), timeout=10)
    assert [outcome.value for outcome in outcomes] == [x * x for x in range(50)]
    assert all(outcome.status == "ok" for outcome in outcomes)


@pytest.mark.parametrize("kind", ["spin", "big_pow", "sleep"])
def test_hung_item_is_killed_within_timeout(pool, kind):
    restarts = pool.restarts
    start = time.monotonic()
    outcomes = pool.map(behave, ["fine", kind, "also fine"], timeout=1.0)
    elapsed = time.monotonic() - start
    assert [outcome.status for outcome in outcomes] == ["ok", "timeout", "ok"]
    assert outcomes[0].value == "fine" and outcomes[2].value == "also fine"
    assert elapsed < 1.0 + MARGIN
    assert pool.restarts == restarts + 1


def test_crash_and_exception_are_errors_and_pool_recovers(pool):
    outcomes = pool.map(behave, ["die", "raise", "unpicklable", "ok"], timeout=10)
    assert [outcome.status for outcome in outcomes] == ["error", "error", "error", "ok"]
    assert "exit code 3" in outcomes[0].error
    assert "ValueError: bad input" in outcomes[1].error
    assert "could not be sent back" in outcomes[2].error
    assert [outcome.value for outcome in pool.map(square, [3, 4], timeout=10)] == [9, 16]


def test_timeout_from_a_non_main_thread(pool):
    result = {}

    def run():
        start = time.monotonic()
        result["outcomes"] = pool.map(behave, ["spin", "ok"], timeout=1.0)
        result["elapsed"] = time.monotonic() - start

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert [outcome.status for outcome in result["outcomes"]] == ["timeout", "ok"]
    assert result["elapsed"] < 1.0 + MARGIN


def test_concurrent_calls_from_several_threads_share_the_workers(pool):
    results = [None] * 4

    def run(index):
        results[index] = pool.map(square, range(index * 10, index * 10 + 10), timeout=10)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for index, outcomes in enumerate(results):
        assert [outcome.value for outcome in outcomes] == [x * x for x in range(index * 10, index * 10 + 10)]


def test_items_run_in_parallel(pool):
    start = time.monotonic()
    pids = {outcome.value for outcome in pool.map(slow_worker_pid, range(40), timeout=10)}
    assert len(pids) == 2
    assert time.monotonic() - start < 40 * 0.05  # one worker alone would need 2 s


def test_killing_a_worker_kills_what_it_started(pool, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    outcomes = pool.map(child_then_spin, [str(pid_file)], timeout=2.0)
    assert outcomes[0].status == "timeout"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_close_leaves_no_process_behind():
    pool = TimeoutPool(2)
    pids = {outcome.value for outcome in pool.map(worker_pid, range(10), timeout=30)}
    pool.map(behave, ["spin"], timeout=0.5)  # one worker killed and replaced mid-life
    pool.close()
    time.sleep(0.2)
    assert pids and not any(alive(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        pool.map(square, [1], timeout=1)


def test_function_that_cannot_be_loaded_fails_every_item(pool):
    # A function from a module that exists only in this process: it pickles here, but no worker can import it.
    module = types.ModuleType("module_only_in_the_parent")
    exec("def double(x):\n    return 2 * x\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        outcomes = pool.map(module.double, [1, 2, 3], timeout=5)
    finally:
        del sys.modules[module.__name__]
    assert [outcome.status for outcome in outcomes] == ["error"] * 3
    assert "ModuleNotFoundError" in outcomes[0].error
    assert [outcome.value for outcome in pool.map(square, [5], timeout=5)] == [25]


def test_run_with_timeout_pool_substitutes_failures(pool):
    values = run_with_timeout_pool(behave, ["a", "sleep", "raise"], 1.0, on_timeout=-1.0, on_error=None, pool=pool)
    assert values == ["a", -1.0, None]


def test_invalid_arguments():
    with pytest.raises(ValueError, match="num_workers"):
        TimeoutPool(0)
    with TimeoutPool(1) as pool, pytest.raises(ValueError, match="timeout"):
        pool.map(square, [1], timeout=0)


def test_pool_does_not_pickle(pool):
    import pickle

    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(pool)
