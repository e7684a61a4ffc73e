"""The `code` reward: the completion's Python code runs against the dataset's tests in the sandbox.

The dataset's `tests` column holds, per prompt, either Python assert statements or stdin/stdout pairs:

    ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]
    [{"input": "1 2\\n", "output": "3\\n"}, {"input": "5 5\\n", "output": "10\\n"}]

(also accepted: a JSON string of either, a block of Python whose top-level asserts are the tests, and the
APPS/TACO mapping `{"inputs": [...], "outputs": [...]}`). The score is the fraction of tests passed
(`partial_credit=True`) or all-or-nothing, mapped onto the scoring's correct/incorrect values. A missing or
empty tests value scores `None` ("cannot judge").

How a test is judged, so that the program cannot fake a pass (see `code_harness.py`):

- `assert <expr> <op> <literal>` (either order; `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `not in`, `is`,
  `is not`): the sandbox computes `<expr>` only and sends it back as plain data; the comparison with the
  literal happens here, in the trainer, and the literal never enters the sandbox. A custom `__eq__`, a patched
  harness or an early exit cannot make a wrong value pass.
- stdin/stdout pairs: the program's stdout comes back and is compared here (`output_match`).
- any other assert: it runs in the sandbox after the solution and passes only if the test process then
  echoes a per-test nonce the harness gave it; see the harness docstring for what that does and does not stop.

Tests are evaluated against the standard library as it was before the solution ran, with the genuine builtins
and modules for the names they use, so replacing `math.isclose` or rebinding `abs` does not help either.

The program of each completion runs in one sandbox (`Sandbox`), each of its tests in a fresh child process
with its own timeout; completions of a batch run in parallel, one sandbox per worker thread.
"""

from __future__ import annotations

import ast
import json
import logging
import operator
import re
import textwrap
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

from .base import Reward, dataset_column, scores_for
from .pool import default_num_workers
from .registry import register_reward
from .sandbox import Sandbox, SandboxLimits

__all__ = [
    "CodeReward",
    "CodeTest",
    "CodeTestReport",
    "TestOutcome",
    "extract_python_code",
    "outputs_match",
    "parse_tests",
    "run_code_tests",
]

logger = logging.getLogger(__name__)

OUTPUT_MATCHES = ("exact", "stripped", "lines", "tokens")
_PYTHON_FENCE_TAGS = frozenset({"python", "py", "python3", "py3"})
_FENCE = re.compile(r"```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
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
}
_AST_OPERATORS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}
_NOT_LITERAL = object()


# ----------------------------------------------------------------------------------------------- extraction


def extract_python_code(text: str) -> str:
    """The program in a completion: the last ```python block (also `py`, `python3`), else the last untagged
    ``` block, else the whole text when it has no fenced block at all. Text up to the last `</think>` is
    reasoning and is ignored. A block cut off by the length limit (no closing fence) runs to the end. A
    completion whose only blocks are in other languages has no Python code (empty string)."""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    for wanted in (lambda tag: tag in _PYTHON_FENCE_TAGS, lambda tag: tag == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return chosen[-1]
    return "" if blocks else text


# ---------------------------------------------------------------------------------------------------- tests


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

    def plan(self) -> dict:
        """What the sandbox harness receives: never the expected value."""
        if self.kind == "stdio":
            return {"kind": "stdio", "stdin": self.stdin}
        return {"kind": self.kind, "source": self.source}


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


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "\n".join(str(line) for line in value)
    return str(value)


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning("code reward: %s", message)


def _cannot_judge(problem: str) -> None:
    _warn_once(f"{problem}; such rows score None (cannot judge).")
    return None


def parse_tests(tests: Any) -> list[CodeTest] | None:
    """The tests of one dataset row, or `None` when there are none or they cannot be read.

    Accepts a list of Python test statements (usually asserts), a list of `{"input", "output"}` mappings, a
    JSON string of either, a block of Python (each top-level assert becomes a test; a block with other
    statements is one test), and `{"inputs": [...], "outputs": [...]}`. Lists of lines are joined with "\\n".
    """
    if tests is None:
        return None
    if isinstance(tests, str):
        text = tests.strip()
        if not text:
            return None
        if text[0] in "[{":
            try:
                return parse_tests(json.loads(text))
            except ValueError:
                pass
        return _python_block_tests(text)
    if isinstance(tests, Mapping):
        if "fn_name" in tests:
            return _cannot_judge("call-based APPS tests (`fn_name`) are not supported; use assert statements")
        if "inputs" in tests and "outputs" in tests:
            if len(tests["inputs"]) != len(tests["outputs"]):
                return _cannot_judge("a tests mapping has different numbers of `inputs` and `outputs`")
            pairs = list(zip(tests["inputs"], tests["outputs"]))
        elif "input" in tests and "output" in tests:
            pairs = [(tests["input"], tests["output"])]
        else:
            return _cannot_judge(f"a tests mapping needs `inputs`/`outputs` or `input`/`output`, got {sorted(tests)}")
        return [CodeTest("stdio", stdin=_as_text(i), expected=_as_text(o)) for i, o in pairs] or None
    if isinstance(tests, Sequence) and not isinstance(tests, (bytes, bytearray)):
        items = list(tests)
        if not items:
            return None
        if all(isinstance(item, str) for item in items):
            try:
                return [assert_test(item) for item in items]
            except SyntaxError as error:
                return _cannot_judge(f"a test statement does not parse ({error.msg})")
        if all(isinstance(item, Mapping) and "input" in item and "output" in item for item in items):
            return [
                CodeTest("stdio", stdin=_as_text(item["input"]), expected=_as_text(item["output"])) for item in items
            ]
        return _cannot_judge("tests must be all strings (asserts) or all {'input', 'output'} mappings")
    return _cannot_judge(f"tests of type {type(tests).__name__} are not supported")


def _python_block_tests(text: str) -> list[CodeTest] | None:
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError as error:
        return _cannot_judge(f"a tests block does not parse ({error.msg})")
    if tree.body and all(isinstance(node, ast.Assert) for node in tree.body):
        return [assert_test(ast.get_source_segment(textwrap.dedent(text), node)) for node in tree.body]
    return [CodeTest("statement", textwrap.dedent(text))]


# -------------------------------------------------------------------------------------------------- judging


def outputs_match(actual: str, expected: str, mode: str = "lines") -> bool:
    """Whether a program's stdout matches the expected output.

    `exact`: identical; `stripped`: identical after stripping both ends; `lines`: same lines after stripping
    both ends and trailing spaces of each line (`\\r\\n` = `\\n`); `tokens`: same whitespace-separated tokens.
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
    raise ValueError(f"output_match must be one of {OUTPUT_MATCHES}, got {mode!r}.")


def _decode(node: Any) -> Any:
    """Inverse of the harness's `encode_value`, building only plain data (never calls code it names)."""
    if isinstance(node, list):
        return [_decode(item) for item in node]
    if node is None or isinstance(node, (bool, str)):
        return node
    if isinstance(node, dict) and len(node) == 1:
        ((tag, payload),) = node.items()
        if tag == "int":
            return int(payload)
        if tag == "float":
            return float(payload)
        if tag == "complex":
            return complex(float(payload[0]), float(payload[1]))
        if tag == "bytes":
            return bytes.fromhex(payload)
        if tag == "tuple":
            return tuple(_decode(item) for item in payload)
        if tag == "set":
            return {_decode(item) for item in payload}
        if tag == "frozenset":
            return frozenset(_decode(item) for item in payload)
        if tag == "dict":
            return {_decode(key): _decode(value) for key, value in payload}
        if tag == "fraction":
            return Fraction(int(payload[0]), int(payload[1]))
        if tag == "decimal":
            return Decimal(payload)
    raise ValueError(f"not an encoded value: {str(node)[:80]}")


@dataclass(frozen=True)
class TestOutcome:
    """Verdict on one test: `status` is "passed" or why it failed ("wrong_value", "wrong_output",
    "timeout", "error", "not_run", ...); `detail` is a short explanation (exception, what came back)."""

    passed: bool
    status: str
    detail: str = ""


@dataclass(frozen=True)
class CodeTestReport:
    """Verdicts on all tests of one program, with how the sandbox run went."""

    outcomes: tuple[TestOutcome, ...]
    isolation: str
    wall_time: float
    sandbox_timed_out: bool = False
    run_id: str = ""
    harness_stderr: str = field(default="", repr=False)

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
            actual = _decode(json.loads(record["value"]))
            left, right = (test.expected, actual) if test.literal_first else (actual, test.expected)
            passed = bool(_COMPARISONS[test.operator](left, right))
        except Exception as error:  # noqa: BLE001 - malformed or incomparable value: the test fails
            return TestOutcome(False, "wrong_value", f"{type(error).__name__}: {error}"[:200])
        return TestOutcome(passed, "passed" if passed else "wrong_value", "" if passed else repr(actual)[:200])
    if test.kind == "statement" and status == "passed":
        return TestOutcome(True, "passed")
    if test.kind == "stdio" and status == "output":
        stdout = str(record.get("stdout", ""))
        passed = outputs_match(stdout, test.expected, output_match)
        return TestOutcome(passed, "passed" if passed else "wrong_output", "" if passed else stdout[:200])
    return TestOutcome(False, "bad_record", f"unexpected record {str(record)[:120]}")


@lru_cache(maxsize=1)
def _harness_source() -> str:
    return Path(__file__).with_name("code_harness.py").read_text(encoding="utf-8")


def run_code_tests(
    code: str,
    tests: Sequence[CodeTest],
    *,
    sandbox: Sandbox,
    timeout: float = 4.0,
    max_output: int = 1 << 20,
    output_match: str = "lines",
    stop_on_failure: bool = False,
) -> CodeTestReport:
    """Run `code` against `tests` in one sandbox run, each test in its own process with `timeout` seconds.

    `max_output` caps each test's stdout (stdin/stdout tests). With `stop_on_failure` the harness skips the
    remaining tests after one fails in the sandbox (exception, timeout), as all-or-nothing scoring allows.
    """
    if not tests:
        raise ValueError("run_code_tests needs at least one test.")
    plan = {
        "tests": [test.plan() for test in tests],
        "timeout": timeout,
        "max_output": max_output,
        "max_value": _MAX_VALUE_BYTES,
        "private_pids": sandbox.isolation in ("bwrap", "unshare"),
        "stop_on_failure": stop_on_failure,
    }
    # One JSON line per test; a stdout string may grow up to 6x when JSON escapes it.
    report_bytes = len(tests) * (6 * max(max_output, _MAX_VALUE_BYTES) + 4096)
    wall = _STARTUP_ALLOWANCE + len(tests) * (timeout + _PER_TEST_OVERHEAD)
    limits = replace(sandbox.limits, wall_time=wall, cpu_time=wall, max_output=report_bytes)
    result = sandbox.run_python(
        "code_harness.py",
        files={"code_harness.py": _harness_source(), "plan.json": json.dumps(plan), "solution.py": code},
        args=["plan.json", "solution.py"],
        limits=limits,
    )
    records: dict[int, dict] = {}
    for line in result.stdout.splitlines():
        try:
            record = json.loads(line)
            index = record["test"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(index, int) and 0 <= index < len(tests) and index not in records:
            records[index] = record
    stderr = result.stderr.decode(errors="replace")
    if "Traceback" in stderr:
        # Only the launcher and harness write here (test processes' stderr goes to /dev/null): a bug or a
        # broken interpreter, not the program's doing. Left silent, every test would just read as failed.
        _warn_once(f"the code sandbox's harness failed, every test of that run scored as failed:\n{stderr[-1500:]}")
    return CodeTestReport(
        outcomes=tuple(_judge(test, records.get(i), output_match) for i, test in enumerate(tests)),
        isolation=result.isolation,
        wall_time=result.wall_time,
        sandbox_timed_out=result.timed_out,
        run_id=result.run_id,
        harness_stderr=stderr[-2000:],
    )


# --------------------------------------------------------------------------------------------------- reward


@register_reward(
    "code",
    aliases=("code_tests",),
    description="Python code in the completion passes the dataset's tests (asserts or stdin/stdout), run in a sandbox.",
    pooled=True,
)
class CodeReward(Reward):
    """Runs the completion's Python code against the row's tests in the sandbox; scores the tests passed.

    Parameters:
        tests_column: Dataset column with the tests (see `parse_tests`).
        partial_credit: Score the fraction of tests passed (True) or all-or-nothing (False). The fraction maps
            linearly onto the scoring: `incorrect + fraction * (correct - incorrect)`.
        scoring: "binary" (1 correct / 0 incorrect) or "dapo" (+1 / -1).
        timeout: Wall-clock seconds per test (also its CPU-time limit, rounded up).
        memory_mb: Address-space limit per process, in MiB.
        max_processes: Processes and threads a program may have at once.
        max_output_bytes: Stdout kept per stdin/stdout test; a program printing more fails that test.
        output_match: How stdin/stdout outputs compare: "lines" (default), "tokens", "stripped", "exact".
        isolation: Sandbox isolation, see `Sandbox` ("auto", "bwrap", "unshare", "none").
        num_workers: Programs run at the same time; defaults to the usable CPU cores.
        site_packages: Let programs import installed packages (numpy...), not only the standard library.
    """

    __name__ = "code"

    def __init__(
        self,
        tests_column: str = "tests",
        partial_credit: bool = True,
        scoring: str = "binary",
        timeout: float = 4.0,
        memory_mb: int = 1024,
        max_processes: int = 32,
        max_output_bytes: int = 1 << 20,
        output_match: str = "lines",
        isolation: str = "auto",
        num_workers: int | None = None,
        site_packages: bool = False,
    ):
        if output_match not in OUTPUT_MATCHES:
            raise ValueError(f"Reward 'code': output_match must be one of {OUTPUT_MATCHES}, got {output_match!r}.")
        if not timeout > 0:
            raise ValueError(f"Reward 'code': timeout must be positive seconds, got {timeout!r}.")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"Reward 'code': num_workers must be at least 1 or None, got {num_workers!r}.")
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="code")
        self.tests_column = tests_column
        self.partial_credit = partial_credit
        self.scoring = scoring
        self.timeout = float(timeout)
        self.max_output_bytes = max_output_bytes
        self.output_match = output_match
        self.num_workers = num_workers
        self.sandbox = Sandbox(
            SandboxLimits(memory=memory_mb << 20, max_processes=max_processes, max_output=max_output_bytes),
            isolation=isolation,
            site_packages=site_packages,
        )

    def evaluate(self, completion_text: str, tests: Any) -> CodeTestReport | None:
        """Per-test verdicts for one completion (text) and one row's tests; `None` if the tests are unusable."""
        parsed = parse_tests(tests)
        if parsed is None:
            return None
        return self._evaluate(extract_python_code(completion_text), parsed)

    def _evaluate(self, code: str, tests: list[CodeTest]) -> CodeTestReport:
        if not code.strip():
            outcomes = tuple(TestOutcome(False, "no_code", "no Python code in the completion") for _ in tests)
            return CodeTestReport(outcomes, self.sandbox.isolation, 0.0)
        return run_code_tests(
            code,
            tests,
            sandbox=self.sandbox,
            timeout=self.timeout,
            max_output=self.max_output_bytes,
            output_match=self.output_match,
            stop_on_failure=not self.partial_credit,
        )

    def _score(self, report: CodeTestReport) -> float:
        fraction = report.fraction_passed
        if not self.partial_credit:
            fraction = 1.0 if fraction == 1.0 else 0.0
        return self.incorrect_score + fraction * (self.correct_score - self.incorrect_score)

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        tests = dataset_column(columns, self.tests_column, len(texts), reward=self.__name__, argument="tests_column")
        jobs = []
        for index, (text, row_tests) in enumerate(zip(texts, tests)):
            parsed = parse_tests(row_tests)
            if parsed is not None:
                jobs.append((index, extract_python_code(text), parsed))
        scores: list[float | None] = [None] * len(texts)
        if not jobs:
            return scores
        workers = min(self.num_workers or default_num_workers(), len(jobs))
        # Threads only wait: every program runs in its own sandbox process.
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-reward") as executor:
            reports = executor.map(lambda job: self._evaluate(job[1], job[2]), jobs)
            for (index, _, _), report in zip(jobs, reports):
                scores[index] = self._score(report)
        return scores
