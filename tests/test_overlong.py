"""Soft overlong punishment (DAPO Eq. 13) at its boundaries."""

import pickle

import pytest

from trl_ext.rewards.length import SoftOverlongPunishment, soft_overlong_penalty


@pytest.mark.parametrize(
    "length,expected",
    [(0, 0.0), (80, 0.0), (81, -0.05), (90, -0.5), (99, -0.95), (100, -1.0), (101, -1.0), (500, -1.0)],
)
def test_penalty_is_zero_then_linear_then_minus_one(length, expected):
    assert soft_overlong_penalty(length, max_length=100, buffer_length=20) == pytest.approx(expected)


def test_penalty_matches_trl_reference_implementation():
    from trl.rewards import get_soft_overlong_punishment

    reference = get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)
    ids = [[1] * n for n in (10, 80, 85, 99, 100, 130)]
    assert SoftOverlongPunishment(100, 20)(completions=None, completion_ids=ids) == pytest.approx(
        reference(completion_ids=ids)
    )


@pytest.mark.parametrize("buffer_length", [0, -1, 101])
def test_invalid_buffer_fails_at_construction(buffer_length):
    with pytest.raises(ValueError, match="buffer_length"):
        SoftOverlongPunishment(max_length=100, buffer_length=buffer_length)


def test_reward_is_picklable_with_a_stable_name():
    reward = pickle.loads(pickle.dumps(SoftOverlongPunishment(16, 4)))
    assert reward.__name__ == "soft_overlong_punishment"
    assert reward(completions=["a", "b"], completion_ids=[[1] * 12, [1] * 14]) == [0.0, -0.5]
