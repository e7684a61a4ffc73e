"""`DynamicSampler` on its own, with no trainer: a source that scores rounds, its state, and what it says."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset

from trl_ext.sampling import DynamicSampler, SamplerSettings
from trl_ext.sampling.assembly import rollout_rows
from trl_ext.sampling.sampler import local_processes

GROUP = 2


def settings(**overrides) -> SamplerSettings:
    values = dict(
        group_size=GROUP,
        max_rounds=10,
        max_oversampling=8.0,
        confidence=0.95,
        on_exhausted="raise",
        carry_max_groups=4,
        carry_max_staleness=1,
        max_skip_probability=0.0,
        seed=0,
        shuffle=True,
        filter_used=torch.tensor([True]),
        filter_weights=torch.tensor([1.0]),
    )
    return SamplerSettings(**{**values, **overrides})


class EvenPromptsInformative:
    """Scores a round: the groups of even-numbered prompts get (1, 0), the others (0, 0)."""

    def __init__(self):
        self.rounds = []

    def generate_and_score(self, inputs, held_environments):
        self.rounds.append(len(inputs) // GROUP)
        informative = [int(row["prompt"].split()[-1]) % 2 == 0 for row in inputs[::GROUP]]
        rewards = torch.tensor([[1.0 if found and row == 0 else 0.0] for found in informative for row in range(GROUP)])
        generation = ([[0]] * len(inputs), [[1, 2]] * len(inputs), None, [""] * len(inputs), None, {}, None, [])
        rows = rollout_rows(
            generation,
            inputs=inputs,
            prompts=[row["prompt"] for row in inputs],
            rewards=rewards,
            extra_logs={},
            environments=None,
        )
        return rows, rewards

    def record_behaviour(self, groups):
        for group in groups:
            group.payload["logps"] = [torch.zeros(2)] * GROUP


def dataset() -> Dataset:
    return Dataset.from_dict({"prompt": [f"prompt {index}" for index in range(200)]})


def batch_inputs(first: int, groups: int = 4) -> list[dict]:
    return [{"prompt": f"prompt {first + 2 * group + 1}"} for group in range(groups) for _ in range(GROUP)]


def test_the_sampler_fills_a_batch_with_informative_groups_from_refills():
    sampler, source = DynamicSampler(settings(), dataset(), local_processes()), EvenPromptsInformative()
    batch = sampler.next_batch(batch_inputs(0), source, policy_version=0, draw_key=0)  # odd prompts: uninformative
    kept_prompts = batch.rows.columns["prompts"][: batch.num_kept_rows : GROUP]
    assert batch.num_kept_rows == len(batch.rows) == 4 * GROUP
    assert all(int(prompt.split()[-1]) % 2 == 0 for prompt in kept_prompts)
    assert batch.report.rounds_run == len(source.rounds) >= 2
    assert not batch.report.exhausted and batch.carried_rows == 0


def test_state_dict_restores_keep_rates_and_carried_groups():
    sampler, source = DynamicSampler(settings(), dataset(), local_processes()), EvenPromptsInformative()
    for step in range(3):
        sampler.next_batch(batch_inputs(10 * step), source, policy_version=step, draw_key=step)
    state = sampler.state_dict()
    restored = DynamicSampler(settings(), dataset(), local_processes())
    restored.load_state_dict(state)
    assert [e.state_dict() for e in restored.keep_rates] == [e.state_dict() for e in sampler.keep_rates]
    assert len(restored.carry) == len(sampler.carry)
    assert restored.backoff.state_dict() == sampler.backoff.state_dict()


@pytest.mark.parametrize("rounds_run, suggests_more_rounds", [(10, True), (6, False)])
def test_a_short_batch_says_why_the_rounds_stopped(rounds_run, suggests_more_rounds):
    sampler = DynamicSampler(settings(), dataset(), local_processes())
    with pytest.raises(RuntimeError) as raised:
        sampler._on_rounds_exhausted(rounds_run, fewest_kept=1, groups_needed=4, step=3)
    message = str(raised.value)
    assert f"ran {rounds_run} generation round(s) at step 3" in message
    assert ("Raise dynamic_sampling_max_rounds" in message) is suggests_more_rounds
    assert ("backs off" in message) is not suggests_more_rounds
