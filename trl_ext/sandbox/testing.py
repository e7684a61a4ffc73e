"""Run a program against tests in one sandbox run, and judge the results in this process.

`run_code_tests(code, tests, sandbox=...)` copies the harness (`harness.py`), a plan and the program into a
fresh sandbox run; the harness runs each test in its own process and reports what came back (a value, an
output, an error); the verdicts are decided here, outside the sandbox, so that the expected values never
enter it. See the harness's docstring for what each kind of test can and cannot fake.

Languages: "python" (assert tests and stdin/stdout tests) and "cpp" (stdin/stdout tests; the program is
compiled once per run, inside the sandbox, with its own time and memory limits; needs `g++`).
"""

from __future__ import annotations

import ast
import atexit
import base64
import hashlib
import json
import logging
import math
import operator
import os
import re
import shutil
import textwrap
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

from .core import SANDBOX_DIR, Sandbox, SandboxServer
from .cpp_headers import first_standard_include, precompiled_header_dir, precompiled_headers_root
from .harness import HARNESS_MODULES
from .plain_data import decode_value

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

LANGUAGES = ("python", "cpp")
DEFAULT_CPP_FLAGS = ("-std=c++17", "-O2", "-pipe")
_MAX_DIAGNOSTICS = 16 << 10

OUTPUT_MATCHES = ("exact", "stripped", "lines", "tokens", "numbers", "apps")
DEFAULT_REL_TOL = 1e-6
DEFAULT_ABS_TOL = 1e-6
# Largest encoded value a test may send back (a returned list of a million ints is about 7 MB).
_MAX_VALUE_BYTES = 8 << 20
# Time the sandbox may take beyond the tests' own timeouts: starting bubblewrap and Python, forking children.
_STARTUP_ALLOWANCE = 5.0
_PER_TEST_OVERHEAD = 0.5

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
_AST_OPERATORS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}
_NOT_LITERAL = object()


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

    def plan(self) -> dict:
        """What the sandbox harness receives: never the expected value. Statement tests go in instrumented
        (see `instrument_checks`), with the modules they import, which the harness loads before the solution."""
        if self.kind == "stdio":
            return {"kind": "stdio", "stdin": self.stdin}
        if self.kind == "statement":
            source, imports = _instrumented(self.source)
            return {"kind": "statement", "source": source, "imports": list(imports)}
        return {"kind": self.kind, "source": self.source}


# Names the instrumented test code calls; the harness binds them in each test child (see harness.py).
CHECK_FUNCTION = "__trl_ext_check__"
COMPARE_FUNCTION = "__trl_ext_compare__"
TRUTH_FUNCTION = "__trl_ext_truth__"
VALUE_FUNCTION = "__trl_ext_value__"
_COMPARE_SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                    ast.In: "in", ast.NotIn: "not in"}


class _CheckInstrumenter(ast.NodeTransformer):
    """`assert <test>, <message>` becomes `if not <test'>: raise AssertionError(<message>)` followed by a call
    that counts one check; in `<test'>` comparisons and truth tests go through the harness's plain-data
    comparison. An assert on constants alone (`assert True`) checks nothing and counts nothing."""

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        self.generic_visit(node)
        failure = ast.Raise(
            exc=ast.Call(ast.Name("AssertionError", ast.Load()), [node.msg] if node.msg is not None else [], []),
            cause=None,
        )
        statements: list[ast.stmt] = [ast.If(ast.UnaryOp(ast.Not(), _guarded(node.test)), [failure], [])]
        if _literal(node.test) is _NOT_LITERAL:
            statements.append(ast.Expr(ast.Call(ast.Name(CHECK_FUNCTION, ast.Load()), [], [])))
        return [ast.copy_location(statement, node) for statement in statements]


class _ValueGuard(ast.NodeTransformer):
    """Every value an assert computes with (a name, call, attribute or subscript) goes through the harness's
    `value` guard: plain data becomes a plain copy, so `abs(f(x) - y) < eps` or `lo <= f(x) <= hi` computes with
    built-in values, and a value of a class the program wrote that answers comparisons or arithmetic itself
    fails the test. Not guarded: the operands of `is` / `is not` (they keep their identity), a called function
    and the object whose attribute is read (the attribute's value is), and the body of a lambda."""

    def _inner(self, node: ast.expr) -> ast.expr:
        """`node` with its parts guarded, not `node` itself."""
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                node.func = self._inner(node.func)
            node.args = [self.visit(argument) for argument in node.args]
            node.keywords = [self.visit(keyword) for keyword in node.keywords]
            return node
        if isinstance(node, ast.Attribute):
            node.value = self._inner(node.value)
            return node
        if isinstance(node, ast.Name):
            return node
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            node.left = self._inner(node.left)
            node.comparators = [self._inner(operand) for operand in node.comparators]
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        internal = isinstance(node.func, ast.Name) and node.func.id.startswith("__trl_ext_")
        node = self._inner(node)
        return node if internal else _value_call(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and not node.id.startswith("__trl_ext_"):
            return _value_call(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node = self._inner(node)
        return _value_call(node) if isinstance(node.ctx, ast.Load) else node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        return _value_call(node) if isinstance(node.ctx, ast.Load) else node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node


def _value_call(node: ast.expr) -> ast.expr:
    return ast.Call(ast.Name(VALUE_FUNCTION, ast.Load()), [node], [])


def _guarded(test: ast.expr) -> ast.expr:
    return _ValueGuard().visit(_compared(test))


def _compared(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.BoolOp):
        return ast.BoolOp(test.op, [_compared(value) for value in test.values])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.UnaryOp(ast.Not(), _compared(test.operand))
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE_SYMBOLS:
        return ast.Call(
            ast.Name(COMPARE_FUNCTION, ast.Load()),
            [test.left, ast.Constant(_COMPARE_SYMBOLS[type(test.ops[0])]), test.comparators[0]],
            [],
        )
    if isinstance(test, ast.Compare):  # `is`, `is not`, chained comparisons: as written
        return test
    return ast.Call(ast.Name(TRUTH_FUNCTION, ast.Load()), [test], [])


def instrument_checks(source: str) -> str:
    """A test statement rewritten so that the sandbox can tell how many checks ran (see `_CheckInstrumenter`)."""
    return _instrumented(source)[0]


@lru_cache(maxsize=4096)
def _instrumented(source: str) -> tuple[str, tuple[str, ...]]:
    tree = ast.parse(source)
    imports = _imports(tree) | _reached_modules(tree)
    tree = ast.fix_missing_locations(_CheckInstrumenter().visit(tree))
    return ast.unparse(tree), tuple(sorted(imports))


def _imports(tree: ast.AST) -> set[str]:
    """The modules `tree` imports, by their full names (relative imports left out)."""
    imports = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imports.add(node.module)
    return imports


def _reached_modules(tree: ast.AST) -> set[str]:
    """What the test reaches as attributes of a module it imported (`np.fft.fft` -> `numpy.fft`, `numpy.fft.fft`).

    Packages load some submodules lazily, on first use (NumPy's `fft`, `random`, `testing`): the harness loads
    these too before the solution runs, so that a solution cannot plant its own module under such a name for the
    test to pick up. Names that are not modules simply fail to load there.
    """
    bound = {}  # a name the test binds to a module -> that module's full name
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.partition(".")[0]] = alias.name if alias.asname else alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    reached = {name for name in bound.values() if "." in name}  # `from numpy import fft`: numpy.fft
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            path = []
            while isinstance(node, ast.Attribute):
                path.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in bound:
                reached.add(".".join([bound[node.id], *reversed(path)]))
    return reached


def imported_modules(tests: Sequence[CodeTest]) -> frozenset[str]:
    """Top-level names of the modules the Python tests import (`numpy` for `import numpy.testing`)."""
    names = set()
    for test in tests:
        if test.kind == "statement":
            names.update(module.partition(".")[0] for module in _imports(ast.parse(test.source)))
    return frozenset(names)


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def assert_test(source: str) -> CodeTest:
    """A `CodeTest` for one Python test statement; raises `SyntaxError` if it does not parse."""
    source = textwrap.dedent(source).strip()
    tree = ast.parse(source)
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




_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning("code sandbox: %s", message)


def cpp_compiler() -> str | None:
    """Absolute path of `g++` on this machine's `PATH`, or None. The sandbox sees it (it lives under `/usr`)."""
    found = shutil.which("g++")
    return str(Path(found).absolute()) if found else None


def outputs_match(
    actual: str,
    expected: str,
    mode: str = "lines",
    rel_tol: float | None = None,
    abs_tol: float | None = None,
) -> bool:
    """Whether a program's stdout matches the expected output.

    `exact`: identical; `stripped`: identical after stripping both ends; `lines`: same lines after stripping
    both ends and trailing spaces of each line (`\\r\\n` = `\\n`); `tokens`: same whitespace-separated tokens;
    `numbers`: same tokens, where two tokens that both read as numbers may differ by `rel_tol` (relative) or
    `abs_tol` (absolute), default 1e-6 each, when the expected token is not an integer: an expected integer
    (`1000000007`) is matched only by the same number (`1000000007`, `1000000007.0`), never by a near one;
    `apps`: the APPS/TACO rule: `lines`, else `tokens`, else `numbers`.
    """
    if mode == "exact":
        return actual == expected
    if mode == "stripped":
        return actual.strip() == expected.strip()
    if mode == "lines":
        return [line.rstrip() for line in actual.strip().splitlines()] == [
            line.rstrip() for line in expected.strip().splitlines()
        ]
    if mode == "tokens":
        return actual.split() == expected.split()
    if mode == "numbers":
        return _tokens_match_numerically(actual.split(), expected.split(), rel_tol, abs_tol)
    if mode == "apps":
        return any(outputs_match(actual, expected, each, rel_tol, abs_tol) for each in ("lines", "tokens", "numbers"))
    raise ValueError(f"output_match must be one of {OUTPUT_MATCHES}, got {mode!r}.")


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _exact_number(token: str) -> Fraction | None:
    """The exact value of a decimal token (`2`, `2.0`, `-1e3`), or None."""
    try:
        return Fraction(token) if _number(token) is not None else None
    except (ValueError, ZeroDivisionError):
        return None


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _tokens_match_numerically(
    actual: list[str], expected: list[str], rel_tol: float | None, abs_tol: float | None
) -> bool:
    if len(actual) != len(expected):
        return False
    rel = DEFAULT_REL_TOL if rel_tol is None else rel_tol
    absolute = DEFAULT_ABS_TOL if abs_tol is None else abs_tol
    for got, want in zip(actual, expected):
        if got == want:
            continue
        if _INTEGER.fullmatch(want):
            if _exact_number(got) != int(want):
                return False
            continue
        got_number, want_number = _number(got), _number(want)
        if got_number is None or want_number is None:
            return False
        if not math.isclose(got_number, want_number, rel_tol=rel, abs_tol=absolute):
            return False
    return True


def _lists_for_tuples(value: Any) -> Any:
    """Tuples read as lists, at any depth: call-based datasets store a returned tuple as a JSON list."""
    if isinstance(value, (list, tuple)):
        return [_lists_for_tuples(item) for item in value]
    if isinstance(value, dict):
        return {key: _lists_for_tuples(item) for key, item in value.items()}
    return value


NO_CHECK_DETAIL = (
    "the test returned without running any check (no assert ran, no assertion method was called): it cannot "
    "tell a right program from a wrong one"
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
    def ran_no_check(self) -> bool:
        """Some test returned without running a check: the tests, not the program, are at fault."""
        return any(outcome.status == "no_check" for outcome in self.outcomes)

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


def _judge(test: CodeTest, record: Mapping[str, Any] | None, output_match: str) -> TestOutcome:
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
    if test.kind == "statement" and status == "no_check":
        return TestOutcome(False, "no_check", NO_CHECK_DETAIL)
    if test.kind == "stdio" and status == "output":
        stdout = str(record.get("stdout", ""))
        passed = outputs_match(stdout, test.expected, test.output_match or output_match, test.rel_tol, test.abs_tol)
        return TestOutcome(passed, "passed" if passed else "wrong_output", "" if passed else stdout[:200])
    return TestOutcome(False, "bad_record", f"unexpected record {str(record)[:120]}")


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
            _warn_once(f"a C++ checker did not compile; rows with it score None:\n{binary}")
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
@lru_cache(maxsize=1)
def _harness_files() -> dict[str, str]:
    """The harness script and the modules it imports, as copied into the sandbox."""
    return {name: Path(__file__).with_name(name).read_text(encoding="utf-8") for name in HARNESS_MODULES}


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
    """Run `code` against `tests` in one sandbox run, each test in its own process with `timeout` seconds.

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
    plan = {
        "tests": [test.plan() for test in tests],
        "timeout": timeout,
        "max_output": max_output,
        "max_value": _MAX_VALUE_BYTES,
        "private_pids": sandbox.isolation in ("bwrap", "unshare"),
        "stop_on_failure": stop_on_failure,
        "language": language,
    }
    # One JSON line per test; a stdout string may grow up to 6x when JSON escapes it.
    report_bytes = len(tests) * (6 * max(max_output, _MAX_VALUE_BYTES) + 4096)
    wall = _STARTUP_ALLOWANCE + len(tests) * (timeout + _PER_TEST_OVERHEAD)
    limits = replace(sandbox.limits, wall_time=wall, cpu_time=wall, max_output=report_bytes)
    plan["isolation"] = _program_isolation(sandbox)
    files = {**_harness_files(), "plan.json": json.dumps(plan)}
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
        files["plan.json"] = json.dumps(plan)
        wall += compile_timeout
        limits = replace(
            limits,
            wall_time=wall,
            cpu_time=wall,
            memory=max(sandbox.limits.memory, compile_memory),
            max_output=report_bytes + 4 * _MAX_DIAGNOSTICS,
        )
        files["solution.cpp"] = code
        script_args = ["plan.json", "solution.cpp"]
    else:
        files["solution.py"] = code
        script_args = ["plan.json", "solution.py"]
    if reuse:
        plan["memory"] = sandbox.limits.memory
        plan["scratch"] = _scratch_directories(sandbox)
        plan["private_ipc"] = sandbox.isolation in ("bwrap", "unshare")
        server_memory = max(sandbox.limits.memory, compile_memory if language == "cpp" else 0)
        stdout, stderr_bytes, timed_out, wall_time, run_id = _exchange(
            sandbox, server_memory, {"plan": plan, "source": code}, wall, report_bytes
        )
    else:
        result = sandbox.run_python("harness.py", files=files, args=script_args, limits=limits, harness=True)
        stdout, stderr_bytes, timed_out, wall_time, run_id = (
            result.stdout, result.stderr, result.timed_out, result.wall_time, result.run_id
        )
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
        if isinstance(index, int) and 0 <= index < len(tests) and index not in records:
            records[index] = record
    stderr = stderr_bytes.decode(errors="replace")
    if "Traceback" in stderr:
        # Only the launcher and harness write here (test processes' stderr goes to /dev/null): a bug or a
        # broken interpreter, not the program's doing. Left silent, every test would just read as failed.
        _warn_once(f"the harness failed, every test of that run scored as failed:\n{stderr[-1500:]}")
    outcomes = [_judge(test, records.get(i), output_match) for i, test in enumerate(tests)]
    if checker is not None:
        outputs = {
            i: str(records[i].get("stdout", ""))
            for i, test in enumerate(tests)
            if test.kind == "stdio" and records.get(i, {}).get("status") == "output"
        }
        if outputs:
            verdicts = _run_checker(checker, tests, outputs, sandbox=sandbox, timeout=timeout,
                                    compile_timeout=compile_timeout, compile_memory=compile_memory)
            for i in outputs:
                outcomes[i] = verdicts.get(i, TestOutcome(False, "checker_failed", "the checker gave no verdict"))
    return CodeTestReport(
        outcomes=tuple(outcomes),
        isolation=sandbox.isolation,
        wall_time=wall_time,
        sandbox_timed_out=timed_out,
        run_id=run_id,
        harness_stderr=stderr[-2000:],
        compile=compiled,
    )


# ------------------------------------------------------------------------------------------ reused sandboxes

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
        _SERVERS.setdefault(sandbox, {}).setdefault(memory, []).append(server)


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
    server = _take_server(sandbox, memory)
    started = time.monotonic()
    lines, stderr, ok = server.exchange(json.dumps(request).encode(), started + wall, report_bytes)
    elapsed = time.monotonic() - started
    if ok:
        _give_back(sandbox, memory, server)
    else:
        server.close()
    return b"\n".join(lines), stderr, not ok and elapsed >= wall, elapsed, server.run_id
