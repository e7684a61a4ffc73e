"""unittest tests that share the program's process (a mock makes them), run by the harness's own runner and
assertion methods: every assertion form a BigCodeBench-style test uses passes a right program and fails a wrong
one, with fixtures, cleanups, `subTest`, `patch` decorators and context managers, and `assertRaises` as a context
and as a call. Programs really run in the sandbox; nothing is mocked but what the rows' tests mock themselves.
"""

from __future__ import annotations

import pytest

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox.testing import close_servers

HEADER = (
    "import unittest\nfrom unittest.mock import patch, MagicMock\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    @classmethod\n    def setUpClass(cls):\n        cls.shared = [1, 2]\n"
    "    def setUp(self):\n        self.values = [3, 1, 2]\n        self.addCleanup(self.values.clear)\n"
)
# One test method per assertion form; `random.randint` is patched so the test runs in the program's process.
CHECKS = {
    "assertEqual": "self.assertEqual(task_func(self.values), [1, 2, 3])",
    "assertNotEqual": "self.assertNotEqual(task_func(self.values), [3, 1, 2])",
    "assertListEqual": "self.assertListEqual(task_func(self.values), [1, 2, 3])",
    "assertIn": "self.assertIn(2, task_func(self.values))",
    "assertNotIn": "self.assertNotIn(5, task_func(self.values))",
    "assertTrue": "self.assertTrue(task_func(self.values)[0] == 1)",
    "assertFalse": "self.assertFalse(task_func(self.values)[0] == 3)",
    "assertGreater": "self.assertGreater(task_func(self.values)[2], 2)",
    "assertLessEqual": "self.assertLessEqual(task_func(self.values)[0], 1)",
    "assertAlmostEqual": "self.assertAlmostEqual(sum(task_func(self.values)) / 3, 2.0000001, places=5)",
    "assertAlmostEqual delta": "self.assertAlmostEqual(task_func(self.values)[1], 2.4, delta=0.5)",
    "assertCountEqual": "self.assertCountEqual(task_func(self.values), [3, 2, 1])",
    "assertIsNone": "self.assertIsNone(task_func(None))",
    "assertIsNotNone": "self.assertIsNotNone(task_func(self.values))",
    "assertIsInstance": "self.assertIsInstance(task_func(self.values), list)",
    "assertRaises as a context": "with self.assertRaises(TypeError) as caught:\n            task_func(5)\n"
                                 "        self.assertIn('sequence', str(caught.exception))",
    "assertRaises as a call": "self.assertRaises(TypeError, task_func, 5)",
    "assertRaisesRegex": "with self.assertRaisesRegex(TypeError, 'seq'):\n            task_func(5)",
    "subTest": "for size in (1, 2, 3):\n            with self.subTest(size=size):\n"
               "                self.assertEqual(len(task_func(self.values[:size])), size)",
    "a mock the program calls": "with patch('random.shuffle') as shuffled:\n            task_func(self.values)\n"
                                "        shuffled.assert_not_called()",
    "setUpClass fixture": "self.assertEqual(task_func(self.shared), self.shared)",
}
RIGHT = (
    "import random\n"
    "def task_func(values):\n"
    "    if values is None:\n        return None\n"
    "    if not isinstance(values, list):\n        raise TypeError('a sequence is needed')\n"
    "    return sorted(values)\n"
)
WRONG = {
    "unsorted": "def task_func(values):\n    return None if values is None else list(values)\n",
    "reversed": "def task_func(values):\n    return None if values is None else sorted(values, reverse=True)\n",
    "no error": "def task_func(values):\n    return [] if values is None else sorted(values) if isinstance(values, list) "
                "else []\n",
}


def row(check: str) -> dict:
    method = "    @patch('random.randint', return_value=4)\n    def test_form(self, mocked):\n        " + check + "\n"
    return {"test": HEADER + method}


@pytest.fixture(scope="module", params=[False, True], ids=["fresh", "reused"])
def reward(request) -> CodeReward:
    reward = CodeReward(timeout=4.0, memory_mb=256, reuse_sandbox=request.param)
    yield reward
    close_servers(reward.sandbox)


def score(reward: CodeReward, program: str, check: str) -> float | None:
    return reward(completions=[f"```python\n{program}```"], **{k: [v] for k, v in row(check).items()})[0]


@pytest.mark.parametrize("form", list(CHECKS))
def test_a_right_program_passes_every_assertion_form(reward, form):
    assert score(reward, RIGHT, CHECKS[form]) == 1.0


def test_wrong_programs_fail_the_forms_that_tell_them_apart(reward):
    failed = {name: [form for form, check in CHECKS.items() if score(reward, program, check) == 0.0]
              for name, program in WRONG.items()}
    assert {"assertEqual", "assertListEqual", "assertCountEqual"} - set(failed["unsorted"]) == {"assertCountEqual"}
    assert {"assertEqual", "assertTrue", "assertFalse", "assertLessEqual"} <= set(failed["reversed"])
    assert {"assertRaises as a context", "assertRaises as a call", "assertRaisesRegex"} <= set(failed["no error"])


def test_the_programs_exceptions_reach_the_test_as_they_were_raised(reward):
    # The call guard runs each call in a generator: a StopIteration of the program's must stay one, and no
    # exception of the guard's may be chained to the program's.
    program = "import random\ndef task_func(values):\n    if values == []:\n        raise StopIteration\n" \
              "    raise ValueError('no values')\n"
    check = ("with self.assertRaises(StopIteration):\n            task_func([])\n"
             "        with self.assertRaises(ValueError) as caught:\n            task_func([1])\n"
             "        self.assertIsNone(caught.exception.__context__)")
    assert score(reward, program, check) == 1.0


# Right programs whose values the test compares inside a list or a dict: dates, built-in functions, the test's own
# function and a plain object compare as they are (the list is no plain data, and is compared as it is).
IN_CONTAINERS = {
    "a list of dates": (
        "import random, datetime\ndef task_func(x):\n    return [datetime.date(2020, 1, x)]\n",
        "import datetime\n        self.assertEqual(task_func(2), [datetime.date(2020, 1, 2)])"),
    "a dict of built-in functions": (
        "import random\ndef task_func(x):\n    return {'size': len, 'top': max}\n",
        "self.assertEqual(task_func(0), {'size': len, 'top': max})"),
    "a dict compared with the test's own unittest.mock.ANY": (
        "import random\ndef task_func(x):\n    return {'id': random.randint(1, 9), 'value': x}\n",
        "self.assertEqual(task_func(3), {'id': __import__('unittest.mock').mock.ANY, 'value': 3})"),
    "a mock's call checked with ANY, imported under another name": (
        "import random\ndef task_func(x):\n    return [random.randint(0, x)]\n",
        "from unittest.mock import ANY as anything\n"
        "        with patch('random.randint', return_value=1) as fake:\n"
        "            self.assertEqual(task_func(3), [1])\n"
        "        fake.assert_called_once_with(0, anything)"),
    "a program comparing with pytest.approx inside its call, a masked array the test expects": (
        "import random, pytest, numpy as np\ndef task_func(x):\n    assert x == pytest.approx(3.0)\n"
        "    return np.ma.masked_array([x, 0], mask=[False, True])\n",
        "import numpy as np\n        expected = np.ma.masked_array([3, 9], mask=[False, True])\n"
        "        np.testing.assert_array_equal(task_func(3), expected)"),
    "the test's function and an object, found in what the program returns": (
        "import random\ndef task_func(*values):\n    return list(values)\n",
        "def report(value):\n            return value\n        marker = object()\n"
        "        self.assertIn(report, task_func(report, marker))\n        self.assertIn(marker, task_func(report, marker))"),
}


# Right programs that make what the judge reads for code left to run without a frame, or hand the test what it
# hides or frames: each scores 1.0 (`lasting_code`, `call_guard.hider`, `answer_traps.argument_framer`).
LEFT_ALONE = {
    "a lazy map of a pure function, iterated by the test": (
        "import random\ndef task_func(values):\n    return map(abs, values)\n",
        "self.assertEqual(list(task_func([-1, 2])), [1, 2])"),
    "a defaultdict(list) the test indexes": (
        "import random, collections\ndef task_func(values):\n    table = collections.defaultdict(list)\n"
        "    for value in values:\n        table[value % 2].append(value)\n    return table\n",
        "table = task_func([1, 2, 3])\n        self.assertEqual(table[1], [1, 3])\n        self.assertEqual(table[5], [])"),
    "a partial of a pure built-in, called and passed on by the test": (
        "import random, functools, operator\ndef task_func(values):\n    return functools.partial(operator.mul, 2)\n",
        "double = task_func(None)\n        self.assertIsInstance(double, __import__('functools').partial)\n"
        "        self.assertEqual(list(map(double, [1, 2])), [2, 4])"),
    "a registry the program fills across calls": (
        "import random\nREGISTRY = {}\ndef task_func(values):\n    REGISTRY[len(REGISTRY)] = values\n"
        "    return dict(REGISTRY)\n",
        "task_func('a')\n        self.assertEqual(task_func('b'), {0: 'a', 1: 'b'})"),
    "defaultdicts of a standard library's classes, and of a partial of defaultdict": (
        "import random\nfrom collections import Counter, OrderedDict, defaultdict, deque\nfrom decimal import Decimal\n"
        "from functools import partial\n"
        "def task_func(words):\n"
        "    counts, seen, nested = defaultdict(Counter), defaultdict(deque), defaultdict(partial(defaultdict, int))\n"
        "    firsts, totals = defaultdict(OrderedDict), defaultdict(Decimal)\n"
        "    for word in words:\n"
        "        counts[word[0]][word] += 1\n        seen[word[0]].append(word)\n"
        "        nested[word[0]][len(word)] += 1\n        firsts[word[0]].setdefault(word, len(word))\n"
        "        totals[word[0]] += Decimal('0.5')\n"
        "    return counts, seen, nested, firsts, totals\n",
        "counts, seen, nested, firsts, totals = task_func(['ab', 'ac', 'ab', 'b'])\n"
        "        self.assertEqual(counts['a']['ab'], 2)\n        self.assertEqual(list(seen['b']), ['b'])\n"
        "        self.assertEqual(nested['a'][2], 3)\n        self.assertEqual(list(firsts['a']), ['ab', 'ac'])\n"
        "        self.assertEqual(str(totals['a']), '1.5')\n        self.assertEqual(counts['z'], {})"),
    "a listener's bound method the program registers, which the test finds again": (
        "import random\nHANDLERS = []\ndef task_func(handler):\n    HANDLERS.append(handler)\n    return HANDLERS\n",
        "class Listener:\n            def on_event(self, value):\n                return value\n"
        "        listener = Listener()\n        registered = task_func(listener.on_event)\n"
        "        self.assertIs(registered[-1], listener.on_event)\n        self.assertEqual(registered[-1](5), 5)"),
    "a callback and a key the test makes, handed to the program": (
        "import random\ndef task_func(values, key=None, report=None):\n    ordered = sorted(values, key=key)\n"
        "    report(ordered)\n    return ordered\n",
        "seen = []\n        def report(ordered):\n            seen.append(ordered)\n"
        "        self.assertEqual(task_func([1, -3, 2], key=lambda v: abs(v), report=report), [1, 2, -3])\n"
        "        self.assertEqual(seen, [[1, 2, -3]])"),
}


# Right programs handed the test's case, or whose library objects the test runs (`test_namespace.call_argument_hider`,
# `answer_traps.context_framer`): each scores 1.0.
HANDED_AND_ENTERED = {
    "the test's case handed over: its data read, its checks run": (
        "import random\ndef task_func(case):\n    case.assertEqual(len(case.values), 3)\n"
        "    return sorted(case.values) + case.shared\n",
        "self.assertEqual(task_func(self), [1, 2, 3, 1, 2])\n        self.assertEqual(self.values, [3, 1, 2])"),
    "a library's context manager and counter the program returns, entered and called by the test": (
        "import random, contextlib, collections\ndef task_func(values):\n"
        "    return contextlib.nullcontext(sorted(values)), collections.Counter(values)\n",
        "context, counts = task_func(self.values)\n        with context as ordered:\n"
        "            self.assertEqual(ordered, [1, 2, 3])\n        self.assertEqual(counts.most_common(1), [(3, 1)])"),
    "what the test's callback sets on the case while the program runs, which the case keeps": (
        "import random\ndef task_func(values, report):\n    report(sorted(values))\n    return len(values)\n",
        "def report(ordered):\n            self.reported = ordered\n"
        "        self.assertEqual(task_func(self.values, report), 3)\n        self.assertEqual(self.reported, [1, 2, 3])"),
}


RIGHT_PROGRAMS = {**IN_CONTAINERS, **LEFT_ALONE, **HANDED_AND_ENTERED}


@pytest.mark.parametrize("case", list(RIGHT_PROGRAMS))
def test_right_programs_compared_in_containers_or_leaving_lazy_values_or_handed_the_tests_functions_pass(reward, case):
    program, check = RIGHT_PROGRAMS[case]
    assert score(reward, program, check) == 1.0

