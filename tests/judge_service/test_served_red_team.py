"""The red-team table (`tests/sandbox/red_team.py`) against the served judge: each hostile program, sent by the
reward's client to a `trl-ext sandbox serve` process, scores what its case allows, and the right programs judged
after it by the same server still score 1.0. A server adds no way out of the sandbox."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))

from red_team import ATTACKS  # noqa: E402
from servers import TOKEN, judge_servers  # noqa: E402
from test_red_team import TIMEOUT, assert_contained  # noqa: E402

from trl_ext.rewards.code import CodeReward  # noqa: E402


@pytest.fixture(scope="module")
def served():
    with judge_servers(1, "--workers", "2") as [(url, _)]:
        yield CodeReward(timeout=TIMEOUT, memory_mb=256, executor=url, executor_token=TOKEN)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_on_the_served_judge_is_contained(name, served):
    assert_contained(served, ATTACKS[name])
