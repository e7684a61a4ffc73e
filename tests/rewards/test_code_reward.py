"""The `code` reward: code extraction, test formats, scoring, languages. Every program really runs in the sandbox.

The adversarial table (hostile programs that must score 0 under every backend) is in tests/sandbox/.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time

import pytest
from datasets import Dataset

from trl_ext.rewards import build_reward_funcs, call_reward, get_reward
from trl_ext.rewards.code import (
    CodeReward,
    assert_test,
    extract_cpp_code,
    extract_python_code,
    outputs_match,
    parse_tests,
)
from trl_ext.sandbox.instrumentation import JUDGE_CONSTANT, guarded_expression

MARGIN = 3.0  # seconds of slack for a loaded 2-core CI machine
TIMEOUT = 1.0

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert 10 == add(4, 6)"]
SUM_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"
SUM_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5", "output": "10"}]


CPP_SUM = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n"


def fenced(code: str, language: str = "python") -> str:
    return f"Here is my solution.\n```{language}\n{code}```\nIt adds the numbers."


@pytest.fixture(scope="module")
def reward() -> CodeReward:
    reward = CodeReward(timeout=TIMEOUT, memory_mb=256)
    assert reward.sandbox.isolation == "bwrap"  # "auto" never settles for less than file-system isolation
    return reward


# ---------------------------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```python\nx = 1\n```", "x = 1\n"),
        ("```py\nx = 1\n```", "x = 1\n"),
        ("first\n```python\nx = 1\n```\nbetter:\n```python\nx = 2\n```\n", "x = 2\n"),
        ("```python\nx = 1\n```\n```text\noutput\n```", "x = 1\n"),  # a later non-Python block is skipped
        ("```\nx = 3\n```", "x = 3\n"),  # untagged block when no Python block
        ("```cpp\nint main() {}\n```", ""),  # only another language: no Python code
        ("x = 4\nprint(x)", "x = 4\nprint(x)"),  # no fence: the whole completion
        ("<think>```python\nx = 0\n```</think>```python\nx = 5\n```", "x = 5\n"),
        ("<think>maybe ```python\nx = 0\n```</think>no code after thinking", "no code after thinking"),
        ("```python\ndef f():\n    return 1", "def f():\n    return 1"),  # cut off by the length limit
    ],
)
def test_extract_python_code(text, code):
    assert extract_python_code(text) == code


# --------------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    ("statement", "kind", "source", "expected", "op", "literal_first"),
    [
        ("assert add(1, 2) == 3", "value", "add(1, 2)", 3, "==", False),
        ("assert 3 == add(1, 2)", "value", "add(1, 2)", 3, "==", True),
        ("assert f([3, 1]) == (1, 3)", "value", "f([3, 1])", (1, 3), "==", False),
        ("assert f(x=-1) != -2", "value", "f(x=-1)", -2, "!=", False),
        ("assert abs(f(2) - 0.5) < 1e-6", "value", "abs(f(2) - 0.5)", 1e-6, "<", False),
        ("assert 'a' in f('abc')", "value", "f('abc')", "a", "in", True),
        ("assert f(0) is None", "value", "f(0)", None, "is", False),
        ("   assert f({1: 'a'}) == {1: 'a'}, 'message'", "value", "f({1: 'a'})", {1: "a"}, "==", False),
        ("assert math.isclose(area(2), 12.56)", "statement", "assert math.isclose(area(2), 12.56)", None, "==", False),
        ("assert f(1) == g(1)", "statement", "assert f(1) == g(1)", None, "==", False),
        ("assert f(1)", "statement", "assert f(1)", None, "==", False),
        ("assert 0 < f(1) < 5", "statement", "assert 0 < f(1) < 5", None, "==", False),
    ],
)
def test_assert_statements_are_split_into_what_the_sandbox_sees_and_what_stays_here(
    statement, kind, source, expected, op, literal_first
):
    test = assert_test(statement)
    assert (test.kind, test.source, test.expected, test.operator, test.literal_first) == (
        kind, source, expected, op, literal_first
    )
    if kind == "value":  # the expected value never goes into the sandbox's plan; what it computes is guarded
        assert test.plan() == {"kind": "value", "source": guarded_expression(source)}
        # The guard is the harness's function as a constant of the code (a name could be rebound by the program).
        assert test.plan()["source"].startswith(repr(JUDGE_CONSTANT + "__trl_ext_value__") + "(")


def test_parse_tests_formats():
    asserts = parse_tests(ADD_TESTS)
    assert [t.kind for t in asserts] == ["value"] * 3
    pairs = parse_tests(SUM_TESTS)
    assert [(t.kind, t.stdin, t.expected) for t in pairs] == [("stdio", "1 2\n", "3\n"), ("stdio", "5 5", "10")]
    as_json = parse_tests('[{"input": "1 2", "output": "3"}]')
    assert [(t.stdin, t.expected) for t in as_json] == [("1 2", "3")]
    apps = parse_tests({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", ["7"]]})
    assert [(t.stdin, t.expected) for t in apps] == [("1 2\n", "3\n"), ("3\n4", "7")]
    block = parse_tests("assert add(1, 2) == 3\nassert add(0, 0) == 0\n")
    assert [t.source for t in block] == ["add(1, 2)", "add(0, 0)"]
    setup_block = parse_tests("import math\nassert math.isclose(area(1), 3.14159, rel_tol=1e-4)")
    assert len(setup_block) == 1 and setup_block[0].kind == "statement"


@pytest.mark.parametrize(
    "tests", [None, [], "", "   ", {}, {"inputs": ["1"], "outputs": []}, ["assert (("], [1, 2], {"fn_name": "f"}]
)
def test_missing_or_unreadable_tests_cannot_be_judged(tests):
    assert parse_tests(tests) is None


@pytest.mark.parametrize(
    ("actual", "expected", "mode", "match"),
    [
        ("3\n", "3", "lines", True),
        ("1 2 \r\n3\n\n", "1 2\n3", "lines", True),
        ("1  2\n3", "1 2\n3", "lines", False),
        ("1  2\n3", "1 2 3", "tokens", True),
        (" 3 \n", "3", "stripped", True),
        ("3\n", "3", "exact", False),
        ("30", "3", "tokens", False),
    ],
)
def test_outputs_match(actual, expected, mode, match):
    assert outputs_match(actual, expected, mode) is match


# ------------------------------------------------------------------------------------------------- scoring


def test_correct_code_passes_asserts_and_stdio(reward):
    scores = reward(completions=[fenced(ADD), fenced(SUM_PROGRAM)], tests=[ADD_TESTS, SUM_TESTS])
    assert scores == [1.0, 1.0]


def test_wrong_code_fails_and_partial_credit_counts_tests(reward):
    wrong_for_negatives = "def add(a, b):\n    return abs(a) + b\n"  # add(-1, 1) == 2
    scores = reward(
        completions=[fenced("def add(a, b):\n    return a - b\n"), fenced(wrong_for_negatives)],
        tests=[ADD_TESTS] * 2,
    )
    assert scores == [0.0, pytest.approx(2 / 3)]


def test_all_or_nothing_and_dapo_scoring():
    strict = CodeReward(timeout=TIMEOUT, partial_credit=False, scoring="dapo")
    wrong_for_one = "def add(a, b):\n    return a + b if a != 4 else 0\n"
    report = strict.evaluate(fenced(wrong_for_one), ADD_TESTS + ["assert add(2, 2) == 4"])
    # All-or-nothing stops after the first failure the sandbox sees; a wrong value is judged here, so all run.
    assert [o.status for o in report.outcomes] == ["passed", "passed", "wrong_value", "passed"]
    scores = strict(completions=[fenced(ADD), fenced(wrong_for_one), "no code at all ```"], tests=[ADD_TESTS] * 3)
    assert scores == [1.0, -1.0, -1.0]


def test_all_or_nothing_skips_the_rest_after_a_timeout():
    strict = CodeReward(timeout=TIMEOUT, partial_credit=False)
    program = "import time\ndef add(a, b):\n    if a == 1:\n        time.sleep(60)\n    return a + b\n"
    started = time.monotonic()
    report = strict.evaluate(fenced(program), ADD_TESTS)
    assert [o.status for o in report.outcomes] == ["timeout", "not_run", "not_run"]
    assert time.monotonic() - started < TIMEOUT + MARGIN


def test_values_are_compared_with_python_semantics_on_plain_data(reward):
    program = (
        "from fractions import Fraction\n"
        "from collections import namedtuple, OrderedDict\n"
        "Point = namedtuple('Point', 'x y')\n"
        "def pair(): return [1, 2]\n"
        "def point(): return Point(1, 2)\n"
        "def half(): return Fraction(1, 2)\n"
        "def ordered(): return OrderedDict(a=1)\n"
        "def nan(): return float('nan')\n"
        "def big(): return 2 ** 200\n"
        "def nested(): return {(1, 2): {3, 4}, 'k': [None, True, 1.5, b'x', 2j]}\n"
    )
    tests = [
        "assert pair() == (1, 2)",  # list is not a tuple
        "assert point() == (1, 2)",  # a namedtuple is one
        "assert half() == 0.5",
        "assert ordered() == {'a': 1}",
        "assert nan() != 0.5",
        "assert nan() == nan()",  # no literal side: runs in the sandbox, and NaN != NaN there too
        "assert big() == 1606938044258990275541962092341162602522202993782792835301376",
        "assert nested() == {(1, 2): {3, 4}, 'k': [None, True, 1.5, b'x', 2j]}",
        "assert pair() == [1, 2]",
    ]
    report = reward.evaluate(fenced(program), tests)
    assert [o.passed for o in report.outcomes] == [False, True, True, True, True, False, True, True, True]


def test_conversational_completions_and_a_json_tests_column(reward):
    completions = [[{"role": "assistant", "content": fenced(ADD)}]]
    assert reward(completions=completions, tests=['["assert add(2, 3) == 5"]']) == [1.0]


def test_rows_without_tests_score_none_and_code_free_completions_score_zero(reward):
    assert reward(completions=[fenced(ADD), "I don't know.", fenced(ADD)], tests=[None, ADD_TESTS, []]) == [
        None, 0.0, None,
    ]


def test_missing_tests_column_names_the_argument(reward):
    with pytest.raises(KeyError, match="tests_column"):
        reward(completions=[fenced(ADD)], answer=["3"])


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="output_match"):
        CodeReward(output_match="fuzzy")
    with pytest.raises(ValueError, match="scoring"):
        CodeReward(scoring="ternary")
    with pytest.raises(ValueError, match="timeout"):
        CodeReward(timeout=0)


# ------------------------------------------------------------------------------------------------ registry


def test_registered_as_code_pickles_and_runs_from_any_thread():
    reward = get_reward("code", timeout=TIMEOUT)
    assert reward.__name__ == "code"
    copy = pickle.loads(pickle.dumps(reward))
    results = {}
    thread = threading.Thread(
        target=lambda: results.update(scores=call_reward(copy, completions=[fenced(ADD)], tests=[ADD_TESTS]))
    )
    thread.start()
    thread.join()
    assert results["scores"] == [1.0]


def test_spec_strings_build_the_reward_with_arguments():
    (reward,), weights = build_reward_funcs(["code:timeout=2,partial_credit=false,output_match=tokens"])
    inner = getattr(reward, "reward", reward)
    assert (inner.timeout, inner.partial_credit, inner.output_match, weights) == (2.0, False, "tokens", [1.0])
    with pytest.raises(TypeError, match="tests_column"):
        get_reward("code", test_column="tests")


def test_batch_runs_in_parallel(reward):
    # 8 programs that each sleep 0.5 s in their one test: parallel workers finish well under 8 x 0.5 s.
    program = "import time\ndef add(a, b):\n    time.sleep(0.5)\n    return a + b\n"
    parallel = CodeReward(timeout=5, num_workers=8)
    started = time.monotonic()
    scores = parallel(completions=[fenced(program)] * 8, tests=[["assert add(1, 1) == 2"]] * 8)
    assert scores == [1.0] * 8
    assert time.monotonic() - started < 8 * 0.5


def test_limits_only_mode_still_scores_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="trl_ext.sandbox.core"):
        unisolated = CodeReward(timeout=TIMEOUT, isolation="none")
    assert any("without Linux namespaces" in record.getMessage() for record in caplog.records)
    assert unisolated(completions=[fenced(ADD), fenced(SUM_PROGRAM)], tests=[ADD_TESTS, SUM_TESTS]) == [1.0, 1.0]
    started = time.monotonic()
    looping = fenced("def add(a, b):\n    while True:\n        pass\n")
    assert unisolated(completions=[looping], tests=[ADD_TESTS[:1]]) == [0.0]
    assert time.monotonic() - started < TIMEOUT + MARGIN


# ------------------------------------------------------------------------------------------------ training


@pytest.mark.slow
def test_code_reward_in_a_short_dapo_run(tmp_path, tiny_model_dir):
    from trl_ext import DAPOConfig, DAPOTrainer

    dataset = Dataset.from_dict(
        {"prompt": [f"def f{i}(x):" for i in range(8)], "tests": [[f"assert f{i}(1) == 1"] for i in range(8)]}
    )
    reward_funcs, weights = build_reward_funcs(["code:timeout=2"])
    config = DAPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        max_steps=2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        dynamic_sampling=False,
        reward_weights=weights,
    )
    trainer = DAPOTrainer(tiny_model_dir, reward_funcs=reward_funcs, args=config, train_dataset=dataset)
    trainer.train()
    logged = [entry["rewards/code/mean"] for entry in trainer.state.log_history if "rewards/code/mean" in entry]
    assert len(logged) == 2 and all(0.0 <= value <= 1.0 for value in logged)


def test_site_packages_are_opt_in():
    program = "import numpy as np\ndef pair():\n    return np.array([1, 2])\ndef three():\n    return np.int64(3)\n"
    tests = ["assert pair() == [1, 2]", "assert three() == 3", "assert three() == 3.5"]
    stdlib_only = CodeReward(timeout=10).evaluate(fenced(program), tests)
    assert [o.status for o in stdlib_only.outcomes] == ["error", "not_run", "not_run"]
    assert "ModuleNotFoundError" in stdlib_only.outcomes[0].detail
    with_packages = CodeReward(timeout=10, site_packages=True).evaluate(fenced(program), tests)
    assert [o.passed for o in with_packages.outcomes] == [True, True, False]  # NumPy values come back as data


def test_a_failing_harness_is_reported_not_silently_scored(reward, caplog):
    from trl_ext.rewards.code import CodeTest, run_code_tests

    broken = CodeTest("value", "add(1,", expected=3)  # not an expression: the harness itself raises
    with caplog.at_level(logging.WARNING, logger="trl_ext.sandbox.testing"):
        report = run_code_tests(ADD, [broken], sandbox=reward.sandbox, timeout=TIMEOUT)
    # A fault of the judge, not the program's: judged again on a fresh sandbox, then "cannot judge" naming the cause.
    assert [o.status for o in report.outcomes] == ["judge_failed"]
    assert report.judge_failed is not None and "SyntaxError" in report.judge_failed
    messages = [record.getMessage() for record in caplog.records]
    assert any("harness failed" in message and "SyntaxError" in message for message in messages)


# ---------------------------------------------------------------------------------------------------- C++


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```cpp\nint main() {}\n```", "int main() {}\n"),
        ("```c++\nint a;\n```\n```python\nx = 1\n```", "int a;\n"),
        ("```python\nx = 1\n```", ""),  # only another language: no C++ code
        ("```\nint b;\n```", "int b;\n"),
        ("<think>```cpp\nint c;\n```</think>```cpp\nint d;\n```", "int d;\n"),
    ],
)
def test_extract_cpp_code(text, code):
    assert extract_cpp_code(text) == code


@pytest.fixture(scope="module")
def cpp_reward() -> CodeReward:
    return CodeReward(timeout=TIMEOUT, memory_mb=256, language="cpp", compile_timeout=20)


def test_cpp_programs_are_compiled_once_and_judged_on_stdio(cpp_reward):
    wrong = CPP_SUM.replace("a + b", "a - b")
    crashes = "int main() { int* p = nullptr; return *p; }\n"
    exits = "#include <cstdlib>\nint main() { std::exit(3); }\n"
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 0", "output": "5"}]
    reports = [cpp_reward.evaluate(fenced(code, "cpp"), tests) for code in (CPP_SUM, wrong, crashes, exits)]
    assert [[o.status for o in report.outcomes] for report in reports] == [
        ["passed", "passed"], ["wrong_output", "passed"], ["killed", "killed"], ["error", "error"],
    ]
    assert all(report.compile["status"] == "ok" for report in reports)
    assert cpp_reward._score(reports[1]) == 0.5


def test_cpp_compile_errors_fail_every_test_with_the_diagnostics(cpp_reward):
    report = cpp_reward.evaluate(fenced("int main( {}\n", "cpp"), [{"input": "", "output": ""}] * 2)
    assert [o.status for o in report.outcomes] == ["compile_error"] * 2
    assert "error" in report.outcomes[0].detail and report.compile["status"] == "compile_error"


def test_language_per_row_from_a_column():
    mixed = CodeReward(timeout=TIMEOUT, language_column="language", compile_timeout=20)
    completions = [fenced(CPP_SUM, "cpp"), fenced("print(sum(map(int, input().split())))\n"), fenced(CPP_SUM, "cpp")]
    tests = [[{"input": "1 2", "output": "3"}]] * 3
    # An empty value means the reward's `language` (python): the C++ block is then no Python code.
    assert mixed(completions=completions, tests=tests, language=["cpp", "python", ""]) == [1.0, 1.0, 0.0]
    assert mixed(completions=completions[:1], tests=tests[:1], language=["fortran"]) == [None]
    # C++ rows need stdin/stdout tests; asserts cannot judge them.
    assert mixed(completions=completions[:1], tests=[ADD_TESTS], language=["c++"]) == [None]
    with pytest.raises(KeyError, match="language_column"):
        mixed(completions=completions[:1], tests=tests[:1])


def test_cpp_arguments_are_validated():
    with pytest.raises(ValueError, match="language"):
        CodeReward(language="rust")
    with pytest.raises(ValueError, match="compile_timeout"):
        CodeReward(language="cpp", compile_timeout=0)



def test_standard_library_code_that_looks_at_frames_still_works(reward):
    # The harness refuses frame access to protect its check counter; the standard library's own callers
    # (namedtuple, enum, typing, logging, unittest's assertRaises) handle that and keep working.
    program = (
        "import collections, enum, logging, typing, unittest, warnings\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "Color = enum.Enum('Color', 'RED GREEN')\n"
        "class Pair(typing.NamedTuple):\n    a: int\n    b: int\n"
        "def total(n):\n    logging.getLogger('solution').warning('adding %d', n)\n"
        "    warnings.warn('careful')\n"
        "    return Point(n, 1).x + Pair(1, 2).b + Color.GREEN.value\n"
        "def fails():\n    raise ValueError('no')\n"
    )
    tests = [
        "assert total(3) == 7",
        "import unittest\ncase = unittest.TestCase()\nwith case.assertRaises(ValueError):\n    fails()\n"
        "assert total(0) == 4",
    ]
    assert [o.status for o in reward.evaluate(fenced(program), tests).outcomes] == ["passed", "passed"]


def test_asserts_compare_plain_data_so_odd_objects_cannot_pass(reward):
    # int/float subclasses, NumPy-free plain values: compared as plain data; an object of a class the program
    # wrote never decides a comparison with its own __eq__, with plain data or with another such object.
    program = (
        "class Node:\n    def __init__(self, v):\n        self.v = v\n"
        "    def __eq__(self, other):\n        return isinstance(other, Node) and other.v == self.v\n"
        "class Weird(int):\n    def __eq__(self, other):\n        return True\n"
        "def node(v):\n    return Node(v)\ndef weird():\n    return Weird(2)\n"
    )
    tests = [
        "assert node(1) == Node(1)",
        "assert weird() == 2 and weird() != 3",
        "assert not (weird() == 5)",
        "assert node(1) == 1",
        "def check(f):\n    assert f() == 7\ncheck(weird)",
    ]
    report = reward.evaluate(fenced(program), tests)
    assert [o.passed for o in report.outcomes] == [False, True, True, False, False]


def test_reused_sandboxes_outlive_the_batch_threads_that_started_them():
    # bubblewrap's --die-with-parent follows the thread that started it: the batch's worker threads end, the
    # sandboxes they used must not.
    from trl_ext.sandbox.testing import _SERVERS, close_servers

    reward = CodeReward(timeout=2.0, num_workers=2)
    try:
        assert reward(completions=[fenced(ADD)] * 2, tests=[ADD_TESTS] * 2) == [1.0, 1.0]
        time.sleep(0.3)
        idle = [server for servers in _SERVERS[reward.sandbox].values() for server in servers]
        assert idle and all(server.alive for server in idle)
        report = reward.evaluate(fenced(ADD), ADD_TESTS)
        assert report.fraction_passed == 1.0 and report.run_id in {server.run_id for server in idle}
        fresh = CodeReward(timeout=2.0, reuse_sandbox=False).evaluate(fenced(ADD), ADD_TESTS)
        assert fresh.fraction_passed == 1.0 and fresh.run_id not in {server.run_id for server in idle}
    finally:
        close_servers(reward.sandbox)
