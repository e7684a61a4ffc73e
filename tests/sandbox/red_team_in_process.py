"""Red-team programs against a test that runs in the program's process (a mock, an installed package): values of
the program's classes compared outside the judge's asserts, code of the program run after its call, and the test
itself (its names, methods and mocks) read, run or silenced. Used by `red_team.py` (classes 2 and 4)."""

from __future__ import annotations

from red_team_programs import ANYTHING, bigcodebench

# Tests that run in the program's process and compare outside the judge's asserts: the program's value is compared
# by a unittest `assertTrue`, by `in` on a list, by a mock or by NumPy. A row with `patch` (BigCodeBench style).
def in_process_row(body: str, imports: str = "") -> dict:
    return bigcodebench(
        f"import unittest\nfrom unittest.mock import patch, MagicMock\n{imports}\n"
        "class TestCases(unittest.TestCase):\n"
        "    @patch('random.randint', return_value=4)\n"
        f"    def test_value(self, mock_randint):\n        {body}\n"
    )


IN_PROCESS_RIGHT = "import random\ndef task_func(x):\n    return 2 * x + 1\n"
ALWAYS_EQUAL_IN_PROCESS = "import random\n" + ANYTHING + "def task_func(x):\n    return Anything()\n"
# An answering method that is no function of the program's: a C slot of `int` that answers the opposite.
OPPOSITE_INT = "import random\nclass Opposite(int):\n    __eq__ = int.__ne__\ndef task_func(x):\n    return Opposite(0)\n"
ZERO_DIFFERENCE = (
    "import random\nclass Zero:\n    def __sub__(self, other):\n        return 0\n    __rsub__ = __sub__\n"
    "def task_func(x):\n    return Zero()\n"
)
OBJECT_ARRAY_ROW = bigcodebench(
    "import unittest\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        expected = np.empty(2, dtype=object)\n"
    "        expected[:] = [(1, 2), (3, 4)]\n"
    "        result = np.empty(2, dtype=object)\n"
    "        result[:] = task_func(2)\n"
    "        np.testing.assert_array_equal(result, expected)\n"
)
OBJECT_ARRAY_RIGHT = "def task_func(n):\n    return [(1, 2), (3, 4)][:n]\n"
OBJECT_ARRAY_WRONG = ANYTHING + "def task_func(n):\n    return [Anything() for _ in range(n)]\n"
# Code of the program that the test runs outside a call into the program: a method of a returned object, and a
# finalizer, each rewriting what decides the verdict after the call has returned.
METHOD_ROW = bigcodebench(
    "import unittest\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        result = task_func(3)\n"
    "        result.describe()\n"
    "        self.assertTrue(result.value == 7)\n"
    "        np.testing.assert_array_equal(result.array(), np.array([7]))\n"
)
METHOD_RIGHT = (
    "import numpy as np\nclass Result:\n    def __init__(self, value):\n        self.value = value\n"
    "    def describe(self):\n        return f'value {self.value}'\n"
    "    def array(self):\n        return np.array([self.value])\n"
    "def task_func(x):\n    return Result(2 * x + 1)\n"
)
METHOD_REWRITES = (
    "import numpy as np\n" + ANYTHING + "class Result:\n    value = Anything()\n"
    "    def describe(self):\n"
    "        Anything.__eq__ = lambda self, other: True\n"
    "        np.testing.assert_array_equal = lambda *args, **kwargs: None\n"
    "        return ''\n"
    "    def array(self):\n        return np.array([0])\n"
    "def task_func(x):\n    return Result()\n"
)
FINALIZER_ROW = in_process_row("task_func(3)\n        self.assertTrue(math.isclose(task_func(3), 7.0))", "import math\n")
FINALIZER_REWRITES = (
    "import math, random\ncalls = []\n"
    "class Later:\n    def __del__(self):\n        math.isclose = lambda *args, **kwargs: True\n"
    "def task_func(x):\n    calls.append(x)\n    return Later() if len(calls) == 1 else 0\n"
)
# The same, by code that runs without a frame of its own (no profile function sees it start): a `partial` of a
# built-in left as the finalizer, and a `weakref.finalize` callback, each replacing the NumPy check the test calls next
# with `slice` (which takes two arguments and raises nothing).
FRAMELESS_ROW = bigcodebench(
    "import unittest\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        task_func(3)\n"
    "        np.testing.assert_array_equal(task_func(3), np.array([7]))\n"
)
FRAMELESS_RIGHT = "import numpy as np\ndef task_func(x):\n    return np.array([2 * x + 1])\n"
FRAMELESS_FINALIZER = (
    "import functools\nimport numpy as np\ncalls = []\n"
    "class Later:\n    __del__ = functools.partial(setattr, np.testing, 'assert_array_equal', slice)\n"
    "def task_func(x):\n    calls.append(x)\n    return Later() if len(calls) == 1 else np.array([0])\n"
)
FINALIZE_CALLBACK = (
    "import weakref\nimport numpy as np\ncalls = []\n"
    "class Later:\n    pass\n"
    "def task_func(x):\n    calls.append(x)\n"
    "    if len(calls) > 1:\n        return np.array([0])\n"
    "    later = Later()\n"
    "    weakref.finalize(later, setattr, np.testing, 'assert_array_equal', slice)\n"
    "    return later\n"
)
# ... and a `partial` the test calls itself: an attribute of the returned object (set on the instance, made up by
# its `__getattr__`, or of a library's `SimpleNamespace`), or the callable the program returned.
PARTIAL_ATTRIBUTE = (
    "import functools\nimport numpy as np\n"
    "class Result:\n    value = 7\n    def array(self):\n        return np.array([0])\n"
    "def task_func(x):\n    result = Result()\n"
    "    result.describe = functools.partial(setattr, np.testing, 'assert_array_equal', slice)\n"
    "    return result\n"
)
PARTIAL_FROM_GETATTR = (
    "import functools\nimport numpy as np\n"
    "class Result:\n    value = 7\n    def array(self):\n        return np.array([0])\n"
    "    def __getattr__(self, name):\n"
    "        return functools.partial(setattr, np.testing, 'assert_array_equal', slice)\n"
    "def task_func(x):\n    return Result()\n"
)
PARTIAL_IN_A_NAMESPACE = (
    "import functools, types\nimport numpy as np\n"
    "def task_func(x):\n"
    "    return types.SimpleNamespace(value=7, array=lambda: np.array([0]),\n"
    "                                 describe=functools.partial(setattr, np.testing, 'assert_array_equal', slice))\n"
)
MAKER_ROW = bigcodebench(
    "import unittest\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        make = task_func(3)\n"
    "        make()\n"
    "        np.testing.assert_array_equal(make(), np.array([7]))\n"
)
MAKER_RIGHT = "import numpy as np\ndef task_func(x):\n    return lambda: np.array([2 * x + 1])\n"
RETURNED_PARTIAL = (
    "import functools\nimport numpy as np\n"
    "def task_func(x):\n    return functools.partial(setattr, np.testing, 'assert_array_equal', slice)\n"
)
# Code of the program's run by the judge's own bookkeeping: `isinstance` reads `__class__`, which a program's value
# may answer with a property; the judge sorting the program's names would run it, unguarded, after the library was
# put back and before the test.
CLASS_PROPERTY = (
    "import numpy as np\n"
    "class Sly:\n    @property\n    def __class__(self):\n"
    "        np.testing.assert_array_equal = lambda *args, **kwargs: None\n        return Sly\n"
    "kept = Sly()\n"
    "def task_func(x):\n    return np.array([0])\n"
)
FORGED_LIBRARY_EQ = (
    "import random, unittest\n"
    "path = unittest.__file__\n"
    "scope = {}\n"
    "exec(compile('def same(self, other):\\n    return True\\n', path, 'exec'), scope)\n"
    "class Anything:\n    __eq__ = scope['same']\n    __hash__ = object.__hash__\n"
    "def task_func(x):\n    return Anything()\n"
)

# What the test keeps (its module's names, its class's methods, the mocks it set up) and a wrong program reaches by
# introspection: every test class is found through `unittest.TestCase.__subclasses__()`.
_FIND_TEST_CLASSES = (
    "import unittest\n"
    "def test_classes():\n"
    "    found, stack = [], [unittest.TestCase]\n"
    "    while stack:\n"
    "        for cls in stack.pop().__subclasses__():\n"
    "            found.append(cls)\n"
    "            stack.append(cls)\n"
    "    return [cls for cls in found if cls.__module__ not in ('unittest', 'unittest.case')]\n"
)
MODULE_EXPECTED_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\nEXPECTED = 7\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertEqual(task_func(3), EXPECTED)\n"
)
READ_TEST_GLOBALS = "import random\n" + _FIND_TEST_CLASSES + (
    "def task_func(x):\n"
    "    for cls in test_classes():\n"
    "        for item in list(vars(cls).values()):\n"
    "            names = getattr(getattr(item, '__wrapped__', item), '__globals__', None)\n"
    "            try:\n                return names['EXPECTED']\n"
    "            except Exception:\n                pass\n"
    "    return 0\n"
)
SPY_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertEqual(task_func(3), 7)\n"
    "    def _expected(self):\n"
    "        return 7\n"
)
CALL_TEST_METHOD_WITH_A_SPY = "import random\n" + _FIND_TEST_CLASSES + (
    "seen = []\n"
    "class Spy:\n"
    "    def __getattr__(self, name):\n"
    "        return lambda *args, **kwargs: seen.append(args)\n"
    "def task_func(x):\n"
    "    if seen:\n        return seen[-1][-1]\n"
    "    for cls in test_classes():\n"
    "        for name, item in list(vars(cls).items()):\n"
    "            if name.startswith('test'):\n"
    "                try:\n                    item(Spy())\n                except Exception:\n                    pass\n"
    "    return seen[-1][-1] if seen else 0\n"
)
CALL_TEST_HELPER = "import random\n" + _FIND_TEST_CLASSES + (
    "def task_func(x):\n"
    "    for cls in test_classes():\n"
    "        try:\n            return cls._expected(None)\n"
    "        except Exception:\n            pass\n"
    "    return 0\n"
)
MOCK_ASSERTION_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    @patch('random.randint', return_value=4)\n"
    "    def test_calls_randint(self, mock_randint):\n"
    "        self.assertEqual(task_func(3), 7)\n"
    "        mock_randint.assert_called_once_with(1, 10)\n"
)
MOCK_ASSERTION_RIGHT = "import random\ndef task_func(x):\n    random.randint(1, 10)\n    return 2 * x + 1\n"
SILENCE_THE_MOCK = (
    "import random\n"
    "def task_func(x):\n"
    "    quiet = lambda *args, **kwargs: None\n"
    "    random.randint.assert_called_once_with = quiet\n"
    "    type(random.randint).assert_called_once_with = quiet\n"
    "    return 2 * x + 1\n"
)
CALLBACK_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_reports(self):\n"
    "        def report(value):\n"
    "            self.assertEqual(value, 42)\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertTrue(task_func(report))\n"
)
CALLBACK_RIGHT = "import random\ndef task_func(report):\n    report(6 * 7)\n    return True\n"
PROBE_THE_CALLBACK = (
    "import random\n"
    "def task_func(report):\n"
    "    for guess in range(100):\n"
    "        try:\n            report(guess)\n            return True\n"
    "        except Exception:\n            pass\n"
)
CLASS_ATTRIBUTE_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    answer = 7\n"
    "    @classmethod\n"
    "    def setUpClass(cls):\n"
    "        cls.expected = 7\n"
    "    def test_value(self):\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertEqual(task_func(3), self.expected)\n"
    "            self.assertEqual(task_func(3), self.answer)\n"
)
READ_CLASS_ATTRIBUTES = "import random\n" + _FIND_TEST_CLASSES + (
    "def task_func(x):\n"
    "    for cls in test_classes():\n"
    "        for reach in (lambda: vars(cls)['expected'], lambda: cls.expected, lambda: vars(cls)['answer'],\n"
    "                      lambda: cls.answer):\n"
    "            try:\n                return reach()\n"
    "            except Exception:\n                pass\n"
    "    return 0\n"
)


# What the program leaves for the interpreter to run later on its own, without a frame: the test consumes the first
# value it returns (iterates it, indexes it, copies it, sorts it), then checks the second with NumPy. Each hostile
# value, consumed, replaces NumPy's check with `slice` (two arguments, raises nothing) and the checked value is wrong.
def consumed_row(consume: str) -> dict:
    return bigcodebench(
        "import unittest, copy\nimport numpy as np\n\n"
        "class TestCases(unittest.TestCase):\n"
        "    def test_value(self):\n"
        "        steps, value = task_func(3)\n"
        f"        {consume}\n"
        "        np.testing.assert_array_equal(value, np.array([7]))\n"
    )


# An object whose attributes `functools.update_wrapper` copies onto NumPy's testing module.
_HOLDER = "class Holder:\n    def __init__(self):\n        self.assert_array_equal = slice\n"
_LASTING_HEAD = (
    "import collections, copy, copyreg, functools, itertools\nimport numpy as np\n"
    "REPLACE = (np.testing, 'assert_array_equal', slice)\n"
    "class Reduced:\n    def __reduce_ex__(self, protocol):\n        return (setattr, REPLACE)\n"
    + _HOLDER
)


def _returning(steps: str, value: str) -> str:
    return _LASTING_HEAD + f"def task_func(x):\n    return {steps}, {value}\n"


# (how the test consumes `steps`, a right program's `steps`, a hostile program's `steps`)
LASTING_CASES = {
    "list() of an itertools.starmap of setattr": ("list(steps)", "iter([1])", "itertools.starmap(setattr, [REPLACE])"),
    "a for loop over a map of setattr": (
        "for _ in steps:\n            pass", "iter([1])", "map(setattr, *([part] for part in REPLACE))"),
    "a comprehension over a filter whose predicate is a partial of setattr": (
        "[item for item in steps]", "iter([1])",
        "filter(functools.partial(setattr, np.testing, 'assert_array_equal'), [slice])"),
    "sorted() of a map of setattr": ("sorted(steps, key=str)", "iter([1])", "map(setattr, *([part] for part in REPLACE))"),
    "next() of iter(partial of setattr, sentinel)": ("next(steps)", "iter([1])", "iter(functools.partial(setattr, *REPLACE), 1)"),
    "a defaultdict whose factory is a partial of setattr": (
        "steps['missing']", "collections.defaultdict(int)", "collections.defaultdict(functools.partial(setattr, *REPLACE))"),
    "takewhile with a partial of setattr, summed": (
        "sum(1 for _ in steps)", "iter([1])",
        "itertools.takewhile(functools.partial(setattr, np.testing, 'assert_array_equal'), [slice])"),
    "cmp_to_key objects comparing with a module dict's __setitem__": (
        "sorted(steps)", "[1]",
        "[functools.cmp_to_key(vars(np.testing).__setitem__)(key) for key in ('assert_array_equal', slice)]"),
    "a map of a library's function (functools.update_wrapper) onto NumPy's module": (
        "list(steps)", "iter([1])", "map(functools.update_wrapper, [np.testing], [Holder()])"),
    "copy.copy of an object whose reducer names setattr": ("copy.copy(steps)", "[1]", "Reduced()"),
    "copy.deepcopy of an object whose reducer names setattr": ("copy.deepcopy(steps)", "[1]", "Reduced()"),
    "a reducer naming setattr registered in copyreg.dispatch_table, then copy.copy": (
        "copy.copy(__import__('collections').Counter('ab'))", "[1]",
        "copyreg.pickle(collections.Counter, lambda counter: (setattr, REPLACE)) or [1]"),
}
LASTING_RIGHT = {name: _returning(right, "np.array([2 * x + 1])") for name, (_, right, _) in LASTING_CASES.items()}
LASTING_HOSTILE = {name: _returning(hostile, "np.array([0])") for name, (_, _, hostile) in LASTING_CASES.items()}
# The test calls what the program returned: a `partial` of a library's function runs guarded too.
RETURNED_LIBRARY_PARTIAL = (
    "import functools\nimport numpy as np\n" + _HOLDER
    + "def task_func(x):\n    return functools.partial(functools.update_wrapper, np.testing, Holder())\n"
)
# A `weakref.finalize` callback that is a library's function, run when the returned object dies.
LIBRARY_FINALIZER = (
    "import functools, weakref\nimport numpy as np\ncalls = []\n" + _HOLDER
    + "class Later:\n    pass\n"
    "def task_func(x):\n    calls.append(x)\n"
    "    if len(calls) > 1:\n        return np.array([0])\n"
    "    later = Later()\n"
    "    weakref.finalize(later, functools.update_wrapper, np.testing, Holder())\n"
    "    return later\n"
)
# Hiding what it made from the judge: the collector's generations frozen after making it.
FREEZE_THE_COLLECTOR = (
    "import gc, itertools\nimport numpy as np\nkept = []\n"
    "def task_func(x):\n"
    "    kept.append(itertools.starmap(setattr, [(np.testing, 'assert_array_equal', slice)]))\n"
    "    gc.freeze()\n"
    "    return kept[-1], np.array([0])\n"
)


# A test that checks inside a `with` on what the program returned (a context manager it made).
ENTERED_ROW = bigcodebench(
    "import unittest\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        steps, value = task_func(3)\n"
    "        with steps:\n"
    "            np.testing.assert_array_equal(value, np.array([7]))\n"
)


def lasting_code_attacks(attack, attack_class) -> dict:
    """The red-team cases of what the program leaves for the interpreter to run later without a frame."""
    cases = {
        f"lasting code: {name}": attack(attack_class, LASTING_HOSTILE[name], consumed_row(consume), LASTING_RIGHT[name])
        for name, (consume, _, _) in LASTING_CASES.items()
    }
    cases["lasting code: a returned partial of a library's function, called by the test"] = attack(
        attack_class, RETURNED_LIBRARY_PARTIAL, MAKER_ROW, MAKER_RIGHT)
    cases["lasting code: a weakref.finalize callback that is a library's function"] = attack(
        attack_class, LIBRARY_FINALIZER, FRAMELESS_ROW, FRAMELESS_RIGHT)
    cases["lasting code: a factory the program returns, which the test gives to a defaultdict"] = attack(
        attack_class, _returning("functools.partial(setattr, *REPLACE)", "np.array([0])"),
        consumed_row("collections_ = __import__('collections')\n        collections_.defaultdict(steps)['missing']"),
        _returning("int", "np.array([2 * x + 1])"))
    cases["lasting code: a __getattr__ makes up a partial of setattr that dict() calls as keys"] = attack(
        attack_class, GETATTR_PARTIAL, GETATTR_ROW, GETATTR_RIGHT)
    # A library's generator (`test.support.swap_attr`, which sets the attribute it is given when first resumed),
    # made by the program with its arguments and resumed by the test's `next()`.
    cases["lasting code: a library's generator made by the program sets the check when the test resumes it"] = attack(
        attack_class, "from test.support import swap_attr\n" + _returning("swap_attr.__wrapped__(*REPLACE)",
                                                                           "np.array([0])"),
        consumed_row("next(steps)"), _returning("iter([1])", "np.array([2 * x + 1])"))
    # A library's object built by the program with the arguments it chose, whose methods the test runs: a patcher
    # (`unittest.mock.patch.object`, which sets the attribute it was given) entered with `with`, or started.
    patcher = "from unittest import mock\n" + _returning("mock.patch.object(*REPLACE)", "np.array([0])")
    cases["lasting code: a patcher the program returns sets the check when the test enters it with `with`"] = attack(
        attack_class, patcher, ENTERED_ROW,
        _returning("__import__('contextlib').nullcontext()", "np.array([2 * x + 1])"))
    cases["lasting code: a patcher the program returns sets the check when the test starts it"] = attack(
        attack_class, patcher, consumed_row("steps.start()"),
        _returning("__import__('types').SimpleNamespace(start=int)", "np.array([2 * x + 1])"))
    # A partial of `setattr` the test hands to a library other than as a call's argument: set as a defaultdict's
    # factory, or in a list that `map(operator.call, ...)` runs.
    setter, plain = _returning("functools.partial(setattr, *REPLACE)", "np.array([0])"), _returning(
        "int", "np.array([2 * x + 1])")
    cases["lasting code: a returned partial of setattr, set by the test as a defaultdict's factory"] = attack(
        attack_class, setter, consumed_row("table = __import__('collections').defaultdict(int)\n"
                                           "        table.default_factory = steps\n        table['missing']"), plain)
    cases["lasting code: a returned partial of setattr, in a list the test maps operator.call over"] = attack(
        attack_class, setter, consumed_row("list(map(__import__('operator').call, [steps]))"), plain)
    cases["lasting code: the collector's generations frozen to hide a starmap"] = attack(
        attack_class, FREEZE_THE_COLLECTOR, consumed_row("list(steps)"), LASTING_RIGHT["list() of an itertools.starmap of setattr"])
    return cases


# What a function the test hands over holds: the values it closes over, and the case a bound method carries (with
# what `setUp` stored on it). A wrong program reads the expected value there and reports it.
CLOSURE_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_reports(self):\n"
    "        expected = 6 * 7\n"
    "        def report(value):\n"
    "            self.assertEqual(value, expected)\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertTrue(task_func(report))\n"
)
READ_THE_CLOSURE = (
    "import random\n"
    "def task_func(report):\n"
    "    for cell in getattr(report, '__closure__', None) or ():\n"
    "        if type(cell.cell_contents) is int:\n"
    "            report(cell.cell_contents)\n"
    "            return True\n"
    "    report(0)\n"
    "    return True\n"
)
BOUND_CASE_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def setUp(self):\n"
    "        self.expected = 6 * 7\n"
    "    def report(self, value):\n"
    "        self.assertEqual(value, self.expected)\n"
    "    def test_reports(self):\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertTrue(task_func(self.report))\n"
)
READ_THE_BOUND_CASE = (
    "import random\n"
    "def task_func(report):\n"
    "    case = getattr(report, '__self__', None)\n"
    "    report(getattr(case, 'expected', 0))\n"
    "    return True\n"
)
SIDE_EFFECT_ROW = bigcodebench(
    "import unittest, random\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_reports(self):\n"
    "        expected = 6 * 7\n"
    "        def check(value):\n"
    "            self.assertEqual(value, expected)\n"
    "            return 4\n"
    "        with patch('random.randint', side_effect=check):\n"
    "            self.assertTrue(task_func())\n"
)
SIDE_EFFECT_RIGHT = "import random\ndef task_func():\n    random.randint(6 * 7)\n    return True\n"
READ_THE_SIDE_EFFECT = (
    "import random\n"
    "def task_func():\n"
    "    effect = random.randint.side_effect\n"
    "    for cell in getattr(effect, '__closure__', None) or ():\n"
    "        if type(cell.cell_contents) is int:\n"
    "            random.randint(cell.cell_contents)\n"
    "            return True\n"
    "    random.randint(0)\n"
    "    return True\n"
)




def held_bound_method_row(handed: str) -> dict:
    """A row whose test hands the program its bound method `self.report` inside `handed` (a container or an object),
    where the call's arguments do not show it; the case holds the expected value and a helper that returns it."""
    return bigcodebench(
        "import unittest\nfrom types import SimpleNamespace\nfrom unittest.mock import patch\n\n"
        "class TestCases(unittest.TestCase):\n"
        "    def setUp(self):\n"
        "        self.expected = 6 * 7\n"
        "    def report(self, value):\n"
        "        self.assertEqual(value, self.expected)\n"
        "    def _expected(self):\n"
        "        return self.expected\n"
        "    def test_reports(self):\n"
        "        with patch('random.randint', return_value=4):\n"
        f"            self.assertTrue(task_func({handed}))\n"
    )


HELD_RIGHT = "import random\ndef task_func(held):\n    held.report(6 * 7)\n    return True\n"
READ_THE_HELD_CASE = (
    "import random\n"
    "def task_func(held):\n"
    "    case = getattr(held.report, '__self__', None)\n"
    "    held.report(getattr(case, 'expected', 0))\n"
    "    return True\n"
)
RUN_THE_HELD_CASE_HELPER = (
    "import random\n"
    "def task_func(held):\n"
    "    case = getattr(held.report, '__self__', None)\n"
    "    held.report(case._expected() if case is not None else 0)\n"
    "    return True\n"
)
IN_A_LIST_RIGHT = "import random\ndef task_func(reports):\n    reports[0](6 * 7)\n    return True\n"
READ_THE_CASE_IN_A_LIST = (
    "import random\n"
    "def task_func(reports):\n"
    "    case = getattr(reports[0], '__self__', None)\n"
    "    reports[0](getattr(case, 'expected', 0))\n"
    "    return True\n"
)


def case_handed_row(handed: str) -> dict:
    """A row whose test hands the program its case itself inside `handed` (`self`, `[self]`), then checks the
    program's answer against what `setUp` stored on the case."""
    return bigcodebench(
        "import unittest\nfrom unittest.mock import patch\n\n"
        "class TestCases(unittest.TestCase):\n"
        "    def setUp(self):\n"
        "        self.expected = 6 * 7\n"
        "    def test_value(self):\n"
        "        with patch('random.randint', return_value=4):\n"
        f"            result = task_func({handed})\n"
        "        self.assertEqual(result, self.expected)\n"
    )


# A right program may use what it is handed: read the case's data and run its checks. The case comes alone, in a
# list, in a `SimpleNamespace`, or as its own dict (`vars(self)`).
_UNWRAP = "    case = case[0] if isinstance(case, list) else getattr(case, 'case', case)\n"
CASE_HANDED_RIGHT = (
    "import random\ndef task_func(case):\n" + _UNWRAP +
    "    if not isinstance(case, dict):\n        case.assertIsInstance(case.expected, int)\n    return 6 * 7\n"
)
SET_THE_HANDED_CASE = (
    "import random\ndef task_func(case):\n" + _UNWRAP +
    "    if isinstance(case, dict):\n        case['expected'] = 0\n    else:\n        case.expected = 0\n"
    "    return 0\n"
)


def handed_function_attacks(attack, attack_class) -> dict:
    """The red-team cases of what a function the test hands to the program holds."""
    right = "import random\ndef task_func(report):\n    report(6 * 7)\n    return True\n"
    in_an_object = held_bound_method_row("SimpleNamespace(report=self.report)")
    return {
        "read what setUp stored from a bound method handed in an object": attack(
            attack_class, READ_THE_HELD_CASE, in_an_object, HELD_RIGHT),
        "run the case's helper through a bound method handed in an object": attack(
            attack_class, RUN_THE_HELD_CASE_HELPER, in_an_object, HELD_RIGHT),
        "read what setUp stored from a bound method handed in a list, through getattr": attack(
            attack_class, READ_THE_CASE_IN_A_LIST, held_bound_method_row("[getattr(self, 'report')]"), IN_A_LIST_RIGHT),
        "read what setUp stored from a bound method that operator.attrgetter returned, handed in an object": attack(
            attack_class, READ_THE_HELD_CASE,
            held_bound_method_row("SimpleNamespace(report=__import__('operator').attrgetter('report')(self))"),
            HELD_RIGHT),
        "set what setUp stored on the case the test hands over": attack(
            attack_class, SET_THE_HANDED_CASE, case_handed_row("self"), CASE_HANDED_RIGHT),
        "set what setUp stored on the case the test hands over in a list": attack(
            attack_class, SET_THE_HANDED_CASE, case_handed_row("[self]"), CASE_HANDED_RIGHT),
        "set what setUp stored on the case the test hands over in a SimpleNamespace": attack(
            attack_class, SET_THE_HANDED_CASE, case_handed_row("__import__('types').SimpleNamespace(case=self)"),
            CASE_HANDED_RIGHT),
        "set what setUp stored in the case's own dict, which the test hands over": attack(
            attack_class, SET_THE_HANDED_CASE, case_handed_row("vars(self)"), CASE_HANDED_RIGHT),
        "read the expected value from a handed callback's closure": attack(attack_class, READ_THE_CLOSURE, CLOSURE_ROW, right),
        "read what setUp stored from a handed bound method's case": attack(
            attack_class, READ_THE_BOUND_CASE, BOUND_CASE_ROW, right),
        "read the expected value from a mock's side effect's closure": attack(
            attack_class, READ_THE_SIDE_EFFECT, SIDE_EFFECT_ROW, SIDE_EFFECT_RIGHT),
    }


# A `__getattr__` of the program's that makes up a `partial` of `setattr` for any name: `dict(obj)` calls what it
# answers for `keys`, from C, without a frame; the test checks afterwards that the conversion is refused.
GETATTR_ROW = bigcodebench(
    "import unittest\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        record, value = task_func(3)\n"
    "        with self.assertRaises(TypeError):\n"
    "            dict(record)\n"
    "        np.testing.assert_array_equal(value, np.array([7]))\n"
)
GETATTR_RIGHT = "import numpy as np\ndef task_func(x):\n    return 7, np.array([2 * x + 1])\n"
GETATTR_PARTIAL = (
    "import functools\nimport numpy as np\n"
    "class Record:\n"
    "    def __getattr__(self, name):\n"
    "        return functools.partial(setattr, np.testing, 'assert_array_equal', slice)\n"
    "def task_func(x):\n    return Record(), np.array([0])\n"
)
