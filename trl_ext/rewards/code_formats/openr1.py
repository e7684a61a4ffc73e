"""open-r1: a `verification_info` object with the `language` and its `test_cases` (stdin/stdout or calls)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import RowTests, TestsFormatError, _call_test, _identifier, _json_value, _stdio


def _openr1(row: Mapping[str, Any]) -> RowTests:
    info = _json_value(row["verification_info"], "verification_info")
    if not isinstance(info, Mapping) or "test_cases" not in info:
        raise TestsFormatError("verification_info must be an object with `test_cases` (and `language`)")
    tests = []
    for case in _json_value(info["test_cases"], "verification_info.test_cases") or []:
        kind = case.get("type", "stdin_stdout")
        if kind == "stdin_stdout":
            tests.append(_stdio(case.get("input", ""), case.get("output", "")))
        elif kind == "function_call" and info.get("fn_name"):
            tests.append(_call_test(_identifier(info["fn_name"], "verification_info.fn_name"),
                                    _json_value(case["input"], "function input"), [_json_value(case["output"], "output")]))
        else:
            raise TestsFormatError(f"verification_info: test type {kind!r} is not supported")
    language = info.get("language")
    return RowTests(tests, language=str(language) if language else None)
