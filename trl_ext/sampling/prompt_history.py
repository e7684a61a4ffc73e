"""Prompt history: skip, before generating, the prompts whose recent groups were all uninformative.

A prompt whose last groups were all-correct (or all-wrong) is likely to be so again: generating for it mostly
produces a group that dynamic sampling then drops, the whole cost of `G` completions for nothing. Following the
selective-rollout idea of GRESO (arXiv 2506.02177), a prompt uninformative in its last `k` consecutive visits is
skipped with a probability that rises with `k`,

    p_skip(k) = min(1 - exploration_rate ** k, max_skip_probability),      p_skip(0) = 0,

capped below 1 so that every prompt keeps a chance (`1 - max_skip_probability`) of being generated for: a prompt
the policy forgets, or starts to solve, comes back, and one informative (mixed) group resets its streak to 0.

Defaults: `exploration_rate=0.5` halves the chance of generating for a prompt with each further uninformative visit
(0.5, 0.75, 0.875 skip after 1, 2, 3 visits); `max_skip_probability=0.9` is reached after 4 visits. The cap is the
trade-off between saving and noticing change: a prompt that stays hopeless still costs 10% of its generation, and
one that has changed is generated for again after 10 of its visits on average (geometric waiting time `1 / 0.1`).
A lower cap notices change sooner but saves less on the prompts that never change, which are most of the
uninformative ones late in training.

Sharding: the history is global, one copy on every process. The trainer gathers the dataset indices and the
outcomes of every process's groups (it gathers the rewards already) and records them all, in process order, on
every process, so the copies stay identical without further communication; a checkpoint saves one copy, valid
for any number of processes on resume. Skip decisions are coins keyed by `(seed, batch_key, round_index,
prompt_index)`, not drawn from a shared random stream, so a decision does not depend on which process computes it
or on what else was decided before: 1 and 2 processes, and a resumed run, take the same decisions.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence

import torch

from .dynamic_sampling import informative_group_mask


class Outcome(str, enum.Enum):
    """What one prompt group's filter rewards say about the prompt."""

    ALL_CORRECT = "all_correct"  # every judged completion got the same reward, above the success threshold
    ALL_WRONG = "all_wrong"  # every judged completion got the same reward, at or below the success threshold
    MIXED = "mixed"  # the rewards differ: the group is informative
    UNJUDGED = "unjudged"  # fewer than two judged completions: nothing learned about the prompt

    @property
    def uninformative(self) -> bool:
        return self in (Outcome.ALL_CORRECT, Outcome.ALL_WRONG)


def group_outcomes(
    rewards: torch.Tensor, group_size: int, success_threshold: float = 0.5, atol: float = 1e-6
) -> list[Outcome]:
    """The outcome of each prompt group, with the same informativeness test as dynamic sampling's filter.

    A group is `MIXED` exactly when `informative_group_mask` keeps it. Otherwise, with at least two judged
    completions, all of them got the same reward (zero variance, binary or not): `ALL_CORRECT` when that reward is
    above `success_threshold`, else `ALL_WRONG`. The default 0.5 separates the usual verifier rewards, 1 from 0 and
    1 from -1.

    Args:
        rewards: `(num_groups * group_size,)` filter rewards, the completions of one prompt contiguous; NaN where
            no filter reward could judge a completion.
        group_size: completions per prompt (G).
        success_threshold: a uniform reward above this counts as correct.
        atol: rewards closer than this count as equal (as in `informative_group_mask`).

    Returns:
        `num_groups` outcomes, in group order.
    """
    informative = informative_group_mask(rewards, group_size, atol=atol).tolist()
    grouped = rewards.view(-1, group_size)
    judged = ~torch.isnan(grouped)
    judged_counts = judged.sum(dim=1).tolist()
    # All judged rewards of an uninformative group are equal (within atol): their mean is the group's reward.
    means = (torch.where(judged, grouped, 0.0).sum(dim=1) / judged.sum(dim=1).clamp(min=1)).tolist()
    outcomes = []
    for mixed, count, mean in zip(informative, judged_counts, means, strict=True):
        if mixed:
            outcomes.append(Outcome.MIXED)
        elif count < 2:
            outcomes.append(Outcome.UNJUDGED)
        else:
            outcomes.append(Outcome.ALL_CORRECT if mean > success_threshold else Outcome.ALL_WRONG)
    return outcomes


def uniform_coin(seed: int, batch_key: int, round_index: int, prompt_index: int) -> float:
    """A uniform number in [0, 1) that depends only on its arguments (stable across processes and Python runs)."""
    key = f"{seed}:{batch_key}:{round_index}:{prompt_index}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2**64


class PromptHistory:
    """Per-prompt streaks of uninformative groups, and the skip decisions they lead to.

    Args:
        seed: seeds the skip coins (the trainer passes its `seed`).
        max_skip_probability: the most a prompt is ever skipped, in [0, 1); `1 - max_skip_probability` is the
            exploration floor.
        exploration_rate: after `k` consecutive uninformative visits a prompt is generated for with probability
            `exploration_rate ** k` (until the floor), in (0, 1].
    """

    def __init__(self, seed: int = 0, max_skip_probability: float = 0.9, exploration_rate: float = 0.5):
        if not 0.0 <= max_skip_probability < 1.0:
            raise ValueError(
                f"max_skip_probability must be in [0, 1) (a prompt must keep a chance to come back), got "
                f"{max_skip_probability}."
            )
        if not 0.0 < exploration_rate <= 1.0:
            raise ValueError(f"exploration_rate must be in (0, 1], got {exploration_rate}.")
        self.seed = seed
        self.max_skip_probability = max_skip_probability
        self.exploration_rate = exploration_rate
        # prompt index -> (consecutive uninformative visits, outcome of the last one); prompts at 0 are not stored.
        self._streaks: dict[int, tuple[int, Outcome]] = {}

    def __len__(self) -> int:
        """Prompts with an uninformative streak."""
        return len(self._streaks)

    def record(self, prompt_indices: Sequence[int], outcomes: Sequence[Outcome]) -> None:
        """Record one outcome per prompt group, in order (a prompt may appear more than once).

        `MIXED` resets the prompt's streak, `ALL_CORRECT`/`ALL_WRONG` extend it, `UNJUDGED` leaves it as it was.
        Negative indices (a prompt the trainer could not find in the dataset) are ignored.
        """
        if len(prompt_indices) != len(outcomes):
            raise ValueError(f"{len(prompt_indices)} prompt indices for {len(outcomes)} outcomes.")
        for index, outcome in zip(prompt_indices, outcomes, strict=True):
            index, outcome = int(index), Outcome(outcome)
            if index < 0 or outcome is Outcome.UNJUDGED:
                continue
            if outcome is Outcome.MIXED:
                self._streaks.pop(index, None)
            else:
                streak, _ = self._streaks.get(index, (0, outcome))
                self._streaks[index] = (streak + 1, outcome)

    def streak(self, prompt_index: int) -> int:
        """Consecutive uninformative visits of the prompt, most recent first."""
        return self._streaks.get(int(prompt_index), (0, None))[0]

    def last_outcome(self, prompt_index: int) -> Outcome | None:
        """The outcome that ended the prompt's streak so far (None without a streak)."""
        return self._streaks.get(int(prompt_index), (0, None))[1]

    def skip_probability(self, prompt_index: int) -> float:
        streak = self.streak(prompt_index)
        if streak == 0:
            return 0.0
        return min(1.0 - self.exploration_rate**streak, self.max_skip_probability)

    def should_skip(self, prompt_indices: Sequence[int], batch_key: int, round_index: int) -> list[bool]:
        """Whether to skip each prompt in this generation round; the same answer on every process and on resume.

        Args:
            prompt_indices: dataset indices of the candidate prompts (negative: unknown, never skipped).
            batch_key: identifies the generation batch (the trainer's refill draw key).
            round_index: the generation round within the batch.
        """
        return [
            int(index) >= 0
            and uniform_coin(self.seed, batch_key, round_index, int(index)) < self.skip_probability(index)
            for index in prompt_indices
        ]

    def skipped_by_outcome(self, prompt_indices: Sequence[int], skipped: Sequence[bool]) -> dict[str, int]:
        """For metrics: how many skipped prompts were last all-correct and how many all-wrong."""
        counts = {Outcome.ALL_CORRECT.value: 0, Outcome.ALL_WRONG.value: 0}
        for index, was_skipped in zip(prompt_indices, skipped, strict=True):
            if was_skipped:
                counts[self.last_outcome(index).value] += 1
        return counts

    def state_dict(self) -> dict:
        """JSON-serialisable state for a checkpoint: `[prompt_index, streak, last_outcome]` per prompt."""
        return {
            "streaks": [[index, streak, outcome.value] for index, (streak, outcome) in sorted(self._streaks.items())]
        }

    def load_state_dict(self, state: dict) -> None:
        self._streaks = {int(index): (int(streak), Outcome(outcome)) for index, streak, outcome in state["streaks"]}
