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
from test_red_team import TIMEOUT, contained_verdicts, score  # noqa: E402

from trl_ext.rewards.code import CodeReward  # noqa: E402


@pytest.fixture(scope="module")
def served():
    with judge_servers(1, "--workers", "2") as [(url, _)]:
        yield CodeReward(timeout=TIMEOUT, memory_mb=256, executor=url, executor_token=TOKEN)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_on_the_served_judge_is_contained(name, served):
    attack = ATTACKS[name]
    for program, row in attack.before:
        assert score(served, program, row) == 1.0, "a right program judged before the attack"
    hostile = score(served, attack.program, attack.row)
    assert hostile in contained_verdicts(attack), f"the hostile program scored {hostile}"
    for index, (program, row) in enumerate(attack.followers()):
        assert score(served, program, row) == 1.0, f"program {index} judged after the attack"
    for index, (program, row) in enumerate(attack.probes):
        assert score(served, program, row) == 1.0, f"probe {index} after the attack"
