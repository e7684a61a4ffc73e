"""Which format a row is in, judged by its columns and the shape of its `test` code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import TestsFormatError, _test_code_kind


def _present(row: Mapping[str, Any], column: str) -> bool:
    value = row.get(column)
    return value is not None and not (isinstance(value, (str, list, dict)) and not value)


def _is_apps_mapping(value: Any) -> bool:
    # APPS/TACO's `input_output` is a JSON object; LeetCodeDataset's column of the same name is a list of examples.
    if isinstance(value, str):
        return value.lstrip()[:1] == "{"
    return isinstance(value, Mapping)


def candidate_formats(row: Mapping[str, Any], tests_column: str = "tests") -> list[str]:
    """The formats whose columns this row has, judged by the columns and the shape of the `test` code."""
    found = []
    if _present(row, tests_column):
        found.append("tests")
    if _present(row, "test") and isinstance(row["test"], str):
        kind = _test_code_kind(row["test"])
        if _present(row, "test_list"):
            found.append("mbppplus")
        elif kind == "unittest":
            found.append("bigcodebench")
        elif kind == "pytest":
            found.append("kodcode")
        elif kind == "check" and _present(row, "entry_point"):
            leetcode = str(row["entry_point"]).startswith("Solution()")
            found.append("leetcodedataset" if leetcode else "humaneval")
    elif _present(row, "test_list"):
        found.append("mbpp")
    if _present(row, "input_output") and _is_apps_mapping(row["input_output"]):
        found.append("apps")
    if any(_present(row, column) for column in ("public_tests", "private_tests", "generated_tests")):
        found.append("codecontests")
    if _present(row, "public_test_cases") or _present(row, "private_test_cases"):
        found.append("livecodebench")
    if _present(row, "verification_info"):
        found.append("openr1")
    if "tests" in found and len(found) > 1 and tests_column not in ("tests",):
        found.remove("tests")  # an explicitly named tests column wins over the others
    return found


def detect_format(row: Mapping[str, Any], tests_column: str = "tests", index: int = 0) -> str | None:
    """The one format this row is in; None when the row has none of its test columns filled (no tests).
    Raises `TestsFormatError` naming the row, its columns and the candidates when it could be several."""
    found = candidate_formats(row, tests_column)
    if len(found) == 1:
        return found[0]
    if not found:
        return None
    raise TestsFormatError(
        f"row {index}: its columns {sorted(row)} fit several test formats {found}; pass tests_format=<one of "
        f"them> to the reward"
    )
