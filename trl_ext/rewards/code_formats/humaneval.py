"""HumanEval (and HumanEval+): a `test` column defining `check(candidate)`, called with the `entry_point`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...sandbox.testing import CodeTest
from .common import RowTests, TestsFormatError, _text


def _humaneval(row: Mapping[str, Any]) -> RowTests:
    """The `check` call; and, when the row's `prompt` is the function's signature and docstring (a string, as
    HumanEval ships it), that prompt for completions that are the function's body only."""
    entry_point = _entry_point(row)
    prompt = row.get("prompt")
    continues = prompt if isinstance(prompt, str) and re.search(rf"def\s+{re.escape(entry_point)}\s*\(", prompt) else ""
    return RowTests([CodeTest("statement", f"{_text(row['test'])}\n\ncheck({entry_point})\n")],
                    continues=continues, entry_point=entry_point)


def _entry_point(row: Mapping[str, Any]) -> str:
    entry_point = str(row.get("entry_point") or "").strip()
    if not re.fullmatch(r"(Solution\(\)\.)?[A-Za-z_]\w*", entry_point):
        raise TestsFormatError(f"entry_point must name the function under test, got {entry_point!r}")
    return entry_point
