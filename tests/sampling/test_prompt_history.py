"""Prompt history: group outcomes, streaks, skip probabilities and deterministic skip decisions."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ext.sampling.dynamic_sampling import informative_group_mask
from trl_ext.sampling.prompt_history import Outcome, PromptHistory, group_outcomes

NAN = float("nan")
C, W, M = Outcome.ALL_CORRECT, Outcome.ALL_WRONG, Outcome.MIXED


def test_group_outcomes_cases():
    rewards = torch.tensor(
        [
            1.0, 1.0, 1.0,  # all correct
            0.0, 0.0, 0.0,  # all wrong (0/1 rewards)
            -1.0, -1.0, -1.0,  # all wrong (+-1 rewards)
            1.0, -1.0, 1.0,  # mixed
            NAN, 1.0, 1.0,  # all correct among the judged ones
            NAN, NAN, 1.0,  # a single judged completion
            NAN, NAN, NAN,  # none judged
            0.3, 0.3 + 1e-9, 0.3,  # continuous reward, zero variance, below the threshold
        ]
    )  # fmt: skip
    assert group_outcomes(rewards, group_size=3) == [C, W, W, M, C, Outcome.UNJUDGED, Outcome.UNJUDGED, W]
    assert group_outcomes(rewards[-3:], group_size=3, success_threshold=0.2) == [C]


def test_group_outcomes_rejects_partial_groups():
    with pytest.raises(ValueError, match="groups of 4"):
        group_outcomes(torch.zeros(6), group_size=4)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=2, max_value=5).flatmap(
        lambda g: st.tuples(
            st.just(g), st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, NAN]), min_size=g, max_size=6 * g)
        )
    )
)
def test_group_outcomes_agree_with_the_filter(case):
    group_size, values = case
    values = values[: len(values) // group_size * group_size]
    if not values:
        return
    rewards = torch.tensor(values)
    outcomes = group_outcomes(rewards, group_size)
    assert [outcome is M for outcome in outcomes] == informative_group_mask(rewards, group_size).tolist()
    for outcome, group in zip(outcomes, rewards.view(-1, group_size), strict=True):
        judged = group[~torch.isnan(group)]
        if outcome.uninformative:
            assert len(judged) >= 2 and (outcome is C) == bool(judged[0] > 0.5)
        if outcome is Outcome.UNJUDGED:
            assert len(judged) < 2


def test_streaks_grow_on_uninformative_visits_and_reset_on_mixed():
    history = PromptHistory()
    history.record([3, 4, 3], [C, W, C])
    assert history.streak(3) == 2 and history.last_outcome(3) is C
    assert history.streak(4) == 1 and history.last_outcome(4) is W
    history.record([3, 4, 5], [M, Outcome.UNJUDGED, M])
    assert history.streak(3) == 0 and history.last_outcome(3) is None
    assert history.streak(4) == 1  # unjudged: nothing learned
    assert len(history) == 1  # only prompt 4 holds state


def test_record_ignores_unknown_prompts_and_checks_lengths():
    history = PromptHistory()
    history.record([-1, 2], [C, C])
    assert len(history) == 1 and history.streak(2) == 1
    history.record([2], ["all_wrong"])  # outcome values are accepted too
    assert history.streak(2) == 2 and history.last_outcome(2) is W
    with pytest.raises(ValueError, match="2 prompt indices for 1 outcomes"):
        history.record([1, 2], [C])


def test_skip_probability_rises_with_the_streak_up_to_the_cap():
    history = PromptHistory(max_skip_probability=0.9, exploration_rate=0.5)
    expected = [0.0, 0.5, 0.75, 0.875, 0.9, 0.9]
    for streak, probability in enumerate(expected):
        assert history.skip_probability(7) == pytest.approx(probability)
        history.record([7], [W])
    assert PromptHistory(exploration_rate=1.0).skip_probability(0) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"max_skip_probability": 1.0}, "max_skip_probability"), ({"exploration_rate": 0.0}, "exploration_rate")],
)
def test_rejects_settings_that_would_never_bring_a_prompt_back(kwargs, field):
    with pytest.raises(ValueError, match=field):
        PromptHistory(**kwargs)


def test_should_skip_is_deterministic_and_independent_of_order_and_copy():
    history = PromptHistory(seed=11)
    prompts = list(range(200))
    history.record(prompts, [C] * 200)
    history.record(prompts, [W] * 200)  # streak 2: skip probability 0.75
    decisions = history.should_skip(prompts, batch_key=5, round_index=0)
    # Another copy (another process, or a resumed run) decides the same, whatever order or subset it asks for.
    copy = PromptHistory(seed=11)
    copy.load_state_dict(json.loads(json.dumps(history.state_dict())))
    assert copy.should_skip(prompts[::-1], batch_key=5, round_index=0) == decisions[::-1]
    assert copy.should_skip(prompts[100:], batch_key=5, round_index=0) == decisions[100:]
    # Each decision is a fresh coin per batch and round, at the skip probability.
    assert 0.65 < sum(decisions) / 200 < 0.85
    assert history.should_skip(prompts, batch_key=6, round_index=0) != decisions
    assert history.should_skip(prompts, batch_key=5, round_index=1) != decisions
    assert PromptHistory(seed=12).should_skip(prompts, 5, 0) == [False] * 200  # no history: never skipped


def test_should_skip_never_skips_prompts_without_a_streak_or_unknown():
    history = PromptHistory()
    for _ in range(10):
        history.record([1], [C])
    assert history.should_skip([0, -1, 2], batch_key=0, round_index=0) == [False, False, False]


def test_exploration_floor_keeps_hopeless_prompts_coming_back():
    history = PromptHistory(seed=0, max_skip_probability=0.9)
    history.record([9] * 50, [W] * 50)
    kept = sum(not history.should_skip([9], batch_key=key, round_index=0)[0] for key in range(4000))
    assert 0.08 < kept / 4000 < 0.12


def test_skipped_by_outcome_counts_for_metrics():
    history = PromptHistory()
    history.record([1, 2, 3], [C, W, W])
    assert history.skipped_by_outcome([1, 2, 3, 4], [True, True, True, False]) == {"all_correct": 1, "all_wrong": 2}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(list(Outcome))), max_size=40))
def test_streak_is_the_run_of_uninformative_visits_since_the_last_mixed(visits):
    history = PromptHistory()
    for index, outcome in visits:
        history.record([index], [outcome])
    for index in range(6):
        judged = [outcome for i, outcome in visits if i == index and outcome is not Outcome.UNJUDGED]
        run = 0
        for outcome in reversed(judged):
            if outcome is M:
                break
            run += 1
        assert history.streak(index) == run
        probability = history.skip_probability(index)
        assert 0.0 <= probability <= 0.9 and (probability > 0) == (run > 0)
    restored = PromptHistory()
    restored.load_state_dict(json.loads(json.dumps(history.state_dict())))
    assert restored.state_dict() == history.state_dict()
