"""The adaptive mode: pass-rate beliefs, the estimate skip, the history baseline (its unbiasedness), and the sampler
running with them."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ext.sampling import DynamicSampler
from trl_ext.sampling.adaptive import (
    AdaptiveSettings,
    PassRateBeliefs,
    history_baseline_advantages,
    informative_against_history,
    informative_probability,
    skip_probability,
)
from trl_ext.sampling.adaptive import HISTORY_COLUMN, batch_history_advantages
from trl_ext.sampling.sampler import local_processes

from test_sampler import GROUP, EvenPromptsInformative, batch_inputs, dataset
from test_sampler import settings as sampler_settings


def test_informative_probability_matches_the_beta_integral():
    # Beta(1, 1): E[p^G] = 1 / (G + 1), so v = 1 - 2 / (G + 1).
    assert informative_probability(0, 0, 8) == pytest.approx(1 - 2 / 9)
    # Beta(3, 1) (two successes), G = 2: E[p^2] = 3*4 / (4*5) = 0.6, E[(1-p)^2] = 1*2 / (4*5) = 0.1.
    assert informative_probability(2, 0, 2) == pytest.approx(0.3)
    # Numerical integral for an uneven posterior.
    a, b, G, n = 4.0, 9.0, 6, 20000
    density = [(x / n) ** (a - 1) * (1 - x / n) ** (b - 1) for x in range(1, n)]
    norm = sum(density)
    expected = sum(d * (1 - (x / n) ** G - (1 - x / n) ** G) for x, d in zip(range(1, n), density)) / norm
    assert informative_probability(a - 1, b - 1, G) == pytest.approx(expected, abs=1e-4)


def test_skip_probability_is_zero_for_undecided_prompts_and_capped_for_decided_ones():
    assert skip_probability(0, 0, 8, 0.9) == 0.0  # never seen
    assert skip_probability(8, 8, 8, 0.9) == 0.0  # half right: as informative as it gets
    assert 0.0 < skip_probability(12, 0, 8, 0.9) <= 0.9  # always right so far
    assert skip_probability(1000, 0, 8, 0.9) == 0.9  # the exploration floor: never skipped for sure
    assert skip_probability(0, 1000, 8, 0.5) == 0.5


def test_beliefs_discount_old_evidence_and_round_trip_their_state():
    beliefs = PassRateBeliefs(AdaptiveSettings(decay=0.5), group_size=2, seed=0)
    beliefs.record([7, -1], torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([1.0, 0.5, 0.0, 0.0]))
    beliefs.record([7], torch.tensor([0.0, float("nan")]), torch.tensor([0.0, float("nan")]))
    assert beliefs.evidence(7) == (1.0, 1.0, 0.75, 2.0)  # (2 successes, 1.5 reward, 2 rows) halved, plus one failure
    assert beliefs.evidence(-1) == (0.0, 0.0, 0.0, 0.0) and len(beliefs) == 1
    restored = PassRateBeliefs(AdaptiveSettings(decay=0.5), group_size=2, seed=0)
    restored.load_state_dict(beliefs.state_dict())
    assert restored.evidence(7) == beliefs.evidence(7)
    assert restored.should_skip(list(range(50)), 3, 0) == beliefs.should_skip(list(range(50)), 3, 0)


def test_history_baseline_leaves_each_completion_out_of_its_own_baseline():
    rewards = torch.tensor([1.0, 0.0, 0.0, float("nan"), 0.0, 0.0, 0.0, 0.0])
    advantages = history_baseline_advantages(rewards, 4, torch.tensor([2.0, 3.0]), torch.tensor([4.0, 4.0]))
    # Group 1: b_0 = (2 + 0 + 0) / (4 + 2) = 1/3; b_1 = (2 + 1 + 0) / 6 = 0.5; the unjudged row gets 0.
    assert advantages[:4].tolist() == pytest.approx([1 - 1 / 3, -0.5, -0.5, 0.0])
    # Group 2, all wrong, history mean 0.75: b = 3 / (4 + 3) for every row, all pushed down.
    assert advantages[4:].tolist() == pytest.approx([-3 / 7] * 4)
    # Without history an all-equal group has nothing to learn; with history it does.
    assert informative_against_history(rewards, 4, torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0])).tolist() == [
        True,
        False,
    ]
    assert informative_against_history(rewards, 4, torch.tensor([2.0, 3.0]), torch.tensor([4.0, 4.0])).all()


@given(
    rewards=st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.25]), min_size=4, max_size=4),
    history=st.tuples(st.floats(-5, 5), st.floats(0, 10)),
)
@settings(max_examples=50, deadline=None)
def test_history_baseline_equals_its_formula(rewards, history):
    values = torch.tensor(rewards)
    advantages = history_baseline_advantages(values, 4, torch.tensor([history[0]]), torch.tensor([history[1]]))
    for i in range(4):
        others = [r for j, r in enumerate(rewards) if j != i]
        denominator = history[1] + len(others)
        expected = rewards[i] - (history[0] + sum(others)) / denominator
        assert advantages[i].item() == pytest.approx(expected, abs=1e-5)


def test_history_baseline_estimator_is_unbiased_and_the_group_mean_is_not():
    """A one-parameter Bernoulli policy: pi(o = 1) = p = sigmoid(theta), reward = o. The true gradient of E[R] is
    p (1 - p); the score function is (o - p). Averaged over many groups (fixed seed), the history baseline's
    estimate matches it; the group mean (which includes R_i) shrinks it by (G - 1) / G."""
    generator = torch.Generator().manual_seed(0)
    p, group, groups = 0.3, 4, 200_000
    outcomes = torch.bernoulli(torch.full((groups, group), p), generator=generator)
    history_count = torch.full((groups,), 8.0)
    history_sum = torch.bernoulli(torch.full((groups, 8), p), generator=generator).sum(dim=1)
    advantages = history_baseline_advantages(outcomes.view(-1), group, history_sum, history_count).view(groups, group)
    score = outcomes - p
    estimate = (advantages * score).mean().item()
    group_mean = ((outcomes - outcomes.mean(dim=1, keepdim=True)) * score).mean().item()
    true_gradient = p * (1 - p)
    standard_error = (advantages * score).std().item() / math.sqrt(groups * group)
    assert abs(estimate - true_gradient) < 4 * standard_error
    assert group_mean == pytest.approx(true_gradient * (group - 1) / group, abs=4 * standard_error)
    assert abs(group_mean - true_gradient) > 10 * standard_error


def adaptive_sampler(carry_max_staleness: int = 1, **adaptive) -> DynamicSampler:
    configured = sampler_settings(adaptive=AdaptiveSettings(**adaptive), carry_max_staleness=carry_max_staleness)
    return DynamicSampler(configured, dataset(), local_processes())


def test_adaptive_mode_keeps_all_wrong_groups_of_prompts_solved_before():
    """Odd prompts score (0, 0) now; once their history holds a success, their all-wrong groups are informative and
    fill the batch without more rounds; their rows carry the history the advantages use."""
    sampler, source = adaptive_sampler(max_skip_probability=0.0, carry_max_staleness=0), EvenPromptsInformative()
    inputs = batch_inputs(0)
    first = sampler.next_batch(inputs, source, policy_version=0, draw_key=0)
    assert first.report.rounds_run >= 2  # no history yet: the odd prompts' groups are dropped, as DAPO drops them
    odd = [int(row["prompt"].split()[-1]) for row in inputs[::GROUP]]
    sampler.beliefs.record(odd, torch.tensor([1.0, 0.0] * len(odd)), torch.tensor([1.0, 0.0] * len(odd)))
    rounds_before = len(source.rounds)
    second = sampler.next_batch(inputs, source, policy_version=1, draw_key=1)
    assert len(source.rounds) - rounds_before == 1 and second.report.rounds_run == 1
    kept = second.rows.columns["prompts"][: second.num_kept_rows : GROUP]
    assert sorted(int(prompt.split()[-1]) for prompt in kept) == sorted(odd)
    assert all(history[1] > 0 for history in second.rows.columns[HISTORY_COLUMN])
    advantages = batch_history_advantages(second, sampler.settings)
    assert (advantages < 0).all()  # every all-wrong completion is pushed down


def test_adaptive_skip_replaces_decided_prompts_before_generating():
    sampler, source = adaptive_sampler(max_skip_probability=0.9), EvenPromptsInformative()
    decided = list(range(1, 200, 2))  # every odd prompt: always wrong, with much evidence
    for _ in range(6):
        sampler.beliefs.record(decided, torch.zeros(len(decided) * GROUP), torch.zeros(len(decided) * GROUP))
    batch = sampler.next_batch(batch_inputs(0, groups=8), source, policy_version=0, draw_key=0)
    assert batch.report.prompts_skipped >= 4  # most of the 8 odd prompts of the batch are not generated for
    assert sampler.state_dict()["shared"]["beliefs"]["evidence"]
    assert sampler.prompt_history is None  # the estimate replaces the streak-based history


def test_adaptive_settings_refuse_out_of_range_values():
    with pytest.raises(ValueError, match="max_skip_probability"):
        AdaptiveSettings(max_skip_probability=1.0)
    with pytest.raises(ValueError, match="decay"):
        AdaptiveSettings(decay=1.0)


def test_two_processes_take_identical_adaptive_decisions():
    """Two simulated processes (threads whose gathers exchange values) each run the real sampler in the adaptive
    mode on their own prompts and their own rewards: their beliefs, skips and round counts stay identical."""
    import sys
    import threading
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from dynamic_sampling_sim import BernoulliGroups, Lockstep

    lockstep, samplers, reports = Lockstep(2), [None, None], [[], []]
    adaptive = AdaptiveSettings(max_skip_probability=0.9, history_baseline=True)

    def process_run(index):
        process = lockstep.process(index)
        sampler = DynamicSampler(sampler_settings(adaptive=adaptive, on_exhausted="warn"), dataset(), process)
        samplers[index] = sampler
        source = BernoulliGroups(0.4, np.random.default_rng(index), process)
        for step in range(12):
            first = (step * 2 + index) * 4 % 40  # prompts revisit, so beliefs build up and skips happen
            inputs = [{"prompt": f"prompt {first + group}"} for group in range(4) for _ in range(GROUP)]
            batch = sampler.next_batch(inputs, source, policy_version=step, draw_key=step)
            reports[index].append((batch.report.rounds_run, batch.report.prompts_skipped, batch.report.groups_sampled))

    threads = [threading.Thread(target=process_run, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert reports[0] == reports[1]
    assert samplers[0].state_dict()["shared"] == samplers[1].state_dict()["shared"]
    assert len(samplers[0].beliefs) > 0 and sum(skipped for _, skipped, _ in reports[0]) > 0


def test_groups_the_history_baseline_trains_do_not_pass_for_a_filter_that_never_filters(monkeypatch, caplog):
    """Every group is all wrong on prompts solved before: each is informative against its history, yet the filter
    reward had zero variance, so the sampler does not say it "kept every prompt group" (its warning for a continuous
    filter reward)."""
    import logging

    from test_pilot import G, PassRates, inputs_for, pilot_sampler

    from trl_ext.sampling import sampler as sampler_module

    monkeypatch.setattr(sampler_module, "ALWAYS_INFORMATIVE_BATCHES", 2)
    sampler, source = pilot_sampler(pilot_size=0), PassRates(lambda index: 0.0)
    solved = list(range(32))
    sampler.beliefs.record(solved, torch.ones(len(solved) * G), torch.ones(len(solved) * G))
    with caplog.at_level(logging.WARNING, logger="trl_ext.sampling.sampler"):
        for step in range(3):
            batch = sampler.next_batch(inputs_for(range(8 * step, 8 * step + 8)), source, policy_version=step,
                                       draw_key=step)  # fmt: skip
            assert batch.report.informative_sampled == batch.report.groups_sampled == 8
    assert "kept every prompt group" not in caplog.text
