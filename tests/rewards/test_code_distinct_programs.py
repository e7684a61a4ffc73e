"""The `code` reward runs each distinct program once per batch: a group of samples often repeats a program (a
tiny or a well-trained policy at temperature 1 does), and the same program on the same tests gets one verdict."""

from __future__ import annotations

from trl_ext.rewards import call_reward, get_reward
from trl_ext.sandbox.testing import close_servers

TEST = "def check(candidate):\n    assert candidate(2) == 4\n"


def test_the_same_program_on_the_same_tests_runs_once_per_batch(monkeypatch):
    reward = get_reward("code", timeout=4.0, asynchronous=False)
    runs = []
    evaluate = reward._evaluate

    def counted(code, *args, **kwargs):
        runs.append(code)
        return evaluate(code, *args, **kwargs)

    monkeypatch.setattr(reward, "_evaluate", counted)
    right, wrong = "def double(x):\n    return 2 * x\n", "def double(x):\n    return x + 3\n"
    other_test = "def check(candidate):\n    assert candidate(3) == 6\n"
    scores = call_reward(
        reward,
        completions=[right, wrong, right, right, wrong, right],
        test=[TEST] * 5 + [other_test],
        entry_point=["double"] * 6,
    )
    assert scores == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    # right and wrong on the first test, right on the second: three programs ran for six completions
    assert len(runs) == 3
    close_servers(reward.sandbox)
