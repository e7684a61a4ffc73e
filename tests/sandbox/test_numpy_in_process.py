"""NumPy arrays in tests that share the program's process (BigCodeBench-style rows import NumPy): the test
computes with an array the program returns as NumPy does, element by element, so the idioms such tests use pass a
right program and fail a wrong one. Classes of the program's that answer through NumPy's dispatch are in the red
team (`red_team_library.py`). Programs really run in the sandbox.
"""

from __future__ import annotations

import pytest

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox.testing import close_servers

HEADER = "import unittest\nimport numpy as np\n\nclass TestCases(unittest.TestCase):\n    def test_form(self):\n"
# Each form tells the right program (1, 2, 3) from the wrong one (0, 1, 2).
FORMS = {
    "assertTrue of an elementwise == and .all()": "self.assertTrue((task_func(3) == np.array([1, 2, 3])).all())",
    "assert of an elementwise == against a list and .all()": "assert (task_func(3) == [1, 2, 3]).all()",
    "assertTrue of an elementwise >= and .all()": "self.assertTrue((task_func(3) >= 1).all())",
    "np.all of an elementwise >": "assert np.all(task_func(3) > 0)",
    "all() over an elementwise ==": "self.assertTrue(all(task_func(3) == np.array([1, 2, 3])))",
    "a boolean mask indexing the result": "result = task_func(3)\n        self.assertEqual(len(result[result > 1]), 2)",
    "an array method": "self.assertAlmostEqual(task_func(3).mean(), 2.0)",
    "an assert comparing arrays with ==": "assert task_func(3) == np.array([1, 2, 3])",
    "assertEqual of arrays": "self.assertEqual(task_func(3), np.array([1, 2, 3]))",
    "np.testing.assert_array_equal": "np.testing.assert_array_equal(task_func(3), [1, 2, 3])",
}
RIGHT = "import numpy as np\ndef task_func(n):\n    return np.arange(1, n + 1)\n"
WRONG = "import numpy as np\ndef task_func(n):\n    return np.arange(0, n)\n"


@pytest.fixture(scope="module", params=[False, True], ids=["fresh", "reused"])
def reward(request) -> CodeReward:
    reward = CodeReward(timeout=4.0, memory_mb=512, reuse_sandbox=request.param)
    yield reward
    close_servers(reward.sandbox)


def scores(reward: CodeReward, check: str) -> list:
    test = HEADER + "        " + check + "\n"
    return reward(completions=[f"```python\n{program}```" for program in (RIGHT, WRONG)], test=[test, test])


@pytest.mark.parametrize("form", list(FORMS))
def test_a_right_program_passes_and_a_wrong_one_fails(reward, form):
    assert scores(reward, FORMS[form]) == [1.0, 0.0]


def test_arrays_mean_what_they_mean_under_numpy(reward):
    # Both programs return int64 arrays.
    assert scores(reward, "self.assertEqual(task_func(3).dtype, np.int64)") == [1.0, 1.0]
    assert scores(reward, "self.assertTrue(isinstance(task_func(3), np.ndarray))") == [1.0, 1.0]
    assert scores(reward, "assert type(task_func(3)) == np.ndarray") == [1.0, 1.0]
    # `bool(array)` of more than one element is ambiguous: a test that asks it fails for every program, as under
    # the dataset's own harness; of one element, it is that element's truth.
    assert scores(reward, "self.assertTrue(task_func(3))") == [0.0, 0.0]
    assert scores(reward, "self.assertFalse(task_func(1) - 1)") == [1.0, 0.0]
