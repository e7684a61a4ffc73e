"""`CodeReward(executor="sandboxfusion+..." | "piston+...")`: stdin/stdout rows judged by an existing execution
service, compared by our output matching. The services cannot run here: these tests run against stand-ins that
speak their documented APIs (`standins.py` says where each is documented). What a user deploys: a SandboxFusion
server (its Docker image) or a Piston API with the `python` (and `c++`) packages installed."""

from __future__ import annotations

import pickle

import pytest
from standins import Serving

from trl_ext.rewards.code import CodeReward

SQUARE = "print(int(input()) ** 2)\n"
DOUBLE = "print(int(input()) * 2)\n"
CRASH = "raise SystemExit(3)\n"
SLOW = "import time\ntime.sleep(5)\nprint(9)\n"
TESTS = [{"input": "3\n", "output": "9\n"}, {"input": "-4\n", "output": "16\n"}]
ENGINES = ["sandboxfusion", "piston"]


def fenced(code: str) -> str:
    return f"```python\n{code}```"


@pytest.fixture(scope="module")
def standin():
    with Serving() as serving:
        yield serving


def executor(engine: str, standin) -> str:
    return f"sandboxfusion+{standin.url}" if engine == "sandboxfusion" else f"piston+{standin.url}/api/v2"


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engine_judges_stdio_rows_as_the_local_judge(engine, standin):
    reward = CodeReward(timeout=2.0, executor=executor(engine, standin))
    local = CodeReward(timeout=2.0)
    completions = [fenced(SQUARE), fenced(DOUBLE), fenced(CRASH), fenced(SLOW), "no code"]
    scores = reward(completions=completions, tests=[TESTS] * 5)
    assert scores == local(completions=completions, tests=[TESTS] * 5) == [1.0, 0.0, 0.0, 0.0, 0.0]
    report = reward.evaluate(fenced(SLOW), TESTS)
    assert report.outcomes[0].status == "timeout"
    assert reward.evaluate(fenced(CRASH), TESTS).outcomes[0].status == "error"
    sent = standin.standin.requests[-1]
    if engine == "sandboxfusion":
        assert sent["language"] == "python" and sent["run_timeout"] == 2.0 and sent["memory_limit_MB"] == 1024
    else:
        assert sent["language"] == "python" and sent["version"] == "*" and sent["run_timeout"] == 2000


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fault", ["http", "service"])
def test_a_fault_of_the_service_is_retried_and_never_a_verdict(engine, fault, standin, caplog):
    reward = CodeReward(timeout=2.0, executor=executor(engine, standin))
    standin.standin.faults = [fault]  # the first request fails, the next succeeds
    assert reward(completions=[fenced(SQUARE)], tests=[TESTS]) == [1.0]
    standin.standin.faults = [fault] * 10  # every attempt fails: cannot judge, with the cause
    with caplog.at_level("WARNING"):
        assert reward(completions=[fenced(SQUARE + "# again\n")], tests=[TESTS]) == [None]
    assert "the judge failed" in caplog.text and engine in caplog.text
    standin.standin.faults = []


@pytest.mark.parametrize("engine", ENGINES)
def test_what_a_program_prints_is_never_taken_for_a_fault_of_the_service(engine, standin):
    # open-r1 reads "Resource temporarily unavailable" in a run's stderr as an overloaded worker; a program can
    # print it, so here it is the program's failure (0), never a retry and then None.
    claims = "import sys\nsys.stderr.write('Resource temporarily unavailable\\n')\nraise SystemExit(1)\n"
    reward = CodeReward(timeout=2.0, executor=executor(engine, standin))
    assert reward(completions=[fenced(claims)], tests=[TESTS]) == [0.0]


@pytest.mark.parametrize("engine", ENGINES)
def test_assert_rows_and_checkers_are_refused(engine, standin, caplog):
    reward = CodeReward(executor=executor(engine, standin))
    with caplog.at_level("WARNING"):
        assert reward(completions=[fenced("def f():\n    return 1\n")], tests=[["assert f() == 1"]]) == [None]
    assert "stdin/stdout tests only" in caplog.text
    with pytest.raises(ValueError, match="cannot run checker programs"):
        CodeReward(executor=executor(engine, standin), checker_column="checker")


def test_an_unknown_engine_is_named():
    with pytest.raises(ValueError, match="sandboxfusion"):
        CodeReward(executor="judge0+http://127.0.0.1:1")


def test_an_engine_reward_pickles(standin):
    reward = pickle.loads(pickle.dumps(CodeReward(executor=executor("piston", standin))))
    assert reward(completions=[fenced(SQUARE)], tests=[TESTS]) == [1.0]
