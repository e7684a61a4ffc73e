"""Run a program against tests in one sandbox run, and judge the results in this process.

`run_code_tests(code, tests, sandbox=...)` copies the harness (`harness.py`), a plan and the program into a
fresh sandbox run; the harness runs each test in its own process and reports what came back (a value, an
output, an error); the verdicts are decided here, outside the sandbox, so that the expected values never
enter it. See the harness's docstring for what each kind of test can and cannot fake.

Languages: "python" (assert tests and stdin/stdout tests) and "cpp" (stdin/stdout tests; the program is
compiled once per run, inside the sandbox, with its own time and memory limits; needs `g++`).

Where the parts live: `code_tests` (the tests and verdicts, what every run shares), `instrumentation` (test
statements rewritten to count their checks), `output_matching`, `checkers` (checker programs) and
`server_pool` (reused sandboxes); everything is importable from here as before.
"""

from __future__ import annotations

import json
import logging
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

# What is not used here is re-exported: the names this module defined before its parts moved to modules of their
# own still import from here.
from .checkers import CHECKER_ORDERS, Checker, _compiled_checker, _run_checker  # noqa: F401
from .code_tests import (  # noqa: F401
    _PER_TEST_OVERHEAD,
    _STARTUP_ALLOWANCE,
    DEFAULT_CPP_FLAGS,
    LANGUAGES,
    NO_CHECK_DETAIL,
    NO_CHECK_RAN_DETAIL,
    CodeTest,
    CodeTestReport,
    TestOutcome,
    _harness_files,
    _precompiled_include,
    _warn_once,
    assert_test,
    cpp_compiler,
    imported_modules,
)
from .core import Sandbox
from .instrumentation import (  # noqa: F401
    CHECK_FUNCTION,
    COMPARE_FUNCTION,
    TRUTH_FUNCTION,
    VALUE_FUNCTION,
    instrument_checks,
)
from .output_matching import DEFAULT_ABS_TOL, DEFAULT_REL_TOL, OUTPUT_MATCHES, outputs_match  # noqa: F401
from .plain_data import decode_value
from .server_pool import _SERVERS, _exchange, _scratch_directories, close_servers  # noqa: F401

__all__ = [
    "LANGUAGES",
    "OUTPUT_MATCHES",
    "Checker",
    "CodeTest",
    "CodeTestReport",
    "TestOutcome",
    "assert_test",
    "close_servers",
    "cpp_compiler",
    "imported_modules",
    "outputs_match",
    "run_code_tests",
]

logger = logging.getLogger(__name__)

_MAX_DIAGNOSTICS = 16 << 10
# Largest encoded value a test may send back (a returned list of a million ints is about 7 MB).
_MAX_VALUE_BYTES = 8 << 20

_COMPARISONS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
    "is": operator.is_,
    "is not": operator.is_not,
    # Call-based tests (APPS/TACO, LiveCodeBench): `expected` lists the accepted values; tuples read as lists.
    "any of": lambda value, accepted: any(_lists_for_tuples(value) == _lists_for_tuples(a) for a in accepted),
}


def _lists_for_tuples(value: Any) -> Any:
    """Tuples read as lists, at any depth: call-based datasets store a returned tuple as a JSON list."""
    if isinstance(value, (list, tuple)):
        return [_lists_for_tuples(item) for item in value]
    if isinstance(value, dict):
        return {key: _lists_for_tuples(item) for key, item in value.items()}
    return value


def _judge(test: CodeTest, record: Mapping[str, Any] | None, output_match: str) -> TestOutcome:
    if not test.can_check:  # the row's fault, decided from the test alone, whatever the program did
        return TestOutcome(False, "no_check", NO_CHECK_DETAIL)
    if record is None:
        return TestOutcome(False, "no_result", "the sandbox ended before reporting this test")
    status = record.get("status")
    if status == "failed":
        reason = str(record.get("reason", "failed"))
        return TestOutcome(False, reason, str(record.get("error", record.get("signal", record.get("code", "")))))
    if test.kind == "value" and status == "value":
        try:
            actual = decode_value(json.loads(record["value"]))
            left, right = (test.expected, actual) if test.literal_first else (actual, test.expected)
            passed = bool(_COMPARISONS[test.operator](left, right))
        except Exception as error:  # noqa: BLE001 - malformed or incomparable value: the test fails
            return TestOutcome(False, "wrong_value", f"{type(error).__name__}: {error}"[:200])
        return TestOutcome(passed, "passed" if passed else "wrong_value", "" if passed else repr(actual)[:200])
    if test.kind == "statement" and status == "passed":
        return TestOutcome(True, "passed")
    if test.kind == "statement" and status == "no_check":  # it can check: the program kept it from checking
        return TestOutcome(False, "no_check_ran", NO_CHECK_RAN_DETAIL)
    if test.kind == "stdio" and status == "output":
        stdout = str(record.get("stdout", ""))
        passed = outputs_match(stdout, test.expected, test.output_match or output_match, test.rel_tol, test.abs_tol)
        return TestOutcome(passed, "passed" if passed else "wrong_output", "" if passed else stdout[:200])
    return TestOutcome(False, "bad_record", f"unexpected record {str(record)[:120]}")


def _program_isolation(sandbox: Sandbox) -> dict | None:
    """Under bubblewrap every program runs in namespaces of its own (`program_isolation`), with these writable
    places made fresh for it; the other backends are for trusted code and run programs as they are."""
    if sandbox.isolation != "bwrap":
        return None
    return {"writable": _scratch_directories(sandbox), "size": sandbox.limits.scratch_size}


def run_code_tests(
    code: str,
    tests: Sequence[CodeTest],
    *,
    sandbox: Sandbox,
    timeout: float = 4.0,
    max_output: int = 1 << 20,
    output_match: str = "lines",
    stop_on_failure: bool = False,
    language: str = "python",
    compile_timeout: float = 30.0,
    compile_memory: int = 2 << 30,
    cpp_flags: Sequence[str] = DEFAULT_CPP_FLAGS,
    checker: Checker | None = None,
    reuse: bool = False,
    precompiled_headers: bool = True,
) -> CodeTestReport:
    """Run `code` against `tests` in one sandbox run, each test in its own process with `timeout` seconds (the
    tests against a literal together in one, each still with its own timeout, as the datasets' harnesses run them).

    `max_output` caps each test's stdout (stdin/stdout tests). With `stop_on_failure` the harness skips the
    remaining tests after one fails in the sandbox (exception, timeout), as all-or-nothing scoring allows.

    `language="cpp"`: `code` is C++ source, compiled once inside the sandbox with `g++ *cpp_flags`, limited to
    `compile_timeout` seconds (wall clock and CPU) and `compile_memory` bytes of address space per compiler
    process; a failed or timed-out compile fails every test (`compile_error`, `compile_timeout`). The tests
    must be stdin/stdout tests; each runs the binary with the sandbox's per-process memory limit. With
    `precompiled_headers`, the standard header the program includes first is read precompiled when the sandbox
    can see `cpp_headers.precompiled_headers_root()` (see `trl_ext.sandbox.cpp_headers`): the same program,
    compiled in about a third of the time.

    With a `checker`, each stdin/stdout test's output is judged by that program instead of compared with the
    expected output (a second sandbox run, after the program's).

    With `reuse`, the harness runs in a sandbox that stays up between programs (`SandboxServer`): its
    interpreter, already started, forks each test as it does in a fresh sandbox; after each program every
    other process of the sandbox is killed and its scratch directories and IPC objects are emptied.
    """
    if not tests:
        raise ValueError("run_code_tests needs at least one test.")
    if language not in LANGUAGES:
        raise ValueError(f"run_code_tests: language must be one of {LANGUAGES}, got {language!r}.")
    job = _harness_job(code, tests, sandbox, timeout, max_output, stop_on_failure, language, compile_timeout,
                       compile_memory, cpp_flags, reuse, precompiled_headers)
    run = _judged_run(job, tests)
    outcomes = _outcomes(tests, run, output_match)
    if checker is not None:
        outputs = {
            i: str(run.records[i].get("stdout", ""))
            for i, test in enumerate(tests)
            if test.kind == "stdio" and run.records.get(i, {}).get("status") == "output"
        }
        if outputs:
            verdicts = _run_checker(checker, tests, outputs, sandbox=sandbox, timeout=timeout,
                                    compile_timeout=compile_timeout, compile_memory=compile_memory)
            missing = {i: output for i, output in outputs.items() if i not in verdicts}
            if missing:  # the checker's own sandbox run failed (the judge's fault): once more, then "cannot judge"
                verdicts.update(_run_checker(checker, tests, missing, sandbox=sandbox, timeout=timeout,
                                             compile_timeout=compile_timeout, compile_memory=compile_memory))
            for i in outputs:
                outcomes[i] = verdicts.get(i, TestOutcome(False, "judge_failed", "the checker's run gave no verdict"))
    return CodeTestReport(
        outcomes=tuple(outcomes),
        isolation=sandbox.isolation,
        wall_time=run.wall_time,
        sandbox_timed_out=run.timed_out,
        run_id=run.run_id,
        harness_stderr=run.stderr[-2000:],
        compile=run.compiled,
    )


@dataclass(frozen=True)
class _HarnessJob:
    """One program and its plan, ready to be judged by a harness: in a fresh sandbox run or a reused one."""

    sandbox: Sandbox
    plan: dict
    files: dict
    script_args: list
    limits: Any
    code: str
    reuse: bool
    server_memory: int
    wall: float
    report_bytes: int


def _harness_job(code, tests, sandbox, timeout, max_output, stop_on_failure, language, compile_timeout,
                 compile_memory, cpp_flags, reuse, precompiled_headers) -> _HarnessJob:
    plan = {
        "tests": [test.plan() for test in tests],
        "timeout": timeout,
        "max_output": max_output,
        "max_value": _MAX_VALUE_BYTES,
        "private_pids": sandbox.isolation in ("bwrap", "unshare"),
        "stop_on_failure": stop_on_failure,
        "language": language,
        "isolation": _program_isolation(sandbox),
    }
    # One JSON line per test; a stdout string may grow up to 6x when JSON escapes it.
    report_bytes = len(tests) * (6 * max(max_output, _MAX_VALUE_BYTES) + 4096)
    wall = _STARTUP_ALLOWANCE + len(tests) * (timeout + _PER_TEST_OVERHEAD)
    limits = replace(sandbox.limits, wall_time=wall, cpu_time=wall, max_output=report_bytes)
    files = dict(_harness_files())
    if language == "cpp":
        if any(test.kind != "stdio" for test in tests):
            raise ValueError("run_code_tests: C++ programs take stdin/stdout tests only, not assert statements.")
        compiler = cpp_compiler()
        if compiler is None:
            raise RuntimeError("run_code_tests: language='cpp' needs `g++` (apt-get install g++).")
        include = _precompiled_include(sandbox, compiler, cpp_flags, code) if precompiled_headers else []
        plan["compile"] = {
            "argv": [compiler, *cpp_flags, *include, "-o", "solution", "solution.cpp"],
            "timeout": compile_timeout,
            "memory": compile_memory,
            "max_output": _MAX_DIAGNOSTICS,
            "output": "solution",
        }
        plan["memory"] = sandbox.limits.memory  # each test; the sandbox as a whole allows the compiler more
        wall += compile_timeout
        limits = replace(limits, wall_time=wall, cpu_time=wall, memory=max(sandbox.limits.memory, compile_memory),
                         max_output=report_bytes + 4 * _MAX_DIAGNOSTICS)
        files["solution.cpp"] = code
        script_args = ["plan.json", "solution.cpp"]
    else:
        files["solution.py"] = code
        script_args = ["plan.json", "solution.py"]
    if reuse:
        plan["memory"] = sandbox.limits.memory
        plan["scratch"] = _scratch_directories(sandbox)
        plan["private_ipc"] = sandbox.isolation in ("bwrap", "unshare")
    files["plan.json"] = json.dumps(plan)
    server_memory = max(sandbox.limits.memory, compile_memory if language == "cpp" else 0)
    return _HarnessJob(sandbox, plan, files, script_args, limits, code, reuse, server_memory, wall, report_bytes)


@dataclass(frozen=True)
class _HarnessRun:
    """What one harness reported for a program: a record per test index, the compile's report (C++), and whether
    the harness finished as it should (`complete`); `fault` says why the verdicts cannot stand when it did not."""

    records: dict
    compiled: Mapping[str, Any] | None
    stderr: str
    timed_out: bool
    wall_time: float
    run_id: str
    fault: str | None = None

    @property
    def killed_from_outside(self) -> bool:
        """A test process died of SIGKILL that its harness did not send (the OOM killer, an operator)."""
        return any(record.get("reason") == "killed" and record.get("signal") == 9 for record in self.records.values())


def _judged_run(job: _HarnessJob, tests: Sequence[CodeTest]) -> _HarnessRun:
    """The program judged by a harness, and judged again on a fresh sandbox when the first judge failed (it died,
    hung, broke its report, or could not start) or a test process was killed from outside: a fault of the judge
    never becomes a verdict. A program cannot reach the harness, its sandbox or its server (the red team), so a
    death there is not the program's doing; a program that kills itself is killed again, and then fails."""
    first = _harness_run(job, tests)
    if first.fault is None and not first.killed_from_outside:
        return first
    second = _harness_run(job, tests)
    return replace(second, wall_time=first.wall_time + second.wall_time)


def _harness_run(job: _HarnessJob, tests: Sequence[CodeTest]) -> _HarnessRun:
    try:
        if job.reuse:
            stdout, stderr_bytes, timed_out, wall_time, run_id, complete = _exchange(
                job.sandbox, job.server_memory, {"plan": job.plan, "source": job.code}, job.wall, job.report_bytes
            )
        else:
            result = job.sandbox.run_python("harness.py", files=job.files, args=job.script_args, limits=job.limits,
                                            harness=True)
            stdout, stderr_bytes, timed_out, wall_time, run_id = (
                result.stdout, result.stderr, result.timed_out, result.wall_time, result.run_id
            )
            complete = stdout.rstrip().endswith(_DONE) and result.returncode == 0
    except OSError as error:  # the sandbox could not start: no space for its files, no process left...
        return _HarnessRun({}, None, "", False, 0.0, "", fault=f"the sandbox could not start: {error}")
    records, compiled = _read_records(stdout, len(tests))
    stderr = stderr_bytes.decode(errors="replace")
    fault = None
    if "Traceback" in stderr:
        # Only the launcher and harness write here (test processes' stderr goes to /dev/null): a bug or a
        # broken interpreter, not the program's doing.
        fault = "the harness failed: " + stderr.strip().splitlines()[-1][:300]
    elif not complete or len(records) < len(tests):
        fault = ("the sandbox timed out before its harness finished" if timed_out
                 else "the sandbox's harness ended before reporting every test")
    elif any(record.get("reason") == "judge_fault" for record in records.values()):
        fault = "a process of the judge could not start: " + next(
            str(record.get("error"))[:300] for record in records.values() if record.get("reason") == "judge_fault")
    return _HarnessRun(records, compiled, stderr, timed_out, wall_time, run_id, fault)


_DONE = b'{"done": true}'


def _read_records(stdout: bytes, count: int) -> tuple[dict[int, dict], Mapping[str, Any] | None]:
    """The first record of each test index in the harness's report, and the compile's report (C++)."""
    records: dict[int, dict] = {}
    compiled = None
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
            if compiled is None and isinstance(record, dict) and isinstance(record.get("compile"), dict):
                compiled = record["compile"]
                continue
            index = record["test"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(index, int) and 0 <= index < count and index not in records:
            records[index] = record
    return records, compiled


def _outcomes(tests: Sequence[CodeTest], run: _HarnessRun, output_match: str) -> list[TestOutcome]:
    """A verdict per test; where the judge failed twice, `judge_failed` naming the cause (scored "cannot judge")."""
    if run.fault is not None:
        _warn_once(logger, f"{run.fault}; the program was judged again on a fresh sandbox, which failed too")
    outcomes = []
    for index, test in enumerate(tests):
        if run.fault is not None and test.can_check:
            outcomes.append(TestOutcome(False, "judge_failed", run.fault))
        else:
            outcomes.append(_judge(test, run.records.get(index), output_match))
    return outcomes
