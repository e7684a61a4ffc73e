"""Sandbox tests. With TRL_EXT_SANDBOX_TESTS_MUST_RUN=1 (CI), a skipped test here is a failure: a green run must
mean the isolation was tested on this machine, not skipped."""

from __future__ import annotations

import os
import socket

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("TRL_EXT_SANDBOX_TESTS_MUST_RUN") == "1":
        report.outcome = "failed"
        report.longrepr = f"sandbox test skipped, which TRL_EXT_SANDBOX_TESTS_MUST_RUN=1 forbids: {report.longrepr}"


@pytest.fixture
def listener():
    """Port of a TCP server on 127.0.0.1 that a sandboxed program must not reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()
