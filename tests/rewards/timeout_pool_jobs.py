"""Jobs for the timeout-pool tests. Standard library only: pool workers import this module by name."""

from __future__ import annotations

import os
import time


def square(x):
    return x * x


def behave(kind):
    """A well-behaved answer, or one of the ways a verifier goes wrong."""
    if kind == "spin":  # pure-Python busy loop: never returns
        while True:
            pass
    if kind == "big_pow":  # one C-level call holding the GIL: signals cannot interrupt it
        return len(str(10 ** (10**9)))
    if kind == "sleep":
        time.sleep(1000)
    if kind == "die":
        os._exit(3)
    if kind == "raise":
        raise ValueError("bad input")
    if kind == "unpicklable":
        return lambda: None
    return kind


def child_then_spin(pid_file):
    """Start a grandchild process, record its pid, then hang: the pool must kill both."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
    with open(pid_file, "w") as handle:
        handle.write(str(child.pid))
    while True:
        time.sleep(0.1)


def worker_pid(_):
    return os.getpid()


def slow_worker_pid(_):
    time.sleep(0.05)
    return os.getpid()
