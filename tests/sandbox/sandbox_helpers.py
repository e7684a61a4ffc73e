"""What the sandbox tests share: finding leftover processes, and the backends this machine offers."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trl_ext.sandbox import RUN_ID_VARIABLE, Backend, bwrap_binaries
from trl_ext.sandbox.core import _cgroup_bases, _probe

# Seconds of slack for a loaded 2-core CI machine; still below the 6.5 s at which the sandbox's own wall-clock
# limit would end a one-test run, so a hang that only that limit stops is caught.
MARGIN = 4.0


def leftover_processes(run_id: str) -> list[int]:
    """PIDs of live processes started by the run `run_id` (they all inherit its environment variable)."""
    marker = f"{RUN_ID_VARIABLE}={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path("/proc", entry, "environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def run_cgroups() -> list[str]:
    return sorted(name for base, _ in _cgroup_bases() for name in os.listdir(base) if os.path.isdir(Path(base, name)))


def isolating_backends() -> list[Backend]:
    """Every bubblewrap this machine offers: each binary found (system, bundled) with a user namespace, and, for
    root, in privileged mode; only those that start the interpreter here (a probe, as `Sandbox` does)."""
    import sys

    found = []
    for binary, origin in bwrap_binaries():
        for user_namespace in (True, False) if os.geteuid() == 0 else (True,):
            backend = Backend("bwrap", binary, origin, user_namespace)
            if _probe(backend, os.path.abspath(sys.executable)) is None:
                found.append(backend)
    return found


def backend_id(backend: Backend) -> str:
    origin = "system" if backend.origin == "system" else "bundled"
    return f"bwrap-{origin}-{'userns' if backend.user_namespace else 'privileged'}"


ISOLATING_BACKENDS = isolating_backends()


def in_a_forked_child(body) -> dict:
    """Run `body()` in a forked child (it may rewrite this process's modules and classes) and return the dict it
    returns."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_end, json.dumps(body()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(answer)
