"""KodCode: a `test` column of pytest-style tests (`from solution import ...`), one test per test function."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ...sandbox.instrumentation import RUNNER_END
from ...sandbox.testing import CodeTest
from .common import RowTests, _parse, _text


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
                __trl_ext_fail__(f"DID NOT RAISE {self.expected}")
            if not issubclass(kind, self.expected):
                return False
            if self.match is not None:
                import re
                if not re.search(self.match, str(value)):
                    __trl_ext_fail__(f"{value!s} does not match {self.match!r}")
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
        __trl_ext_fail__("skipped: " + str(reason))
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

class _trl_ext_MonkeyPatch:  # a stand-in for pytest's `monkeypatch`: what it changes is undone after the test
    _unset = object()
    def __init__(self):
        self._undo = []
    def _target(self, dotted):
        import importlib
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:end]))
            except ImportError:
                continue
            for part in parts[end:]:
                found = getattr(found, part)
            return found
        raise ImportError(f"cannot import {dotted!r}")
    def setattr(self, target, name, value=_unset, raising=True):
        if value is self._unset:
            target, _, attribute = target.rpartition(".")
            target, name, value = self._target(target), attribute, name
        old = vars(target).get(name, self._unset) if isinstance(target, type) else getattr(target, name, self._unset)
        if raising and old is self._unset:
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        self._undo.append(lambda: setattr(target, name, old) if old is not self._unset else delattr(target, name))
        setattr(target, name, value)
    def delattr(self, target, name=_unset, raising=True):
        if name is self._unset:
            target, _, name = target.rpartition(".")
            target = self._target(target)
        if not hasattr(target, name):
            if raising:
                raise AttributeError(name)
            return
        old = getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        delattr(target, name)
    def setitem(self, mapping, key, value):
        old = mapping.get(key, self._unset)
        self._undo.append(lambda: mapping.__setitem__(key, old) if old is not self._unset else mapping.pop(key, None))
        mapping[key] = value
    def delitem(self, mapping, key, raising=True):
        if key not in mapping:
            if raising:
                raise KeyError(key)
            return
        old = mapping[key]
        self._undo.append(lambda: mapping.__setitem__(key, old))
        del mapping[key]
    def setenv(self, name, value, prepend=None):
        import os
        value = str(value)
        if prepend and name in os.environ:
            value = value + prepend + os.environ[name]
        self.setitem(os.environ, name, value)
    def delenv(self, name, raising=True):
        import os
        self.delitem(os.environ, name, raising)
    def syspath_prepend(self, path):
        self.setattr(_trl_ext_sys, "path", [str(path)] + _trl_ext_sys.path)
    def chdir(self, path):
        import os
        old = os.getcwd()
        self._undo.append(lambda: os.chdir(old))
        os.chdir(path)
    def undo(self):
        while self._undo:
            self._undo.pop()()

def __trl_ext_run_pytest__(name):
    import inspect, tempfile, pathlib, contextlib, io, collections
    CaptureResult = collections.namedtuple("CaptureResult", "out err")
    owner, _, function_name = name.rpartition("::")
    cls = globals()[owner] if owner else None
    instance = cls() if owner else None
    function = getattr(instance, function_name) if owner else globals()[function_name]
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
            buffers = io.StringIO(), io.StringIO()
            stack.enter_context(contextlib.redirect_stdout(buffers[0]))
            stack.enter_context(contextlib.redirect_stderr(buffers[1]))
            class Captured:
                def readouterr(self):
                    out, err = (buffer.getvalue() for buffer in buffers)
                    for buffer in buffers:
                        buffer.seek(0); buffer.truncate()
                    return CaptureResult(out, err)
            return Captured()
        if fixture_name == "monkeypatch":  # pytest's own where the sandbox has it
            patcher = pytest.MonkeyPatch() if hasattr(pytest, "MonkeyPatch") else _trl_ext_MonkeyPatch()
            stack.callback(patcher.undo)
            return patcher
        provider = getattr(globals().get(fixture_name), "__wrapped__", globals().get(fixture_name))
        if provider is None:
            __trl_ext_fail__(f"fixture {fixture_name!r} not found")
        arguments = {p: fixture(p, stack) for p in inspect.signature(provider).parameters}
        value = provider(**arguments)
        if inspect.isgenerator(value):
            stack.callback(lambda: next(value, None))
            value = next(value)
        return value
    def xunit(hook, argument):  # pytest's xunit-style setup and teardown, with or without their argument
        if hook is not None:
            hook(argument) if inspect.signature(hook).parameters else hook()
    method_hooks = (getattr(instance, "setup_method", None), getattr(instance, "teardown_method", None)) if owner \
        else (globals().get("setup_function"), globals().get("teardown_function"))
    xunit(getattr(cls, "setup_class", None), cls)
    try:
        for case in cases:
            with contextlib.ExitStack() as stack:
                xunit(method_hooks[0], function)
                stack.callback(xunit, method_hooks[1], function)
                patched = len(getattr(function, "patchings", ()))  # `@patch` gives its mocks first, as pytest skips
                arguments = {p: case[p] if p in case else fixture(p, stack)
                             for p in list(inspect.signature(function).parameters)[patched:]}
                function(**arguments)
    finally:
        xunit(getattr(cls, "teardown_class", None), cls)
''' + RUNNER_END + "\n"


def pytest_tests(source: str) -> list[CodeTest]:
    """One statement test per pytest-style test: top-level `test*` functions and `test*` methods of `Test*`
    classes (fixtures defined in the file, `tmp_path`, `capsys`, `monkeypatch`, `parametrize`, xunit-style
    `setup_method`, `setup_class`, `setup_function` and their teardowns), pytest or not in the sandbox."""
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


def _kodcode(row: Mapping[str, Any]) -> RowTests:
    return RowTests(pytest_tests(_text(row["test"])))
