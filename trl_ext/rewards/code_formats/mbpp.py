"""MBPP: a `test_list` of asserts (with `test_setup_code`, `test_imports`); MBPP+: a `test` program as well."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...sandbox.testing import CodeTest, assert_test
from .common import RowTests, TestsFormatError, _json_value, _text


def _mbpp(row: Mapping[str, Any]) -> RowTests:
    test_list = _json_value(row["test_list"], "test_list")
    if not isinstance(test_list, list) or not all(isinstance(t, str) for t in test_list):
        raise TestsFormatError("test_list must be a list of assert statements")
    imports = row.get("test_imports") or []
    setup = "\n".join([*(imports if isinstance(imports, list) else [str(imports)]), _text(row.get("test_setup_code") or "")])
    if setup.strip():
        return RowTests([CodeTest("statement", f"{setup.strip()}\n{test}") for test in test_list if test.strip()])
    try:
        return RowTests([assert_test(test) for test in test_list if test.strip()])
    except SyntaxError as error:
        raise TestsFormatError(f"a test_list statement does not parse ({error.msg})") from None


def _mbppplus(row: Mapping[str, Any]) -> RowTests:
    return RowTests([CodeTest("statement", _text(row["test"]))])
