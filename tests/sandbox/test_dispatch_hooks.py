"""A class of the program's that subclasses a library of arrays and overrides what its operations call on their
results (`trl_ext.sandbox.dispatch_hooks`): which of its names are trapped, and, end to end on pandas, that a
`DataFrame` subclass building or computing the result of `==` itself fails while one that only adds methods passes.
NumPy's cases are in the red team (`red_team_library.py`); pandas needs more memory than its sandboxes have."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox.dispatch_hooks import override_traps
from trl_ext.sandbox.testing import close_servers

OVERRIDES, TRAPPED = override_traps()


def trap(*args, **kwargs):
    raise AssertionError("trapped")


def test_the_overrides_of_a_library_of_arrays_are_found_and_nothing_else():
    class Frame(pd.DataFrame):
        _metadata = ["unit"]

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

        @property
        def _constructor(self):
            return Frame

        def _cmp_method(self, other, op):
            return True

        def total(self):  # a method of its own: pandas never calls it
            return 0

    class Array(np.ndarray):
        def all(self, *args, **kwargs):
            return True

    class Hidden(type):
        def mro(cls):  # leaves NumPy's base out of the `__mro__`: the bases still show it
            return [cls, object]

    class Mapping(dict):  # a built-in base: not a library of arrays
        def get(self, key, default=None):
            return 1

    assert OVERRIDES(Frame) == {"_metadata", "_constructor", "_cmp_method"}
    assert OVERRIDES(Array) == {"all"}
    assert OVERRIDES(Hidden("Sneaky", (np.ndarray,), {"all": lambda self: True})) == {"all"}
    assert OVERRIDES(Mapping) == set()


def test_an_override_is_trapped_by_its_kind_and_data_is_left():
    for descriptor in (property(lambda self: 1), staticmethod(len), classmethod(len), lambda self: 1):
        assert isinstance(TRAPPED(descriptor, trap), property)  # any read of it springs the trap
    assert TRAPPED(pd.DataFrame, trap) is trap  # a class to call: the call springs it
    assert TRAPPED(["unit"], trap) is None and TRAPPED(15.0, trap) is None


FRAME_TEST = (
    "import unittest\nimport pandas as pd\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        expected = pd.DataFrame({'a': [1, 2, 3]})\n"
    "        result = task_func(3)\n"
    "        self.assertEqual(len(result), 3)\n"
    "        self.assertTrue((result == expected).all().all())\n"
)
# The result of `==` built by the program's class: all True, whatever was compared.
BUILDS_THE_RESULT = (
    "import pandas as pd\n"
    "class Liar(pd.DataFrame):\n"
    "    def _constructor_from_mgr(self, mgr, axes):\n"
    "        frame = pd.DataFrame._from_mgr(mgr, axes=axes)\n"
    "        return pd.DataFrame(True, index=frame.index, columns=frame.columns)\n"
    "def task_func(n):\n    return Liar({'a': [0] * n})\n"
)
# The comparison itself computed by the program's class.
COMPUTES_THE_RESULT = (
    "import pandas as pd\n"
    "class Liar(pd.DataFrame):\n"
    "    def _cmp_method(self, other, op):\n"
    "        return pd.DataFrame(True, index=self.index, columns=self.columns)\n"
    "def task_func(n):\n    return Liar({'a': [0] * n})\n"
)
# A subclass that only adds what pandas never calls, and data pandas reads.
RIGHT_SUBCLASS = (
    "import pandas as pd\n"
    "class Scores(pd.DataFrame):\n"
    "    _metadata = ['unit']\n"
    "    def total(self):\n        return int(self.to_numpy().sum())\n"
    "def task_func(n):\n    return Scores({'a': list(range(1, n + 1))})\n"
)
RIGHT = "import pandas as pd\ndef task_func(n):\n    return pd.DataFrame({'a': list(range(1, n + 1))})\n"


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_a_frame_subclass_answering_equality_through_pandas_fails(reuse):
    reward = CodeReward(timeout=10.0, memory_mb=1024, reuse_sandbox=reuse)
    try:
        programs = (BUILDS_THE_RESULT, COMPUTES_THE_RESULT, RIGHT_SUBCLASS, RIGHT)
        scores = reward(completions=[f"```python\n{program}```" for program in programs], test=[FRAME_TEST] * 4)
    finally:
        close_servers(reward.sandbox)
    assert scores == [0.0, 0.0, 1.0, 1.0]
