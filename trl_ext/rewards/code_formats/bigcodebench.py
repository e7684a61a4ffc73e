"""BigCodeBench: a `test` column holding `class TestCases(unittest.TestCase)`, one test per test method."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ...sandbox.instrumentation import RUNNER_END
from ...sandbox.testing import CodeTest
from .common import RowTests, _names_test_case, _parse, _text


# Runs one method of a unittest.TestCase class as unittest would (class and instance fixtures, cleanups, `patch`
# decorators), by calling them: no TestResult, TestSuite or outcome object decides the verdict, and the assertion
# methods the test calls on `self` are the harness's own, bound before the test starts (they compare plain copies
# through the harness's comparison, as an assert does, and use nothing of unittest's): a program that patches
# unittest while it is called changes nothing. Whatever the test raises (a failed assertion, SkipTest) fails it.
# Assertion calls count as checks where the test writes them (`instrument_checks`).
_UNITTEST_RUNNER = '''
def __trl_ext_run_unittest__(class_name, method_name):
    import re
    search, is_instance, is_subclass, to_list = re.search, isinstance, issubclass, list
    def compared(operator, negated=False):
        def check(first, second, msg=None):
            if not __trl_ext_compare__(first, operator, second):
                __trl_ext_fail__(msg or f"{first!r} {operator} {second!r} is false")
        return check
    def truth(expected):
        def check(value, msg=None):
            if __trl_ext_truth__(value) is not expected:
                __trl_ext_fail__(msg or f"{value!r} is not {expected}")
        return check
    def almost(expected):
        def check(first, second, places=None, msg=None, delta=None):
            first, second = __trl_ext_value__(first), __trl_ext_value__(second)
            if first == second:
                close = True
            elif delta is not None:
                close = abs(first - second) <= delta
            else:
                close = round(abs(first - second), 7 if places is None else places) == 0
            if close is not expected:
                __trl_ext_fail__(msg or f"{first!r} and {second!r}: close is {close}")
        return check
    def identity(expected_none=None, same=None):
        def check(first, second=None, msg=None):
            holds = (first is None) is expected_none if same is None else (first is second) is same
            if not holds:
                __trl_ext_fail__(msg or f"{first!r} {second!r}")
        return check
    def instance(expected):
        def check(value, classes, msg=None):
            if is_instance(value, classes) is not expected:
                __trl_ext_fail__(msg or f"{value!r} isinstance {classes!r} is not {expected}")
        return check
    def count_equal(first, second, msg=None):
        rest = to_list(__trl_ext_value__(second))
        for item in to_list(__trl_ext_value__(first)):
            for index, other in enumerate(rest):
                if __trl_ext_compare__(item, "==", other):
                    del rest[index]
                    break
            else:
                __trl_ext_fail__(msg or f"{item!r} is missing")
        if rest:
            __trl_ext_fail__(msg or f"{rest!r} are extra")
    class Raises:
        def __init__(self, expected, pattern=None):
            self.expected, self.pattern, self.exception = expected, pattern, None
        def __enter__(self):
            return self
        def __exit__(self, kind, value, traceback):
            if kind is None:
                __trl_ext_fail__(f"{self.expected!r} not raised")
            if not is_subclass(kind, self.expected):
                return False
            if self.pattern is not None and not search(self.pattern, str(value)):
                __trl_ext_fail__(f"{str(value)!r} does not match {self.pattern!r}")
            self.exception = value
            return True
    def raised(context, args, kwargs):  # a context manager, or the call `args[0](*args[1:], **kwargs)` in one
        if not args:
            return context
        with context:
            args[0](*args[1:], **kwargs)
    def raises(expected, *args, **kwargs):
        return raised(Raises(expected), args, kwargs)
    def raises_matching(expected, pattern, *args, **kwargs):
        return raised(Raises(expected, pattern), args, kwargs)
    def fail(msg=None):
        __trl_ext_fail__(msg or "the test failed")
    equal = compared("==")
    own = {
        "assertEqual": equal, "assertEquals": equal, "assertListEqual": equal, "assertTupleEqual": equal,
        "assertDictEqual": equal, "assertSetEqual": equal, "assertSequenceEqual": equal,
        "assertMultiLineEqual": equal, "assertNotEqual": compared("!="), "assertNotEquals": compared("!="),
        "assertGreater": compared(">"), "assertGreaterEqual": compared(">="), "assertLess": compared("<"),
        "assertLessEqual": compared("<="), "assertIn": compared("in"), "assertNotIn": compared("not in"),
        "assertTrue": truth(True), "assertFalse": truth(False), "assertAlmostEqual": almost(True),
        "assertAlmostEquals": almost(True), "assertNotAlmostEqual": almost(False),
        "assertIsNone": identity(expected_none=True), "assertIsNotNone": identity(expected_none=False),
        "assertIs": identity(same=True), "assertIsNot": identity(same=False),
        "assertIsInstance": instance(True), "assertNotIsInstance": instance(False), "assertCountEqual": count_equal,
        "assertRaises": raises, "assertRaisesRegex": raises_matching, "fail": fail,
    }
    cls = globals()[class_name]
    case = cls(method_name)
    for name, check in own.items():
        setattr(case, name, check)
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
