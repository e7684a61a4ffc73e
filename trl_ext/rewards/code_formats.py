"""The public code datasets' test columns, read as they are: one small pure converter per format.

`row_tests(row, tests_format)` turns one dataset row (column name -> value) into `RowTests`: the tests the
sandbox runs, plus what the format implies (code to put before the program, its language, a checker, how
outputs compare). `detect_format(row)` names the format from the row's columns and their shape; a row that
fits no format, or several, is an error naming the row's columns and the candidates.

| format          | columns                                                          |
|-----------------|------------------------------------------------------------------|
| tests           | `tests`: asserts, stdin/stdout pairs, `{"inputs", "outputs"}` ... |
| humaneval       | `test` (defines `check(candidate)`) + `entry_point`              |
| leetcodedataset | `test` + `entry_point` `Solution().method` + `prompt` (header)    |
| mbpp            | `test_list` (+ `test_setup_code`, `test_imports`)                |
| mbppplus        | `test_list` + `test` (a program calling its `assertion` helper)  |
| apps            | `input_output` (JSON: `inputs`/`outputs`, `fn_name` call-based)  |
| codecontests    | `public_tests` / `private_tests` / `generated_tests`             |
| livecodebench   | `public_test_cases` (+ compressed `private_test_cases`, `metadata`)|
| openr1          | `verification_info` (`language`, `test_cases`)                   |
| kodcode         | `test`: pytest-style functions, `from solution import ...`        |
| bigcodebench    | `test`: `class TestCases(unittest.TestCase)`                      |

Everything here is plain data in, plain data out: no dataset code runs in this process (LiveCodeBench's
pickled test cases are read by parsing the pickle's opcodes, never by unpickling).
"""

from __future__ import annotations

import ast
import base64
import json
import pickletools
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..sandbox.testing import Checker, CodeTest, assert_test

__all__ = [
    "FORMATS",
    "LIVECODEBENCH_HEADER",
    "RowTests",
    "TestsFormatError",
    "decode_livecodebench_tests",
    "detect_format",
    "pytest_tests",
    "row_tests",
    "unittest_tests",
]


class TestsFormatError(ValueError):
    """A row's test columns fit no format, or several, or cannot be read in the format asked for."""

    __test__ = False  # not a pytest test class, whatever its name


@dataclass(frozen=True)
class RowTests:
    """What one row asks of a program: the tests, code to put before the program (`prelude`: imports and
    helpers the dataset assumes), the language if the row says, a checker, and how outputs compare."""

    tests: list[CodeTest]
    prelude: str = ""
    language: str | None = None
    checker: Checker | None = None
    output_match: str | None = None
    notes: tuple[str, ...] = field(default=())


# Standard-library names LeetCode-style tasks use without importing them (`List`, `defaultdict`, `heapq`...).
LIVECODEBENCH_HEADER = (
    "import bisect, collections, copy, functools, heapq, itertools, math, operator, random, re, string, sys\n"
    "from bisect import bisect_left, bisect_right, insort\n"
    "from collections import Counter, OrderedDict, defaultdict, deque\n"
    "from functools import cache, lru_cache, reduce\n"
    "from heapq import heapify, heappop, heappush, heappushpop, heapreplace, nlargest, nsmallest\n"
    "from itertools import accumulate, combinations, count, groupby, permutations, product, zip_longest\n"
    "from math import ceil, comb, factorial, floor, gcd, inf, isqrt, lcm, log, log2, sqrt\n"
    "from typing import Any, Dict, List, Optional, Set, Tuple\n"
)


# ------------------------------------------------------------------------------------------------ helpers


def _json_value(value: Any, what: str) -> Any:
    if isinstance(value, (str, bytes)):
        text = value.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as error:
            raise TestsFormatError(f"{what} is not valid JSON ({error})") from None
    return value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "\n".join(str(line) for line in value)
    return str(value)


def _stdio(stdin: Any, expected: Any) -> CodeTest:
    return CodeTest("stdio", stdin=_text(stdin), expected=_text(expected))


def _call_test(function: str, arguments: Sequence[Any], accepted: list[Any]) -> CodeTest:
    """A test calling `function(*arguments)` (or the method of a LeetCode-style `class Solution`), the value
    compared here with the accepted values (never sent to the sandbox)."""
    call = (
        f"(Solution().{function} if 'Solution' in globals() and hasattr(Solution, {function!r}) else {function})"
        f"(*{list(arguments)!r})"
    )
    return CodeTest("value", call, expected=accepted, operator="any of")


def _identifier(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise TestsFormatError(f"{what} must name a function, got {name!r}")
    return name


# ---------------------------------------------------------------------------------------- test-code runners

# Runs one method of a unittest.TestCase class, counting its assertion calls as checks (see harness.py).
_UNITTEST_RUNNER = '''
def __trl_ext_run_unittest__(class_name, method_name):
    import unittest
    import unittest.mock
    counted = [0]
    def counting(method):
        def counted_call(*args, **kwargs):
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
                setattr(case, name, counting(method))
    result = unittest.TestResult()
    unittest.TestSuite([case]).run(result)
    problems = result.errors + result.failures
    if problems:
        raise AssertionError(problems[0][1][-300:])
    if result.unexpectedSuccesses or result.testsRun != 1 or result.skipped:
        raise AssertionError(f"{class_name}.{method_name} did not run to a verdict")
    for _ in range(counted[0]):
        __trl_ext_check__()
'''

# A stand-in for the parts of pytest that test files use, for sandboxes without pytest installed; and a runner
# for one test function (fixtures by name, `parametrize` marks), counting `raises` blocks as checks.
_PYTEST_RUNNER = '''
import sys as _trl_ext_sys
try:
    import pytest
except ImportError:
    import types as _trl_ext_types
    pytest = _trl_ext_types.ModuleType("pytest")
    class _trl_ext_Mark:
        def __init__(self, name, args=(), kwargs=None):
            self.name, self.args, self.kwargs = name, args, kwargs or {}
        def __call__(self, *args, **kwargs):
            if len(args) == 1 and callable(args[0]) and not kwargs:
                args[0].pytestmark = getattr(args[0], "pytestmark", []) + [self]
                return args[0]
            return _trl_ext_Mark(self.name, args, kwargs)
    class _trl_ext_Marks:
        def __getattr__(self, name):
            return _trl_ext_Mark(name)
    class _trl_ext_Raises:
        def __init__(self, expected, match=None):
            self.expected, self.match, self.value = expected, match, None
        def __enter__(self):
            return self
        def __exit__(self, kind, value, traceback):
            if kind is None:
                raise AssertionError(f"DID NOT RAISE {self.expected}")
            if not issubclass(kind, self.expected):
                return False
            if self.match is not None:
                import re
                if not re.search(self.match, str(value)):
                    raise AssertionError(f"{value!s} does not match {self.match!r}")
            self.value = value
            return True
    class _trl_ext_Approx:
        def __init__(self, expected, rel=None, abs=None):
            self.expected, self.rel, self.abs = expected, rel, abs
        def _close(self, actual, expected):
            import math
            if isinstance(expected, (list, tuple)):
                return len(actual) == len(expected) and all(self._close(a, e) for a, e in zip(actual, expected))
            if isinstance(expected, dict):
                return actual.keys() == expected.keys() and all(self._close(actual[k], expected[k]) for k in expected)
            rel = 1e-6 if self.rel is None else self.rel
            absolute = 1e-12 if self.abs is None else self.abs
            return math.isclose(actual, expected, rel_tol=rel, abs_tol=absolute)
        def __eq__(self, actual):
            try:
                return self._close(actual, self.expected)
            except TypeError:
                return False
        __hash__ = None
    def _trl_ext_fixture(function=None, **options):
        def register(f):
            f._trl_ext_fixture__ = True
            return f
        return register(function) if callable(function) else register
    def _trl_ext_skip(reason=""):
        raise AssertionError("skipped: " + str(reason))
    pytest.mark, pytest.raises, pytest.approx = _trl_ext_Marks(), _trl_ext_Raises, _trl_ext_Approx
    class _trl_ext_Param:
        def __init__(self, *values, **options):
            self.values = values
    pytest.fixture, pytest.skip, pytest.param = _trl_ext_fixture, _trl_ext_skip, _trl_ext_Param
    pytest.fail = lambda reason="": (_ for _ in ()).throw(AssertionError(reason))
    __trl_ext_trust_comparison__(_trl_ext_Approx)
    _trl_ext_sys.modules["pytest"] = pytest
else:
    __trl_ext_trust_comparison__(type(pytest.approx(0)))
    for _trl_ext_base in type(pytest.approx(0)).__mro__[1:-1]:
        __trl_ext_trust_comparison__(_trl_ext_base)

def __trl_ext_run_pytest__(name):
    import inspect, tempfile, pathlib, contextlib, io
    owner, _, function_name = name.rpartition("::")
    function = getattr(globals()[owner](), function_name) if owner else globals()[function_name]
    raises = pytest.raises
    def counting_raises(*args, **kwargs):
        context = raises(*args, **kwargs)
        class Counted:
            def __enter__(self):
                return context.__enter__()
            def __exit__(self, *exc):
                handled = context.__exit__(*exc)
                __trl_ext_check__()
                return handled
        return Counted()
    pytest.raises = counting_raises
    cases = [{}]
    for mark in reversed(getattr(function, "pytestmark", [])):
        if getattr(mark, "name", "") == "parametrize":
            names, values = mark.args[0], mark.args[1]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            expanded = []
            for case in cases:
                for value in values:
                    if hasattr(value, "values") and not isinstance(value, dict):  # pytest.param(...)
                        value = tuple(value.values)
                        value = value if len(names) > 1 else value[0]
                    value = value if len(names) > 1 else (value,)
                    expanded.append({**case, **dict(zip(names, value))})
            cases = expanded
    def fixture(fixture_name, stack):
        if fixture_name == "tmp_path":
            return pathlib.Path(tempfile.mkdtemp())
        if fixture_name == "capsys":
            buffer = io.StringIO()
            stack.enter_context(contextlib.redirect_stdout(buffer))
            class Captured:
                def readouterr(self):
                    out = buffer.getvalue(); buffer.seek(0); buffer.truncate()
                    return type("CaptureResult", (), {"out": out, "err": ""})()
            return Captured()
        provider = getattr(globals().get(fixture_name), "__wrapped__", globals().get(fixture_name))
        if provider is None:
            raise AssertionError(f"fixture {fixture_name!r} not found")
        arguments = {p: fixture(p, stack) for p in inspect.signature(provider).parameters}
        value = provider(**arguments)
        if inspect.isgenerator(value):
            stack.callback(lambda: next(value, None))
            value = next(value)
        return value
    for case in cases:
        with contextlib.ExitStack() as stack:
            arguments = {p: case[p] if p in case else fixture(p, stack) for p in inspect.signature(function).parameters}
            function(**arguments)
'''


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


def pytest_tests(source: str) -> list[CodeTest]:
    """One statement test per pytest-style test: top-level `test*` functions and `test*` methods of `Test*`
    classes (fixtures defined in the file, `tmp_path`, `capsys`, `parametrize`), pytest or not in the sandbox."""
    tree = _parse(source, "the pytest test code")
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names += [f"{node.name}::{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name.startswith("test")]
    return [CodeTest("statement", _PYTEST_RUNNER + "\n" + source + f"\n__trl_ext_run_pytest__({name!r})\n")
            for name in names]


def _names_test_case(base: ast.expr) -> bool:
    return (isinstance(base, ast.Name) and base.id == "TestCase") or (
        isinstance(base, ast.Attribute) and base.attr == "TestCase"
    )


@lru_cache(maxsize=1024)
def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        raise TestsFormatError(f"{what} does not parse ({error.msg}, line {error.lineno})") from None


@lru_cache(maxsize=4096)
def _test_code_kind(source: str) -> str:
    """What a `test` column's code is: "unittest", "pytest", "check" (defines check()), or "asserts"."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "unreadable"
    top = tree.body
    if any(isinstance(node, ast.ClassDef) and any(_names_test_case(b) for b in node.bases) for node in top):
        return "unittest"
    if any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in top):
        return "check"
    imports_solution = any(
        (isinstance(node, ast.ImportFrom) and node.module == "solution")
        or (isinstance(node, ast.Import) and any(alias.name == "solution" for alias in node.names))
        for node in top
    )
    defines_tests = any(
        (isinstance(node, ast.FunctionDef) and node.name.startswith("test"))
        or (isinstance(node, ast.ClassDef) and node.name.startswith("Test"))
        for node in top
    )
    if imports_solution or defines_tests:
        return "pytest"
    return "asserts"


# ------------------------------------------------------------------------------------------- the converters


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


def textwrap_dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def _pairs(inputs: Sequence[Any], outputs: Sequence[Any], what: str) -> RowTests:
    if len(inputs) != len(outputs):
        raise TestsFormatError(f"{what} has {len(inputs)} inputs but {len(outputs)} outputs")
    return RowTests([_stdio(i, o) for i, o in zip(inputs, outputs)])


def _apps_tests(spec: Any) -> RowTests:
    spec = _json_value(spec, "input_output")
    if not isinstance(spec, Mapping) or "inputs" not in spec or "outputs" not in spec:
        raise TestsFormatError("input_output must be a JSON object with `inputs` and `outputs`")
    inputs, outputs = list(spec["inputs"]), list(spec["outputs"])
    if len(inputs) != len(outputs):
        raise TestsFormatError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")
    function = spec.get("fn_name")
    if not function:
        return RowTests([_stdio(i, o) for i, o in zip(inputs, outputs)], output_match="apps")
    function = _identifier(function, "input_output.fn_name")
    tests = []
    for arguments, expected in zip(inputs, outputs):
        if not isinstance(arguments, list):
            arguments = [arguments]
        # APPS/TACO accept the value itself or, when the expected value is a one-element list, its element.
        accepted = [expected] + ([expected[0]] if isinstance(expected, list) and len(expected) == 1 else [])
        tests.append(_call_test(function, arguments, accepted))
    return RowTests(tests, prelude=LIVECODEBENCH_HEADER)


def _humaneval(row: Mapping[str, Any]) -> RowTests:
    entry_point = _entry_point(row)
    return RowTests([CodeTest("statement", f"{_text(row['test'])}\n\ncheck({entry_point})\n")])


def _entry_point(row: Mapping[str, Any]) -> str:
    entry_point = str(row.get("entry_point") or "").strip()
    if not re.fullmatch(r"(Solution\(\)\.)?[A-Za-z_]\w*", entry_point):
        raise TestsFormatError(f"entry_point must name the function under test, got {entry_point!r}")
    return entry_point


def _leetcodedataset(row: Mapping[str, Any]) -> RowTests:
    header = _text(row.get("prompt") or "")
    return RowTests(_humaneval(row).tests, prelude=(header + "\n") if header.strip() else LIVECODEBENCH_HEADER)


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


def _livecodebench(row: Mapping[str, Any]) -> RowTests:
    cases = list(_json_value(row.get("public_test_cases"), "public_test_cases") or [])
    private = row.get("private_test_cases")
    if private:
        cases += decode_livecodebench_tests(private)
    return _livecodebench_cases(cases, row, "public_test_cases")


def _livecodebench_cases(cases: Sequence[Mapping[str, Any]], row: Mapping[str, Any], what: str) -> RowTests:
    metadata = _json_value(row.get("metadata"), "metadata") or {}
    tests = []
    for case in cases:
        kind = case.get("testtype", "stdin")
        if kind == "stdin":
            tests.append(_stdio(case["input"], case["output"]))
        elif kind == "functional":
            function = _identifier(metadata.get("func_name") if isinstance(metadata, Mapping) else None,
                                   "metadata.func_name (functional tests)")
            try:
                arguments = [json.loads(line) for line in str(case["input"]).split("\n") if line.strip()]
                expected = json.loads(case["output"])
            except ValueError as error:
                raise TestsFormatError(f"a functional test of {what} is not JSON ({error})") from None
            tests.append(_call_test(function, arguments, [expected]))
        else:
            raise TestsFormatError(f"{what}: unknown testtype {kind!r} (expected 'stdin' or 'functional')")
    return RowTests(tests, prelude=LIVECODEBENCH_HEADER)


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


def _kodcode(row: Mapping[str, Any]) -> RowTests:
    return RowTests(pytest_tests(_text(row["test"])))


def _bigcodebench(row: Mapping[str, Any]) -> RowTests:
    return RowTests(unittest_tests(_text(row["test"])))


FORMATS = {
    "tests": _from_tests_column,  # called with the tests column's value
    "humaneval": _humaneval,
    "leetcodedataset": _leetcodedataset,
    "mbpp": _mbpp,
    "mbppplus": _mbppplus,
    "apps": lambda row: _apps_tests(row["input_output"]),
    "codecontests": _codecontests,
    "livecodebench": _livecodebench,
    "openr1": _openr1,
    "kodcode": _kodcode,
    "bigcodebench": _bigcodebench,
}


# ------------------------------------------------------------------------------------------------ detection


def _present(row: Mapping[str, Any], column: str) -> bool:
    value = row.get(column)
    return value is not None and not (isinstance(value, (str, list, dict)) and not value)


def _is_apps_mapping(value: Any) -> bool:
    # APPS/TACO's `input_output` is a JSON object; LeetCodeDataset's column of the same name is a list of examples.
    if isinstance(value, str):
        return value.lstrip()[:1] == "{"
    return isinstance(value, Mapping)


def candidate_formats(row: Mapping[str, Any], tests_column: str = "tests") -> list[str]:
    """The formats whose columns this row has, judged by the columns and the shape of the `test` code."""
    found = []
    if _present(row, tests_column):
        found.append("tests")
    if _present(row, "test") and isinstance(row["test"], str):
        kind = _test_code_kind(row["test"])
        if _present(row, "test_list"):
            found.append("mbppplus")
        elif kind == "unittest":
            found.append("bigcodebench")
        elif kind == "pytest":
            found.append("kodcode")
        elif kind == "check" and _present(row, "entry_point"):
            leetcode = str(row["entry_point"]).startswith("Solution()")
            found.append("leetcodedataset" if leetcode else "humaneval")
    elif _present(row, "test_list"):
        found.append("mbpp")
    if _present(row, "input_output") and _is_apps_mapping(row["input_output"]):
        found.append("apps")
    if any(_present(row, column) for column in ("public_tests", "private_tests", "generated_tests")):
        found.append("codecontests")
    if _present(row, "public_test_cases") or _present(row, "private_test_cases"):
        found.append("livecodebench")
    if _present(row, "verification_info"):
        found.append("openr1")
    if "tests" in found and len(found) > 1 and tests_column not in ("tests",):
        found.remove("tests")  # an explicitly named tests column wins over the others
    return found


def detect_format(row: Mapping[str, Any], tests_column: str = "tests", index: int = 0) -> str | None:
    """The one format this row is in; None when the row has none of its test columns filled (no tests).
    Raises `TestsFormatError` naming the row, its columns and the candidates when it could be several."""
    found = candidate_formats(row, tests_column)
    if len(found) == 1:
        return found[0]
    if not found:
        return None
    raise TestsFormatError(
        f"row {index}: its columns {sorted(row)} fit several test formats {found}; pass tests_format=<one of "
        f"them> to the reward"
    )


def row_tests(row: Mapping[str, Any], tests_format: str, tests_column: str = "tests") -> RowTests:
    """The tests of one row in `tests_format`. Raises `TestsFormatError` when the row cannot be read so."""
    if tests_format not in FORMATS:
        raise TestsFormatError(f"unknown tests_format {tests_format!r}; formats: {sorted(FORMATS)}")
    try:
        if tests_format == "tests":
            return _from_tests_column(row[tests_column], row)
        return FORMATS[tests_format](row)
    except KeyError as error:
        raise TestsFormatError(f"format {tests_format!r} needs the column {error.args[0]!r}") from None
    except (TypeError, AttributeError) as error:
        raise TestsFormatError(f"format {tests_format!r}: the row's values have the wrong shape ({error})") from None


# --------------------------------------------------------------------------------- LiveCodeBench decoding

# Pickle opcodes that can only build one plain string: no global lookups, no calls, no objects.
_STRING_PICKLE_OPCODES = frozenset(
    {"PROTO", "FRAME", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE", "MEMOIZE", "BINPUT",
     "LONG_BINPUT", "PUT", "STOP"}
)
_MAX_DECOMPRESSED = 1 << 30


def decode_livecodebench_tests(value: str) -> list[Mapping[str, Any]]:
    """LiveCodeBench's `private_test_cases`: plain JSON, or base64 of zlib of a pickled JSON string.

    The pickle is never unpickled here (unpickling untrusted data runs code): its opcodes are parsed with
    `pickletools.genops`, and only a pickle that is exactly one string is accepted."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text[:1] == "[":
        return list(json.loads(text))
    if isinstance(text, list):
        return text
    try:
        compressed = base64.b64decode(text, validate=False)
        decompressor = zlib.decompressobj()
        data = decompressor.decompress(compressed, _MAX_DECOMPRESSED)
    except (ValueError, zlib.error) as error:
        raise TestsFormatError(f"private_test_cases is neither JSON nor base64 zlib data ({error})") from None
    strings = []
    try:
        for opcode, argument, _ in pickletools.genops(data):
            if opcode.name not in _STRING_PICKLE_OPCODES:
                raise TestsFormatError(f"private_test_cases: the pickle holds more than a string ({opcode.name})")
            if isinstance(argument, str) and opcode.name != "PUT":
                strings.append(argument)
    except (ValueError, EOFError) as error:
        raise TestsFormatError(f"private_test_cases: not a readable pickle ({error})") from None
    if len(strings) != 1:
        raise TestsFormatError("private_test_cases: the pickle must hold exactly one JSON string")
    try:
        return list(json.loads(strings[0]))
    except ValueError as error:
        raise TestsFormatError(f"private_test_cases: the pickled string is not JSON ({error})") from None
