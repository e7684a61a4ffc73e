"""Red-team programs that pass as the judge's own code, or run theirs inside the judge, through names: a function
of the program's whose code names another file (the audit hook asked whether a frame of "solution.py" was on the
stack), a `str` subclass whose `__eq__` answers the judge's comparisons of file names, and one whose `__hash__` or
`__eq__` the judge would run while it reads the program's classes (a key of a class's dict, a class's `__name__`
or `__module__`, a metaclass's `__hash__`). Each rewires NumPy's check, which the test then calls, or forges the
pass record. Used by `red_team.py` (class 2)."""

from __future__ import annotations

from red_team_library import ARRAY_RIGHT, ARRAY_ROW, NOTHING

# A `str` subclass that rewires NumPy's check whenever the judge hashes or compares it.
_REWIRING_STR = (
    "class Name(str):\n"
    "    def __hash__(self):\n"
    "        np.testing.assert_array_equal = nothing\n"
    "        return str.__hash__(self)\n"
    "    def __eq__(self, other):\n"
    "        np.testing.assert_array_equal = nothing\n"
    "        return str.__eq__(self, other)\n"
    "    def __ne__(self, other):\n"
    "        np.testing.assert_array_equal = nothing\n"
    "        return str.__ne__(self, other)\n"
)
_HEADER = "import numpy as np\n" + NOTHING
REWIRE_IN_CALL = "def task_func(n):\n    np.testing.assert_array_equal.__code__ = nothing.__code__\n    return np.zeros(n)\n"
RENAMED_CODE = (
    _HEADER + REWIRE_IN_CALL + "task_func.__code__ = task_func.__code__.replace(co_filename='elsewhere.py')\n"
)
NEVER_EQUAL_CODE_NAME = (
    _HEADER + "class Name(str):\n    def __eq__(self, other):\n        return False\n    __hash__ = str.__hash__\n"
    + REWIRE_IN_CALL + "task_func.__code__ = task_func.__code__.replace(co_filename=Name('solution.py'))\n"
)
HASHED_CLASS_KEY = (
    _HEADER + _REWIRING_STR + "Holder = type('Holder', (), {Name('value'): 1})\n"
    "def task_func(n):\n    return np.zeros(n)\n"
)
COMPARED_CLASS_NAMES = (
    _HEADER + _REWIRING_STR
    + "class Holder:\n    pass\nHolder.__name__ = Name('Holder')\nHolder.__module__ = Name('elsewhere')\n"
    "KEPT = Holder()\ndef task_func(n):\n    return np.zeros(n)\n"
)

# A metaclass whose `__hash__` the judge ran while it read the program's objects, with the audit hook's checks off
# for the judge's own work: it took the test process's frames and wrote a pass record with the test's nonce.
FORGING_METACLASS = (
    "import numpy as np, os, sys\n"
    "class Meta(type):\n"
    "    def __hash__(cls):\n"
    "        try:\n"
    "            frame = sys._getframe(0)\n"
    "            while frame is not None:\n"
    "                found = frame.f_locals\n"
    "                if 'secret' in found and 'result_fd' in found:\n"
    "                    os.write(found['result_fd'], b'P' + found['secret'] + b':1.')\n"
    "                    os._exit(0)\n"
    "                frame = frame.f_back\n"
    "        except Exception:\n"
    "            pass\n"
    "        return type.__hash__(cls)\n"
    "class Thing(metaclass=Meta):\n    pass\n"
    "KEPT = Thing()\n"
    "def task_func(n):\n    return np.zeros(n)\n"
)

# The same metaclass, rewiring NumPy's check instead, after the program's changes were put back.
REWIRING_METACLASS = (
    _HEADER + "class Meta(type):\n"
    "    def __hash__(cls):\n"
    "        np.testing.assert_array_equal = nothing\n"
    "        return type.__hash__(cls)\n"
    "class Thing(metaclass=Meta):\n    pass\n"
    "KEPT = Thing()\n"
    "def task_func(n):\n    return np.zeros(n)\n"
)


def judge_name_attacks(attack, judge_class) -> dict:
    """The red-team cases of names that pass as the judge's or run the program's code inside it."""
    return {
        "a function whose code names another file rewires NumPy's check in the call": attack(
            judge_class, RENAMED_CODE, ARRAY_ROW, ARRAY_RIGHT),
        "a function whose code's file name never equals solution.py rewires NumPy's check": attack(
            judge_class, NEVER_EQUAL_CODE_NAME, ARRAY_ROW, ARRAY_RIGHT),
        "a class-dict key whose __hash__ rewires NumPy's check when the judge reads the class": attack(
            judge_class, HASHED_CLASS_KEY, ARRAY_ROW, ARRAY_RIGHT),
        "a class __name__ and __module__ whose comparisons rewire NumPy's check": attack(
            judge_class, COMPARED_CLASS_NAMES, ARRAY_ROW, ARRAY_RIGHT),
        "a metaclass whose __hash__ forges the pass record when the judge hashes its class": attack(
            judge_class, FORGING_METACLASS, ARRAY_ROW, ARRAY_RIGHT),
        "a metaclass whose __hash__ rewires NumPy's check when the judge hashes its class": attack(
            judge_class, REWIRING_METACLASS, ARRAY_ROW, ARRAY_RIGHT),
    }
