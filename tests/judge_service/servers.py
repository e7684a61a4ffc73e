"""Judge servers for the tests: real `trl-ext sandbox serve` processes on free loopback ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import requests

TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "TRL_EXT_JUDGE_TOKEN": TOKEN, "HF_HUB_OFFLINE": "1", **extra}


def start_server(*flags: str, port: int | None = None) -> tuple[str, subprocess.Popen]:
    """One server (`python -m trl_ext.cli sandbox serve`), answering /health; raises with its log if it does not."""
    port = port or free_port()
    log = tempfile.TemporaryFile(mode="w+", prefix="judge-server-")  # a pipe nobody reads would block its logging
    process = subprocess.Popen(
        [sys.executable, "-m", "trl_ext.cli", "sandbox", "serve", "--port", str(port), *flags],
        env=environment(), stdout=log, stderr=subprocess.STDOUT, text=True,
    )
    process.log = log
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the judge server exited ({process.returncode}): {log_of(process)[-3000:]}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{url}/health", timeout=1).status_code == 200:
                return url, process
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the judge server did not answer: {log_of(process)[-3000:]}")


def log_of(process: subprocess.Popen) -> str:
    """What a server wrote so far (its JSON lines and uvicorn's)."""
    process.log.seek(0)
    return process.log.read()


def stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
    process.wait(timeout=30)


@contextlib.contextmanager
def judge_servers(count: int, *flags: str):
    """`count` servers: yields [(url, process)], all stopped afterwards."""
    started = []
    try:
        for _ in range(count):
            started.append(start_server(*flags))
        yield started
    finally:
        for _, process in started:
            stop(process)


def headers(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
