"""What the program sets in the closures of the libraries' functions is put back (`trl_ext.sandbox.library_closures`),
and NumPy's checks compare masks (`trl_ext.sandbox.masked_positions`). The other end-to-end cases are in the red team
(`red_team_library.py`); the one here needs pandas, which needs more memory than the red team's sandboxes have."""

from __future__ import annotations

import functools
import sys
import types
import unittest.mock

import numpy as np
import pytest

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox import library_closures, masked_positions
from trl_ext.sandbox.library_closures import cells_keeper, closure_cells
from trl_ext.sandbox.testing import close_servers


def _library_module():
    """A module holding a decorated function, as pandas' checks are: the wrapper calls what its closure holds."""
    module = types.ModuleType("library")

    def check(value):
        if value != 1:
            raise AssertionError(value)

    @functools.wraps(check)
    def wrapper(value):
        return check(value)

    class Holder:
        @property
        def size(self):
            return len(wrapper.__name__)

    module.check, module.Holder = wrapper, Holder
    return module, check


@pytest.mark.parametrize("pointers", [True, False], ids=["cells-pointers-read", "cells-read"])
def test_a_closure_cell_the_program_sets_or_empties_is_put_back(pointers, monkeypatch):
    assert library_closures._POINTERS is not None  # CPython: the pointers are read, touching no cell
    if not pointers:
        monkeypatch.setattr(library_closures, "_POINTERS", None)
    module, check = _library_module()
    put_back = cells_keeper(closure_cells({"library": module}))
    cell = module.check.__closure__[0]
    cell.cell_contents = lambda value: None
    put_back()
    assert cell.cell_contents is check
    with pytest.raises(AssertionError):
        module.check(2)
    del cell.cell_contents
    put_back()
    assert cell.cell_contents is check
    cell.cell_contents = unittest.mock.ANY  # equal to everything: told apart by identity
    put_back()
    assert cell.cell_contents is check


def test_the_cells_of_methods_and_properties_and_of_the_functions_cells_hold_are_read():
    module, check = _library_module()
    cells, contents = closure_cells({"library": module})
    assert check in contents  # the wrapper's
    assert module.check in contents  # the property's getter closes over the wrapper


def test_numpys_checks_compare_masks_before_values():
    utilities = sys.modules["numpy.testing._private.utils"]
    original = utilities.assert_array_compare
    try:
        assert masked_positions.compare_masks(sys.modules)
        expected = np.ma.masked_array([1, 2, 3], mask=[0, 1, 0])
        np.testing.assert_array_equal(np.ma.masked_array([1, 9, 3], mask=[0, 1, 0]), expected)  # same mask
        np.testing.assert_array_equal(np.arange(3), [0, 1, 2])
        for masked in (np.ma.masked_all(3), np.ma.masked):
            for check in (np.testing.assert_array_equal, np.testing.assert_allclose, np.testing.assert_equal):
                with pytest.raises(AssertionError, match="masked on one side only"):
                    check(masked, np.array([1, 2, 3]))
        with pytest.raises(AssertionError):  # shapes that do not match: NumPy's own message
            np.testing.assert_array_equal(np.ma.masked_all(2), np.array([1, 2, 3]))
    finally:
        utilities.assert_array_compare = original


FRAME_ROW = {"test": (
    "import unittest\nimport pandas as pd\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        expected = pd.DataFrame({'value': [1.0, 2.0, 3.0]})\n"
    "        pd.testing.assert_frame_equal(task_func(3), expected)\n"
)}
FRAME_RIGHT = "import pandas as pd\ndef task_func(n):\n    return pd.DataFrame({'value': [1.0, 2.0, 3.0][:n]})\n"
FRAME_WRONG = "import pandas as pd\ndef task_func(n):\n    return pd.DataFrame({'value': [0.0] * n})\n"
# pandas' checks are decorated: the decorator calls the function its closure holds.
CLOSURE_CELL = (
    "import types\nimport pandas as pd\n"
    "def nothing(*args, **kwargs):\n    return None\n"
    "def task_func(n):\n"
    "    for cell in pd.testing.assert_frame_equal.__closure__ or ():\n"
    "        if type(cell.cell_contents) is types.FunctionType:\n"
    "            cell.cell_contents = nothing\n"
    "    return pd.DataFrame({'value': [0.0] * n})\n"
)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_a_program_that_sets_pandas_checks_closure_fails(reuse):
    reward = CodeReward(timeout=10.0, memory_mb=1024, reuse_sandbox=reuse)
    try:
        programs = (CLOSURE_CELL, FRAME_RIGHT, FRAME_WRONG)
        scores = reward(completions=[f"```python\n{program}```" for program in programs], test=[FRAME_ROW["test"]] * 3)
    finally:
        close_servers(reward.sandbox)
    assert scores == [0.0, 1.0, 0.0]
