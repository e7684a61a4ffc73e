"""BigCodeBench: a `test` column holding `class TestCases(unittest.TestCase)`, one test per test method."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ...sandbox.instrumentation import RUNNER_END
from ...sandbox.testing import CodeTest
from .common import RowTests, _names_test_case, _parse, _text


# Runs one method of a unittest.TestCase class as unittest would (class and instance fixtures, cleanups, `patch`
# decorators), by calling them: no TestResult, TestSuite or outcome object decides the verdict, so a program that
# patches those changes nothing; whatever the test raises (a failed assertion, SkipTest) fails it. Its assertion
# calls are counted as checks where they are written (`instrument_checks`), and the values a comparing assertion
# receives go through the harness's plain-data guard first, as an assert's do.
_UNITTEST_RUNNER = '''
def __trl_ext_run_unittest__(class_name, method_name):
    comparing = ("assertEqual", "assertNotEqual", "assertAlmostEqual", "assertNotAlmostEqual", "assertGreater",
                 "assertGreaterEqual", "assertLess", "assertLessEqual", "assertIn", "assertNotIn", "assertCountEqual",
                 "assertListEqual", "assertTupleEqual", "assertDictEqual", "assertSetEqual", "assertSequenceEqual",
                 "assertMultiLineEqual", "assertTrue", "assertFalse", "assertEquals", "assertNotEquals",
                 "assertAlmostEquals", "assertDictContainsSubset")
    def guarded(method):
        def guarded_call(*args, **kwargs):
            args = [__trl_ext_value__(argument) for argument in args]
            kwargs = {key: __trl_ext_value__(argument) for key, argument in kwargs.items()}
            return method(*args, **kwargs)
        return guarded_call
    cls = globals()[class_name]
    case = cls(method_name)
    for name in comparing:
        method = getattr(case, name, None)
        if callable(method):
            setattr(case, name, guarded(method))
    cls.setUpClass()
    try:
        case.setUp()
        try:
            getattr(case, method_name)()
        finally:
            case.tearDown()
            case.doCleanups()
    finally:
        cls.tearDownClass()
        cls.doClassCleanups()
''' + RUNNER_END + "\n"


def unittest_tests(source: str) -> list[CodeTest]:
    """One statement test per `test*` method of each `unittest.TestCase` subclass in `source`, run by unittest
    in the sandbox (setUp, class fixtures, `unittest.mock.patch` decorators work as usual)."""
    tree = _parse(source, "the unittest test code")
    tests = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(_names_test_case(base) for base in node.bases):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    call = f"\n__trl_ext_run_unittest__({node.name!r}, {item.name!r})\n"
                    tests.append(CodeTest("statement", _UNITTEST_RUNNER + "\n" + source + call))
    return tests


def _bigcodebench(row: Mapping[str, Any]) -> RowTests:
    return RowTests(unittest_tests(_text(row["test"])))
