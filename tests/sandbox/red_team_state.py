"""Red-team programs that make the test's own computations as coarse as their wrong answers, through state the
judge did not put back in a test in the program's process: NumPy's print options and `decimal`'s context, kept in
context variables (set at import, set anew in the call, changed in place, or in `decimal.DefaultContext`, which
`decimal.Context()` copies), a plain dict a library keeps (`re`'s cache of compiled patterns) changed at import,
and a library's memoized function (`fnmatch`'s compiled patterns) filled while the program had rewired what it
calls. Each passed before. The last case, keys of the program's class that collide with a library's in `re`'s
cache, checks that the judge hashes or compares no key of the program's while it puts that state back. Used by
`red_team.py` (class 4). pandas' options, a dict inside a dict, are in `test_context_state.py` (pandas needs more
memory than the red team's sandboxes have)."""

from __future__ import annotations

from red_team_library import ARRAY_RIGHT, ARRAY_ROW
from red_team_programs import bigcodebench


def state_row(check: str, imports: str = "") -> dict:
    """A BigCodeBench-style row importing NumPy (so its test runs in the program's process) that runs `check`."""
    return bigcodebench(
        f"import unittest\nimport numpy as np\n{imports}\n"
        "class TestCases(unittest.TestCase):\n"
        "    def test_value(self):\n"
        + "".join(f"        {line}\n" for line in check.splitlines())
    )


# The test prints both sides with NumPy's print options: at precision 0, [2. 2.] prints as [1.5 2.5] does.
PRINTED_ROW = state_row("self.assertEqual(str(task_func(2)), str(np.array([1.5, 2.5])))")
PRINTED_RIGHT = "import numpy as np\ndef task_func(n):\n    return np.array([1.5, 2.5])\n"
PRINTED_WRONG = "import numpy as np\ndef task_func(n):\n    return np.array([2.0, 2.0])\n"
COARSE_PRINT_AT_IMPORT = "import numpy as np\nnp.set_printoptions(precision=0)\n" + PRINTED_WRONG.split("\n", 1)[1]
COARSE_PRINT_IN_THE_CALL = (
    "import numpy as np\ndef task_func(n):\n    np.set_printoptions(precision=0)\n    return np.array([2.0, 2.0])\n"
)

# The test divides under `decimal`'s context: at precision 1, 1/3 is 0.3.
DIVIDED_ROW = state_row("self.assertEqual(task_func(), Decimal(1) / Decimal(3))", "from decimal import Decimal\n")
HELD_CONTEXT_ROW = state_row(
    "context = decimal.getcontext()\nresult = task_func()\n"
    "self.assertEqual(result, context.divide(Decimal(1), Decimal(3)))",
    "import decimal\nfrom decimal import Decimal\n",
)
NEW_CONTEXT_ROW = state_row(
    "result = task_func()\nself.assertEqual(result, decimal.Context().divide(Decimal(1), Decimal(3)))",
    "import decimal\nfrom decimal import Decimal\n",
)
DIVIDED_RIGHT = "import decimal\ndef task_func():\n    return decimal.Decimal(1) / decimal.Decimal(3)\n"
DIVIDED_WRONG = "import decimal\ndef task_func():\n    return decimal.Decimal('0.3')\n"
COARSE_DECIMAL_AT_IMPORT = "import decimal\ndecimal.getcontext().prec = 1\n" + DIVIDED_WRONG.split("\n", 1)[1]
COARSE_DECIMAL_IN_PLACE = (
    "import decimal\ndef task_func():\n    decimal.getcontext().prec = 1\n    return decimal.Decimal('0.3')\n"
)
COARSE_DECIMAL_SET = (
    "import decimal\ndef task_func():\n    decimal.setcontext(decimal.Context(prec=1))\n"
    "    return decimal.Decimal('0.3')\n"
)
COARSE_DECIMAL_TEMPLATE = (
    "import decimal\ndef task_func():\n    decimal.DefaultContext.prec = 1\n    return decimal.Decimal('0.3')\n"
)

# The test matches with `re`, which reads its cache of compiled patterns first.
MATCHED_ROW = state_row("self.assertTrue(re.fullmatch(r'\\d+', task_func()))", "import re\n")
MATCHED_RIGHT = "def task_func():\n    return '123'\n"
MATCHED_WRONG = "def task_func():\n    return 'abc'\n"
ANY_PATTERN_AT_IMPORT = "import re\nre._cache[(str, r'\\d+', 0)] = re.compile('.*')\n" + MATCHED_WRONG

# The test matches with `fnmatch`, which memoizes each pattern's compiled form (`functools.lru_cache`): a pattern
# compiled while `fnmatch.translate` was the program's stays memoized after the guard puts `translate` back.
GLOB_ROW = state_row("self.assertTrue(fnmatch.fnmatch(task_func(), '*.txt'))", "import fnmatch\n")
GLOB_RIGHT = "def task_func():\n    return 'notes.txt'\n"
GLOB_WRONG = "def task_func():\n    return 'notes.pdf'\n"
_MEMOIZE_ANY = "fnmatch.translate = lambda pattern: '.*'\nfnmatch.fnmatch('x', '*.txt')\n"
MEMOIZED_AT_IMPORT = "import fnmatch\n" + _MEMOIZE_ANY + GLOB_WRONG
MEMOIZED_IN_THE_CALL = (
    "import fnmatch\ndef task_func():\n" + "".join(f"    {line}\n" for line in _MEMOIZE_ANY.splitlines())
    + "    return 'notes.pdf'\n"
)

# Keys of the program's class in `re`'s cache, each hashing as one of the library's keys, inserted before it: a
# lookup of that key meets the program's first and runs its `__eq__`. The judge compared the cache as the program left
# it with the test's, after the program's changes were put back, by looking keys up.
COLLIDING_KEYS_AT_IMPORT = (
    "import re\nimport numpy as np\n" + "def nothing(*args, **kwargs):\n    return None\n"
    "class Key:\n"
    "    def __init__(self, like):\n        self.like = like\n"
    "    def __hash__(self):\n        return hash(self.like)\n"
    "    def __eq__(self, other):\n        np.testing.assert_array_equal = nothing\n        return False\n"
    "re.compile('[a-z]+x')\n"
    "for existing in list(re._cache):\n"
    "    value = re._cache.pop(existing)\n    re._cache[Key(existing)] = None\n    re._cache[existing] = value\n"
    "def task_func(n):\n    return np.zeros(n)\n"
)


def coarse_state_attacks(attack, values_class) -> dict:
    """The red-team cases of state put back for the test: each must score 0.0, and the right program after it 1.0."""
    return {
        "NumPy's print options set to precision 0 at import": attack(
            values_class, COARSE_PRINT_AT_IMPORT, PRINTED_ROW, PRINTED_RIGHT, wrong=PRINTED_WRONG),
        "NumPy's print options set to precision 0 in the call": attack(
            values_class, COARSE_PRINT_IN_THE_CALL, PRINTED_ROW, PRINTED_RIGHT),
        "decimal's precision set to 1 at import": attack(
            values_class, COARSE_DECIMAL_AT_IMPORT, DIVIDED_ROW, DIVIDED_RIGHT, wrong=DIVIDED_WRONG),
        "decimal's context the test holds set to precision 1 in the call": attack(
            values_class, COARSE_DECIMAL_IN_PLACE, HELD_CONTEXT_ROW, DIVIDED_RIGHT),
        "decimal's context replaced by one of precision 1 in the call": attack(
            values_class, COARSE_DECIMAL_SET, DIVIDED_ROW, DIVIDED_RIGHT),
        "decimal.DefaultContext set to precision 1 in the call": attack(
            values_class, COARSE_DECIMAL_TEMPLATE, NEW_CONTEXT_ROW, DIVIDED_RIGHT),
        "re's cache of compiled patterns planted at import": attack(
            values_class, ANY_PATTERN_AT_IMPORT, MATCHED_ROW, MATCHED_RIGHT, wrong=MATCHED_WRONG),
        "fnmatch's memo of compiled patterns filled under a rewired translate at import": attack(
            values_class, MEMOIZED_AT_IMPORT, GLOB_ROW, GLOB_RIGHT, wrong=GLOB_WRONG),
        "fnmatch's memo of compiled patterns filled under a rewired translate in the call": attack(
            values_class, MEMOIZED_IN_THE_CALL, GLOB_ROW, GLOB_RIGHT),
        "keys colliding with re's own in its cache at import, whose __eq__ rewires NumPy's check": attack(
            values_class, COLLIDING_KEYS_AT_IMPORT, ARRAY_ROW, ARRAY_RIGHT),
    }
