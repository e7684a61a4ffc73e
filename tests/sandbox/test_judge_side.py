"""Statement tests judged in the judge's own process (`trl_ext.sandbox.judge_side`): what a test does with the
program's functions and objects works as it does in one process, and which tests run apart. Real sandbox runs,
under every isolating backend, fresh and reused."""

from __future__ import annotations

import pytest
from sandbox_helpers import ISOLATING_BACKENDS, backend_id

from trl_ext.rewards.code import CodeReward
from trl_ext.rewards.code_formats.bigcodebench import unittest_tests
from trl_ext.rewards.code_formats.kodcode import pytest_tests
from trl_ext.sandbox.instrumentation import judged_apart
from trl_ext.sandbox.testing import close_servers

BACKENDS = [pytest.param(backend, id=backend_id(backend)) for backend in ISOLATING_BACKENDS]

PROGRAM = """
def sort_in_place(values):
    values.sort()

def count_up(n):
    for i in range(n):
        yield i

class Counter:
    def __init__(self, start):
        self.value = start
    def add(self, amount):
        self.value += amount
        return self.value

def apply(function, value):
    return function(value)

def refuse(x):
    if x < 0:
        raise ValueError("negative")
    return x

def pairs(words):
    return {word: len(word) for word in words}
"""

# Each test with a right verdict for PROGRAM, and the reason it exercises.
TESTS = {
    "an argument changed in place is seen changed": "def check(f):\n    xs = [3, 1, 2]\n    f(xs)\n    assert xs == [1, 2, 3]\ncheck(sort_in_place)",
    "a generator is iterated": "assert list(count_up(3)) == [0, 1, 2]\nassert sum(count_up(4)) == 6",
    "an object of the program keeps its state": "c = Counter(1)\nassert c.add(2) == 3\nassert c.add(4) == 7\nassert c.value == 7",
    "a function of the test is called back": "assert apply(lambda v: v * 10, 4) == 40\nassert sorted(['bb', 'a'], key=len) == ['a', 'bb']",
    "the program's exception is the built-in one": "try:\n    refuse(-1)\n    raise AssertionError('no exception')\nexcept ValueError as error:\n    assert 'negative' in str(error)\nassert refuse(2) == 2",
    "a dict comes back as plain data": "assert pairs(['ab', 'c']) == {'ab': 2, 'c': 1}",
}


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module", params=[False, True], ids=["fresh", "reused"])
def reward(backend, request):
    reward = CodeReward(timeout=2.0, memory_mb=256, isolation=backend, reuse_sandbox=request.param)
    yield reward
    close_servers(reward.sandbox)


def test_each_test_here_is_judged_apart():
    assert all(judged_apart(source) for source in TESTS.values())


@pytest.mark.parametrize("name", list(TESTS))
def test_a_right_program_passes_as_in_one_process(name, reward):
    report = reward.evaluate("```python\n" + PROGRAM + "```", [TESTS[name]])
    assert [outcome.status for outcome in report.outcomes] == ["passed"], report


def test_an_object_of_the_program_never_equals_a_value_of_the_test(reward):
    # Judged apart, a reference to the program's object compares by identity only, whatever its class says.
    program = "class Same:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\ndef make():\n    return Same()\n"
    report = reward.evaluate("```python\n" + program + "```", ["def check(f):\n    assert f() == 1\ncheck(make)"])
    assert not report.outcomes[0].passed


def test_a_program_that_breaks_the_conversation_fails_the_test(reward):
    # Ending its process, or writing on the socket itself, makes the test fail; a test's `except Exception`
    # cannot swallow it.
    for program in ("import os\ndef f(x):\n    os._exit(0)\n",
                    "import os\ndef f(x):\n    os.write(3, b'\\x00\\x00\\x00\\x02{}')\n    return x\n"):
        test = "def check(g):\n    try:\n        g(1)\n    except Exception:\n        pass\n    assert True is not False\ncheck(f)"
        report = reward.evaluate("```python\n" + program + "```", [test])
        assert not report.outcomes[0].passed, program


@pytest.mark.parametrize(
    ("source", "apart"),
    [
        ("def check(candidate):\n    assert candidate(1) == 2\ncheck(f)", True),
        ("import math\nassert math.isclose(f(2), 4.0)", True),
        ("from solution import f\ndef test_f():\n    assert f(1) == 2", True),
        ("import numpy as np\nassert np.allclose(f(1), 2)", False),  # an installed package: in the program's process
        ("import random\nrandom.seed(0)\nassert f() == 4", False),  # random state shared with the program
        ("def test_f(capsys):\n    f()\n    assert capsys.readouterr().out == 'x'", True),  # captures its output
        ("import io, sys\ndef test_f():\n    sys.stdout = io.StringIO()\n    f()\n"
         "    assert sys.stdout.getvalue() == 'x'", True),
        ("import sys\nassert f([]) == -sys.maxsize", True),  # a constant of `sys`
        ("import io\nassert f(io.StringIO('1 2')) == 3", False),  # a stream handed to the program
        ("from io import StringIO\ndef test_f():\n    s = StringIO('1 2')\n    t = s\n    assert f(t) == 3", False),
        ("import sys\nassert f(sys.stdout) == 3", False),
        ("import sys, io\nsys.stdin = io.StringIO('1')\nassert f() == 1", False),  # the program's input
        ("import sys\nassert f(sys) == 1", False),
        ("def test_f(capfd):\n    f()\n    assert capfd.readouterr().out == 'x'", False),  # at the descriptors
        ("from unittest.mock import patch\nwith patch('builtins.input', return_value='3'):\n    assert f() == 3", True),
        ("from unittest.mock import patch as p\n@p('sys.stdout')\ndef test_f(out):\n    f()", True),
        ("from unittest.mock import patch\nwith patch('sys.stdin'):\n    assert f() == 3", False),
        ("from unittest.mock import patch\nwith patch.object(sys, 'stdout'):\n    f()", False),
        ("from unittest.mock import patch\ntarget = 'builtins.input'\nwith patch(target):\n    f()", False),
        ("from unittest.mock import patch\nwith patch('sys.stdout') as out:\n    f(out)", False),  # handed over
        ("from unittest.mock import patch, MagicMock\nwith patch('builtins.input'):\n    f()", False),
        ("from unittest import mock\nwith mock.patch('builtins.input'):\n    f()", False),
        ("def test_f(tmp_path):\n    assert f(tmp_path) == 1", False),  # shares files with it
        ("from unittest.mock import patch\n@patch('os.listdir')\ndef test_f(listdir):\n    f()", False),
        ("import sys\nsys.setrecursionlimit(10000)\nassert f(5000) == 1", False),
    ],
)
def test_which_tests_are_judged_apart(source, apart):
    assert judged_apart(source) is apart


def test_format_runners_are_not_read_when_deciding():
    kodcode = pytest_tests("import pytest\nfrom solution import mean\n\ndef test_mean():\n    assert mean([1, 3]) == pytest.approx(2)\n")
    bigcodebench = unittest_tests("import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(task_func(1), 2)\n")
    mocked = unittest_tests("import unittest\nfrom unittest.mock import patch\nclass TestCases(unittest.TestCase):\n    @patch('os.listdir')\n    def test_one(self, listdir):\n        task_func()\n")
    assert judged_apart(kodcode[0].source) and judged_apart(bigcodebench[0].source)
    assert not judged_apart(mocked[0].source)


PRINTING = """
import sys
print("at import")
def show(n, then=None):
    print(n)
    if then is not None:
        then()
        print("end")
def shout(text):
    print(text + "!", file=sys.stderr)
"""
CAPTURING = """
import sys
from io import StringIO
from contextlib import redirect_stdout
from solution import show, shout

def test_capsys(capsys):
    show(3)
    print("from the test")
    show(1)
    out, err = capsys.readouterr()
    assert out == "3\\nfrom the test\\n1\\n" and err == ""

def test_stderr(capsys):
    shout("x")
    assert capsys.readouterr().err == "x!\\n"

def test_sys_stdout_replaced():
    captured = StringIO()
    sys.stdout = captured
    show(5)
    sys.stdout = sys.__stdout__
    assert captured.getvalue() == "5\\n"

def test_redirect_stdout():
    with StringIO() as buffer, redirect_stdout(buffer):
        show(2, then=lambda: print("called back"))
        assert buffer.getvalue() == "2\\ncalled back\\nend\\n"
"""


def test_what_the_program_prints_reaches_the_tests_capture_in_order(reward):
    # Judged apart, the program's output reaches the test's streams with each reply and call back, in order with
    # what the test prints itself; what the program printed at import is not captured, as under pytest.
    tests = pytest_tests(CAPTURING)
    assert all(judged_apart(test.source) for test in tests)
    report = reward.evaluate_row("```python\n" + PRINTING + "```", {"test": CAPTURING}, tests_format="kodcode")
    assert [outcome.status for outcome in report.outcomes] == ["passed"] * 4, report
    wrong = PRINTING.replace("print(n)", "print(n + 1)").replace('text + "!"', "text")
    report = reward.evaluate_row("```python\n" + wrong + "```", {"test": CAPTURING}, tests_format="kodcode")
    assert not any(outcome.passed for outcome in report.outcomes), report


FED = """
import io
import pytest
from unittest.mock import patch
from solution import add_two

def test_input_mocked(capsys):
    with patch("builtins.input", side_effect=["3", "4"]) as fake:
        add_two()
    assert capsys.readouterr().out == "7\\n" and fake.call_count == 2

@patch("builtins.input", return_value="10")
def test_input_mocked_by_a_decorator(mock_input, capsys):
    add_two()
    assert capsys.readouterr().out == "20\\n"

def test_stdout_patched():
    with patch("builtins.input", return_value="1"), patch("sys.stdout", new_callable=io.StringIO) as out:
        add_two()
    assert out.getvalue() == "2\\n"  # a mocked input prints no prompt

def test_input_not_fed():
    with pytest.raises(EOFError):
        add_two()
"""
FED_RIGHT = "def add_two():\n    a = int(input('a? '))\n    b = int(input())\n    print(a + b)\n"


def test_the_programs_input_is_the_tests_mock(reward):
    # Judged apart, the program's `input()` calls the judge's `builtins.input` as it is: the test's mock where it
    # patched it (its call count is the program's calls), else the real one, which reads /dev/null (EOFError).
    tests = pytest_tests(FED)
    assert all(judged_apart(test.source) for test in tests)
    report = reward.evaluate_row("```python\n" + FED_RIGHT + "```", {"test": FED}, tests_format="kodcode")
    assert [outcome.status for outcome in report.outcomes] == ["passed"] * 4, report
    wrong = FED_RIGHT.replace("a + b", "a * b")
    report = reward.evaluate_row("```python\n" + wrong + "```", {"test": FED}, tests_format="kodcode")
    assert [outcome.passed for outcome in report.outcomes] == [False, False, False, True], report


def test_a_program_printing_past_the_output_limit_fails_at_once(reward):
    # What the program prints comes to the judge with each message; past `max_output` characters in all (1 MiB
    # here) the test fails, instead of the judge holding whatever the program prints until its time runs out.
    program = "def task_func(f):\n    while True:\n        print('7' * 100_000)\n        f(0)\n"
    test = "def check(candidate):\n    assert candidate(lambda v: v) == 7\ncheck(task_func)"
    report = reward.evaluate("```python\n" + program + "```", [test])
    assert not report.outcomes[0].passed and "output limit" in report.outcomes[0].detail, report


def test_a_large_input_reaches_stdin_and_dev_stdin(reward):
    # The program's /dev is a small tmpfs of its own: it holds `/dev/stdin`, however large the test's input is.
    numbers = " ".join(str(i) for i in range(400_000))  # about 2.6 MB
    tests = [{"input": numbers, "output": str(sum(range(400_000)))}]
    for program in ("import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
                    "print(sum(map(int, open('/dev/stdin').read().split())))\n"):
        report = reward.evaluate("```python\n" + program + "```", tests)
        assert [outcome.status for outcome in report.outcomes] == ["passed"], report


def test_a_program_cannot_end_the_tests_loop_early(reward):
    # In one process, StopIteration raised by the tested function ends `map` early and `all(...)` holds; judged
    # apart it comes back as an error of the program's.
    program = "def square(x):\n    raise StopIteration\n"
    test = "def check(f):\n    assert all(map(lambda x: f(x) == x * x, [2, 3]))\ncheck(square)"
    report = reward.evaluate("```python\n" + program + "```", [test])
    assert not report.outcomes[0].passed
