"""The `code` reward: the completion's program runs against the dataset's tests in the sandbox.

The row's tests are read as the dataset stores them (`trl_ext.rewards.code_formats`: HumanEval, MBPP/MBPP+,
APPS/TACO, CodeContests, LiveCodeBench, open-r1, LeetCodeDataset, rllm/DeepCoder, KodCode, BigCodeBench, and the
generic `tests` column of asserts or stdin/stdout pairs), detected from the row's columns or named with
`tests_format=`. The score is the fraction of tests passed (`partial_credit=True`) or all-or-nothing, mapped
onto the scoring's correct/incorrect values. A row without tests, with tests that cannot be read, or whose tests
run no check at all scores `None` ("cannot judge"), with a warning naming the row.

Programs are Python, or C++ (`language="cpp"`, per row from `language_column` or the format), which is compiled
once per completion inside the sandbox and judged on stdin/stdout tests. Outputs compare by line, token, number
(with tolerances) or the APPS rule, or are judged by a per-row checker program. How tests run and why a program
cannot fake a pass is the sandbox package's business: see `trl_ext.sandbox.testing` and
`trl_ext/sandbox/harness.py`. This module only extracts the program from the completion, picks the format, and
scores. See docs/rewards/code.md.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ..judge_service.client import JudgeServers, parse_executor
from ..judge_service.engines import engine_for
from ..judge_service.protocol import REWARD_SETTINGS
from ..sandbox import Sandbox, SandboxLimits
from ..sandbox.cpp_headers import precompiled_headers_root
from ..sandbox.testing import (
    CHECKER_ORDERS,
    DEFAULT_CPP_FLAGS,
    LANGUAGES,
    OUTPUT_MATCHES,
    Checker,
    CodeTest,
    CodeTestReport,
    TestOutcome,
    assert_test,  # noqa: F401 - re-exported
    cpp_compiler,
    imported_modules,  # noqa: F401 - re-exported
    outputs_match,
    run_code_tests,
)
from .base import TRAINER_KEYS, Reward, dataset_column, scores_for
from .code_extraction import defines, extract_cpp_code, extract_python_code
from .code_packages import needed_packages, packages_problem
from .code_warnings import _warned, collected_warnings  # noqa: F401 - re-exported
from .code_warnings import cannot_judge as _cannot_judge
from .code_warnings import warn_once as _warn_once
from .code_formats import (
    FORMATS, RowTests, TestsFormatError, candidate_formats, detect_format, format_problems, header_for, row_tests,
)
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

# Names a `language_column` value may take, by language.
_LANGUAGE_NAMES = {
    "python": "python", "py": "python", "python3": "python", "py3": "python",
    "cpp": "cpp", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "g++": "cpp", "cpp17": "cpp", "c++17": "cpp",
}


# ---------------------------------------------------------------------------------------------------- tests


def parse_tests(tests: Any) -> list[CodeTest] | None:
    """The tests of one `tests` column value, or `None` when there are none or they cannot be read.

    Accepts a list of Python test statements (usually asserts), a list of `{"input", "output"}` mappings, a
    JSON string of either, a block of Python (each top-level assert becomes a test; a unittest `TestCase` or
    pytest-style test functions become one test each; any other block is one test), APPS/TACO's
    `{"inputs": [...], "outputs": [...]}` (with `fn_name`: call-based), `{"input": [...], "output": [...]}`
    lists, and rllm's `{"functional": code}`. See `trl_ext.rewards.code_formats` for every dataset format.
    """
    if tests is None or (isinstance(tests, (str, list, tuple, dict)) and not (tests.strip() if isinstance(tests, str) else tests)):
        return None
    try:
        return row_tests({"tests": tests}, "tests").tests or None
    except TestsFormatError as error:
        return _cannot_judge(str(error))


# --------------------------------------------------------------------------------------------------- reward


@register_reward(
    "code",
    aliases=("code_tests",),
    description="Python or C++ code in the completion passes the dataset's tests (HumanEval, MBPP, APPS/TACO, "
    "CodeContests, LiveCodeBench, KodCode, BigCodeBench, open-r1 ... read as they are), run in a sandbox.",
    pooled=True,
)
class CodeReward(Reward):
    """Runs the completion's program against the row's tests in the sandbox; scores the tests passed.

    Parameters:
        tests_column: Dataset column of the generic "tests" format (see `parse_tests`).
        tests_format: How the row's tests are read: "auto" (default) detects the format from the row's columns
            and their shape; or one of `trl_ext.rewards.code_formats.FORMATS` ("humaneval", "mbpp", "apps",
            "codecontests", "livecodebench", "openr1", "kodcode", "bigcodebench", ...). A row that fits several
            formats, or a batch with none of their columns, is an error naming the row and the candidates.
        partial_credit: Score the fraction of tests passed (True) or all-or-nothing (False). The fraction maps
            linearly onto the scoring: `incorrect + fraction * (correct - incorrect)`.
        scoring: "binary" (1 correct / 0 incorrect) or "dapo" (+1 / -1).
        timeout: Wall-clock seconds per test (also its CPU-time limit, rounded up).
        memory_mb: Address-space limit per process, in MiB.
        max_processes: Processes and threads a program may have at once.
        max_output_bytes: Stdout kept per stdin/stdout test; a program printing more fails that test.
        output_match: How stdin/stdout outputs compare: "lines", "tokens", "stripped", "exact", "numbers"
            (tokens, numbers within `rel_tol`/`abs_tol`) or "apps" (lines, else tokens, else numbers). Default:
            the format's own rule ("apps" for APPS/TACO rows), else "lines".
        rel_tol, abs_tol: Tolerances of "numbers" and "apps" (default 1e-6 each).
        tolerance_column: Dataset column with a per-row tolerance: a number (both tolerances) or a mapping with
            `rel_tol`/`abs_tol` (and optionally `output_match`); rows without a value use the reward's.
        checker_column: Dataset column with a per-row checker program judging each stdin/stdout test: its
            source (C++ when it `#include`s, else Python) or `{"language", "source"}`; run in the sandbox as
            `checker <input> <expected> <actual>`, exit status 0 accepts.
        checker_order: "input expected actual" (default) or "testlib" (`<input> <output> <answer>`).
        isolation: Sandbox isolation, see `Sandbox`: "auto" (bubblewrap; raises at construction when nothing
            can isolate the file system), or the explicit opt-ins for trusted code "unshare" and "none".
        num_workers: Programs run at the same time; defaults to the usable CPU cores.
        site_packages: Whether Python programs may import installed packages (NumPy...), not only the standard
            library. "auto" (default): the rows whose tests import a module outside the standard library (real
            MBPP+ rows import NumPy, BigCodeBench's pandas...) run with installed packages, the others without.
            With False such rows score None (cannot judge) with a warning; so do rows whose tests import a
            module that is not installed.
        language: Language of every program, "python" or "cpp" (stdin/stdout tests only; needs `g++`).
        language_column: Dataset column giving each row's language ("python", "cpp", "c++", ...), overriding
            `language` and the format's own; an empty value means the format's or `language`.
        compile_timeout: Seconds (wall clock and CPU) the C++ compiler may take per completion.
        compile_memory_mb: Address-space limit of each compiler process, in MiB.
        cpp_flags: Compiler flags, default `-std=c++17 -O2 -pipe`.
        precompiled_headers: Read the standard header a C++ program includes first (`<bits/stdc++.h>`,
            `<iostream>`...) precompiled, built once per compiler and flags into the user's cache on the
            host, from the system's headers only (`trl_ext.sandbox.cpp_headers`): the same program, compiled
            in about a third of the time. GCC falls back to the header itself wherever the precompiled one
            does not apply.
        reuse_sandbox: Judge programs in sandboxes that stay up (one per worker thread): the harness's
            interpreter is started once, forks each test as a fresh sandbox's would, and after each program
            every other process is killed and the sandbox's scratch directories and IPC objects are emptied.
            About 5x the runs per second of a fresh sandbox per program (`False`), at the same isolation from
            the host; see docs/rewards/code.md for what the two share and do not.
        executor: Where programs are judged: "local" (default, this machine's sandbox), or judge servers
            (`trl-ext sandbox serve`) on other machines: a URL, a comma-separated list or list of them, or a file
            listing one per line. The batch is spread over them by load; a server that dies or hangs has its jobs
            judged by another; a job no server could judge scores None with a warning. Or an execution service
            for stdin/stdout rows: "sandboxfusion+http://host:8080", "piston+http://host:2000/api/v2". See
            docs/rewards/judge-servers.md.
        executor_token: The servers' shared secret (default: the TRL_EXT_JUDGE_TOKEN environment variable).
        executor_timeout: Seconds a judge server may stay silent (it sends a space every 2 s while it judges)
            before it is taken for hung and the program is sent to another; for an execution service, seconds
            beyond a test's own time limits.

    A test that runs no check at all (a `check` function never called, a TestCase never run) would pass any
    program: such a row scores None ("cannot judge") with a warning naming the row, never 1.
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
        output_match: str | None = None,
        isolation: str = "auto",
        num_workers: int | None = None,
        site_packages: bool | str = "auto",
        language: str = "python",
        language_column: str | None = None,
        compile_timeout: float = 30.0,
        compile_memory_mb: int = 2048,
        cpp_flags: Sequence[str] = DEFAULT_CPP_FLAGS,
        tests_format: str = "auto",
        rel_tol: float | None = None,
        abs_tol: float | None = None,
        tolerance_column: str | None = None,
        checker_column: str | None = None,
        checker_order: str = "input expected actual",
        reuse_sandbox: bool = True,
        precompiled_headers: bool = True,
        executor: str | Sequence[str] = "local",
        executor_token: str | None = None,
        executor_timeout: float = 30.0,
    ):
        self.settings = {  # what a judge server needs to judge as this reward would (`trl_ext.judge_service`)
            name: value for name, value in locals().items() if name in REWARD_SETTINGS
        }
        if output_match is not None and output_match not in OUTPUT_MATCHES:
            raise ValueError(f"Reward 'code': output_match must be one of {OUTPUT_MATCHES}, got {output_match!r}.")
        if tests_format != "auto" and tests_format not in FORMATS:
            raise ValueError(
                f"Reward 'code': tests_format must be 'auto' or one of {sorted(FORMATS)}, got {tests_format!r}."
            )
        if checker_order not in CHECKER_ORDERS:
            raise ValueError(f"Reward 'code': checker_order must be one of {sorted(CHECKER_ORDERS)}, got {checker_order!r}.")
        for name, value in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
            if value is not None and not value >= 0:
                raise ValueError(f"Reward 'code': {name} must be a non-negative number or None, got {value!r}.")
        if not timeout > 0:
            raise ValueError(f"Reward 'code': timeout must be positive seconds, got {timeout!r}.")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"Reward 'code': num_workers must be at least 1 or None, got {num_workers!r}.")
        if language not in LANGUAGES:
            raise ValueError(f"Reward 'code': language must be one of {LANGUAGES}, got {language!r}.")
        if site_packages not in (True, False, "auto"):
            raise ValueError(f"Reward 'code': site_packages must be True, False or 'auto', got {site_packages!r}.")
        if not compile_timeout > 0:
            raise ValueError(f"Reward 'code': compile_timeout must be positive seconds, got {compile_timeout!r}.")
        self.executor = executor
        self._servers, self._engine = None, engine_for(executor, executor_timeout)
        if self._engine is not None and checker_column is not None:
            raise ValueError(f"Reward 'code': executor {executor!r} cannot run checker programs: judge such rows "
                             "locally or with judge servers (`trl-ext sandbox serve`).")
        if executor != "local" and self._engine is None:  # programs never run here: the servers check themselves
            self._servers = JudgeServers(parse_executor(executor), executor_token, silence_timeout=executor_timeout)
            self._servers.check()  # raises naming the servers when none answers or one refuses the token
        remote = self._servers is not None or self._engine is not None
        if (language == "cpp" or language_column is not None) and cpp_compiler() is None and not remote:
            which = "language='cpp'" if language == "cpp" else f"language_column={language_column!r}"
            raise RuntimeError(
                f"Reward 'code' with {which} compiles C++ with `g++`, which is not installed: "
                "`apt-get install g++` (Debian/Ubuntu) or `dnf install gcc-c++`."
            )
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="code")
        self.tests_column = tests_column
        self.tests_format = tests_format
        self.partial_credit = partial_credit
        self.scoring = scoring
        self.timeout = float(timeout)
        self.max_output_bytes = max_output_bytes
        self.output_match = output_match
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol
        self.tolerance_column = tolerance_column
        self.checker_column = checker_column
        self.checker_order = checker_order
        self.reuse_sandbox = reuse_sandbox
        self.num_workers = num_workers
        self.language = language
        self.language_column = language_column
        self.compile_timeout = float(compile_timeout)
        self.compile_memory_mb = compile_memory_mb
        self.cpp_flags = tuple(cpp_flags)
        self.precompiled_headers = precompiled_headers
        self.site_packages = site_packages
        # Raises `SandboxUnavailableError` here, before training, when nothing can isolate the file system.
        self.sandbox = None if remote else Sandbox(
            SandboxLimits(memory=memory_mb << 20, max_processes=max_processes, max_output=max_output_bytes),
            isolation=isolation,
            site_packages=site_packages is True,
            read_only_paths=self._precompiled_headers_mount(),
        )
        # With site_packages="auto": the same sandbox, with installed packages, for the rows whose tests need them.
        self._site_sandbox: Sandbox | None = None

    def _precompiled_headers_mount(self) -> list[str]:
        # The cache is made visible to the sandbox now: a sandbox that stays up keeps the mounts it started with.
        if not self.precompiled_headers or cpp_compiler() is None:
            return []
        root = precompiled_headers_root()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            logger.warning(
                "Reward 'code': C++ programs compile without precompiled headers (about 3x slower): cannot "
                "create %s (%s). Set TRL_EXT_PCH_DIR to a writable directory.", root, error.strerror or error
            )
            return []
        return [str(root)]

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        # TRL passes the dataset's `prompt` column as `prompts`: a HumanEval row's prompt is the code a base
        # model's completion continues (`RowTests.continues`).
        if prompts is not None and "prompt" not in columns:
            columns["prompt"] = prompts
        return super().__call__(prompts, completions, completion_ids, **columns)

    def dataset_problems(self, column_names: Sequence[str], rows: Sequence[Mapping[str, Any]] = ()) -> list[str]:
        """What this reward cannot read in a dataset with these columns (and these first rows), checked by the
        trainers before training: the columns its `*_column` arguments name, and a test format. With
        `tests_format="auto"` the format is detected from the rows as when scoring; an explicit `tests_format`
        (or a `tests_column` the dataset has) is read as asked."""
        names = set(column_names)
        problems = [
            f"reads column {column!r} (argument {argument})"
            for argument, column in vars(self).items()
            if argument.endswith("_column") and argument != "tests_column" and isinstance(column, str)
            and column not in names
        ]
        return problems + format_problems(rows, names, self.tests_format, self.tests_column)

    # ------------------------------------------------------------------------------------------ one row

    def evaluate(self, completion_text: str, tests: Any, language: str | None = None) -> CodeTestReport | None:
        """Per-test verdicts for one completion (text) and one `tests` value in the generic format, in
        `language` (default: the reward's); `None` if the tests are unusable."""
        return self.evaluate_row(completion_text, {self.tests_column: tests}, language=language, tests_format="tests")

    def evaluate_row(
        self, completion_text: str, row: Mapping[str, Any], *, language: str | None = None,
        tests_format: str | None = None, index: int = 0,
    ) -> CodeTestReport | None:
        """Per-test verdicts for one completion and one dataset row (column name -> value) in any format;
        `None` if the row's tests are unusable (with a warning)."""
        if self._servers is not None:
            settings = {**self.settings, "tests_format": tests_format or self.tests_format}
            return self._servers.score([completion_text], [row], [language], settings, _warn_once)[0][1]
        job = self._job(completion_text, row, language, tests_format or self.tests_format, index)
        return None if job is None else self._evaluate(*job)

    def score_row(
        self, completion_text: str, row: Mapping[str, Any], language: str | None = None, index: int = 0,
    ) -> tuple[float | None, CodeTestReport | None]:
        """The score and verdicts of one completion on one row (the `index`-th of its batch), as a batch scores
        it: what a judge server answers for one job (`trl_ext.judge_service`)."""
        job = self._job(completion_text, row, language, self.tests_format, index)
        if job is None:
            return None, None
        report = self._evaluate(*job)
        return self._score_row(index, report), report

    def _job(self, text: str, row: Mapping[str, Any], language: Any, tests_format: str, index: int):
        """(program, tests, language, checker) for one row, or None (cannot judge, warned)."""
        if tests_format == "auto":
            tests_format = detect_format(row, self.tests_column, index)  # raises when ambiguous
            if tests_format is None:
                return None
        try:
            read = row_tests(row, tests_format, self.tests_column)
        except TestsFormatError as error:
            return _cannot_judge(f"row {index} ({tests_format} format): {error}")
        if not read.tests:
            return None
        language = self._row_language(language if _filled(language) else read.language)
        if language is None:
            return None
        tests = self._with_comparison(read, row, index)
        if tests is None:
            return None
        if language == "cpp":
            if any(test.kind != "stdio" for test in tests):
                return _cannot_judge(f"row {index}: C++ rows need stdin/stdout tests, not assert statements")
            if cpp_compiler() is None:
                return _cannot_judge(f"row {index} is C++, and `g++` is not installed (apt-get install g++)")
        code = self._extract(text, language)
        if language == "python" and read.continues and not defines(code, read.entry_point):
            code = read.continues + code  # a function body after its prompt, as HumanEval's harness runs it
        header = header_for(read.prelude, code) if code.strip() and language == "python" else ""
        if self._engine is not None:
            if any(test.kind != "stdio" for test in tests):
                return _cannot_judge(f"row {index}: executor {self._engine.name} judges stdin/stdout tests only (a "
                                     "test run in the program's process is within its reach there); serve this "
                                     "judge for assert tests (`trl-ext sandbox serve`)")
            sandbox = None
        elif language == "python":  # the header counts as the tests do: `SortedList` needs the installed packages
            sandbox = self._sandbox_for([*tests, CodeTest("statement", header)], index)
            if sandbox is None:
                return None
        else:
            sandbox = self.sandbox
        checker = self._row_checker(row, index)
        if checker is False:
            return None
        return (header + "\n" + code if header else code), tests, language, checker, sandbox

    def _sandbox_for(self, tests: list[CodeTest], index: int) -> Sandbox | None:
        """The sandbox a Python row runs in: with installed packages when its tests (or the header put before the
        program) import any (and may), or None (cannot judge, warned) when they cannot be offered."""
        try:
            packages = needed_packages(tests)
        except SyntaxError as error:
            return _cannot_judge(f"row {index}: a test does not parse as Python ({error.msg}, line {error.lineno})")
        if not packages:
            return self.sandbox
        problem = packages_problem(packages, self.site_packages, self.sandbox.python == os.path.abspath(sys.executable))
        if problem is not None:
            return _cannot_judge(f"row {index}: {problem}")
        if self.site_packages is True:
            return self.sandbox
        if self._site_sandbox is None:
            self._site_sandbox = Sandbox(
                self.sandbox.limits, isolation=self.sandbox.backend, python=self.sandbox.python,
                site_packages=True, read_only_paths=self.sandbox.read_only_paths,
            )
        return self._site_sandbox

    def _with_comparison(self, read: RowTests, row: Mapping[str, Any], index: int) -> list[CodeTest] | None:
        output_match, rel_tol, abs_tol = self.output_match or read.output_match, self.rel_tol, self.abs_tol
        if self.tolerance_column is not None and _filled(row.get(self.tolerance_column)):
            value = row[self.tolerance_column]
            if isinstance(value, Mapping):
                rel_tol, abs_tol = value.get("rel_tol", rel_tol), value.get("abs_tol", abs_tol)
                output_match = value.get("output_match", output_match or "numbers")
            elif isinstance(value, (int, float)) and value >= 0:
                rel_tol = abs_tol = float(value)
                output_match = output_match if output_match in ("numbers", "apps") else "numbers"
            else:
                return _cannot_judge(
                    f"row {index}: column {self.tolerance_column!r} must hold a number or a mapping with "
                    f"rel_tol/abs_tol, got {value!r}"
                )
            if output_match not in OUTPUT_MATCHES:
                return _cannot_judge(f"row {index}: output_match {output_match!r} is not one of {OUTPUT_MATCHES}")
        return [
            replace(test, output_match=output_match, rel_tol=rel_tol, abs_tol=abs_tol) if test.kind == "stdio" else test
            for test in read.tests
        ]

    def _row_checker(self, row: Mapping[str, Any], index: int) -> Checker | None | bool:
        if self.checker_column is None or not _filled(row.get(self.checker_column)):
            return None
        value = row[self.checker_column]
        source, language = value, None
        if isinstance(value, Mapping):
            source = value.get("source") or value.get("checker") or ""
            language = value.get("language")
        if not isinstance(source, str) or not source.strip():
            _cannot_judge(f"row {index}: column {self.checker_column!r} holds no checker source")
            return False
        language = _LANGUAGE_NAMES.get(str(language).lower()) if language else ("cpp" if "#include" in source else "python")
        if language is None or (language == "cpp" and cpp_compiler() is None):
            _cannot_judge(f"row {index}: the checker's language cannot run here ({value.get('language')!r})")
            return False
        return Checker(source, language, self.checker_order)

    def _row_language(self, value: Any) -> str | None:
        if not _filled(value):
            return self.language
        language = _LANGUAGE_NAMES.get(str(value).strip().lower())
        if language is None:
            return _cannot_judge(f"unknown language {value!r} (column {self.language_column!r} or the row's format)")
        return language

    @staticmethod
    def _extract(text: str, language: str) -> str:
        return extract_cpp_code(text) if language == "cpp" else extract_python_code(text)

    def _evaluate(
        self, code: str, tests: list[CodeTest], language: str = "python", checker: Checker | None = None,
        sandbox: Sandbox | None = None,
    ) -> CodeTestReport:
        sandbox = sandbox or self.sandbox
        if not code.strip():
            outcomes = tuple(TestOutcome(False, "no_code", f"no {language} code in the completion") for _ in tests)
            return CodeTestReport(outcomes, sandbox.isolation if sandbox else str(self.executor), 0.0)
        if self._engine is not None:
            return self._engine.run_tests(
                code, tests, language, timeout=self.timeout, memory_mb=self.settings["memory_mb"],
                compile_timeout=self.compile_timeout, max_output=self.max_output_bytes,
                output_match=self.output_match or "lines", stop_on_failure=not self.partial_credit,
            )
        return run_code_tests(
            code,
            tests,
            sandbox=sandbox,
            timeout=self.timeout,
            max_output=self.max_output_bytes,
            output_match=self.output_match or "lines",
            stop_on_failure=not self.partial_credit,
            language=language,
            compile_timeout=self.compile_timeout,
            compile_memory=self.compile_memory_mb << 20,
            cpp_flags=self.cpp_flags,
            checker=checker,
            reuse=self.reuse_sandbox,
            precompiled_headers=self.precompiled_headers,
        )

    def _score(self, report: CodeTestReport) -> float:
        fraction = report.fraction_passed
        if not self.partial_credit:
            fraction = 1.0 if fraction == 1.0 else 0.0
        return self.incorrect_score + fraction * (self.correct_score - self.incorrect_score)

    # ------------------------------------------------------------------------------------------ a batch

    def _rows(self, columns: Mapping[str, Any], count: int) -> list[dict[str, Any]]:
        """The batch as rows (column name -> value), with an error naming the columns when none holds tests."""
        names = [
            name for name, values in columns.items()
            if name not in TRAINER_KEYS and isinstance(values, Sequence) and not isinstance(values, str)
            and len(values) == count
        ]
        rows = [{name: columns[name][i] for name in names} for i in range(count)]
        if self.tests_format == "tests" or (self.tests_format == "auto" and self.tests_column in names):
            dataset_column(columns, self.tests_column, count, reward=self.__name__, argument="tests_column")
        elif self.tests_format == "auto" and rows and not any(candidate_formats(row, self.tests_column) for row in rows):
            available = sorted(name for name in columns if name not in TRAINER_KEYS)
            raise KeyError(
                f"Reward 'code' finds no test column in the batch (columns {available}). It reads the formats "
                f"{sorted(FORMATS)} by their columns (`tests`, `test` + `entry_point`, `test_list`, `input_output`, "
                "`public_tests`, `public_test_cases`, `verification_info`, ...): add one, or pass "
                "tests_column=<column> for a column of asserts or stdin/stdout pairs."
            )
        return rows

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        rows = self._rows(columns, len(texts))
        if self.language_column is not None:
            languages = dataset_column(
                columns, self.language_column, len(texts), reward=self.__name__, argument="language_column"
            )
        else:
            languages = [None] * len(texts)
        if self._servers is not None:
            return [score for score, _ in self._servers.score(texts, rows, languages, self.settings, _warn_once)]
        jobs: dict[tuple, tuple[tuple, list[int]]] = {}  # the same program on the same tests runs once
        for index, (text, row, row_language) in enumerate(zip(texts, rows, languages)):
            job = self._job(text, row, row_language, self.tests_format, index)
            if job is not None:
                jobs.setdefault(_job_key(job), (job, []))[1].append(index)
        scores: list[float | None] = [None] * len(texts)
        if not jobs:
            return scores
        workers = min(self.num_workers or default_num_workers(), len(jobs))

        def evaluate(entry):
            return self._evaluate(*entry[0])

        if workers == 1:  # one program, or one worker: no thread to start and join
            reports = list(map(evaluate, jobs.values()))
        else:  # threads only wait: every program runs in its own sandbox process
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-reward") as executor:
                reports = list(executor.map(evaluate, jobs.values()))
        for (_, indices), report in zip(jobs.values(), reports):
            scores[indices[0]] = self._score_row(indices[0], report)
            for index in indices[1:]:
                scores[index] = scores[indices[0]]
        return scores

    def _score_row(self, index: int, report: CodeTestReport) -> float | None:
        if report.checks_nothing:  # fail closed: it would pass any program (read from the test alone)
            which = [i for i, outcome in enumerate(report.outcomes) if outcome.status == "no_check"]
            _warn_once(
                f"row {index} of the batch: test(s) {which} check nothing (no assert, no assertion method, no raise "
                "that the test's code reaches), so they would pass any program. Such rows score None (cannot judge). "
                "Fix the column: make each test assert something about the program (call `check(<function>)` after "
                "defining it, run the unittest TestCase, or give stdin/stdout pairs), or pass tests_format=... "
                "naming the dataset's format."
            )
            return None
        if report.judge_failed is not None:
            _warn_once(f"row {index} of the batch: the judge failed, not the program ({report.judge_failed}), on a "
                       "fresh sandbox too; such rows score None (cannot judge). Check the machine: free space in the "
                       "temporary directory, memory (the OOM killer), processes killed from outside, `trl-ext sandbox`.")
            return None
        if report.isolation_unavailable:
            detail = next(o.detail for o in report.outcomes if o.status == "isolation_unavailable")
            _warn_once(
                f"row {index} of the batch: the sandbox could not isolate the program ({detail}), so it was not run; "
                "such rows score None (cannot judge). The sandbox's bubblewrap must allow `--cap-add CAP_SYS_ADMIN` "
                "(bubblewrap >= 0.4, in a user namespace or run by root), and a test that shares the program's "
                "process needs seccomp filters (Linux on x86_64 or aarch64)."
            )
            return None
        if report.checker_unusable:
            detail = next(outcome.detail for outcome in report.outcomes if outcome.status == "checker_error")
            _warn_once(
                f"row {index} of the batch: its checker program (column {self.checker_column!r}) does not compile, so "
                f"no output can be judged; such rows score None (cannot judge). Fix the checker: {detail}"
            )
            return None
        return self._score(report)


def _job_key(job: tuple) -> tuple:
    """What makes two jobs run the same: the program, its language, sandbox and checker, and every test's fields."""
    code, tests, language, checker, sandbox = job
    return code, language, id(sandbox), repr(checker), tuple(repr(vars(test)) for test in tests)


def _filled(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())
