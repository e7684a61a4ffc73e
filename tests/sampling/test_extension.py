"""The adaptive mode's extensions: an all-equal group gets G more completions when worth their tokens, and the
prompt's completions train as one group of variable size."""

from __future__ import annotations

import copy

import pytest
import torch

from trl_ext.sampling.adaptive import (
    HISTORY_COLUMN,
    AdaptiveSettings,
    batch_history_advantages,
    history_baseline_advantages,
    joint_histories,
)
from trl_ext.sampling.extension import extension_decisions, extension_value, informative_prompts

from test_pilot import G, PassRates, inputs_for, pilot_sampler, run_two_processes


def leave_one_out(rewards: list[float], history_sum: float, history_count: float) -> list[float]:
    """`R_i - (H_sum + sum_{j != i} R_j) / (H_count + n - 1)` over a group of any size, written out."""
    total = sum(rewards)
    return [r - (history_sum + total - r) / (history_count + len(rewards) - 1) for r in rewards]


def test_joint_histories_give_each_slot_the_baseline_of_its_whole_group():
    """Three slots of G = 4: slots 0 and 2 are one group of 8 (a prompt and its extension), slot 1 a group of its
    own. Slot by slot, the advantages equal the leave-one-out baseline over the prompt's history and the group's
    other 7 (or 3) rewards."""
    rewards = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    history_sum, history_count = torch.tensor([0.5, 2.0, 0.5]), torch.tensor([2.0, 3.0, 2.0])
    sums, counts = joint_histories(rewards, G, history_sum, history_count, joint=[[0, 2]])
    advantages = history_baseline_advantages(rewards, G, sums, counts).tolist()
    joint = leave_one_out(rewards[[*range(4), *range(8, 12)]].tolist(), 0.5, 2.0)
    expected = joint[:4] + leave_one_out(rewards[4:8].tolist(), 2.0, 3.0) + joint[4:]
    assert advantages == pytest.approx(expected)
    assert all(value < 0 for value in advantages[:4])  # the first slot, all wrong, is pushed down by the second's


def test_only_an_all_equal_group_has_an_extension_value_and_it_extends_when_worth_its_tokens():
    prior = (1.0, 1.0)
    assert extension_value([1.0, 0.0, 0.0, 0.0], (0.0, 0.0), prior, G, 0.5) == -1.0  # mixed
    assert extension_value([float("nan")] * G, (0.0, 0.0), prior, G, 0.5) == -1.0  # judged by nothing
    fresh = extension_value([0.0] * G, (0.0, 0.0), prior, G, 0.5)
    hopeless = extension_value([0.0] * G, (0.0, 40.0), prior, G, 0.5)
    assert 0 < hopeless < fresh < 1  # 4 more after 4 wrong: E[1 - (1-p)^4] under Beta(1, 5), and less after 40 more
    assert fresh == pytest.approx(1 - 5 / 9)
    assert extension_decisions([-1.0, fresh, hopeless], [1, 1, 1], G, 0.1) == [False, True, False]


def test_the_keep_rates_count_an_extended_group_as_one_prompt():
    """Two processes of 4 slots: process 0's slots 0-1 are one prompt's group (both informative), process 1's slots
    5-7 another's (one informative): 2 informative prompts of 3 on process 0 (that group and slot 3), 1 of 2 on
    process 1."""
    informative = torch.tensor([[True, True, False, True], [False, True, False, False]])
    assert informative_prompts(informative, joint=[[0, 1], [5, 6, 7]]) == [(2, 3), (1, 2)]
    assert informative_prompts(informative, joint=[]) == [(3, 4), (1, 4)]


def test_extensions_need_the_pilot_and_the_history_baseline():
    for settings in ({"pilot_size": 0}, {"pilot_size": 2, "history_baseline": False}):
        with pytest.raises(ValueError, match="extensions"):
            AdaptiveSettings(extensions=1, **settings)
    with pytest.raises(ValueError, match="extensions must be at least 0"):
        AdaptiveSettings(pilot_size=2, extensions=-1)


def test_an_all_wrong_group_of_a_rare_prompt_is_extended_and_trained_as_one_group_of_twice_g():
    """Prompts right 12% of the time. With one extension allowed, every all-wrong group worth it gets 4 more
    completions of the same prompt (its next draws), laid out as a slot of its own; a group with a success among its
    8 trains all 8, with the baseline over the 8, and every generated token is counted once."""
    sampler, source = pilot_sampler(extensions=1), PassRates(lambda index: 0.12)
    tokens, extended, joint_trained = 0, 0, 0
    for step in range(10):
        batch = sampler.next_batch(inputs_for(range(8 * step, 8 * step + 8)), source, policy_version=step,
                                   draw_key=step)  # fmt: skip
        tokens += batch.report.generated_tokens
        extended += batch.report.prompts_extended
        calls = source.calls[len(source.calls) - len(batch.report.rows_per_round) :]
        assert batch.report.rows_per_round == [sum(count for _, count in call) for call in calls]
        kept = batch.rows.select(list(range(batch.num_kept_rows)))
        ids = [row[0] for row in kept.columns["completion_ids"]]
        slots_of = {}
        for slot in range(len(ids) // G):
            prompt = {token // 1000 for token in ids[slot * G : (slot + 1) * G]}
            assert len(prompt) == 1
            slots_of.setdefault(prompt.pop(), []).append(slot)
        advantages = batch_history_advantages(batch, sampler.settings)[: batch.num_kept_rows].tolist()
        for prompt, slots in slots_of.items():
            rows = [slot * G + offset for slot in slots for offset in range(G)]
            draws = sorted(ids[row] % 1000 for row in rows)
            assert draws == list(range(draws[0], draws[0] + len(rows)))  # the prompt's consecutive draws
            if len(slots) > 1:
                joint_trained += 1
                rewards = [source.reward_of_token[ids[row]] for row in rows]
                history = kept.columns[HISTORY_COLUMN][rows[0]]
                own = [kept.columns["rewards"][row][0].item() for row in rows]
                assert own == rewards
                # The first slot's history holds the other slot's rewards: subtract them to get the prompt's own.
                second = sum(rewards[G:])
                expected = leave_one_out(rewards, history[0] - second, history[1] - G)
                assert [advantages[row] for row in rows] == pytest.approx(expected)
    assert tokens == source.tokens
    assert extended > 5 and joint_trained > 3, (extended, joint_trained)


def test_no_extension_is_generated_when_a_fresh_prompt_is_worth_more():
    sampler, source = pilot_sampler(extensions=1), PassRates(lambda index: 0.12)
    sampler.pilot.yield_.record(mixed_groups=1000, completions=1000)
    batch = sampler.next_batch(inputs_for(range(8)), source, policy_version=0, draw_key=0)
    assert batch.report.prompts_extended == 0


def test_extensions_take_the_same_decisions_after_a_resume_and_on_two_processes():
    rate_of = lambda index: 0.1 if index % 2 else 0.5  # noqa: E731
    sampler, source = pilot_sampler(extensions=2), PassRates(rate_of)
    for step in range(3):
        sampler.next_batch(inputs_for(range(8 * step, 8 * step + 8)), source, policy_version=step, draw_key=step)
    state, saved_source = copy.deepcopy(sampler.state_dict()), copy.deepcopy(source)
    resumed = pilot_sampler(extensions=2)
    resumed.load_state_dict(state)
    extended = 0
    for step in range(3, 6):
        prompts = inputs_for(range(8 * step, 8 * step + 8))
        first = sampler.next_batch(prompts, source, policy_version=step, draw_key=step)
        again = resumed.next_batch([dict(row) for row in prompts], saved_source, policy_version=step, draw_key=step)
        assert again.rows.columns["completion_ids"] == first.rows.columns["completion_ids"]
        assert again.rows.columns[HISTORY_COLUMN] == first.rows.columns[HISTORY_COLUMN]
        extended += first.report.prompts_extended
    assert source.calls == saved_source.calls and extended > 0

    # Process 1's prompts mostly rare, process 0's undecided: they extend different numbers of groups.
    samplers, calls, reports = run_two_processes(
        lambda process, prompt: 0.5 if process == 0 or prompt % 4 == 0 else 0.08, 8, extensions=2
    )
    assert calls[0] == calls[1] and len(calls[0]) > 8
    assert samplers[0].state_dict()["shared"] == samplers[1].state_dict()["shared"]
    extended = [sum(report.prompts_extended for report in own) for own in reports]
    assert extended[0] == extended[1] > 0  # counted over both processes, the same on each
