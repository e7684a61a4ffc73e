"""Carry surplus informative groups over to the next generation batch instead of discarding them.

A generation round often yields more informative groups than the batch still lacks. Discarding them (verl's and
DAPO's choice) wastes their generation; keeping them for the next batch costs memory and makes them slightly
off-policy: a group generated at policy version `v` and trained at `v + k` is `k` optimizer updates stale. Its
importance ratio stays right as long as it keeps the behaviour-policy log-probs recorded when it was generated,
which the trainer stores in the group's payload; the buffer bounds `k` (`max_staleness`) and its own size.

The buffer's decisions (what to keep, what expires, what to hand out) depend only on the groups' metadata, never
on their payloads: a process can mirror another process's buffer with `payload=None` and take exactly the same
decisions, which is how every process can agree on how many prompts each one still needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class CarriedGroup:
    """One surplus informative prompt group, kept for a later generation batch.

    Attributes:
        payload: what the trainer needs to train on the group later, opaque to the buffer (for the trainer, a dict
            of per-row tensors: prompt and completion ids and masks, behaviour-policy log-probs, advantages...).
            Anything `torch.save` stores with `weights_only=True` survives a checkpoint.
        generated_at: policy version (the trainer's count of optimizer updates) when the group was generated.
        prompt_index: index of the prompt in the training dataset.
        process_index: the process whose rows the group holds.
    """

    payload: Any
    generated_at: int
    prompt_index: int
    process_index: int = 0

    def staleness(self, policy_version: int) -> int:
        """Optimizer updates between the group's generation and `policy_version`."""
        return policy_version - self.generated_at


class CarryBuffer:
    """A bounded buffer of surplus informative groups, handed out oldest first.

    Args:
        max_groups: most groups held; adding beyond it drops the oldest groups first (lowest `generated_at`, then
            the earliest added), since they are the first to expire and the furthest off-policy.
        max_staleness: most optimizer updates a group may lag the policy it is trained with. A group with
            `policy_version - generated_at > max_staleness` is dropped when groups are taken. `0` means nothing
            survives to the next policy version: the buffer then only carries groups within one policy version
            (e.g. between generation batches of one optimizer step), and across steps it behaves as discarding.
    """

    def __init__(self, max_groups: int, max_staleness: int):
        if max_groups < 0:
            raise ValueError(f"max_groups must be at least 0 (0 carries nothing), got {max_groups}.")
        if max_staleness < 0:
            raise ValueError(
                f"max_staleness must be at least 0 (0 carries nothing across updates), got {max_staleness}."
            )
        self.max_groups = max_groups
        self.max_staleness = max_staleness
        # Kept sorted oldest first: by generation version, then by insertion (Python's sort is stable).
        self._groups: list[CarriedGroup] = []

    def __len__(self) -> int:
        return len(self._groups)

    def __iter__(self):
        return iter(list(self._groups))

    def add(self, groups: list[CarriedGroup]) -> int:
        """Add surplus groups; returns how many groups (old or new) were dropped to stay within `max_groups`."""
        self._groups.extend(groups)
        self._groups.sort(key=lambda group: group.generated_at)
        overflow = max(len(self._groups) - self.max_groups, 0)
        del self._groups[:overflow]
        return overflow

    def expire(self, policy_version: int) -> int:
        """Drop the groups too stale to train at `policy_version`; returns how many were dropped."""
        fresh = [group for group in self._groups if group.staleness(policy_version) <= self.max_staleness]
        expired = len(self._groups) - len(fresh)
        self._groups = fresh
        return expired

    def take(self, num_groups: int, policy_version: int) -> tuple[list[CarriedGroup], int]:
        """Remove and return up to `num_groups` groups usable at `policy_version`, oldest first.

        Groups too stale for `policy_version` are dropped first (they could never be used later either).

        Returns:
            `(taken, expired)`: the groups handed out, oldest first, and how many stale groups were dropped.
        """
        expired = self.expire(policy_version)
        count = min(max(num_groups, 0), len(self._groups))
        taken, self._groups = self._groups[:count], self._groups[count:]
        return taken, expired

    def state_dict(self) -> dict[str, Any]:
        """The buffer for a checkpoint: plain containers and the payloads as they are, for `torch.save`.

        It loads back with `torch.load(..., weights_only=True)` when the payloads are tensors in plain containers.
        """
        return {
            "groups": [
                {
                    "payload": group.payload,
                    "generated_at": group.generated_at,
                    "prompt_index": group.prompt_index,
                    "process_index": group.process_index,
                }
                for group in self._groups
            ]
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the groups of `state_dict()`; this buffer's own limits apply (a smaller `max_groups` drops the
        oldest)."""
        self._groups = []
        self.add(
            [
                CarriedGroup(
                    payload=entry["payload"],
                    generated_at=int(entry["generated_at"]),
                    prompt_index=int(entry["prompt_index"]),
                    process_index=int(entry["process_index"]),
                )
                for entry in state["groups"]
            ]
        )


def surplus_informative_groups(informative: torch.Tensor, needed: int, limit: int) -> torch.Tensor:
    """Indices of the informative groups left after the batch took the first `needed`: the groups to carry.

    Args:
        informative: `(num_groups,)` bool mask from `informative_group_mask`.
        needed: how many groups the batch still lacked before this round (`groups_to_keep` takes the first ones).
        limit: most groups to return (e.g. the room left in the buffer); the earliest surplus groups first.

    Returns:
        `(s,)` long tensor of group indices, in order.
    """
    indices = informative.nonzero(as_tuple=True)[0][max(needed, 0) :]
    return indices[: max(limit, 0)]


def first_round_plan(usable: list[bool], size: int) -> tuple[list[bool], int]:
    """Which of a process's sampler prompts the batch's first round generates, and how many refills complete it.

    Carried groups are used before fresh ones, so the first round only generates for what they leave open: `size`
    prompts, which may be fewer than the sampler yielded. The sampler's usable prompts (not skipped, not already
    carried) come first, in order; refills make up the rest.

    Args:
        usable: for each of the process's sampler prompts, whether it may be generated for.
        size: prompts the first round generates on every process.

    Returns:
        `(used, refills)`: which sampler prompts are generated, and how many refill prompts to draw.
    """
    used, taken = [], 0
    for ok in usable:
        use = ok and taken < size
        used.append(use)
        taken += use
    return used, size - taken


def first_round_plans(
    indices_per_process: list[list[int]], skips: list[list[bool]], carried: set[int], size: int
) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """The first round's prompts on every process: `size` each, the sampler's own first, then refills.

    A sampler prompt the prompt history skips, or one already carried over, is not generated for.

    Args:
        indices_per_process: the dataset indices of each process's sampler prompts.
        skips: for each of them, whether the prompt history skips it.
        carried: indices of the prompts of carried groups.
        size: prompts the first round generates on every process.

    Returns:
        Per process: how many refill prompts complete its round, which sampler prompts (indices) it generates for,
        and their positions in its sampler batch.
    """
    plans = [
        first_round_plan([not (skip or index in carried) for index, skip in zip(indices, flags, strict=True)], size)
        for indices, flags in zip(indices_per_process, skips, strict=True)
    ]
    generated = [
        [index for index, used in zip(indices, plan, strict=True) if used]
        for indices, (plan, _) in zip(indices_per_process, plans, strict=True)
    ]
    positions = [[group for group, used in enumerate(plan) if used] for plan, _ in plans]
    return [count for _, count in plans], generated, positions


def staleness_stats(groups: list[CarriedGroup], policy_version: int) -> tuple[float, int]:
    """Mean and maximum staleness of `groups` at `policy_version`; `(0.0, 0)` for no groups."""
    if not groups:
        return 0.0, 0
    lags = [group.staleness(policy_version) for group in groups]
    return math.fsum(lags) / len(lags), max(lags)
