"""The `code` reward: the completion's program runs against the dataset's tests in the sandbox.

The dataset's `tests` column holds, per prompt, either Python assert statements or stdin/stdout pairs:

    ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]
    [{"input": "1 2\\n", "output": "3\\n"}, {"input": "5 5\\n", "output": "10\\n"}]

(also accepted: a JSON string of either, a block of Python whose top-level asserts are the tests, and the
APPS/TACO mapping `{"inputs": [...], "outputs": [...]}`). The score is the fraction of tests passed
(`partial_credit=True`) or all-or-nothing, mapped onto the scoring's correct/incorrect values. A missing or
empty tests value scores `None` ("cannot judge").

Programs are Python, or C++ (`language="cpp"`, or per row from `language_column`), which is compiled once per
completion inside the sandbox and judged on stdin/stdout tests. How tests run and why a program cannot fake a
pass is the sandbox package's business: see `trl_ext.sandbox.testing` and `trl_ext/sandbox/harness.py`. This
module only extracts the program from the completion, reads the dataset's test formats, and scores.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import textwrap
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..sandbox import Sandbox, SandboxLimits
from ..sandbox.testing import (
    DEFAULT_CPP_FLAGS,
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
from .base import Reward, dataset_column, scores_for
from .pool import default_num_workers
from .registry import register_reward

__all__ = [
    "CodeReward",
    "CodeTest",
    "CodeTestReport",
    "TestOutcome",
    "extract_cpp_code",
    "extract_python_code",
    "outputs_match",
    "parse_tests",
    "run_code_tests",
]

logger = logging.getLogger(__name__)

_PYTHON_FENCE_TAGS = frozenset({"python", "py", "python3", "py3"})
_CPP_FENCE_TAGS = frozenset({"cpp", "c++", "cc", "cxx", "hpp"})
_FENCE = re.compile(r"```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
# Names a `language_column` value may take, by language.
_LANGUAGE_NAMES = {
    "python": "python", "py": "python", "python3": "python", "py3": "python",
    "cpp": "cpp", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "g++": "cpp", "cpp17": "cpp", "c++17": "cpp",
}


# ----------------------------------------------------------------------------------------------- extraction


def _extract(text: str, tags: frozenset[str]) -> str:
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    for wanted in (lambda tag: tag in tags, lambda tag: tag == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return chosen[-1]
    return "" if blocks else text


def extract_python_code(text: str) -> str:
    """The program in a completion: the last ```python block (also `py`, `python3`), else the last untagged
    ``` block, else the whole text when it has no fenced block at all. Text up to the last `</think>` is
    reasoning and is ignored. A block cut off by the length limit (no closing fence) runs to the end. A
    completion whose only blocks are in other languages has no Python code (empty string)."""
    return _extract(text, _PYTHON_FENCE_TAGS)


def extract_cpp_code(text: str) -> str:
    """Like `extract_python_code`, for C++: the last ```cpp block (also `c++`, `cc`, `cxx`), else the last
    untagged block, else the whole text when it has no fenced block."""
    return _extract(text, _CPP_FENCE_TAGS)


# ---------------------------------------------------------------------------------------------------- tests


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning("code reward: %s", message)


def _cannot_judge(problem: str) -> None:
    _warn_once(f"{problem}; such rows score None (cannot judge).")
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "\n".join(str(line) for line in value)
    return str(value)


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



# --------------------------------------------------------------------------------------------------- reward


@register_reward(
    "code",
    aliases=("code_tests",),
    description="Python or C++ code in the completion passes the dataset's tests (asserts or stdin/stdout), "
    "run in a sandbox.",
    pooled=True,
)
class CodeReward(Reward):
    """Runs the completion's program against the row's tests in the sandbox; scores the tests passed.

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
        isolation: Sandbox isolation, see `Sandbox`: "auto" (bubblewrap; raises at construction when nothing
            can isolate the file system), or the explicit opt-ins for trusted code "unshare" and "none".
        num_workers: Programs run at the same time; defaults to the usable CPU cores.
        site_packages: Let Python programs import installed packages (numpy...), not only the standard library.
        language: Language of every program, "python" or "cpp" (stdin/stdout tests only; needs `g++`).
        language_column: Dataset column giving each row's language ("python", "cpp", "c++", ...), overriding
            `language`; an empty value means `language`.
        compile_timeout: Seconds (wall clock and CPU) the C++ compiler may take per completion.
        compile_memory_mb: Address-space limit of each compiler process, in MiB.
        cpp_flags: Compiler flags, default `-std=c++17 -O2 -pipe`.
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
        language: str = "python",
        language_column: str | None = None,
        compile_timeout: float = 30.0,
        compile_memory_mb: int = 2048,
        cpp_flags: Sequence[str] = DEFAULT_CPP_FLAGS,
    ):
        if output_match not in OUTPUT_MATCHES:
            raise ValueError(f"Reward 'code': output_match must be one of {OUTPUT_MATCHES}, got {output_match!r}.")
        if not timeout > 0:
            raise ValueError(f"Reward 'code': timeout must be positive seconds, got {timeout!r}.")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"Reward 'code': num_workers must be at least 1 or None, got {num_workers!r}.")
        if language not in LANGUAGES:
            raise ValueError(f"Reward 'code': language must be one of {LANGUAGES}, got {language!r}.")
        if not compile_timeout > 0:
            raise ValueError(f"Reward 'code': compile_timeout must be positive seconds, got {compile_timeout!r}.")
        if (language == "cpp" or language_column is not None) and cpp_compiler() is None:
            which = "language='cpp'" if language == "cpp" else f"language_column={language_column!r}"
            raise RuntimeError(
                f"Reward 'code' with {which} compiles C++ with `g++`, which is not installed: "
                "`apt-get install g++` (Debian/Ubuntu) or `dnf install gcc-c++`."
            )
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="code")
        self.tests_column = tests_column
        self.partial_credit = partial_credit
        self.scoring = scoring
        self.timeout = float(timeout)
        self.max_output_bytes = max_output_bytes
        self.output_match = output_match
        self.num_workers = num_workers
        self.language = language
        self.language_column = language_column
        self.compile_timeout = float(compile_timeout)
        self.compile_memory_mb = compile_memory_mb
        self.cpp_flags = tuple(cpp_flags)
        # Raises `SandboxUnavailableError` here, before training, when nothing can isolate the file system.
        self.sandbox = Sandbox(
            SandboxLimits(memory=memory_mb << 20, max_processes=max_processes, max_output=max_output_bytes),
            isolation=isolation,
            site_packages=site_packages,
        )

    def evaluate(self, completion_text: str, tests: Any, language: str | None = None) -> CodeTestReport | None:
        """Per-test verdicts for one completion (text) and one row's tests, in `language` (default: the
        reward's); `None` if the tests are unusable."""
        language = self._row_language(language)
        parsed = self._row_tests(tests, language)
        if parsed is None or language is None:
            return None
        return self._evaluate(self._extract(completion_text, language), parsed, language)

    def _row_language(self, value: Any) -> str | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return self.language
        language = _LANGUAGE_NAMES.get(str(value).strip().lower())
        if language is None:
            return _cannot_judge(f"unknown language {value!r} in column {self.language_column!r}")
        return language

    @staticmethod
    def _row_tests(tests: Any, language: str | None) -> list[CodeTest] | None:
        parsed = parse_tests(tests)
        if parsed is not None and language == "cpp" and any(test.kind != "stdio" for test in parsed):
            return _cannot_judge("C++ rows need stdin/stdout tests, not assert statements")
        return parsed

    @staticmethod
    def _extract(text: str, language: str) -> str:
        return extract_cpp_code(text) if language == "cpp" else extract_python_code(text)

    def _evaluate(self, code: str, tests: list[CodeTest], language: str = "python") -> CodeTestReport:
        if not code.strip():
            outcomes = tuple(TestOutcome(False, "no_code", f"no {language} code in the completion") for _ in tests)
            return CodeTestReport(outcomes, self.sandbox.isolation, 0.0)
        return run_code_tests(
            code,
            tests,
            sandbox=self.sandbox,
            timeout=self.timeout,
            max_output=self.max_output_bytes,
            output_match=self.output_match,
            stop_on_failure=not self.partial_credit,
            language=language,
            compile_timeout=self.compile_timeout,
            compile_memory=self.compile_memory_mb << 20,
            cpp_flags=self.cpp_flags,
        )

    def _score(self, report: CodeTestReport) -> float:
        fraction = report.fraction_passed
        if not self.partial_credit:
            fraction = 1.0 if fraction == 1.0 else 0.0
        return self.incorrect_score + fraction * (self.correct_score - self.incorrect_score)

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        tests = dataset_column(columns, self.tests_column, len(texts), reward=self.__name__, argument="tests_column")
        if self.language_column is not None:
            languages = dataset_column(
                columns, self.language_column, len(texts), reward=self.__name__, argument="language_column"
            )
        else:
            languages = [None] * len(texts)
        jobs = []
        for index, (text, row_tests, row_language) in enumerate(zip(texts, tests, languages)):
            language = self._row_language(row_language)
            parsed = self._row_tests(row_tests, language) if language is not None else None
            if parsed is not None:
                jobs.append((index, self._extract(text, language), parsed, language))
        scores: list[float | None] = [None] * len(texts)
        if not jobs:
            return scores
        workers = min(self.num_workers or default_num_workers(), len(jobs))
        # Threads only wait: every program runs in its own sandbox process.
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-reward") as executor:
            reports = executor.map(lambda job: self._evaluate(job[1], job[2], job[3]), jobs)
            for (index, *_), report in zip(jobs, reports):
                scores[index] = self._score_row(index, report)
        return scores

    def _score_row(self, index: int, report: CodeTestReport) -> float | None:
        if report.ran_no_check:
            # Fail closed: a test that checks nothing would pass any program.
            which = [i for i, outcome in enumerate(report.outcomes) if outcome.status == "no_check"]
            _warn_once(
                f"row {index} of the batch (column {self.tests_column!r}): test(s) {which} ran no check (no "
                "assert ran, no check(...) call, no unittest test method, no output compared), so they would "
                "pass any program. Such rows score None (cannot judge). Fix the column: make each test assert "
                "something about the program (call `check(<function>)` after defining it, run the unittest "
                "TestCase, or give stdin/stdout pairs), or pass tests_format=... naming the dataset's format."
            )
            return None
        return self._score(report)
