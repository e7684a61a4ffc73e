"""Red-team programs that hand the test something equal to anything, in a test that runs in the program's process:
`unittest.mock.ANY` itself, passed to a mock for each argument the test checks or returned where the test names
`ANY` too, and classes of the program's whose comparison is a library's function. Used by `red_team.py` (class 4)."""

from __future__ import annotations

from red_team_in_process import OBJECT_ARRAY_RIGHT, OBJECT_ARRAY_ROW
from red_team_programs import bigcodebench

# A BigCodeBench-style row whose test patches `shutil.copy` and checks the mock's call record.
COPY_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    @patch('shutil.copy')\n"
    "    def test_copy(self, mock_copy):\n"
    "        task_func('a.txt')\n"
    "        mock_copy.assert_called_once_with('a.txt', '/backup/a.txt')\n"
)
COPY_RIGHT = "import shutil\ndef task_func(name):\n    shutil.copy(name, '/backup/' + name)\n"
COPY_WRONG = "import shutil\ndef task_func(name):\n    shutil.copy(name, '/tmp/' + name)\n"
# What the program passes for both arguments, which it does not know.
COPY_WITH = "import shutil\n{setup}def task_func(name):\n    shutil.copy({value}, {value})\n"
# A row whose test names `ANY` itself, for a value any program may choose.
NAMES_ANY_ROW = bigcodebench(
    "import unittest\nimport random\nfrom unittest.mock import patch, ANY\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    @patch('random.randint', return_value=4)\n"
    "    def test_value(self, mock_randint):\n"
    "        self.assertEqual(task_func(3), {'id': ANY, 'value': 7})\n"
    "        mock_randint.assert_called_once_with(0, ANY)\n"
)
NAMES_ANY_RIGHT = "import random\ndef task_func(x):\n    return {'id': random.randint(0, 9), 'value': 2 * x + 1}\n"
NAMES_ANY_WRONG = (
    "import random\nfrom unittest import mock\n"
    "def task_func(x):\n    return {'id': random.randint(0, 9), 'value': mock.ANY}\n"
)
OBJECT_ARRAY_OF_ANY = "from unittest import mock\ndef task_func(n):\n    return [mock.ANY] * n\n"
# `unittest.mock` wraps what a program sets as a mock's `__eq__` in a function of its own file.
MOCK_EQUAL = "from unittest.mock import MagicMock\nequal = MagicMock()\nequal.__eq__ = lambda self, other: True\n"
BORROWED_EQUAL = "from unittest import mock\nclass Equal:\n    __eq__ = type(mock.ANY).__eq__\n"
# The same wrapper made again around the program's lambda, with globals of its own: a function of mock's file that
# no module loaded before the program holds.
FORGED_EQUAL = (
    "import types\nfrom unittest import mock\n"
    "wrapper = mock._get_method('__eq__', lambda self, other: True)\n"
    "class Equal:\n"
    "    __eq__ = types.FunctionType(wrapper.__code__, {}, '__eq__', None, wrapper.__closure__)\n"
)


def anything_equal_attacks(attack, attack_class) -> dict:
    """The red-team cases of objects equal to anything that a library's code compares."""
    return {
        "unittest.mock.ANY passed for each argument that a mock's assert_called_once_with checks": attack(
            attack_class, COPY_WITH.format(setup="from unittest import mock\n", value="mock.ANY"), COPY_ROW,
            COPY_RIGHT, wrong=COPY_WRONG),
        "unittest.mock.ANY returned where the test names ANY itself": attack(
            attack_class, NAMES_ANY_WRONG, NAMES_ANY_ROW, NAMES_ANY_RIGHT),
        "unittest.mock.ANY, loaded by the program, in a NumPy object array": attack(
            attack_class, OBJECT_ARRAY_OF_ANY, OBJECT_ARRAY_ROW, OBJECT_ARRAY_RIGHT),
        "a mock whose __eq__ the program set to a lambda, passed to the test's mock": attack(
            attack_class, COPY_WITH.format(setup=MOCK_EQUAL, value="equal"), COPY_ROW, COPY_RIGHT),
        "a class of the program's with ANY's __eq__, passed to the test's mock": attack(
            attack_class, COPY_WITH.format(setup=BORROWED_EQUAL, value="Equal()"), COPY_ROW, COPY_RIGHT),
        "a library's code made into a function with the program's globals, as __eq__": attack(
            attack_class, COPY_WITH.format(setup=FORGED_EQUAL, value="Equal()"), COPY_ROW, COPY_RIGHT),
    }
