"""BackoffController: when dynamic sampling stops over-sampling, and when it comes back."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ext.sampling.backoff import BackoffController, SamplingMode


def controller() -> BackoffController:
    return BackoffController(threshold=1 / 80, evidence_groups=80)


def test_thresholds_from_the_config_defaults():
    defaults = BackoffController.from_config(max_oversampling=8.0, max_rounds=10)
    assert defaults.threshold == pytest.approx(1 / 80) and defaults.evidence_groups == 160
    assert defaults.mode is SamplingMode.NORMAL
    assert BackoffController.from_config(max_oversampling=2.0, max_rounds=3).evidence_groups == 12


def test_enters_only_with_enough_evidence():
    backoff = controller()
    assert not backoff.observe_round(0, 32)  # 32 groups, none informative: not enough evidence yet
    assert backoff.mode is SamplingMode.NORMAL
    assert backoff.observe_round(0, 256)  # 288 groups, none informative
    assert backoff.mode is SamplingMode.BACKOFF


def test_a_low_but_workable_keep_rate_never_backs_off():
    backoff = controller()
    for _ in range(20):
        assert not backoff.observe_round(2, 80)  # 2.5% informative, twice the threshold
    assert backoff.mode is SamplingMode.NORMAL


def test_pooled_rate_below_the_threshold_backs_off():
    backoff = controller()
    assert backoff.observe_round(1, 100)  # 1% < 1.25%, over 100 >= 80 groups
    assert backoff.mode is SamplingMode.BACKOFF


def test_old_rounds_leave_the_evidence_once_newer_ones_cover_it():
    backoff = controller()
    backoff.observe_round(40, 80)  # a good round...
    assert backoff.observe_round(0, 80)  # ...then 80 groups without any: the good round no longer counts


def test_exits_as_soon_as_a_plain_round_shows_an_informative_group():
    backoff = controller()
    backoff.observe_round(0, 100)
    assert not backoff.observe_round(0, 32)
    assert backoff.mode is SamplingMode.BACKOFF
    assert backoff.observe_round(1, 32)
    assert backoff.mode is SamplingMode.NORMAL


def test_with_large_rounds_exit_needs_the_threshold_rate():
    backoff = controller()
    backoff.observe_round(0, 200)
    assert not backoff.observe_round(1, 160)  # 1/160 < 1/80
    assert backoff.observe_round(2, 160)


def test_exit_clears_the_evidence_so_reentry_needs_fresh_rounds():
    backoff = controller()
    backoff.observe_round(0, 100)
    backoff.observe_round(1, 32)  # back to normal
    assert not backoff.observe_round(0, 32)  # 32 fresh groups are not enough evidence
    assert not backoff.observe_round(0, 32)
    assert backoff.observe_round(0, 32)  # 96 >= 80
    assert backoff.mode is SamplingMode.BACKOFF


def test_empty_rounds_change_nothing():
    backoff = controller()
    assert not backoff.observe_round(0, 0)
    assert backoff.state_dict() == {"mode": "normal", "evidence": []}


def test_state_dict_is_json_and_resumes_identically():
    backoff = controller()
    backoff.observe_round(0, 32)
    backoff.observe_round(1, 32)
    state = json.loads(json.dumps(backoff.state_dict()))
    resumed = controller()
    resumed.load_state_dict(state)
    for informative, groups in [(0, 32), (0, 32), (3, 32), (0, 8)]:
        assert resumed.observe_round(informative, groups) == backoff.observe_round(informative, groups)
        assert resumed.mode is backoff.mode


@pytest.mark.parametrize(("threshold", "evidence"), [(0.0, 10), (1.0, 10), (0.1, 0)])
def test_rejects_bad_settings(threshold, evidence):
    with pytest.raises(ValueError, match="threshold" if evidence else "evidence_groups"):
        BackoffController(threshold=threshold, evidence_groups=evidence)


rounds = st.lists(st.integers(1, 300).flatmap(lambda g: st.tuples(st.integers(0, g), st.just(g))), max_size=30)


@settings(max_examples=300, deadline=None)
@given(rounds)
def test_rounds_at_or_above_the_threshold_never_back_off(observed):
    backoff = controller()
    for informative, groups in observed:
        if informative * 80 >= groups:
            assert not backoff.observe_round(informative, groups)
            assert backoff.mode is SamplingMode.NORMAL


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 100), min_size=1, max_size=20))
def test_uninformative_rounds_back_off_exactly_when_they_cover_the_evidence(sizes):
    backoff = controller()
    seen = 0
    for groups in sizes:
        seen += groups
        changed = backoff.observe_round(0, groups)
        assert changed == (seen >= 80 and seen - groups < 80)
        assert (backoff.mode is SamplingMode.BACKOFF) == (seen >= 80)
        if changed:
            break
