"""Red-team programs that rebind, while their call runs, a name the judge's code looks up then: a function of a
harness module (every harness module is in `sys.modules`, and in any harness function's `__globals__`) or a
builtin. The judge's code that runs during a call binds what it calls before the program runs
(`tests/sandbox/test_bound_names.py` checks it). Used by `red_team.py` (class 2)."""

from __future__ import annotations

from red_team_in_process import CALL_TEST_HELPER, SPY_ROW
from red_team_programs import bigcodebench

SPY_RIGHT = "import random\ndef task_func(x):\n    return 2 * x + 1\n"

# The test method's first check asks whether the program calls it; rebound to say no, the test's helper runs for
# the program and hands it the expected value.
_UNGUARD = (
    "import sys\n"
    "def _unguard():\n"
    "    for module in list(sys.modules.values()):\n"
    "        names = getattr(module, '__dict__', None)\n"
    "        if isinstance(names, dict) and 'nearest_code_is_program' in names and 'namespace_keeper' in names:\n"
    "            module.nearest_code_is_program = lambda *args, **kwargs: False\n"
)
HELPER_UNGUARDED = _UNGUARD + CALL_TEST_HELPER.replace("def task_func(x):\n", "def task_func(x):\n    _unguard()\n")

# The audit hook refuses the test's code objects to the program; with `builtins.str` replaced, its check of the
# code's file name would have let the read through, and the helper's constants give the expected value.
READ_WITH_STR_REPLACED = (
    "import random, builtins\n"
    "def task_func(x):\n"
    "    for cls in type.__subclasses__(__import__('unittest').TestCase):\n"
    "        function = vars(cls).get('_expected')\n"
    "        if function is None:\n            continue\n"
    "        real = builtins.str\n"
    "        builtins.str = type('Other', (), {})\n"
    "        try:\n            code = function.__code__\n"
    "        except Exception:\n            code = None\n"
    "        finally:\n            builtins.str = real\n"
    "        if code is not None:\n"
    "            return [constant for constant in code.co_consts if type(constant) is int][-1]\n"
    "    return 0\n"
)

# A check the test makes in a callback the program calls: with `builtins.bool` answering True, the judge's truth
# test of `value == 42` would have passed whatever the program reported.
CALLBACK_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        def report(value):\n"
    "            self.assertTrue(value == 42)\n"
    "        with patch('random.randint', return_value=4):\n"
    "            self.assertEqual(task_func(report), 'reported')\n"
)
CALLBACK_RIGHT = "import random\ndef task_func(report):\n    report(6 * 7)\n    return 'reported'\n"
TRUTH_REBOUND = (
    "import random, builtins\n"
    "def task_func(report):\n"
    "    real = builtins.bool\n"
    "    builtins.bool = lambda *args: True\n"
    "    try:\n        report(0)\n"
    "    finally:\n        builtins.bool = real\n"
    "    return 'reported'\n"
)


def rebound_name_attacks(attack, judge_class) -> dict:
    """The red-team cases of the judge's names rebound while the program's call runs."""
    return {
        "rebind the judge's check of who calls a test method, then run the test's helper": attack(
            judge_class, HELPER_UNGUARDED, SPY_ROW, SPY_RIGHT),
        "replace builtins.str while reading the test helper's code": attack(
            judge_class, READ_WITH_STR_REPLACED, SPY_ROW, SPY_RIGHT),
        "replace builtins.bool while the test's callback checks what the program reports": attack(
            judge_class, TRUTH_REBOUND, CALLBACK_ROW, CALLBACK_RIGHT),
    }
