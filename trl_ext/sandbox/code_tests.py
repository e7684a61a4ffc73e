"""What `run_code_tests` (`testing`) and the checker runs (`checkers`) share: the tests (`CodeTest`), the verdicts
(`TestOutcome`, `CodeTestReport`), the languages and C++ compiler, the harness files copied into a sandbox, and
the time a sandbox run of tests may take beyond the tests' own."""

from __future__ import annotations

import ast
import logging
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .core import Sandbox
from .check_sites import can_check
from .cpp_headers import first_standard_include, precompiled_header_dir, precompiled_headers_root
from .harness import HARNESS_MODULES
from .instrumentation import _NOT_LITERAL, _imports, _instrumented, _literal, guarded_expression, judged_apart
from .parsing import parse

__all__ = [
    "DEFAULT_CPP_FLAGS",
    "LANGUAGES",
    "NO_CHECK_DETAIL",
    "CodeTest",
    "CodeTestReport",
    "TestOutcome",
    "assert_test",
    "cpp_compiler",
    "imported_modules",
]

LANGUAGES = ("python", "cpp")
DEFAULT_CPP_FLAGS = ("-std=c++17", "-O2", "-pipe")
# Time the sandbox may take beyond the tests' own timeouts: starting bubblewrap and Python, forking children.
_STARTUP_ALLOWANCE = 5.0
_PER_TEST_OVERHEAD = 0.5

_AST_OPERATORS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}


@dataclass(frozen=True, eq=False)
class CodeTest:
    """One test, as the sandbox runs it and the trainer judges it.

    `kind` is "value" (the sandbox evaluates `source`, an expression; the trainer checks
    `<value> <operator> expected`, or `expected <operator> <value>` when `literal_first`), "statement"
    (`source` runs in the sandbox and must not raise) or "stdio" (`stdin` is the input, `expected` the
    output).
    """

    kind: str
    source: str = ""
    stdin: str = ""
    expected: Any = None
    operator: str = "=="
    literal_first: bool = False
    # stdio tests: how this test's output is compared (None: the caller's `output_match`), its tolerances.
    output_match: str | None = None
    rel_tol: float | None = None
    abs_tol: float | None = None

    @property
    def can_check(self) -> bool:
        """Whether this test reaches a check at all, read from its source (`check_sites`): a statement test that
        cannot would pass any program. Value and stdin/stdout tests always compare."""
        return self.kind != "statement" or can_check(self.source)

    def plan(self) -> dict:
        """What the sandbox harness receives: never the expected value. Statement tests go in instrumented
        (see `instrument_checks`), with the modules they import, which the harness loads before the solution."""
        if self.kind == "stdio":
            return {"kind": "stdio", "stdin": self.stdin}
        if self.kind == "statement":
            source, imports = _instrumented(self.source)
            return {"kind": "statement", "source": source, "imports": list(imports), "apart": judged_apart(self.source)}
        return {"kind": self.kind, "source": guarded_expression(self.source)}


def imported_modules(tests: Sequence[CodeTest]) -> frozenset[str]:
    """Top-level names of the modules the Python tests import (`numpy` for `import numpy.testing`)."""
    names = set()
    for test in tests:
        if test.kind == "statement":
            names.update(module.partition(".")[0] for module in _imports(parse(test.source)))
    return frozenset(names)


@lru_cache(maxsize=4096)  # a row's tests are read again for each of its completions
def assert_test(source: str) -> CodeTest:
    """A `CodeTest` for one Python test statement; raises `SyntaxError` if it does not parse."""
    source = textwrap.dedent(source).strip()
    tree = parse(source)
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
        test = tree.body[0].test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _AST_OPERATORS:
            symbol = _AST_OPERATORS[type(test.ops[0])]
            left, right = test.left, test.comparators[0]
            left_value, right_value = _literal(left), _literal(right)
            if right_value is not _NOT_LITERAL and left_value is _NOT_LITERAL:
                return CodeTest("value", ast.unparse(left), expected=right_value, operator=symbol)
            if left_value is not _NOT_LITERAL and right_value is _NOT_LITERAL:
                return CodeTest("value", ast.unparse(right), expected=left_value, operator=symbol, literal_first=True)
    return CodeTest("statement", source)


NO_CHECK_DETAIL = (
    "the test reaches no check (no assert, no assertion method, no raise that its code runs): it cannot tell a "
    "right program from a wrong one"
)
NO_CHECK_RAN_DETAIL = (
    "the test returned without running any of its checks with this program (a program must not keep a test "
    "from checking it)"
)


@dataclass(frozen=True)
class TestOutcome:
    """Verdict on one test: `status` is "passed" or why it failed ("wrong_value", "wrong_output",
    "timeout", "error", "not_run", ...); `detail` is a short explanation (exception, what came back)."""

    passed: bool
    status: str
    detail: str = ""


@dataclass(frozen=True)
class CodeTestReport:
    """Verdicts on all tests of one program, with how the sandbox run went (and, for C++, how the compile went:
    `compile = {"status", "seconds", "diagnostics"}`)."""

    outcomes: tuple[TestOutcome, ...]
    isolation: str
    wall_time: float
    sandbox_timed_out: bool = False
    run_id: str = ""
    harness_stderr: str = field(default="", repr=False)
    compile: Mapping[str, Any] | None = None

    @property
    def checks_nothing(self) -> bool:
        """Some test reaches no check, read from its source alone: the tests, not the program, are at fault."""
        return any(outcome.status == "no_check" for outcome in self.outcomes)

    @property
    def judge_failed(self) -> str | None:
        """Why the judge could not give a verdict (its sandbox died, hung or could not start, twice), or None."""
        return next((outcome.detail for outcome in self.outcomes if outcome.status == "judge_failed"), None)

    @property
    def isolation_unavailable(self) -> bool:
        """A program could not be given namespaces of its own (`program_isolation`), so it was not run."""
        return any(outcome.status == "isolation_unavailable" for outcome in self.outcomes)

    @property
    def checker_unusable(self) -> bool:
        """The row's checker program does not compile: the tests, not the program, are at fault."""
        return any(outcome.status == "checker_error" for outcome in self.outcomes)

    @property
    def fraction_passed(self) -> float:
        return sum(outcome.passed for outcome in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0


_warned: set[str] = set()


def _warn_once(logger: logging.Logger, message: str) -> None:
    """Log `message` as a warning of `logger`, the first time only."""
    if message not in _warned:
        _warned.add(message)
        logger.warning("code sandbox: %s", message)


def cpp_compiler() -> str | None:
    """Absolute path of `g++` on this machine's `PATH`, or None. The sandbox sees it (it lives under `/usr`)."""
    found = shutil.which("g++")
    return str(Path(found).absolute()) if found else None


def _precompiled_include(sandbox: Sandbox, compiler: str, flags: Sequence[str], code: str) -> list[str]:
    """`["-isystem", directory]` holding the precompiled form of the program's first header, where the sandbox sees
    the cache read-only. Never without file-system isolation: a program that could write there would plant a
    header into every later program's compile."""
    header = first_standard_include(code)
    root = str(precompiled_headers_root())
    mounted = any(root == path or root.startswith(path + "/") for path in sandbox.read_only_paths)
    if header is None or not mounted or not sandbox.backend.file_system_isolated:
        return []
    directory = precompiled_header_dir(compiler, tuple(flags), header)
    return [] if directory is None else ["-isystem", directory]


@lru_cache(maxsize=1)
def _harness_files() -> dict[str, str]:
    """The harness script and the modules it imports, as copied into the sandbox."""
    return {name: Path(__file__).with_name(name).read_text(encoding="utf-8") for name in HARNESS_MODULES}
