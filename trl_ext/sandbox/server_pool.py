"""Reused sandboxes (`run_code_tests(..., reuse=True)`): idle `SandboxServer`s running the harness, per sandbox
and memory limit, each emptied between programs and replaced after `_REQUESTS_PER_SERVER` of them."""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
import weakref
from dataclasses import replace
from functools import lru_cache

from .code_tests import _harness_files
from .core import SANDBOX_DIR, Sandbox, SandboxServer

__all__ = ["close_servers"]

# Idle servers per sandbox and memory limit; a server serves this many programs, then a fresh one starts.
_SERVERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SERVERS_LOCK = threading.Lock()
_REQUESTS_PER_SERVER = 500
_SERVER_LIFETIME = 3600.0


def _scratch_directories(sandbox: Sandbox) -> list[str]:
    """The sandbox's own writable directories, emptied after each program: under bubblewrap its tmpfs mounts;
    otherwise only its working directory (the rest is the host's)."""
    if sandbox.isolation == "bwrap":
        home = os.path.expanduser("~")
        return [SANDBOX_DIR, "/tmp", "/dev/shm", *([home] if home not in ("", "/") else [])]
    return ["."]


def _take_server(sandbox: Sandbox, memory: int) -> SandboxServer:
    with _SERVERS_LOCK:
        idle = _SERVERS.setdefault(sandbox, {}).setdefault(memory, [])
        while idle:
            server = idle.pop()
            if server.alive:
                return server
            server.close()
    limits = replace(sandbox.limits, wall_time=_SERVER_LIFETIME, cpu_time=_SERVER_LIFETIME, memory=memory)
    # Started from one long-lived thread: bubblewrap's --die-with-parent follows the *thread* that started it,
    # and the reward's worker threads end with each batch.
    server = _spawner().submit(
        sandbox.start_python_server, "harness.py", files=_harness_files(), args=["--serve"], harness=True,
        limits=limits,
    ).result()
    server.requests = 0
    return server


@lru_cache(maxsize=1)
def _spawner():
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="code-sandbox-spawner")


def _give_back(sandbox: Sandbox, memory: int, server: SandboxServer) -> None:
    server.requests += 1
    if server.requests >= _REQUESTS_PER_SERVER or not server.alive:
        server.close()
        return
    with _SERVERS_LOCK:
        pools = _SERVERS.get(sandbox)
        if pools is not None:
            pools.setdefault(memory, []).append(server)
            return
    server.close()  # its sandbox was closed while it judged (`close_servers`)


def _close_all_servers() -> None:
    for sandbox in list(_SERVERS.keys()):
        close_servers(sandbox)


atexit.register(_close_all_servers)


def close_servers(sandbox: Sandbox) -> None:
    """End every idle reused sandbox of `sandbox` (they also end with the process)."""
    with _SERVERS_LOCK:
        pools = _SERVERS.pop(sandbox, {})
    for servers in pools.values():
        for server in servers:
            server.close()


def _exchange(sandbox: Sandbox, memory: int, request: dict, wall: float, report_bytes: int):
    """`(stdout, stderr, timed_out, seconds, run_id, complete)` of one program judged by an idle server (started
    if none is idle); `complete` is False when the server died, hung or broke the exchange (it is then closed)."""
    server = _take_server(sandbox, memory)
    started = time.monotonic()
    lines, stderr, ok = server.exchange(json.dumps(request).encode(), started + wall, report_bytes)
    elapsed = time.monotonic() - started
    if ok:
        _give_back(sandbox, memory, server)
    else:
        server.close()
    return b"\n".join(lines), stderr, not ok and elapsed >= wall, elapsed, server.run_id, ok
