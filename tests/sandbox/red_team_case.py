"""Red-team programs that reach the test's case through something the test hands over other than the case itself or
a built-in container of it (a namedtuple, an object of the test's own class, a pytest case's own dict), and set
what the test stored there for its later check; and programs handed the case that change in place a container the
test stored on it (`case.expected.clear()`). Used by `red_team.py` (class 2)."""

from __future__ import annotations

from red_team_in_process import CASE_HANDED_RIGHT, SET_THE_HANDED_CASE, case_handed_row
from red_team_programs import bigcodebench, kodcode

IN_A_NAMEDTUPLE = "__import__('collections').namedtuple('Holder', 'case')(self)"
# An object of the test's own class holding the case; the program writes in the case's dict.
HOLDER_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class Holder:\n    def __init__(self, case):\n        self.case = case\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def setUp(self):\n"
    "        self.expected = 6 * 7\n"
    "    def test_value(self):\n"
    "        with patch('random.randint', return_value=4):\n"
    "            result = task_func(Holder(self))\n"
    "        self.assertEqual(result, self.expected)\n"
)
SET_THROUGH_THE_DICT = "import random\ndef task_func(holder):\n    vars(holder.case)['expected'] = 0\n    return 0\n"
# A pytest case hands the program its own dict; `setup_method` stored what the test checks.
PYTEST_ROW = kodcode(
    "from unittest.mock import patch\nfrom solution import task_func\n\n"
    "class TestValue:\n"
    "    def setup_method(self):\n"
    "        self.expected = 6 * 7\n"
    "    def test_value(self):\n"
    "        with patch('random.randint', return_value=4):\n"
    "            result = task_func(vars(self))\n"
    "        assert result == self.expected\n"
)
PYTEST_RIGHT = "import random\ndef task_func(state):\n    return 6 * 7\n"
SET_THE_PYTEST_DICT = "import random\ndef task_func(state):\n    state['expected'] = 0\n    return 0\n"


def case_reached_attacks(attack, attack_class) -> dict:
    """The red-team cases of a case the program reaches through what the test hands over."""
    return {
        "set what setUp stored on the case, handed inside a namedtuple": attack(
            attack_class, SET_THE_HANDED_CASE, case_handed_row(IN_A_NAMEDTUPLE), CASE_HANDED_RIGHT),
        "set what setUp stored through the case's dict, inside an object of the test's class": attack(
            attack_class, SET_THROUGH_THE_DICT, HOLDER_ROW, CASE_HANDED_RIGHT),
        "set what setup_method stored through a pytest case's own dict, handed over": attack(
            attack_class, SET_THE_PYTEST_DICT, PYTEST_ROW, PYTEST_RIGHT),
    }


def stored_container_row(handed: str) -> dict:
    """A row whose `setUp` stores a list and a nested dict on the case (and its class body a list), then hands the
    program its case inside `handed` and checks the answer against what it stored."""
    return bigcodebench(
        "import unittest\nfrom unittest.mock import patch\n\n"
        "class TestCases(unittest.TestCase):\n"
        "    kept = [1, 2]\n"
        "    def setUp(self):\n"
        "        self.expected = [6, 7]\n"
        "        self.table = {'values': [6, 7], 'pairs': ([6], [7])}\n"
        "    def test_value(self):\n"
        "        with patch('random.randint', return_value=4):\n"
        f"            result = task_func({handed})\n"
        "        self.assertEqual(result, [self.expected, self.table['values'], self.table['pairs'][0], self.kept])\n"
    )


_UNWRAP = (
    "    case = case[0] if isinstance(case, list) else getattr(case, 'case', case)\n"
    "    read = case.get if isinstance(case, dict) else lambda name: getattr(case, name, None)\n"
)
STORED_RIGHT = "import random\ndef task_func(case):\n" + _UNWRAP + "    return [[6, 7], [6, 7], [6], [1, 2]]\n"
# Empties in place each container of the case's it reaches, and answers the emptied values.
CLEAR_IN_PLACE = (
    "import random\ndef task_func(case):\n" + _UNWRAP +
    "    held = [read('expected'), read('table')['values'], read('table')['pairs'][0]]\n"
    "    held.append(read('kept') if read('kept') is not None else [1, 2])\n"
    "    for value in held[:3] + ([read('kept')] if read('kept') is not None else []):\n"
    "        value.clear()\n"
    "    return held\n"
)
STORED_ROUTES = {"itself": "self", "in a list": "[self]",
                 "in a SimpleNamespace": "__import__('types').SimpleNamespace(case=self)", "as its dict": "vars(self)"}


def changed_in_place_attacks(attack, attack_class) -> dict:
    """The red-team cases of a container the test stored on its case, changed in place by a program handed it."""
    return {f"empty in place the containers setUp stored on the case, handed {route}": attack(
                attack_class, CLEAR_IN_PLACE, stored_container_row(handed), STORED_RIGHT)
            for route, handed in STORED_ROUTES.items()}
