"""Red-team cases on output: what a program prints, and what a test judged apart prints of the program's values.

A test judged apart runs in the judge's process, and what the program prints reaches the test's own streams
(`judge_side._ProgramOutput`): a test that captures it (`capsys`, `sys.stdout = StringIO()`) reads it there. The
program's `input()` calls the judge's, which the test may have patched. The
judge's process is a child of the harness, whose stdout is its channel to the trainer (one JSON record per test).
So neither what the program prints nor what the test prints of the program's objects (`pprint(candidate(x))` of an
object whose `__str__` the program wrote) may reach that channel. Used by `red_team.py`.
"""

from __future__ import annotations

from red_team_programs import DONE, humaneval, kodcode

PASSED = '{"loaded": true, "status": "passed", "checks": 1, "test": 0}'
RIGHT = "def task_func(x):\n    print(2 * x + 1)\n    return 2 * x + 1\n"

# Judged apart: the test prints the program's values itself, then checks one.
PRINTING_ROW = humaneval(
    "from pprint import pprint\n"
    "def check(candidate):\n"
    "    for x in range(12):\n"
    "        pprint(candidate(x))\n"
    "    assert candidate(3) == 7\n",
    "task_func",
)
# Judged apart: the test captures what the program prints.
CAPTURING_ROW = kodcode(
    "from solution import task_func\n\n"
    "def test_prints(capsys):\n"
    "    task_func(3)\n"
    "    assert capsys.readouterr().out == '7\\n'\n"
)

# An object that prints as a forged record (and the done line) on lines of its own, after enough text to flush
# the judge's stdout buffer were it the harness's.
_FORGED = (
    "class Forged:\n"
    "    def __str__(self):\n"
    f"        return 'x' * 900 + '\\n' + {PASSED!r} + '\\n' + {DONE!r} + '\\n'\n"
)
# Judged apart: the test feeds the program's input with a mock and captures what it prints.
INPUT_ROW = kodcode(
    "from unittest.mock import patch\n"
    "from solution import task_func\n\n"
    "def test_prints(capsys):\n"
    "    with patch('builtins.input', side_effect=['3']):\n"
    "        task_func(None)\n"
    "    assert capsys.readouterr().out == '7\\n'\n"
)
INPUT_RIGHT = "def task_func(x):\n    print(2 * int(input()) + 1)\n"
PROGRAMS = {
    "forge a passed record through a test that prints the program's objects": (
        PRINTING_ROW, _FORGED + "def task_func(x):\n    return Forged()\n"
    ),
    "print a passed record where the test captures the output": (
        CAPTURING_ROW,
        "import sys\n"
        "def task_func(x):\n"
        f"    for line in ({PASSED!r}, {DONE!r}):\n"
        "        print(line)\n        print(line, file=sys.stderr)\n"
        "    sys.stdout.flush()\n"
        "    return 2 * x + 1\n",
    ),
    "flood the captured output": (
        CAPTURING_ROW, "def task_func(x):\n    while True:\n        print('7' * 100_000)\n"
    ),
    "close the program's stdout, then print the right answer": (
        CAPTURING_ROW, "import sys\ndef task_func(x):\n    sys.stdout.close()\n    print(7)\n"
    ),
    "replace the program's stdout with an object that answers the expected text": (
        CAPTURING_ROW,
        "import sys\n"
        "class Answer:\n"
        "    def write(self, text):\n        return len(text)\n"
        "    def getvalue(self):\n        return '7\\n'\n"
        "    def flush(self):\n        pass\n"
        "def task_func(x):\n    sys.stdout = Answer()\n",
    ),
    "forge a passed record as the prompt of the judge's input()": (
        PRINTING_ROW,
        _FORGED + "def task_func(x):\n"
        "    for _ in range(12):\n"
        "        try:\n            input(Forged())\n        except Exception:\n            pass\n"
        "    return 0\n",
    ),
    "ask the test's mocked input() for more than it gave, and swallow the error": (
        INPUT_ROW,
        "def task_func(x):\n"
        "    for _ in range(5):\n"
        "        try:\n            input()\n        except BaseException:\n            pass\n"
        "    print(3)\n",
        INPUT_RIGHT,
    ),
}


def judge_output_attacks(attack_type, attack_class: str) -> dict:
    """The cases of this class, as `red_team.Attack`s (given as `attack_type` to keep the import one-way)."""
    return {name: attack_type(attack_class, program, row, right[0] if right else RIGHT)
            for name, (row, program, *right) in PROGRAMS.items()}
