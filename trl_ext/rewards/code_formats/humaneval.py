"""HumanEval (and HumanEval+): a `test` column defining `check(candidate)`, called with the `entry_point`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...sandbox.testing import CodeTest
from .common import RowTests, TestsFormatError, _text


def _humaneval(row: Mapping[str, Any]) -> RowTests:
    entry_point = _entry_point(row)
    return RowTests([CodeTest("statement", f"{_text(row['test'])}\n\ncheck({entry_point})\n")])


def _entry_point(row: Mapping[str, Any]) -> str:
    entry_point = str(row.get("entry_point") or "").strip()
    if not re.fullmatch(r"(Solution\(\)\.)?[A-Za-z_]\w*", entry_point):
        raise TestsFormatError(f"entry_point must name the function under test, got {entry_point!r}")
    return entry_point
