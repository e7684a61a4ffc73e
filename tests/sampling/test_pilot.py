"""The adaptive mode's pilot: generate a prompt's first completions, stop it there when the rest is not worth its
tokens, and train whole groups of the pilot and the commit."""

from __future__ import annotations

import copy
import math
import threading

import numpy as np
import pytest
import torch

from trl_ext.sampling import DynamicSampler
from trl_ext.sampling.adaptive import AdaptiveSettings
from trl_ext.sampling.assembly import rollout_rows
from trl_ext.sampling.pilot import (
    PilotAndCommit,
    PopulationPrior,
    balanced_commits,
    commit_decisions,
    commit_value,
    other_outcome_probability,
)
from trl_ext.sampling.sampler import local_processes

from test_sampler import dataset
from test_sampler import settings as sampler_settings

G = 4


class PassRates:
    """A `RoundSource` whose prompts have fixed pass rates; the `k`-th completion of a prompt is the same draw
    whatever call it falls in. Every completion gets a unique token id, so rows can be traced to their draws."""

    def __init__(self, rate_of, process=None, seed: int = 0):
        self.rate_of, self.process, self.seed = rate_of, process, seed
        self.generated: dict[str, int] = {}  # prompt -> completions generated so far
        self.calls: list[list[tuple[str, int]]] = []  # per call, (prompt, rows) runs
        self.tokens, self.reward_of_token = 0, {}

    def generate_and_score(self, inputs, held_environments):
        runs = []
        for row in inputs:
            if runs and runs[-1][0] == row["prompt"]:
                runs[-1][1] += 1
            else:
                runs.append([row["prompt"], 1])
        rewards, completion_ids = [], []
        for prompt, count in runs:
            start = self.generated.get(prompt, 0)
            self.generated[prompt] = start + count
            index = int(prompt.split()[-1])
            for k in range(start, start + count):
                draw = np.random.default_rng([self.seed, index, k]).random()
                reward = float(draw < self.rate_of(index))
                token = 1000 * index + k
                self.reward_of_token[token] = reward
                rewards.append(reward)
                completion_ids.append([token] * (1 + index % 3))
        self.calls.append([tuple(run) for run in runs])
        self.tokens += sum(map(len, completion_ids))
        scores = torch.tensor(rewards).unsqueeze(1)
        generation = ([[0]] * len(inputs), completion_ids, None, [""] * len(inputs), None, {}, None, [])
        rows = rollout_rows(
            generation, inputs=inputs, prompts=[row["prompt"] for row in inputs], rewards=scores, extra_logs={},
            environments=None,
        )  # fmt: skip
        if self.process is not None and self.process.num_processes > 1:
            scores = torch.cat(self.process.gather(scores))
        return rows, scores

    def record_behaviour(self, groups) -> None:
        return None


def pilot_sampler(processes=None, **adaptive) -> DynamicSampler:
    adaptive = {"pilot_size": 2, "max_skip_probability": 0.0, **adaptive}
    configured = sampler_settings(group_size=G, adaptive=AdaptiveSettings(**adaptive), on_exhausted="warn")
    return DynamicSampler(configured, dataset(), processes or local_processes())


def inputs_for(prompts) -> list[dict]:
    return [{"prompt": f"prompt {index}"} for index in prompts for _ in range(G)]


# --------------------------------------------------------------------------------------------- the decisions


def test_other_outcome_probability_matches_the_beta_integral():
    alpha, beta, successes, failures, remaining, n = 0.4, 0.7, 1.0, 5.0, 6, 200_000
    a, b = alpha + successes, beta + failures
    grid = (np.arange(n) + 0.5) / n
    density = grid ** (a - 1) * (1 - grid) ** (b - 1)
    expected = float((density * (1 - (1 - grid) ** remaining)).sum() / density.sum())
    assert other_outcome_probability((alpha, beta), successes, failures, False, remaining) == pytest.approx(
        expected, abs=1e-3
    )
    # After an all-right pilot the missing outcome is a failure: the roles swap.
    assert other_outcome_probability((0.5, 0.5), 5.0, 1.0, True, 3) == pytest.approx(
        other_outcome_probability((0.5, 0.5), 1.0, 5.0, False, 3)
    )


def test_population_prior_recovers_the_pass_rates_of_a_pool():
    rng = np.random.default_rng(0)
    prior = PopulationPrior()
    for _ in range(4000):
        p = rng.beta(0.4, 0.6)
        size = int(rng.choice([2, 8]))
        prior.record(int(rng.binomial(size, p)), size)
    alpha, beta = prior.beta()
    assert alpha / (alpha + beta) == pytest.approx(0.4, abs=0.02)
    assert alpha + beta == pytest.approx(1.0, abs=0.15)  # rho = 1 / (a + b + 1) = 0.5
    assert PopulationPrior().beta() == (1.0, 1.0)  # nothing seen: uniform


def test_a_mixed_or_unjudged_pilot_commits_and_an_all_equal_one_commits_only_when_worth_its_tokens():
    prior, nan = (0.3, 0.3), float("nan")
    assert commit_value([1.0, 0.0], (0.0, 0.0), prior, G, 0.5) == 1.0
    assert commit_value([nan, nan], (0.0, 9.0), prior, G, 0.5) == 1.0
    decided = commit_value([0.0, 0.0], (0.0, 12.0), prior, G, 0.5)  # never right so far
    fresh = commit_value([0.0, 0.0], (0.0, 0.0), prior, G, 0.5)
    assert 0.0 < decided < fresh < 1.0
    assert commit_decisions([1.0, fresh, decided], remaining=2, yield_per_completion=0.0) == [True, True, True]
    threshold = (fresh + decided) / 4  # per completion, between the two
    assert commit_decisions([1.0, fresh, decided], 2, threshold) == [True, True, False]


def test_balanced_commits_give_every_process_as_many_commits_best_first():
    values = [[1.0, 0.1, 0.3, 0.2], [0.1, 0.2, 0.05, 0.2]]
    commits = [[True, False, True, False], [False, False, False, False]]
    assert balanced_commits(values, commits) == [[0, 2], [1, 3]]  # ties: the earlier first
    assert balanced_commits(values, [[False] * 4, [False] * 4]) == [[], []]


# ------------------------------------------------------------------------------------------ in the sampler


def test_the_pilot_stops_decided_prompts_and_trains_whole_groups_of_pilot_and_commit():
    """Odd prompts are never right; even ones right half the time; 16 prompts come back every other step. Once the
    yield and the beliefs say so, all-wrong pilots stop there: 2 completions, not 4, and mostly those of the odd
    prompts. Every trained group holds its prompt's 2 pilot completions first and its 2 committed ones, with their
    own rewards, and every generated token is counted once."""
    rate_of = lambda index: 0.0 if index % 2 else 0.5  # noqa: E731
    sampler, source = pilot_sampler(), PassRates(rate_of)
    tokens, stopped = 0, {0: 0, 1: 0}
    for step in range(12):
        before = dict(source.generated)
        first = 8 * (step % 2)
        batch = sampler.next_batch(inputs_for(range(first, first + 8)), source, policy_version=step, draw_key=step)
        tokens += batch.report.generated_tokens
        pilots_only = [prompt for prompt, count in source.generated.items() if count - before.get(prompt, 0) == 2]
        for prompt in pilots_only:
            stopped[int(prompt.split()[-1]) % 2] += 1
        assert batch.report.prompts_stopped == len(pilots_only)
        ids = [row[0] for row in batch.rows.columns["completion_ids"][: batch.num_kept_rows]]
        for group in range(batch.num_kept_rows // G):
            tokens_of_group = ids[group * G : (group + 1) * G]
            assert len({token // 1000 for token in tokens_of_group}) == 1  # one prompt per group
            draws = [token % 1000 for token in tokens_of_group]
            assert draws == list(range(draws[0], draws[0] + G))  # the pilot's draws, then the commit's
            rewards = torch.stack(batch.rows.columns["rewards"][group * G : (group + 1) * G])[:, 0].tolist()
            assert rewards == [source.reward_of_token[token] for token in tokens_of_group]
        calls = source.calls[len(source.calls) - len(batch.report.rows_per_round) :]
        assert batch.report.rows_per_round == [sum(count for _, count in call) for call in calls]
    assert tokens == source.tokens
    assert stopped[1] >= 10 and stopped[1] >= 3 * stopped[0], stopped
    assert sampler.beliefs.evidence(1)[1] > 0


def test_the_pilots_state_round_trips_and_a_resumed_sampler_takes_the_same_decisions():
    rate_of = lambda index: 0.0 if index % 3 == 0 else 0.4  # noqa: E731
    sampler, source = pilot_sampler(max_skip_probability=0.9), PassRates(rate_of)
    for step in range(4):
        sampler.next_batch(inputs_for(range(8 * step, 8 * step + 8)), source, policy_version=step, draw_key=step)
    state, saved_source = copy.deepcopy(sampler.state_dict()), copy.deepcopy(source)
    assert state["shared"]["pilot"]["prior"][0] > 0
    resumed = pilot_sampler(max_skip_probability=0.9)
    resumed.load_state_dict(state)
    stopped = 0
    for step in range(4, 7):
        prompts = inputs_for(range(8 * step, 8 * step + 8))
        first = sampler.next_batch(prompts, source, policy_version=step, draw_key=step)
        again = resumed.next_batch([dict(row) for row in prompts], saved_source, policy_version=step, draw_key=step)
        assert again.rows.columns["completion_ids"] == first.rows.columns["completion_ids"]
        assert again.report.prompts_stopped == first.report.prompts_stopped
        stopped += first.report.prompts_stopped
    assert source.calls == saved_source.calls
    assert stopped > 0  # the restored prior and yield took stopping decisions, the same ones


def run_two_processes(rate_of, steps: int, **adaptive) -> tuple[list, list[list[int]], list[list]]:
    """Two simulated processes (threads whose gathers exchange values) run `steps` batches of 4 prompts each;
    `rate_of(process, prompt)` is a prompt's pass rate on that process. Returns the samplers, each process's rows per
    generation call, and each process's batch reports."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from dynamic_sampling_sim import Lockstep

    lockstep, samplers, calls, reports = Lockstep(2), [None, None], [None, None], [[], []]

    def process_run(index):
        process = lockstep.process(index)
        samplers[index] = sampler = pilot_sampler(process, **adaptive)
        source = PassRates(lambda prompt: rate_of(index, prompt), process, seed=index)
        for step in range(steps):
            first = (step * 2 + index) * 4 % 48
            batch = sampler.next_batch(inputs_for(range(first, first + 4)), source, policy_version=step,
                                       draw_key=step)  # fmt: skip
            reports[index].append(batch.report)
        calls[index] = [sum(count for _, count in call) for call in source.calls]

    threads = [threading.Thread(target=process_run, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samplers, calls, reports


def test_two_processes_take_identical_pilot_decisions_and_generate_as_many_rows():
    """Process 1's prompts are mostly decided, process 0's undecided: process 1 commits its best stopped prompts
    too, so both generate the same rows in every call, and their states stay identical."""
    samplers, calls, _ = run_two_processes(
        lambda process, prompt: 0.5 if process == 0 or prompt % 4 == 0 else 0.0, 10, max_skip_probability=0.9
    )
    assert calls[0] == calls[1] and len(calls[0]) > 10
    assert samplers[0].state_dict()["shared"] == samplers[1].state_dict()["shared"]
    assert samplers[0].state_dict()["shared"]["pilot"]["yield"][1] > 0


def test_pilot_sizes_out_of_range_are_refused():
    with pytest.raises(ValueError, match="pilot_size"):
        AdaptiveSettings(pilot_size=-1)
    with pytest.raises(ValueError, match="pilot_size"):
        PilotAndCommit(pilot_size=G, group_size=G, success_threshold=0.5)
    assert math.isclose(PilotAndCommit(1, G, 0.5).yield_.per_completion(), 0.0)


def test_a_batch_whose_every_pilot_stops_is_filled_with_padded_pilots_that_train_on_nothing():
    """Nothing is ever right and a fresh prompt is worth more than any commit: every round stops every prompt.
    The batch still holds its groups, as fillers built from the stopped pilots, and no process gathers nothing."""
    sampler, source = pilot_sampler(), PassRates(lambda index: 0.0)
    sampler.pilot.yield_.record(mixed_groups=1000, completions=1000)  # one mixed group per completion
    batch = sampler.next_batch(inputs_for(range(8)), source, policy_version=0, draw_key=0)
    assert batch.report.exhausted and batch.report.groups_sampled == 0
    assert batch.report.prompts_stopped == sum(batch.report.rows_per_round) // 2
    assert len(batch.rows) == 8 * G and batch.num_kept_rows == 0
    assert torch.isnan(batch.rewards()).all()  # fillers: out of the baseline, zero advantage
    prompts = batch.rows.columns["prompts"]
    assert all(len(set(prompts[group * G : (group + 1) * G])) == 1 for group in range(8))


def test_an_all_wrong_pilot_of_a_prompt_solved_before_is_committed_with_the_history_baseline():
    """With the history baseline, an all-wrong group of a prompt that was right before trains (its answers are
    pushed down): its pilot is worth its whole group whatever the yield. Without the baseline only the chance of a
    mixed group counts, and the pilot stops."""
    solved = list(range(8))
    commit = [(f"prompt {index}", G - 2) for index in solved]
    for history_baseline in (True, False):
        sampler, source = pilot_sampler(history_baseline=history_baseline), PassRates(lambda index: 0.0)
        sampler.pilot.yield_.record(mixed_groups=1000, completions=1000)  # a fresh prompt is worth more
        sampler.beliefs.record(solved, torch.ones(len(solved) * G), torch.ones(len(solved) * G))
        batch = sampler.next_batch(inputs_for(solved), source, policy_version=0, draw_key=0)
        assert (source.calls[1] == commit) is history_baseline  # after the pilots: their commit, or new pilots
        assert batch.num_kept_rows == (len(solved) * G if history_baseline else 0)
