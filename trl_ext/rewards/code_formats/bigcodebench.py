"""BigCodeBench: a `test` column holding `class TestCases(unittest.TestCase)`, one test per test method."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ...sandbox.instrumentation import RUNNER_END
from ...sandbox.testing import CodeTest
from .common import RowTests, _names_test_case, _parse, _text


# Runs one method of a unittest.TestCase class, counting its assertion calls as checks (see harness.py). The
# values a comparing assertion receives go through the harness's plain-data guard first, as an assert's do.
_UNITTEST_RUNNER = '''
def __trl_ext_run_unittest__(class_name, method_name):
    import unittest
    import unittest.mock
    counted = [0]
    comparing = {"assertEqual", "assertNotEqual", "assertAlmostEqual", "assertNotAlmostEqual", "assertGreater",
                 "assertGreaterEqual", "assertLess", "assertLessEqual", "assertIn", "assertNotIn", "assertCountEqual",
                 "assertListEqual", "assertTupleEqual", "assertDictEqual", "assertSetEqual", "assertSequenceEqual",
                 "assertMultiLineEqual", "assertTrue", "assertFalse", "assertEquals", "assertNotEquals",
                 "assertAlmostEquals", "assertDictContainsSubset"}
    def counting(method, guarded=False):
        def counted_call(*args, **kwargs):
            if guarded:
                args = [__trl_ext_value__(argument) for argument in args]
                kwargs = {key: __trl_ext_value__(argument) for key, argument in kwargs.items()}
            result = method(*args, **kwargs)
            counted[0] += 1
            return result
        return counted_call
    for name in dir(unittest.mock.NonCallableMock):
        if name.startswith("assert_"):
            setattr(unittest.mock.NonCallableMock, name, counting(getattr(unittest.mock.NonCallableMock, name)))
    case = globals()[class_name](method_name)
    for name in dir(case):
        if name.startswith(("assert", "fail")) and name != "failureException":
            method = getattr(case, name)
            if callable(method) and not isinstance(method, type):
                setattr(case, name, counting(method, guarded=name in comparing))
    result = unittest.TestResult()
    unittest.TestSuite([case]).run(result)
    problems = result.errors + result.failures
    if problems:
        raise AssertionError(problems[0][1][-300:])
    if result.unexpectedSuccesses or result.testsRun != 1 or result.skipped:
        raise AssertionError(f"{class_name}.{method_name} did not run to a verdict")
    for _ in range(counted[0]):
        __trl_ext_check__()
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
