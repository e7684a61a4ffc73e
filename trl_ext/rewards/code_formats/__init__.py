"""The public code datasets' test columns, read as they are: one small pure converter per format.

`row_tests(row, tests_format)` turns one dataset row (column name -> value) into `RowTests`: the tests the
sandbox runs, plus what the format implies (code to put before the program, its language, a checker, how
outputs compare). `detect_format(row)` names the format from the row's columns and their shape; a row that
fits no format, or several, is an error naming the row's columns and the candidates.

| format          | columns                                                          |
|-----------------|------------------------------------------------------------------|
| tests           | `tests`: asserts, stdin/stdout pairs, `{"inputs", "outputs"}` ... |
| humaneval       | `test` (defines `check(candidate)`) + `entry_point`              |
| leetcodedataset | `test` + `entry_point` `Solution().method` + `prompt` (header)    |
| mbpp            | `test_list` (+ `test_setup_code`, `test_imports`)                |
| mbppplus        | `test_list` + `test` (a program calling its `assertion` helper)  |
| apps            | `input_output` (JSON: `inputs`/`outputs`, `fn_name` call-based)  |
| codecontests    | `public_tests` / `private_tests` / `generated_tests`             |
| livecodebench   | `public_test_cases` (+ compressed `private_test_cases`, `metadata`)|
| openr1          | `verification_info` (`language`, `test_cases`)                   |
| kodcode         | `test`: pytest-style functions, `from solution import ...`        |
| bigcodebench    | `test`: `class TestCases(unittest.TestCase)`                      |

Each converter lives in the module of its dataset family (`humaneval`, `leetcode`, `mbpp`, `apps`, `codecontests`,
`livecodebench`, `openr1`, `kodcode`, `bigcodebench`; the generic `tests` column in `tests_column`), the row
types and shared helpers in `common`, format detection in `detection`; `FORMATS` maps each format's name to its
converter.

Everything here is plain data in, plain data out: no dataset code runs in this process (LiveCodeBench's
pickled test cases are read by parsing the pickle's opcodes, never by unpickling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .apps import _apps_tests
from .bigcodebench import _bigcodebench, unittest_tests
from .codecontests import _codecontests
from .common import LIVECODEBENCH_HEADER, SORTEDCONTAINERS_IMPORT, RowTests, TestsFormatError, header_for
from .detection import candidate_formats, detect_format
from .humaneval import _humaneval
from .kodcode import _kodcode, pytest_tests
from .leetcode import _leetcodedataset
from .livecodebench import _livecodebench, decode_livecodebench_tests
from .mbpp import _mbpp, _mbppplus
from .openr1 import _openr1
from .tests_column import _from_tests_column

__all__ = [
    "FORMATS",
    "LIVECODEBENCH_HEADER",
    "SORTEDCONTAINERS_IMPORT",
    "RowTests",
    "TestsFormatError",
    "candidate_formats",
    "decode_livecodebench_tests",
    "detect_format",
    "format_problems",
    "header_for",
    "pytest_tests",
    "row_tests",
    "unittest_tests",
]


FORMATS = {
    "tests": _from_tests_column,  # called with the tests column's value
    "humaneval": _humaneval,
    "leetcodedataset": _leetcodedataset,
    "mbpp": _mbpp,
    "mbppplus": _mbppplus,
    "apps": lambda row: _apps_tests(row["input_output"]),
    "codecontests": _codecontests,
    "livecodebench": _livecodebench,
    "openr1": _openr1,
    "kodcode": _kodcode,
    "bigcodebench": _bigcodebench,
}


def row_tests(row: Mapping[str, Any], tests_format: str, tests_column: str = "tests") -> RowTests:
    """The tests of one row in `tests_format`. Raises `TestsFormatError` when the row cannot be read so."""
    if tests_format not in FORMATS:
        raise TestsFormatError(f"unknown tests_format {tests_format!r}; formats: {sorted(FORMATS)}")
    try:
        if tests_format == "tests":
            return _from_tests_column(row[tests_column], row)
        return FORMATS[tests_format](row)
    except KeyError as error:
        raise TestsFormatError(f"format {tests_format!r} needs the column {error.args[0]!r}") from None
    except (TypeError, AttributeError) as error:
        raise TestsFormatError(f"format {tests_format!r}: the row's values have the wrong shape ({error})") from None


def format_problems(
    rows: Sequence[Mapping[str, Any]], column_names: set[str], tests_format: str, tests_column: str
) -> list[str]:
    """Why the `code` reward could not read tests in a dataset with these columns and first rows (empty when it
    can): no format's columns, columns that fit several formats, or a first row its format cannot read."""
    if tests_format == "tests" or (tests_format == "auto" and tests_column in column_names):
        return [] if tests_column in column_names else [f"reads column {tests_column!r} (argument tests_column)"]
    if not rows:  # a stream: its rows are read when scoring
        return []
    for index, row in enumerate(rows):
        try:
            if tests_format == "auto":
                found = candidate_formats(row, tests_column)
                if len(found) > 1:
                    return [f"row {index}'s columns fit several test formats {found}: pass "
                            "tests_format=<one of them> (in YAML: `code:tests_format=<format>`)"]
                if not found:
                    continue
                row_tests(row, found[0], tests_column)
            else:
                row_tests(row, tests_format, tests_column)
            return []
        except TestsFormatError as error:
            return [f"row {index} cannot be read as {tests_format!r} tests: {error}"]
    return [
        f"finds no test column in the first rows (the formats it reads: {sorted(FORMATS)}, see docs/rewards/code.md, "
        "read from columns such as `tests`, `test` + `entry_point`, `test_list`, `input_output`, `public_tests`, "
        "`public_test_cases`, `verification_info`); add one, pass tests_format=<format>, or tests_column=<column> "
        "for a column of asserts or stdin/stdout pairs"
    ]
