"""Checker programs: a program that judges a stdin/stdout test's output in place of comparing it (`Checker`),
run in a sandbox after the program's run; a C++ checker is compiled once per source and its binary reused."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .code_tests import (
    _PER_TEST_OVERHEAD,
    _STARTUP_ALLOWANCE,
    DEFAULT_CPP_FLAGS,
    LANGUAGES,
    CodeTest,
    TestOutcome,
    _precompiled_include,
    _warn_once,
    cpp_compiler,
)
from .core import Sandbox

__all__ = ["CHECKER_ORDERS", "Checker"]

logger = logging.getLogger(__name__)

CHECKER_ORDERS = {
    "input expected actual": ("input", "expected", "actual"),
    "testlib": ("input", "actual", "expected"),  # testlib's `checker <input> <output> <answer>`
}


@dataclass(frozen=True)
class Checker:
    """A program that judges one stdin/stdout test: run as `checker <input> <expected> <actual>` (three file
    paths; `argument_order="testlib"` gives testlib's `<input> <output> <answer>`), exit status 0 accepts.

    `language` is "python" or "cpp" (compiled with `g++` in a sandbox once per source, its binary kept in the
    trainer's memory and sent into each checker run; testlib's header is used when the system has it, otherwise
    the checker must not include it). A C++ checker that does not compile gives the status "checker_error"."""

    source: str
    language: str = "python"
    argument_order: str = "input expected actual"

    def __post_init__(self):
        if self.language not in LANGUAGES:
            raise ValueError(f"Checker language must be one of {LANGUAGES}, got {self.language!r}.")
        if self.argument_order not in CHECKER_ORDERS:
            raise ValueError(f"Checker argument_order must be one of {sorted(CHECKER_ORDERS)}, got {self.argument_order!r}.")


# Runs inside the sandbox. With a compile command: compiles a C++ checker and sends the binary back (base64), or
# the compiler's error. Otherwise: runs the checker on each test's three files.
_CHECKER_RUNNER = r"""
import base64, json, os, subprocess, sys
plan = json.load(open(sys.argv[1]))
def report(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()
if plan["compile"]:
    try:
        built = subprocess.run(plan["compile"], stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=plan["compile_timeout"])
        failure = built.returncode != 0 and built.stderr.decode(errors="replace")[-1500:]
    except subprocess.TimeoutExpired:
        failure = "the checker did not compile in time"
    if failure:
        report({"checker_error": failure})
    else:
        with open("checker", "rb") as binary:
            report({"binary": base64.b64encode(binary.read()).decode()})
    sys.exit(0)
if plan["command"][0] == "./checker":
    os.chmod("checker", 0o700)
for index in plan["tests"]:
    files = {"input": f"input_{index}", "expected": f"expected_{index}", "actual": f"actual_{index}"}
    try:
        done = subprocess.run(plan["command"] + [files[name] for name in plan["order"]], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=plan["timeout"])
        report({"test": index, "status": done.returncode,
                "message": (done.stdout + done.stderr).decode(errors="replace")[-200:]})
    except subprocess.TimeoutExpired:
        report({"test": index, "status": "timeout", "message": "the checker ran out of time"})
"""

# Compiled C++ checkers by source (the binary, or the compiler's error): a row's checker judges every completion
# of its group, so it is compiled once, in a sandbox, and the binary is sent into each checker run.
_CHECKER_BINARIES: OrderedDict[str, bytes | str] = OrderedDict()
_CHECKER_LOCKS: dict[str, threading.Lock] = {}
_CHECKER_LOCKS_GUARD = threading.Lock()
_MAX_CHECKER_BINARIES = 64
_MAX_CHECKER_BINARY_BYTES = 32 << 20


def _compiled_checker(
    checker: Checker, *, sandbox: Sandbox, compile_timeout: float, compile_memory: int
) -> bytes | str:
    """The C++ checker's binary, compiled once per source in a sandbox run, or the compiler's error (a string)."""
    key = hashlib.sha256(checker.source.encode()).hexdigest()
    with _CHECKER_LOCKS_GUARD:
        lock = _CHECKER_LOCKS.setdefault(key, threading.Lock())
    with lock:
        with _CHECKER_LOCKS_GUARD:
            if key in _CHECKER_BINARIES:
                _CHECKER_BINARIES.move_to_end(key)
                return _CHECKER_BINARIES[key]
        compiler = cpp_compiler()
        if compiler is None:
            raise RuntimeError("A C++ checker needs `g++` (apt-get install g++).")
        argv = [compiler, *DEFAULT_CPP_FLAGS, *_precompiled_include(sandbox, compiler, DEFAULT_CPP_FLAGS, checker.source),
                "-o", "checker", "checker.cpp"]
        plan = {"compile": argv, "compile_timeout": compile_timeout}
        wall = _STARTUP_ALLOWANCE + compile_timeout
        limits = replace(sandbox.limits, wall_time=wall, cpu_time=wall, memory=max(sandbox.limits.memory, compile_memory),
                         max_output=2 * _MAX_CHECKER_BINARY_BYTES)
        files = {"runner.py": _CHECKER_RUNNER, "checker.cpp": checker.source, "plan.json": json.dumps(plan)}
        result = sandbox.run_python("runner.py", files=files, args=["plan.json"], limits=limits)
        compiled: bytes | str | None = None
        for line in result.stdout.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("checker_error"), str):
                compiled = record["checker_error"]
            elif isinstance(record, dict) and isinstance(record.get("binary"), str):
                compiled = base64.b64decode(record["binary"])
        if compiled is None:  # the run itself failed (ran out of time under load...): not cached, tried again next time
            return "the checker's compile gave no result" + (" (the sandbox run timed out)" if result.timed_out else "")
        with _CHECKER_LOCKS_GUARD:
            _CHECKER_BINARIES[key] = compiled
            while len(_CHECKER_BINARIES) > _MAX_CHECKER_BINARIES:
                _CHECKER_BINARIES.popitem(last=False)
        return compiled


def _run_checker(
    checker: Checker,
    tests: Sequence[CodeTest],
    outputs: Mapping[int, str],
    *,
    sandbox: Sandbox,
    timeout: float,
    compile_timeout: float,
    compile_memory: int,
) -> dict[int, TestOutcome]:
    """Verdicts of `checker` on the stdin/stdout tests whose program output is in `outputs`, from one sandbox run."""
    files: dict[str, str | bytes] = {"runner.py": _CHECKER_RUNNER}
    for index, output in outputs.items():
        files.update({f"input_{index}": tests[index].stdin, f"expected_{index}": str(tests[index].expected),
                      f"actual_{index}": output})
    plan: dict[str, Any] = {"tests": sorted(outputs), "timeout": timeout, "order": CHECKER_ORDERS[checker.argument_order],
                            "compile": None}
    wall = _STARTUP_ALLOWANCE + len(outputs) * (timeout + _PER_TEST_OVERHEAD)
    limits = replace(sandbox.limits, wall_time=wall, cpu_time=wall)
    if checker.language == "cpp":
        binary = _compiled_checker(checker, sandbox=sandbox, compile_timeout=compile_timeout, compile_memory=compile_memory)
        if isinstance(binary, str):
            # The dataset's checker, not the program, is at fault: the row cannot be judged.
            _warn_once(logger, f"a C++ checker did not compile; rows with it score None:\n{binary}")
            return {index: TestOutcome(False, "checker_error", binary[:200]) for index in outputs}
        files["checker"] = binary
        plan["command"] = ["./checker"]
    else:
        files["checker.py"] = checker.source
        plan["command"] = [sandbox.python, "-I", "-S", "checker.py"]
    files["plan.json"] = json.dumps(plan)
    result = sandbox.run_python("runner.py", files=files, args=["plan.json"], limits=limits)
    verdicts: dict[int, TestOutcome] = {}
    for line in result.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        index = record.get("test") if isinstance(record, dict) else None
        if index in outputs:
            accepted = record.get("status") == 0
            verdicts[index] = TestOutcome(accepted, "passed" if accepted else "checker_rejected",
                                          "" if accepted else str(record.get("message", ""))[:200])
    return verdicts
