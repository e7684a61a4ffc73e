"""Dynamic sampling decisions: pure functions, tested on hand-made tensors."""

import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ext.sampling import (
    KeepRateEstimator,
    RefillSampler,
    filter_rewards,
    groups_to_keep,
    informative_group_mask,
    prompts_to_request,
    spare_groups_to_fill,
)
from trl_ext.sampling.dynamic_sampling import _binomial_at_least

NAN = float("nan")


def test_filter_rewards_sums_only_used_functions_with_weights():
    rewards = torch.tensor([[1.0, -0.5, 2.0], [0.0, -1.0, 3.0]])
    weights = torch.tensor([2.0, 1.0, 0.5])
    used = torch.tensor([True, False, True])
    assert filter_rewards(rewards, weights, used).tolist() == [3.0, 1.5]


def test_filter_rewards_all_correct_group_with_length_penalty_stays_uninformative():
    # Two correct answers of different lengths: the overlong penalty differs, the verifier does not.
    rewards = torch.tensor([[1.0, 0.0], [1.0, -0.5]])
    used = torch.tensor([True, False])
    assert not informative_group_mask(filter_rewards(rewards, torch.ones(2), used), group_size=2).item()
    assert informative_group_mask(filter_rewards(rewards, torch.ones(2), torch.tensor([True, True])), 2).item()


def test_filter_rewards_is_nan_only_where_no_used_function_judged():
    rewards = torch.tensor([[NAN, 5.0], [NAN, NAN], [2.0, NAN]])
    result = filter_rewards(rewards, torch.ones(2), torch.tensor([True, True]))
    assert result[0] == 5.0 and math.isnan(result[1]) and result[2] == 2.0


def test_informative_group_mask_cases():
    rewards = torch.tensor(
        [
            1.0, 1.0, 1.0,  # all right
            -1.0, -1.0, -1.0,  # all wrong
            1.0, -1.0, 1.0,  # mixed
            NAN, 1.0, -1.0,  # mixed among the judged ones
            NAN, NAN, 1.0,  # a single judged completion
            0.3, 0.3 + 1e-9, 0.3,  # equal up to float noise
        ]
    )  # fmt: skip
    assert informative_group_mask(rewards, group_size=3).tolist() == [False, False, True, True, False, False]


def test_informative_group_mask_rejects_partial_groups():
    with pytest.raises(ValueError, match="groups of 4"):
        informative_group_mask(torch.zeros(6), group_size=4)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=2, max_value=6).flatmap(
        lambda g: st.tuples(st.just(g), st.lists(st.integers(-2, 2), min_size=g, max_size=8 * g))
    )
)
def test_informative_group_mask_matches_nonzero_std(case):
    group_size, values = case
    values = values[: len(values) // group_size * group_size]
    if not values:
        return
    rewards = torch.tensor(values, dtype=torch.float32)
    expected = rewards.view(-1, group_size).std(dim=1) > 0
    assert torch.equal(informative_group_mask(rewards, group_size), expected)


def test_groups_to_keep_takes_first_informative_groups_in_order():
    informative = torch.tensor([False, True, True, False, True])
    assert groups_to_keep(informative, 2).tolist() == [1, 2]
    assert groups_to_keep(informative, 10).tolist() == [1, 2, 4]
    assert groups_to_keep(informative, 0).tolist() == []


@pytest.mark.parametrize("successes,trials,p", [(3, 10, 0.3), (1, 5, 0.5), (7, 9, 0.9), (20, 60, 0.25)])
def test_binomial_tail_matches_closed_form(successes, trials, p):
    exact = sum(math.comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(successes, trials + 1))
    assert _binomial_at_least(successes, trials, p) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize("keep_rate", [0.1, 0.25, 0.5, 0.75, 0.9])
@pytest.mark.parametrize("needed", [1, 4, 16, 64])
def test_prompts_to_request_is_the_smallest_request_meeting_the_confidence(keep_rate, needed):
    n = prompts_to_request(needed, keep_rate, confidence=0.9, max_prompts=100_000)
    assert _binomial_at_least(needed, n, keep_rate) >= 0.9
    assert _binomial_at_least(needed, n - 1, keep_rate) < 0.9
    assert n >= needed / keep_rate * 0.9  # never requests fewer than the expected need, roughly


def test_prompts_to_request_edge_cases():
    assert prompts_to_request(0, 0.5, 0.9, 100) == 0
    assert prompts_to_request(8, 1.0, 0.9, 100) == 8
    assert prompts_to_request(8, 0.0, 0.9, 100) == 100  # nothing was kept lately: as many as allowed
    assert prompts_to_request(8, 0.05, 0.9, 40) == 40  # capped


def simulate_rounds_per_step(keep_rate, groups_needed, steps, confidence=0.9, seed=0):
    """Rounds per step of the trainer's loop (first round over-sampled too) with i.i.d. groups."""
    rng = random.Random(seed)
    estimator = KeepRateEstimator()
    rounds_per_step, generated, kept_total = [], 0, 0
    for _ in range(steps):
        kept, rounds = 0, 0
        while kept < groups_needed:
            estimate = estimator.estimate()
            request = prompts_to_request(groups_needed - kept, 1.0 if estimate is None else estimate, confidence, 10**6)
            if rounds == 0:
                request = max(request, groups_needed)
            informative = sum(rng.random() < keep_rate for _ in range(request))
            estimator.update(informative, request)
            kept += informative
            generated += request
            rounds += 1
        kept_total += groups_needed
        rounds_per_step.append(rounds)
    return rounds_per_step, generated / kept_total


@pytest.mark.parametrize("keep_rate", [0.25, 0.5, 0.75])
def test_adaptive_oversampling_needs_about_one_round_per_step(keep_rate):
    rounds, generated_per_kept = simulate_rounds_per_step(keep_rate, groups_needed=32, steps=200)
    assert rounds[0] >= 2  # nothing is known at the first step
    steady = rounds[5:]
    assert sum(steady) / len(steady) <= 1.2
    assert generated_per_kept <= 1.3 / keep_rate


def test_keep_rate_estimator_pools_a_sliding_window():
    estimator = KeepRateEstimator(window=2)
    assert estimator.estimate() is None
    estimator.update(1, 4)
    estimator.update(3, 4)
    assert estimator.estimate() == 0.5
    estimator.update(4, 4)  # the first round leaves the window
    assert estimator.estimate() == 7 / 8
    estimator.update(0, 0)  # an empty round carries no information
    assert estimator.estimate() == 7 / 8


def test_refill_sampler_shards_without_overlap_and_is_reproducible():
    shards = [RefillSampler(100, seed=3, num_processes=4, process_index=rank).draw(7, [], 0, 10) for rank in range(4)]
    flat = [index for shard in shards for index in shard]
    assert len(set(flat)) == 40 and all(0 <= index < 100 for index in flat)
    again = RefillSampler(100, seed=3, num_processes=4, process_index=2).draw(7, [], 0, 10)
    assert again == shards[2]  # a resumed run draws the same prompts
    assert RefillSampler(100, 3, 4, 2).draw(8, [], 0, 10) != again  # another generation batch draws others
    assert not set(RefillSampler(100, 3, 4, 2).draw(7, [], 40, 10)) & set(flat)  # the next round, fresh ones


def test_refill_sampler_repeats_only_when_the_dataset_is_too_small():
    indices = RefillSampler(5, seed=0, num_processes=1, process_index=0).draw(0, [], 0, 12)
    assert len(indices) == 12 and sorted(set(indices[:5])) == [0, 1, 2, 3, 4]


def test_draw_unskipped_replaces_skipped_prompts_and_gives_up_skipping_after_its_patience():
    from trl_ext.sampling import draw_unskipped

    order = list(range(20))
    chosen, end, skipped = draw_unskipped(
        take=lambda start, count: order[start : start + count],
        should_skip=lambda indices: [index % 2 == 0 for index in indices],
        start=0,
        count=4,
        patience=10,
    )
    assert chosen == [1, 3, 5, 7] and end == 8 and skipped == 4
    chosen, _, skipped = draw_unskipped(
        take=lambda start, count: order[start : start + count],
        should_skip=lambda indices: [True] * len(indices),
        start=0,
        count=3,
        patience=2,
    )
    assert chosen == [2, 3, 4] and skipped == 2


def test_spare_groups_fill_the_shortfall_from_the_earliest_rounds():
    spare = [torch.tensor([1, 3]), torch.tensor([0, 1]), torch.tensor([0])]
    assert [groups.tolist() for groups in spare_groups_to_fill(spare, shortfall=3)] == [[1, 3], [0], []]
    assert [groups.tolist() for groups in spare_groups_to_fill(spare, shortfall=0)] == [[], [], []]
