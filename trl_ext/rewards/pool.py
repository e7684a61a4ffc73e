"""A process pool with a hard wall-clock limit per item, usable from any thread.

Why not `concurrent.futures.ProcessPoolExecutor`: it cannot stop one running task. A verifier stuck in
sympy on `2^{2^{2^{2^{2}}}}` keeps its worker forever, and killing that worker breaks the whole executor.
`math_verify`'s own timeout uses `signal.alarm`, which only works in the main thread, while TRL may call
rewards from a worker thread (async rewards run on an event-loop thread).

`TimeoutPool` keeps its own worker processes, one pipe each. The calling thread sends one item at a time to
each free worker and waits on the pipes with `multiprocessing.connection.wait`, up to the earliest deadline;
a worker past its deadline is killed with its process group and replaced, and its item is reported as
timed out. No signals are involved, so it works from any thread, and several threads can `map` on one pool
at the same time (each claims free workers as its items need them).

A worker loads the function once (it may import heavy modules such as sympy) before the clock starts for
any item, so a cold start is never mistaken for a hung item.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Literal

__all__ = ["Outcome", "TimeoutPool", "default_num_workers", "run_with_timeout_pool", "shared_pool"]

# Starting a worker and loading the function are not counted against an item's timeout, but are bounded too.
_LOAD_TIMEOUT = 120.0
# A function that cannot be loaded this many times in a row (bad pickle, import error) fails the whole call.
_MAX_LOAD_FAILURES = 3


@dataclass(frozen=True)
class Outcome:
    """Result of one item: `status` is "ok" (then `value` holds fn's return value), "timeout", or "error"."""

    status: Literal["ok", "timeout", "error"]
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def default_num_workers() -> int:
    """Cores this process may use (CPU affinity, not the machine's core count), shared with the other
    processes of a distributed launch on this node (`LOCAL_WORLD_SIZE`, set by torchrun and accelerate)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        processes = 1
    return max(1, cores // processes)


def _watch_parent(parent_pid: int) -> None:
    # If the trainer dies without closing the pool, a worker busy on a hung item would otherwise live on.
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(1)


def _worker_main(fd: int, parent_pid: int, memory_limit_mb: int | None) -> None:
    """Serve `load` and `run` requests on the connection `fd` until told to stop or the parent goes away."""
    conn = Connection(fd)
    if memory_limit_mb is not None:
        import resource

        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    functions: dict[str, Callable] = {}
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "load":
            _, key, payload = message
            try:
                functions[key] = pickle.loads(payload)
                reply = ("loaded", key)
            except BaseException as error:  # noqa: BLE001 - reported to the parent, which decides
                reply = ("load_error", key, f"{type(error).__name__}: {error}")
            conn.send(reply)
            continue
        _, task_id, key, item = message
        try:
            reply = ("ok", task_id, functions[key](item))
        except BaseException as error:  # noqa: BLE001 - a verifier's crash is an outcome, not the pool's
            reply = ("error", task_id, f"{type(error).__name__}: {error}")
        try:
            conn.send(reply)
        except Exception as error:  # an unpicklable return value
            conn.send(("error", task_id, f"result could not be sent back: {type(error).__name__}: {error}"))


# The worker is a plain `python -c` process that runs this file by path, not `multiprocessing`'s spawn: spawn
# re-imports the trainer's `__main__` script in every worker (a recipe without an `if __name__ == "__main__"`
# guard would start training again), and importing this module through its package would load the whole
# trainer stack. The function to run is imported only when the first item arrives.
_WORKER_BOOT = (
    "import json, runpy, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "runpy.run_path(sys.argv[2])['_worker_main'](int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5]))"
)


class _Worker:
    """Parent-side handle of one worker process and the protocol state this pool keeps for it."""

    def __init__(self, memory_limit_mb: int | None):
        parent_socket, child_socket = socket.socketpair()
        self.conn = Connection(parent_socket.detach())
        child_fd = child_socket.detach()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT, json.dumps(sys.path), os.path.abspath(__file__),
                 str(child_fd), str(os.getpid()), json.dumps(memory_limit_mb)],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,
                # Own session and process group: Ctrl-C reaches only the trainer, which shuts the pool down, and
                # killing the group also kills whatever a task started.
                start_new_session=True,
            )
        finally:
            os.close(child_fd)  # so a dead worker reads as EOF here
        self.state = "starting"  # starting -> idle <-> loading / busy
        self.known: set[str] = set()  # keys of the functions this worker has loaded
        self.deadline = time.monotonic() + _LOAD_TIMEOUT
        self.item: int | None = None  # index (in the current map call) of the item this worker runs or is about to

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.kill()
        self.process.wait(timeout=5)
        self.conn.close()


class TimeoutPool:
    """Worker processes running `fn(item)` with a hard wall-clock `timeout` per item.

    Args:
        num_workers: processes to keep (default: the cores this process may use).
        memory_limit_mb: address-space limit of each worker (`RLIMIT_AS`), or None for no limit. An item that
            exceeds it fails with `MemoryError` as an "error" outcome.
    """

    def __init__(self, num_workers: int | None = None, *, memory_limit_mb: int | None = None):
        self.num_workers = default_num_workers() if num_workers is None else num_workers
        if self.num_workers < 1:
            raise ValueError(f"TimeoutPool: num_workers must be >= 1, got {num_workers}.")
        self.memory_limit_mb = memory_limit_mb
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._free: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._closed = False
        self._pid = os.getpid()
        self.restarts = 0  # workers replaced after a timeout or a crash (a health figure worth logging)

    def _spawn(self) -> _Worker:
        worker = _Worker(self.memory_limit_mb)
        self._all.add(worker)
        return worker

    def _claim(self, key: str) -> _Worker | None:
        """A free worker (preferring one that already loaded `key`), starting one if the pool is not full."""
        with self._lock:
            if self._closed:
                raise RuntimeError("TimeoutPool is closed.")
            if self._free:
                for index, worker in enumerate(self._free):
                    if key in worker.known:
                        return self._free.pop(index)
                return self._free.pop()
            if len(self._all) < self.num_workers:
                return self._spawn()
            return None

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            worker.item = None
            if self._closed:  # closed while this call ran
                worker.kill()
                return
            self._free.append(worker)
            self._freed.notify()

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            self.restarts += 1
            self._freed.notify()

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], timeout: float) -> list[Outcome]:
        """`fn` applied to every item in the workers, at most `timeout` seconds of wall-clock time each.

        Returns one `Outcome` per item, in order. `fn` and the items must pickle (a module-level function or
        a picklable callable object). Safe to call from any thread, and from several threads at once.
        """
        if timeout <= 0:
            raise ValueError(f"TimeoutPool.map: timeout must be > 0 seconds, got {timeout}.")
        if os.getpid() != self._pid:
            raise RuntimeError("TimeoutPool was created in another process; create a new pool after fork.")
        items = list(items)
        results: list[Outcome | None] = [None] * len(items)
        if not items:
            return []
        payload = pickle.dumps(fn)
        key = hashlib.sha1(payload).hexdigest()
        pending = deque(range(len(items)))
        owned: dict[Connection, _Worker] = {}  # workers this call holds: starting, loading or running an item
        load_failures = 0

        def advance(worker: _Worker) -> None:
            """Give a ready worker its next step: load `fn`, run the next pending item, or go back to the pool.

            Items are handed out only to workers ready to run them, so a slow-starting worker never holds
            an item that another worker could run now."""
            if worker.state in ("starting", "loading", "busy"):
                return
            if pending and key not in worker.known:
                worker.conn.send(("load", key, payload))
                worker.state, worker.deadline = "loading", time.monotonic() + _LOAD_TIMEOUT
            elif pending:
                worker.item = pending.popleft()
                worker.conn.send(("run", worker.item, key, items[worker.item]))
                worker.state, worker.deadline = "busy", time.monotonic() + timeout
            else:
                del owned[worker.conn]
                self._release(worker)

        def lose(worker: _Worker, outcome: Outcome) -> None:
            """A worker timed out or died: its item (if it ran one) gets `outcome`; the worker is replaced."""
            nonlocal load_failures
            del owned[worker.conn]
            if worker.state == "busy":
                results[worker.item] = outcome
            else:
                load_failures += 1
            self._replace(worker)

        def fail_pending(reason: str) -> None:
            while pending:
                results[pending.popleft()] = Outcome("error", error=f"could not load {fn!r}: {reason}")

        try:
            while pending or any(worker.state == "busy" for worker in owned.values()):
                if load_failures >= _MAX_LOAD_FAILURES:
                    fail_pending("workers failed to start or load the function")
                # Hold as many workers as there are items left, counting those already on their way.
                while len(pending) > sum(worker.state != "busy" for worker in owned.values()):
                    worker = self._claim(key)
                    if worker is None:
                        break
                    owned[worker.conn] = worker
                    advance(worker)
                if not owned:
                    if pending:  # every worker is held by another thread's call
                        with self._lock:
                            if not self._free and len(self._all) >= self.num_workers:
                                self._freed.wait(timeout=0.1)
                    continue
                earliest = min(worker.deadline for worker in owned.values())
                for conn in wait(list(owned), timeout=max(0.0, earliest - time.monotonic())):
                    worker = owned[conn]
                    message = _receive(worker)
                    if isinstance(message, Outcome):  # the worker died
                        lose(worker, message)
                        continue
                    kind = message[0]
                    if kind == "loaded":
                        worker.known.add(message[1])
                    elif kind == "load_error" and message[1] == key:  # (a released worker may report another call's)
                        fail_pending(message[2])
                    elif kind in ("ok", "error"):  # the result of the item this worker ran
                        results[worker.item], worker.item = _result_outcome(message), None
                    worker.state = "idle"  # after "ready", "loaded", "load_error" or a result
                    advance(worker)
                now = time.monotonic()
                for worker in [w for w in owned.values() if w.deadline <= now]:
                    lose(worker, Outcome("timeout", error=f"no result within {timeout} s; worker killed"))
            # Workers still starting or loading for items that others ran go back to the pool as they are.
            for worker in list(owned.values()):
                del owned[worker.conn]
                self._release(worker)
        except BaseException:
            # Interrupted (KeyboardInterrupt, a broken pipe): the workers we hold are in an unknown state.
            for worker in list(owned.values()):
                self._replace(worker)
            raise
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop every worker (idle ones politely, busy ones by force). The pool cannot be used afterwards."""
        with self._lock:
            self._closed = True
            workers, self._all, self._free = list(self._all), set(), []
        for worker in workers:
            if os.getpid() != self._pid:
                continue  # inherited across fork: those workers belong to the parent
            try:
                if worker.state in ("idle", "starting"):
                    worker.conn.send(("stop",))
                    worker.process.wait(timeout=1)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
            if worker.process.poll() is None:
                worker.kill()
            else:
                worker.conn.close()

    def __enter__(self) -> TimeoutPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __getstate__(self):
        raise TypeError("A TimeoutPool holds processes and cannot be pickled; rewards keep only its settings.")


_shared_lock = threading.Lock()
_shared: TimeoutPool | None = None


def shared_pool() -> TimeoutPool:
    """The process-wide pool the pooled rewards use, started on first use and closed at exit.

    Sized by `TRL_EXT_REWARD_WORKERS` (default: the cores this process may use) and limited to
    `TRL_EXT_REWARD_WORKER_MEMORY_MB` of address space per worker if that is set.
    """
    global _shared
    with _shared_lock:
        if _shared is None or _shared._pid != os.getpid() or _shared._closed:
            workers = os.environ.get("TRL_EXT_REWARD_WORKERS")
            memory = os.environ.get("TRL_EXT_REWARD_WORKER_MEMORY_MB")
            _shared = TimeoutPool(
                int(workers) if workers else None, memory_limit_mb=int(memory) if memory else None
            )
            atexit.register(_shared.close)
        return _shared


def run_with_timeout_pool(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    timeout: float,
    *,
    on_timeout: Any = None,
    on_error: Any = None,
    pool: TimeoutPool | None = None,
) -> list[Any]:
    """`[fn(item) for item in items]`, computed in parallel in `pool` (default: `shared_pool()`).

    An item that runs longer than `timeout` seconds has its worker killed and yields `on_timeout`; one whose
    `fn` raises (or whose worker dies) yields `on_error`. Use `TimeoutPool.map` to tell those cases apart.
    """
    outcomes = (pool or shared_pool()).map(fn, items, timeout)
    return [
        outcome.value if outcome.ok else (on_timeout if outcome.status == "timeout" else on_error)
        for outcome in outcomes
    ]


def _receive(worker: _Worker) -> tuple | Outcome:
    """The worker's next message, or the `Outcome` of its item when the worker died."""
    try:
        return worker.conn.recv()
    except (EOFError, OSError):
        try:
            code = worker.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        return Outcome("error", error=f"worker process died (exit code {code})")


def _result_outcome(message: tuple) -> Outcome:
    """The `Outcome` of a worker's ("ok" | "error", item, value) message."""
    kind, _, value = message
    return Outcome("ok", value=value) if kind == "ok" else Outcome("error", error=value)
