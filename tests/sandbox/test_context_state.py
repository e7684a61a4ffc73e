"""State a test's own computations read that the program's code must not change for it: context variables
(`trl_ext.sandbox.context_state`: NumPy's print options, `decimal`'s context, set anew or changed in place), the
plain dicts libraries keep two levels down (`call_guard.held_dicts`: pandas' options) and the memos of libraries'
memoized functions (`call_guard.memo_finder`). The switch itself is tested
here in pytest's process; end to end, right programs that set such state for their own calls still pass, and
pandas' options set by a wrong program fail it (pandas needs more memory than the red team's sandboxes have; the
other attacks are in `red_team_state.py`)."""

from __future__ import annotations

import contextvars
import decimal
import functools

import numpy as np
import pytest

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox import call_guard, context_state, test_process
from trl_ext.sandbox.testing import close_servers


@pytest.fixture
def switch():
    """`(enter, leave)` around code that plays the program's, in a context of its own (nothing leaks to others)."""
    context = contextvars.copy_context()
    yield context, context.run(context_state.switcher, decimal)


def as_program(context, switch, function):
    enter, leave = switch
    context.run(lambda: leave_after(enter, leave, function))


def leave_after(enter, leave, function):
    entered = enter()
    try:
        function()
    finally:
        leave(entered)


def precision(context):
    return context.run(lambda: (np.get_printoptions()["precision"], decimal.getcontext().prec))


def test_what_the_program_sets_is_put_back_for_the_test_and_set_again_for_the_program(switch):
    context, pair = switch

    def set_coarse():
        np.set_printoptions(precision=0)
        decimal.getcontext().prec = 1

    as_program(context, pair, set_coarse)
    assert precision(context) == (8, 28)
    seen = []
    as_program(context, pair, lambda: seen.append(precision(contextvars.copy_context())))
    assert seen == [(0, 1)]  # the program's own, in its later code
    assert precision(context) == (8, 28)


def test_what_the_test_sets_since_is_not_overridden(switch):
    context, pair = switch
    as_program(context, pair, lambda: np.set_printoptions(precision=0))
    context.run(np.set_printoptions, precision=3)
    seen = []
    as_program(context, pair, lambda: seen.append(np.get_printoptions()["precision"]))
    assert seen == [3]


def test_a_context_the_test_holds_and_decimals_templates_are_put_back_in_place(switch):
    context, pair = switch
    held = context.run(decimal.getcontext)

    def coarsen():
        decimal.getcontext().prec = 1
        decimal.getcontext().traps[decimal.Inexact] = True
        decimal.DefaultContext.prec = 2

    as_program(context, pair, coarsen)
    assert held.prec == 28 and not held.traps[decimal.Inexact]
    assert decimal.DefaultContext.prec == 28
    assert context.run(decimal.getcontext) is held


def test_a_context_the_program_sets_is_replaced_by_the_tests(switch):
    context, pair = switch
    held = context.run(decimal.getcontext)
    as_program(context, pair, lambda: decimal.setcontext(decimal.Context(prec=1)))
    assert context.run(decimal.getcontext) is held and held.prec == 28


def test_a_variable_the_program_sets_first_goes_back_to_its_default_and_a_held_dict_is_refilled():
    first = contextvars.ContextVar("first", default="the test's")
    options = {"precision": 8}
    holder = contextvars.ContextVar("holder")
    context = contextvars.copy_context()
    context.run(holder.set, options)
    pair = context.run(context_state.switcher)

    def change():
        first.set("the program's")
        options["precision"] = 0
        options["extra"] = True

    as_program(context, pair, change)
    assert context.run(first.get) == "the test's"
    assert options == {"precision": 8}


def test_memoized_functions_are_found_with_their_memos_and_emptied():
    @functools.lru_cache(maxsize=4)
    def bounded(x):
        return x

    @functools.cache
    def unbounded(x):
        return x

    class Holder:
        method = staticmethod(functools.lru_cache()(lambda x: x))

    watch = test_process._VERSIONS[0]
    memos_in = call_guard.memo_finder(watch)
    found, dicts = memos_in({"bounded": bounded, "unbounded": unbounded, "plain": len, "options": {"a": 1}})
    assert dicts == [{"a": 1}]
    found += memos_in(dict(vars(Holder)))[0]
    assert memos_in({"number": 1, "function": len}) == ([], [])
    assert [function for function, _ in found] == [bounded, unbounded, Holder.method]
    read = test_process._VERSIONS[1]
    tags = [read(view) for _, view in found]
    bounded(1), unbounded(1), Holder.method(1)
    assert all(read(view) != tag for (_, view), tag in zip(found, tags))  # each memo's dict is the one watched
    call_guard.EMPTY_MEMO(bounded)
    assert bounded.cache_info().currsize == 0


def test_held_dicts_are_found_two_levels_down_once_each():
    inner = {"precision": 6}
    options = {"display": inner, "mode": {"copy": False}}
    namespace = {"_global_config": options, "again": options, "number": 1}
    found = call_guard.held_dicts([namespace], {id(namespace)})
    assert [held for held, _ in found] == [options, inner, {"copy": False}]
    assert found[1][1] == inner and found[1][1] is not inner  # a copy, to put back


ROW_WITH_PANDAS = (
    "import unittest\nimport pandas as pd\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        expected = pd.DataFrame({'a': [1.5, 2.5]})\n"
    "        self.assertEqual(task_func().to_string(), expected.to_string())\n"
)
COARSE_PANDAS_AT_IMPORT = (
    "import pandas as pd\npd.set_option('display.precision', 0)\n"
    "def task_func():\n    return pd.DataFrame({'a': [2.0, 2.0]})\n"
)
COARSE_PANDAS_IN_THE_CALL = (
    "import pandas as pd\n"
    "def task_func():\n    pd.set_option('display.precision', 0)\n    return pd.DataFrame({'a': [2.0, 2.0]})\n"
)
RIGHT_PANDAS = "import pandas as pd\ndef task_func():\n    return pd.DataFrame({'a': [1.5, 2.5]})\n"
# A right program that sets pandas' options at import for what it prints in its calls, which the test captures.
PRINTED_FRAME_ROW = (
    "import unittest\nimport io\nfrom contextlib import redirect_stdout\nimport pandas as pd\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        output = io.StringIO()\n"
    "        with redirect_stdout(output):\n"
    "            task_func()\n"
    "        self.assertEqual(output.getvalue(), '     a\\n0  0.3\\n')\n"
)
PRINTS_AT_ITS_PANDAS_PRECISION = (
    "import pandas as pd\npd.set_option('display.precision', 1)\n"
    "def task_func():\n    print(pd.DataFrame({'a': [1 / 3]}).to_string())\n"
)
# Right programs that set a context variable at import for their own calls, whose output the test captures.
PRINTED_ROW = (
    "import unittest\nimport io\nfrom contextlib import redirect_stdout\nimport numpy as np\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        output = io.StringIO()\n"
    "        with redirect_stdout(output):\n"
    "            task_func()\n"
    "        self.assertEqual(output.getvalue(), '[0.33 0.67]\\n')\n"
)
PRINTS_AT_ITS_PRECISION = (
    "import numpy as np\nnp.set_printoptions(precision=2)\n"
    "def task_func():\n    print(np.array([1 / 3, 2 / 3]))\n"
)
DIVIDED_ROW = (
    "import unittest\nimport numpy as np\nfrom decimal import Decimal\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    def test_value(self):\n"
    "        self.assertEqual(task_func(), Decimal('0.33'))\n"
)
DIVIDES_AT_ITS_PRECISION = (
    "import decimal\ndecimal.getcontext().prec = 2\n"
    "def task_func():\n    return decimal.Decimal(1) / decimal.Decimal(3)\n"
)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_pandas_options_are_put_back_and_what_the_program_set_at_import_holds_in_its_calls(reuse):
    reward = CodeReward(timeout=10.0, memory_mb=1024, reuse_sandbox=reuse)
    try:
        programs = (COARSE_PANDAS_AT_IMPORT, COARSE_PANDAS_IN_THE_CALL, RIGHT_PANDAS, PRINTS_AT_ITS_PRECISION,
                    DIVIDES_AT_ITS_PRECISION, PRINTS_AT_ITS_PANDAS_PRECISION)
        rows = [ROW_WITH_PANDAS] * 3 + [PRINTED_ROW, DIVIDED_ROW, PRINTED_FRAME_ROW]
        scores = reward(completions=[f"```python\n{program}```" for program in programs], test=rows)
    finally:
        close_servers(reward.sandbox)
    assert scores == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
