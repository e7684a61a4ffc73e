"""The generic `tests` column, in any of the shapes the datasets use for it (rllm/DeepCoder's included)."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...sandbox.testing import CodeTest, assert_test
from .apps import _apps_tests
from .bigcodebench import unittest_tests
from .common import (
    LIVECODEBENCH_HEADER,
    RowTests,
    TestsFormatError,
    _pairs,
    _parse,
    _stdio,
    _test_code_kind,
    _text,
    textwrap_dedent,
)
from .kodcode import pytest_tests
from .livecodebench import _livecodebench_cases


def _from_tests_column(value: Any, row: Mapping[str, Any]) -> RowTests:
    """The generic `tests` column: asserts, a block of Python, stdin/stdout pairs, `{"inputs", "outputs"}`,
    rllm/DeepCoder's lists with `testtype` (functional ones call `metadata.func_name`), `{"functional": code}`."""
    if value is None or (isinstance(value, (str, list, tuple, dict)) and not (value.strip() if isinstance(value, str) else value)):
        return RowTests([])
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{":
            try:
                return _from_tests_column(json.loads(text), row)
            except ValueError:
                pass
        tree = _parse(textwrap_dedent(text), "the tests block")
        if tree.body and all(isinstance(node, ast.Assert) for node in tree.body):
            source = textwrap_dedent(text)
            return RowTests([assert_test(ast.get_source_segment(source, node)) for node in tree.body])
        kind = _test_code_kind(textwrap_dedent(text))
        expanded = {"unittest": unittest_tests, "pytest": pytest_tests}.get(kind, lambda _: [])(textwrap_dedent(text))
        return RowTests(expanded or [CodeTest("statement", textwrap_dedent(text))])
    if isinstance(value, Mapping):
        if "functional" in value:  # rllm's LeetCode rows: test code that calls `check(...)` itself
            return RowTests([CodeTest("statement", _text(value["functional"]))], prelude=LIVECODEBENCH_HEADER)
        if "fn_name" in value or "inputs" in value:
            return _apps_tests(value)
        if "input" in value and "output" in value:
            inputs, outputs = value["input"], value["output"]
            if isinstance(inputs, list) and isinstance(outputs, list):  # CodeContests' shape: one test per pair
                return _pairs(inputs, outputs, "tests")
            return RowTests([_stdio(inputs, outputs)])
        raise TestsFormatError(f"a tests mapping needs `inputs`/`outputs`, `input`/`output` or `functional`, got {sorted(value)}")
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        items = list(value)
        if all(isinstance(item, str) for item in items):
            tests = []
            for item in items:
                kind = _test_code_kind(textwrap_dedent(item))
                if kind in ("unittest", "pytest"):  # a test file among the statements: one test per test method
                    expanded = (unittest_tests if kind == "unittest" else pytest_tests)(textwrap_dedent(item))
                    if expanded:
                        tests += expanded
                        continue
                try:
                    tests.append(assert_test(item))
                except SyntaxError as error:
                    raise TestsFormatError(f"a test statement does not parse ({error.msg})") from None
            return RowTests(tests)
        if all(isinstance(item, Mapping) and "input" in item and "output" in item for item in items):
            if any("testtype" in item for item in items):
                return _livecodebench_cases(items, row, "tests")
            return RowTests([_stdio(item["input"], item["output"]) for item in items])
        raise TestsFormatError("tests must be all strings (asserts) or all {'input', 'output'} mappings")
    raise TestsFormatError(f"tests of type {type(value).__name__} are not supported")
