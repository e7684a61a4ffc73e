"""LeetCodeDataset: HumanEval's `test`/`entry_point` shape with `Solution().method`, its `prompt` the header."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import LIVECODEBENCH_HEADER, RowTests, _text
from .humaneval import _humaneval


def _leetcodedataset(row: Mapping[str, Any]) -> RowTests:
    header = _text(row.get("prompt") or "")
    return RowTests(_humaneval(row).tests, prelude=(header + "\n") if header.strip() else LIVECODEBENCH_HEADER)
