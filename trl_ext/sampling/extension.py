"""Extensions: more completions for a prompt whose whole group came out all-equal, trained as one larger group.

With `extensions = k` (the adaptive mode, with the pilot and the history baseline), once a round's groups are
complete, a prompt whose group is all-right or all-wrong and whose baseline against its history is all zero (so the
group would train on nothing) gets `G` more completions when they are worth their tokens. The value is the pilot's
(`commit_value`): the chance that `G` more completions bring the outcome the group lacks, under the prompt's
posterior given the whole group so far. What they buy is counted in slots of `G`: finding the missing outcome makes
every slot of the group informative, those generated already included, so the group extends when
`value * (slots + 1) / G` is at least the recent yield of mixed groups per completion (`extension_decisions`).
This is applied up to `k` times per prompt and round: a prompt near p = 0 gets up to `(k + 1) G` completions to find
its first success, one near p = 1 as many to find its first failure (ours; Knapsack RL, arXiv 2509.25849, gives the
prompts where a first success is most valuable more than `G` completions, and Reinforce-Ada, arXiv 2510.04996,
samples a prompt until it is informative).

The prompt's `m G` completions are then one group of variable size. Each extension is one more slot of `G` rows of
the round, right after the group's others, so TRL's batching still sees groups of `G`; the history baseline runs
over the whole group (`adaptive.joint_histories`): each of the `m G` advantages is `R_i` minus the mean of the
prompt's history and the group's `m G - 1` other rewards. The loss weighs every completion alike (per token, or per
sequence), so it is the objective over groups of sizes `G` and `m G`. Every process extends as many groups per
call (`balanced_commits`), and the decisions read gathered rewards and shared state, so they are the same on every
process and after a resume.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .assembly import GeneratedRound, Rows
from .pilot import PilotAndCommit, balanced_commits, commit_value


def extension_value(
    outcomes: Sequence[float],
    evidence: tuple[float, float],
    prior: tuple[float, float],
    group_size: int,
    success_threshold: float,
) -> float:
    """The chance that `group_size` more completions bring the outcome an all-equal group lacks (`commit_value`);
    -1 for a group that needs none (mixed, or judged by no reward: `commit_value` gives those 1).

    Args:
        outcomes: the group's filter rewards so far (NaN where unjudged).
        evidence: the prompt's discounted `(successes, failures)` from before this round.
        prior: the population's pass-rate prior.
    """
    value = commit_value(outcomes, evidence, prior, len(outcomes) + group_size, success_threshold)
    return -1.0 if value >= 1.0 else value


def extension_decisions(
    values: Sequence[float], slots: Sequence[int], group_size: int, yield_per_completion: float
) -> list[bool]:
    """Extend iff the group needs it and what `G` more completions buy per completion is at least the yield. A
    success found (or failure) makes all `slots + 1` slots of the group informative, those generated already
    included: the value per completion is `value * (slots + 1) / G`, against the yield of informative groups of `G`
    per completion."""
    return [
        value > 0 and value * (count + 1) / group_size >= yield_per_completion
        for value, count in zip(values, slots, strict=True)
    ]


def informative_prompts(informative: torch.Tensor, joint: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Per process, `(prompts with an informative slot, prompts)` of a round: an extended group's slots are one
    prompt (what the keep rates count: one draw).

    Args:
        informative: `(num_processes, slots per process)` bool.
        joint: slots (over every process) trained as one group.
    """
    per_process = informative.size(1)
    counts = [[int(row.sum()), len(row)] for row in informative]
    for group in joint:
        process = group[0] // per_process
        flags = informative.flatten()[torch.as_tensor(list(group))]
        counts[process][0] -= int(flags.sum()) - int(flags.any())
        counts[process][1] -= len(group) - 1
    return [tuple(count) for count in counts]


def extend_round(
    generated: GeneratedRound,
    pilot: PilotAndCommit,
    extensions: int,
    source,
    rank: int,
    held_environments: list,
    evidence: Callable[[int], tuple[float, float]],
    outcomes: Callable[[torch.Tensor], torch.Tensor],
    informative: Callable[[int, torch.Tensor], bool],
) -> tuple[GeneratedRound, list[int], int]:
    """Extend the round's all-equal groups, up to `extensions` times each.

    Args:
        generated: the round, slots of `G` (every process has as many).
        pilot: whose population prior and yield value the extensions (the yield counts their completions).
        source: the `RoundSource`.
        evidence: a prompt's discounted `(successes, failures)` as of this visit.
        outcomes: `(N, F)` rewards to the `(N,)` filter rewards (NaN where unjudged).
        informative: whether a prompt's group, `(n, F)` rewards, is informative against its history already.

    Returns:
        The round with the extensions as more slots and their groups in `joint`, the completions generated by each
        extension call (over all processes), and the number of extensions (over all processes).
    """
    size, processes = pilot.group_size, len(generated.indices)
    per_process = len(generated.indices[0])
    rewards = generated.rewards_per_func
    slots = [[rewards[(process * per_process + j) * size :][:size] for j in range(per_process)]
             for process in range(processes)]  # fmt: skip
    groups = [[[j] for j in range(per_process)] for _ in range(processes)]  # per process, each group's slots
    indices, parts, rows_per_call, extended = [list(own) for own in generated.indices], [generated.rows], [], 0
    prior, yield_per_completion = pilot.prior.beta(), pilot.yield_.per_completion()

    def value(process: int, group: list[int]) -> float:
        group_rewards, index = torch.cat([slots[process][slot] for slot in group]), indices[process][group[0]]
        if informative(index, group_rewards):
            return -1.0
        return extension_value(
            outcomes(group_rewards).tolist(), evidence(index), prior, size, pilot.success_threshold
        )

    for _ in range(extensions):
        values = [[value(process, group) for group in groups[process]] for process in range(processes)]
        decisions = [
            extension_decisions(own, [len(group) for group in groups[process]], size, yield_per_completion)
            for process, own in enumerate(values)
        ]
        if not any(map(any, decisions)):
            break
        chosen = balanced_commits(values, decisions)
        held = held_environments + [env for part in parts for env in part.columns.get("environments") or []]
        inputs = generated.rows.columns["inputs"]
        new_rows, new_rewards = source.generate_and_score(
            [dict(inputs[groups[rank][k][0] * size]) for k in chosen[rank] for _ in range(size)], held
        )
        count = len(chosen[rank])
        rows_per_call.append(count * size * processes)
        extended += count * processes
        parts.append(new_rows)
        mixed = 0
        for process, picked in enumerate(chosen):
            for position, k in enumerate(picked):
                groups[process][k].append(len(slots[process]))
                slots[process].append(new_rewards[(process * count + position) * size :][:size])
                indices[process].append(indices[process][groups[process][k][0]])
                if values[process][k] > 0 and value(process, groups[process][k]) < 0:  # informative now
                    mixed += len(groups[process][k])
        pilot.yield_.add(mixed, count * size * processes)
    if not extended:
        return generated, rows_per_call, 0
    # Each group's slots one after the other, so the filter keeps (or carries) them together.
    order = [[slot for group in own for slot in group] for own in groups]
    joint, start = [], 0
    for own in groups:
        for group in own:
            if len(group) > 1:
                joint.append(list(range(start, start + len(group))))
            start += len(group)
    extended_round = GeneratedRound(
        rows=Rows.concat(parts).select([slot * size + offset for slot in order[rank] for offset in range(size)]),
        rewards_per_func=torch.cat([slots[process][slot] for process, own in enumerate(order) for slot in own]),
        indices=[[indices[process][slot] for slot in own] for process, own in enumerate(order)],
        stopped_rows=generated.stopped_rows,
        stopped=generated.stopped,
        joint=joint,
    )
    return extended_round, rows_per_call, extended
