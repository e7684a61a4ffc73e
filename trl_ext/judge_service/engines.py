"""Existing code-execution services as the `code` reward's executor, for stdin/stdout tests:
`executor="sandboxfusion+http://host:8080"` (SandboxFusion's `POST /run_code`, as verl uses it) or
`executor="piston+http://host:2000/api/v2"` (Piston's `POST /execute`, as open-r1 uses it).

These services run one program on one input and return its output; the comparison is ours (`outputs_match` with
the row's rule and tolerances), as when judging locally. Their protocol has nothing to keep a program away from
its own verdict when a test runs in the program's process, so rows of assert tests are not sent (they score None
with a warning: serve trl-ext's judge for them, `trl-ext sandbox serve`), nor are rows judged by a checker program.
A request the service could not serve (connection error, HTTP 5xx, SandboxFusion's `SandboxError`, Piston's
internal error `XX`) is sent again, up to `attempts` times, then the test is `judge_failed`
(the row scores None with a warning): a fault of the service never becomes a verdict.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..sandbox.testing import CodeTest, CodeTestReport, TestOutcome, outputs_match
from .connections import FAULTS, KeptConnections

__all__ = ["ENGINES", "ExecutionEngine", "PistonEngine", "SandboxFusionEngine", "engine_for"]


@dataclass(frozen=True)
class Execution:
    """One program run on one input, as the service reports it. `status`: "finished", "timeout", "output_limit",
    "killed" (a signal), "compile_error"; `fault` (the service failed, not the program) when not None."""

    status: str = "finished"
    exit_code: int = 0
    stdout: str = ""
    detail: str = ""
    fault: str | None = None


class ExecutionEngine:
    """A code-execution service reached over HTTP. Subclasses say how one program runs on one input."""

    name = ""

    def __init__(self, url: str, *, job_timeout: float = 300.0, attempts: int = 3):
        self.url, self.job_timeout, self.attempts = url.rstrip("/"), job_timeout, attempts
        self._http = KeptConnections()

    def execute(self, code: str, language: str, stdin: str, timeout: float, memory_mb: int,
                compile_timeout: float) -> Execution:
        raise NotImplementedError

    def run_tests(
        self, code: str, tests: Sequence[CodeTest], language: str, *, timeout: float, memory_mb: int,
        compile_timeout: float, max_output: int, output_match: str, stop_on_failure: bool,
    ) -> CodeTestReport:
        """Verdicts on stdin/stdout `tests`, one service request per test (sent again on a fault of the service)."""
        started, outcomes = time.monotonic(), []
        for test in tests:
            if outcomes and ((stop_on_failure and not outcomes[-1].passed) or outcomes[-1].status == "compile_error"):
                outcomes.append(TestOutcome(False, "not_run", "an earlier test failed"))
                continue
            run = self._execute_with_retries(code, language, test.stdin, timeout, memory_mb, compile_timeout)
            outcomes.append(_outcome(run, test, max_output, output_match))
        return CodeTestReport(tuple(outcomes), self.name, time.monotonic() - started)

    def _execute_with_retries(self, code, language, stdin, timeout, memory_mb, compile_timeout) -> Execution:
        faults = []
        for attempt in range(self.attempts):
            try:
                run = self.execute(code, language, stdin, timeout, memory_mb, compile_timeout)
            except FAULTS as error:  # connection refused, reset, timed out, bad JSON...
                run = Execution(fault=f"{type(error).__name__}: {str(error)[:200]}")
            if run.fault is None:
                return run
            faults.append(run.fault)
            if attempt + 1 < self.attempts:
                time.sleep(min(0.2 * 2**attempt, 2.0) * random.uniform(0.5, 1.0))
        return Execution(fault=f"{self.name} at {self.url} failed {self.attempts} times: " + "; ".join(faults))

    def _post(self, path: str, body: dict, timeout: float) -> tuple[int, str]:
        """`(HTTP status, body text)` of a JSON POST to the service."""
        response = self._http.request(self.url, "POST", path, json.dumps(body).encode(),
                                      {"Content-Type": "application/json"}, timeout)
        return response.status_code, response.body.decode(errors="replace")


def _outcome(run: Execution, test: CodeTest, max_output: int, output_match: str) -> TestOutcome:
    if run.fault is not None:
        return TestOutcome(False, "judge_failed", run.fault)
    if run.status != "finished":
        return TestOutcome(False, run.status, run.detail[:300])
    if run.exit_code != 0:
        return TestOutcome(False, "error", f"exit status {run.exit_code}")
    if len(run.stdout.encode()) > max_output:
        return TestOutcome(False, "output_limit", f"more than {max_output} bytes of output")
    if outputs_match(run.stdout, str(test.expected), test.output_match or output_match, test.rel_tol, test.abs_tol):
        return TestOutcome(True, "passed")
    return TestOutcome(False, "wrong_output", run.stdout[:200])


class SandboxFusionEngine(ExecutionEngine):
    """SandboxFusion (bytedance/SandboxFusion, `sandbox/server/sandbox_api.py`): `POST /run_code` with `code`,
    `language`, `stdin`, `run_timeout`/`compile_timeout` (seconds), `memory_limit_MB`; the answer's `status` is
    "Success", "Failed" or "SandboxError", with `compile_result`/`run_result` (`status` "Finished",
    "TimeLimitExceeded" or "Error", `return_code`, `stdout`)."""

    name = "sandboxfusion"
    LANGUAGES = {"python": "python", "cpp": "cpp"}

    def execute(self, code, language, stdin, timeout, memory_mb, compile_timeout) -> Execution:
        body = {"code": code, "language": self.LANGUAGES[language], "stdin": stdin, "run_timeout": timeout,
                "compile_timeout": compile_timeout, "memory_limit_MB": memory_mb, "files": {}, "fetch_files": []}
        status, text = self._post("/run_code", body, compile_timeout + timeout + self.job_timeout)
        if status != 200:
            return Execution(fault=f"HTTP {status}: {text[:200]}")
        answer = json.loads(text)
        if answer.get("status") == "SandboxError":
            return Execution(fault=f"SandboxError: {str(answer.get('message', ''))[:200]}")
        compiled = answer.get("compile_result")
        if compiled is not None and (compiled.get("status") != "Finished" or compiled.get("return_code") != 0):
            if compiled.get("status") == "Error":
                return Execution(fault=f"the compile stage failed in the service: {str(compiled.get('stderr'))[:200]}")
            return Execution("compile_error", detail=str(compiled.get("stderr") or compiled.get("status"))[:300])
        run = answer.get("run_result")
        if run is None:
            return Execution(fault="the answer has no run_result")
        if run.get("status") == "TimeLimitExceeded":
            return Execution("timeout", detail=f"over {timeout} s")
        if run.get("status") != "Finished":
            return Execution(fault=f"run status {run.get('status')}: {str(run.get('stderr'))[:200]}")
        return Execution(exit_code=int(run.get("return_code") or 0), stdout=run.get("stdout") or "")


class PistonEngine(ExecutionEngine):
    """Piston (engineer-man/piston, `docs/api-v2.md`): `POST <base>/execute` with `language`, `version`, `files`,
    `stdin`, `run_timeout`/`compile_timeout` (ms), `run_memory_limit` (bytes); the answer has `run` (and `compile`)
    with `stdout`, `code`, `signal` and, in current versions, `status` ("TO" timeout, "OL"/"EL" output limits,
    "SG" signal, "RE" runtime error, "XX" internal error). `runtimes` maps our languages to Piston's runtime names
    and versions (default `python`/`c++`, any version)."""

    name = "piston"

    def __init__(self, url: str, *, runtimes: dict[str, tuple[str, str]] | None = None, **kwargs):
        super().__init__(url, **kwargs)
        self.runtimes = runtimes or {"python": ("python", "*"), "cpp": ("c++", "*")}

    def execute(self, code, language, stdin, timeout, memory_mb, compile_timeout) -> Execution:
        runtime, version = self.runtimes[language]
        body = {"language": runtime, "version": version, "files": [{"name": "main", "content": code}],
                "stdin": stdin, "run_timeout": int(timeout * 1000), "compile_timeout": int(compile_timeout * 1000),
                "run_memory_limit": memory_mb << 20}
        status, text = self._post("/execute", body, compile_timeout + timeout + self.job_timeout)
        if status != 200 or not text:
            return Execution(fault=f"HTTP {status}: {text[:200]}")
        answer = json.loads(text)
        compiled = answer.get("compile")
        if compiled is not None and (compiled.get("code") != 0 or compiled.get("signal")):
            if compiled.get("status") == "XX":
                return Execution(fault=f"internal error compiling: {str(compiled.get('message'))[:200]}")
            return Execution("compile_error", detail=str(compiled.get("stderr") or compiled.get("output"))[:300])
        run = answer.get("run")
        if run is None:
            return Execution(fault=f"the answer has no run stage: {str(answer.get('message', ''))[:200]}")
        status = run.get("status")
        if status == "XX":  # Piston's own failure. (Never read the program's stderr for one: it writes what it likes.)
            return Execution(fault=f"the worker failed: {str(run.get('message'))[:200]}")
        if status == "TO":
            return Execution("timeout", detail=f"over {timeout} s")
        if status in ("OL", "EL"):
            return Execution("output_limit", detail=str(run.get("message") or status))
        if run.get("signal"):
            return Execution("killed", detail=f"signal {run['signal']}")
        return Execution(exit_code=int(run.get("code") or 0), stdout=run.get("stdout") or "")


ENGINES = {"sandboxfusion": SandboxFusionEngine, "piston": PistonEngine}


def engine_for(executor: str, job_timeout: float) -> ExecutionEngine | None:
    """The engine an `executor` string names (`<engine>+http://...`), or None for anything else."""
    if not isinstance(executor, str) or "+" not in executor.split("://", 1)[0]:
        return None
    name, _, url = executor.partition("+")
    if name not in ENGINES or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"Reward 'code': executor {executor!r}: an execution service is named `<engine>+<URL>` with an engine "
            f"among {sorted(ENGINES)}, e.g. 'sandboxfusion+http://host:8080' or 'piston+http://host:2000/api/v2'."
        )
    return ENGINES[name](url, job_timeout=job_timeout)
