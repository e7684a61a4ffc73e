"""CodeContests: `public_tests` / `private_tests` / `generated_tests`, each `{"input": [...], "output": [...]}`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import RowTests, TestsFormatError, _json_value, _pairs


def _codecontests(row: Mapping[str, Any]) -> RowTests:
    tests = []
    for column in ("public_tests", "private_tests", "generated_tests"):
        value = _json_value(row.get(column), column)
        if not value:
            continue
        if not isinstance(value, Mapping) or "input" not in value or "output" not in value:
            raise TestsFormatError(f"{column} must be a mapping with `input` and `output` lists")
        tests += _pairs(list(value["input"]), list(value["output"]), column).tests
    return RowTests(tests)
