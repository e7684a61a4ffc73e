"""Pilot and commit: generate a prompt in two increments, and stop it after the first when it looks decided.

In the adaptive mode with `pilot_size = n0 > 0`, each round first generates `n0` completions for every prompt it
drew (the pilot). A prompt whose pilot is mixed is informative already and gets its `G - n0` other completions (the
commit). A prompt whose pilot came out all-equal is committed only when that is worth its tokens, and otherwise
stops there: it cost `n0` completions instead of `G`. The trained group is always the pilot plus the commit, `G`
completions, so TRL's batching and advantages see groups of the usual size.

The decision (ours; the screening of SPEED-RL, arXiv 2506.09016, with a knapsack value per token, as Knapsack RL,
arXiv 2509.25849, assigns budget) compares two values per completion:

- what the commit buys: `q / (G - n0)`, where `q` is the chance that the `G - n0` completions still to come bring the
  outcome the pilot lacks (a success after an all-wrong pilot, a failure after an all-right one), under the
  prompt's pass-rate posterior. Its prior is the population's (`PopulationPrior`: a Beta fitted by moments to the
  groups sampled so far, so a pool where most prompts are solved or out of reach makes an all-equal pilot of a fresh
  prompt mostly decided), updated with the prompt's own discounted history and the pilot;
- what the budget buys elsewhere: `lambda`, the sampler's recent yield of mixed groups per completion generated
  (`Yield`), pilots and stopped prompts included.

Commit iff `q / (G - n0) >= lambda`. Before any group was seen `lambda` is 0 and every prompt is committed. With the
history baseline, a pilot whose advantages against its prompt's history are already not all zero (all wrong on a
prompt solved before) makes its group informative whatever the rest brings, and is always committed: the history
baseline trains such groups, and the pilot must not stop them.

Every process takes the same decisions (they read gathered rewards and global state), and every process must
generate the same number of rows in a round (TRL gathers rewards across processes): when processes would commit
different numbers of prompts, those short of the most commit their best remaining prompts too
(`balanced_commits`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .assembly import Rows, completion_lengths

# Groups the population prior needs before it replaces the uniform prior.
PRIOR_MIN_GROUPS = 8
# Weight of the population statistics and the yield after each round: they follow a policy that changes.
ROUND_DECAY = 0.95
# The prior's intra-prompt correlation is kept inside this range (a Beta with a + b between about 0.01 and 999).
CORRELATION_RANGE = (1e-3, 0.99)


def all_fail_probability(alpha: float, beta: float, count: int) -> float:
    """`E[(1 - p)^count]` for `p ~ Beta(alpha, beta)`: the chance that `count` more completions all fail."""
    return math.prod((beta + k) / (alpha + beta + k) for k in range(count))


def other_outcome_probability(
    prior: tuple[float, float], successes: float, failures: float, pilot_right: bool, remaining: int
) -> float:
    """`q`: the chance that `remaining` more completions bring the outcome an all-equal pilot lacks.

    Args:
        prior: `(alpha, beta)` of the population's pass-rate prior.
        successes, failures: the prompt's evidence (its discounted history plus the pilot).
        pilot_right: whether the pilot was all right (else all wrong).
        remaining: completions still to come, `G - n0`.
    """
    alpha, beta = prior[0] + successes, prior[1] + failures
    if pilot_right:  # the chance of at least one failure: the roles of alpha and beta swap
        alpha, beta = beta, alpha
    return 1.0 - all_fail_probability(alpha, beta, remaining)


class PopulationPrior:
    """A Beta prior of the prompts' pass rates, fitted by moments to every group (and pilot) sampled.

    For a group of `n` completions with `k` successes from a prompt of pass rate `p ~ Beta(a, b)`,
    `E[k/n] = m` and `Var(k/n) = m (1 - m) (rho + (1 - rho) / n)`, with `m = a / (a + b)` and the intra-prompt
    correlation `rho = 1 / (a + b + 1)`. The sums are discounted by `ROUND_DECAY` each round. Until
    `PRIOR_MIN_GROUPS` groups were seen, or while every outcome was the same, the prior is uniform, `Beta(1, 1)`.
    """

    def __init__(self):
        self.weight = self.first = self.second = self.inverse_size = 0.0

    def record(self, successes: int, size: int) -> None:
        if size <= 0:
            return
        rate = successes / size
        self.weight += 1.0
        self.first += rate
        self.second += rate * rate
        self.inverse_size += 1.0 / size

    def end_round(self) -> None:
        self.weight, self.first, self.second, self.inverse_size = (
            value * ROUND_DECAY for value in (self.weight, self.first, self.second, self.inverse_size)
        )

    def beta(self) -> tuple[float, float]:
        if self.weight < PRIOR_MIN_GROUPS:
            return 1.0, 1.0
        mean = self.first / self.weight
        spread = mean * (1.0 - mean)
        if spread <= 1e-9:
            return 1.0, 1.0
        variance = self.second / self.weight - mean * mean
        inverse_size = self.inverse_size / self.weight
        rho = (variance / spread - inverse_size) / max(1.0 - inverse_size, 1e-9)
        rho = min(max(rho, CORRELATION_RANGE[0]), CORRELATION_RANGE[1])
        total = 1.0 / rho - 1.0
        return mean * total, (1.0 - mean) * total

    def state_dict(self) -> list[float]:
        return [self.weight, self.first, self.second, self.inverse_size]

    def load_state_dict(self, state: Sequence[float]) -> None:
        self.weight, self.first, self.second, self.inverse_size = (float(value) for value in state)


class Yield:
    """`lambda`: mixed groups per completion generated over the recent rounds (discounted by `ROUND_DECAY`)."""

    def __init__(self):
        self.mixed = self.completions = 0.0

    def record(self, mixed_groups: int, completions: int) -> None:
        self.mixed = self.mixed * ROUND_DECAY + mixed_groups
        self.completions = self.completions * ROUND_DECAY + completions

    def add(self, mixed_groups: int, completions: int) -> None:
        """More of the current round (an extension call): counted without a new discount."""
        self.mixed += mixed_groups
        self.completions += completions

    def per_completion(self) -> float:
        return self.mixed / self.completions if self.completions else 0.0

    def state_dict(self) -> list[float]:
        return [self.mixed, self.completions]

    def load_state_dict(self, state: Sequence[float]) -> None:
        self.mixed, self.completions = (float(value) for value in state)


def commit_value(
    pilot: Sequence[float],
    evidence: tuple[float, float],
    prior: tuple[float, float],
    group_size: int,
    success_threshold: float,
) -> float:
    """The chance that a prompt's completed group is mixed: 1 for a mixed pilot or one no reward judged (the
    pilot then says nothing, so the prompt is not stopped on it), `q` for an all-equal pilot.

    Args:
        pilot: the pilot's filter rewards (NaN where unjudged).
        evidence: the prompt's discounted `(successes, failures)` from before the pilot.
    """
    judged = [value for value in pilot if not math.isnan(value)]
    if not judged:
        return 1.0
    successes = sum(value > success_threshold for value in judged)
    if 0 < successes < len(judged):
        return 1.0
    return other_outcome_probability(
        prior,
        evidence[0] + successes,
        evidence[1] + len(judged) - successes,
        pilot_right=successes == len(judged),
        remaining=group_size - len(pilot),
    )


def commit_decisions(values: Sequence[float], remaining: int, yield_per_completion: float) -> list[bool]:
    """Commit iff the value per completion still to generate, `value / remaining`, is at least the yield."""
    return [value >= 1.0 or value / remaining >= yield_per_completion for value in values]


def balanced_commits(
    values_per_process: Sequence[Sequence[float]], commits: Sequence[Sequence[bool]]
) -> list[list[int]]:
    """Which prompts each process commits, in its order: its own commits, and, on processes that commit fewer than
    the most, their best other prompts (highest value first, earliest on ties) until every process commits as many.

    Args:
        values_per_process: each process's prompts' commit values (`commit_value`).
        commits: each process's prompts' decisions (`commit_decisions`).

    Returns:
        Per process, the positions of its committed prompts, ascending.
    """
    wanted = max((sum(flags) for flags in commits), default=0)
    chosen = []
    for values, flags in zip(values_per_process, commits, strict=True):
        picked = [position for position, flag in enumerate(flags) if flag]
        others = sorted((p for p, flag in enumerate(flags) if not flag), key=lambda p: (-values[p], p))
        chosen.append(sorted(picked + others[: wanted - len(picked)]))
    return chosen


@dataclass
class PilotRound:
    """A round generated in two increments, laid out as a plain round of the committed prompts' groups."""

    rows: Rows  # this process's committed groups, each its pilot rows then its commit rows
    rewards_per_func: torch.Tensor  # (committed groups of every process * G, F), in the same layout
    committed: list[list[int]]  # per process, the positions of its committed prompts in its round
    rows_per_call: list[int]  # completions generated by each call, over all processes
    stopped_tokens: int  # this process's completion tokens of the stopped prompts' pilots
    # This process's stopped pilots, each padded to G rows by repeating its own: filler groups (which train on
    # nothing) for a batch whose rounds run out.
    stopped_rows: Rows


class PilotAndCommit:
    """Runs a round as a pilot and a commit, and keeps the population prior and the yield that decide commits.

    Args:
        pilot_size: completions of the pilot, `n0`, in `[1, G)`.
        group_size: `G`.
        success_threshold: a filter reward above it counts as a success.
    """

    def __init__(self, pilot_size: int, group_size: int, success_threshold: float):
        if not 0 < pilot_size < group_size:
            raise ValueError(f"pilot_size must be in [1, {group_size - 1}] (below the group size), got {pilot_size}.")
        self.pilot_size, self.group_size, self.success_threshold = pilot_size, group_size, success_threshold
        self.prior, self.yield_ = PopulationPrior(), Yield()

    def state_dict(self) -> dict[str, list[float]]:
        return {"prior": self.prior.state_dict(), "yield": self.yield_.state_dict()}

    def load_state_dict(self, state: dict[str, list[float]]) -> None:
        self.prior.load_state_dict(state["prior"])
        self.yield_.load_state_dict(state["yield"])

    def run(
        self,
        source,
        inputs: list[dict[str, Any]],
        prompts: list[list[int]],
        rank: int,
        held_environments: list,
        evidence: Callable[[int], tuple[float, float]],
        outcomes: Callable[[torch.Tensor], torch.Tensor],
        against_history: Callable[[list[int], torch.Tensor], list[bool]] | None = None,
    ) -> tuple[PilotRound, list[tuple[list[int], torch.Tensor]]]:
        """Generate the pilot of every prompt of the round, decide, and generate the commits.

        Args:
            source: the `RoundSource`.
            inputs: this process's rows of the round, `G` per prompt.
            prompts: per process, the dataset indices of its round's prompts (every process has as many).
            rank: this process.
            held_environments: environments of rows kept from earlier rounds.
            evidence: a prompt's discounted `(successes, failures)` as of this visit, before the pilot.
            outcomes: `(N, F)` rewards to the `(N,)` filter rewards (NaN where unjudged).
            against_history: with the history baseline, whether each pilot (prompt indices, `(P * n0, F)` rewards)
                already has non-zero advantages against its prompt's history: its group is informative whatever the
                rest brings, so it is committed.

        Returns:
            The round, and the stopped prompts' pilots per process: `(prompt indices, their (n * n0, F) rewards)`.
        """
        pilot_size, processes, per_process = self.pilot_size, len(prompts), len(prompts[0])
        per_prompt = inputs[:: self.group_size]
        pilot_rows, pilot_rewards = source.generate_and_score(
            [dict(row) for row in per_prompt for _ in range(pilot_size)], held_environments
        )
        pilot_outcomes = outcomes(pilot_rewards).view(processes, per_process, pilot_size)
        informative = (
            against_history([index for indices in prompts for index in indices], pilot_rewards)
            if against_history is not None
            else [False] * (processes * per_process)
        )
        committed = self._decide(pilot_outcomes, prompts, evidence, informative)
        rows_per_call = [len(per_prompt) * pilot_size * processes]
        if committed[rank]:  # every process commits as many prompts: all call the source, or none
            rows, rewards_per_func = self._commit(source, per_prompt, pilot_rows, pilot_rewards, committed, rank,
                                                  held_environments)  # fmt: skip
            rows_per_call.append(len(committed[rank]) * (self.group_size - pilot_size) * processes)
        else:
            rows, rewards_per_func = pilot_rows.select([]), pilot_rewards[:0]
        stopped = [[j for j in range(per_process) if j not in set(chosen)] for chosen in committed]
        self._record(pilot_outcomes, stopped, outcomes(rewards_per_func), sum(rows_per_call))

        def pilot_of(process: int, j: int) -> torch.Tensor:
            return pilot_rewards[(process * per_process + j) * pilot_size :][:pilot_size]

        stopped_pilots = [
            (
                [prompts[process][j] for j in positions],
                torch.cat([pilot_of(process, j) for j in positions] or [pilot_rewards[:0]]),
            )
            for process, positions in enumerate(stopped)
        ]
        lengths = completion_lengths(pilot_rows.generation())
        padded = [j * pilot_size + o % pilot_size for j in stopped[rank] for o in range(self.group_size)]
        generated = PilotRound(
            rows=rows,
            rewards_per_func=rewards_per_func,
            committed=committed,
            rows_per_call=rows_per_call,
            stopped_tokens=sum(sum(lengths[j * pilot_size : (j + 1) * pilot_size]) for j in stopped[rank]),
            stopped_rows=pilot_rows.select(padded),
        )
        return generated, stopped_pilots

    def _decide(self, pilot_outcomes, prompts: list[list[int]], evidence, informative: list[bool]) -> list[list[int]]:
        """Per process, the positions of the prompts to commit (`commit_value`, `commit_decisions`, balanced); a
        pilot already `informative` against its prompt's history is worth its whole group (value 1)."""
        prior, yield_per_completion = self.prior.beta(), self.yield_.per_completion()
        per_process = len(prompts[0])
        values = [
            [
                1.0
                if informative[process * per_process + j]
                else commit_value(pilot.tolist(), evidence(index), prior, self.group_size, self.success_threshold)
                for j, (index, pilot) in enumerate(zip(indices, process_outcomes, strict=True))
            ]
            for process, (indices, process_outcomes) in enumerate(zip(prompts, pilot_outcomes, strict=True))
        ]
        rest = self.group_size - self.pilot_size
        return balanced_commits(values, [commit_decisions(process, rest, yield_per_completion) for process in values])

    def _commit(self, source, per_prompt, pilot_rows, pilot_rewards, committed, rank, held_environments):
        """Generate the rest of the committed prompts' groups; this process's rows and every process's rewards, each
        group its pilot's rows then its commit's. The pilot's environments are held: the commit must not reset
        them."""
        pilot_size, rest, per_process = self.pilot_size, self.group_size - self.pilot_size, len(committed[0])
        mine, environments = committed[rank], pilot_rows.columns.get("environments")
        held = [environments[j * pilot_size + o] for j in mine for o in range(pilot_size)] if environments else []
        commit_rows, commit_rewards = source.generate_and_score(
            [dict(per_prompt[j]) for j in mine for _ in range(rest)], held_environments + held
        )
        order = [
            row
            for position, j in enumerate(mine)
            for row in [*range(j * pilot_size, (j + 1) * pilot_size)]
            + [len(pilot_rows) + position * rest + o for o in range(rest)]
        ]
        pilots_per_process = len(pilot_rewards) // (pilot_size * len(committed))
        pieces = [
            piece
            for process, chosen in enumerate(committed)
            for position, j in enumerate(chosen)
            for piece in (
                pilot_rewards[(process * pilots_per_process + j) * pilot_size :][:pilot_size],
                commit_rewards[(process * per_process + position) * rest :][:rest],
            )
        ]
        return Rows.concat([pilot_rows, commit_rows]).select(order), torch.cat(pieces)

    def _record(self, pilot_outcomes: torch.Tensor, stopped: list[list[int]], groups: torch.Tensor, generated: int):
        """The round's groups and stopped pilots into the population prior, its mixed groups into the yield."""
        mixed = 0
        for group in groups.view(-1, self.group_size).tolist():
            judged = [value > self.success_threshold for value in group if not math.isnan(value)]
            self.prior.record(sum(judged), len(judged))
            mixed += 0 < sum(judged) < len(judged)
        for process, positions in enumerate(stopped):
            for j in positions:
                judged = [value > self.success_threshold for value in pilot_outcomes[process, j].tolist()
                          if not math.isnan(value)]  # fmt: skip
                self.prior.record(sum(judged), len(judged))
        self.prior.end_round()
        self.yield_.record(mixed, generated)
