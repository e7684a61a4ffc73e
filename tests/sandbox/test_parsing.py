"""The `code` reward reads Python from several threads at once (`CodeReward(num_workers=...)`, the judge server's
workers); on CPython 3.11 two threads building syntax trees at once can fail with `SystemError: AST constructor
recursion depth mismatch`, which stopped a training run. Every parse goes through `trl_ext.sandbox.parsing.parse`,
one at a time."""

from __future__ import annotations

import gc
import itertools
import re
import sys
import threading
import time
from pathlib import Path

import pytest

import trl_ext
from trl_ext.rewards.code_extraction import defines
from trl_ext.rewards.code_formats.common import _test_code_kind
from trl_ext.sandbox.code_tests import assert_test
from trl_ext.sandbox.instrumentation import guarded_expression, instrument_checks, judged_apart


class _Finalized:
    """Garbage whose finalizer leaves more garbage like it and lets another thread run: each collection, which
    building a syntax tree triggers, hands the interpreter to another thread mid-tree."""

    stop = False

    def __del__(self):
        if not _Finalized.stop:
            again = _Finalized()
            again.cycle = again
        time.sleep(0)


@pytest.fixture
def threads_switch_mid_tree():
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(10)
    sys.setswitchinterval(1e-6)
    _Finalized.stop = False
    for _ in range(4):
        garbage = _Finalized()
        garbage.cycle = garbage
    del garbage
    yield
    _Finalized.stop = True
    gc.collect()
    gc.set_threshold(*threshold)
    sys.setswitchinterval(interval)


def _unittest_row(n: int) -> str:
    methods = "\n".join(f"    def test_{i}(self):\n        self.assertEqual(f({i}), {i * n})" for i in range(20))
    return f"import unittest\nclass TestCases(unittest.TestCase):\n{methods}\n"


# What the reward's threads read, each on sources no cache has seen.
READERS = {
    "a completion": lambda n: defines("\n".join(f"def g{i}(x):\n    return x * {i + n}" for i in range(20)), "g1"),
    "a test column's kind": lambda n: _test_code_kind(_unittest_row(n)),
    "an assert": lambda n: assert_test(f"assert f({n}) == [{', '.join(str(i) for i in range(60))}]"),
    "a value test's expression": lambda n: guarded_expression(f"[f({n} + i) * {n} for i in range(30) if i != 2]"),
    "a statement test instrumented": lambda n: instrument_checks(_unittest_row(n)),
    "where a statement test runs": lambda n: judged_apart(_unittest_row(n)),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_threads_read_python_at_once(reader, threads_switch_mid_tree):
    read, failures, sources = READERS[reader], [], itertools.count()  # a new source each time: no cache answers

    def work(depth: int) -> None:  # threads at different stack depths, as the reward's and the server's are
        if depth:
            return work(depth - 1)
        for _ in range(25):
            try:
                read(next(sources))
            except SystemError as error:
                failures.append(str(error))

    threads = [threading.Thread(target=work, args=(3 * i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_the_package_parses_python_only_through_the_lock():
    package = Path(trl_ext.__file__).parent
    direct = [
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py") if path.name != "parsing.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bast\.parse\(|\bcompile\([^)]*PyCF_ONLY_AST", line)
    ]
    assert direct == []
