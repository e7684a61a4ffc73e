"""Adaptive sampling: spend generation where a prompt is still undecided, and take signal from groups DAPO discards.

Dynamic sampling's filter removes zero-advantage groups and pays to regenerate; it never creates signal. The adaptive
mode keeps, per prompt, what every completion sampled for it said, and uses it twice:

1. **Before generating** (the estimate skip). A discounted Beta posterior of the prompt's pass rate (as MoPPS,
   arXiv 2507.04632, keeps one per prompt) gives the probability that a group of `G` completions will be
   informative, `v = 1 - E[p^G] - E[(1 - p)^G]`, the value Knapsack RL (arXiv 2509.25849) assigns a prompt's budget.
   A prompt is skipped with probability `1 - v / v_0`, where `v_0 = 1 - 2 / (G + 1)` is the value of a prompt never
   seen (uniform prior), capped at `max_skip_probability` so that every prompt keeps a floor of exploration (as
   GRESO, arXiv 2506.02177, keeps one). An undecided prompt (p near 1/2, or little evidence) is never skipped; one
   whose groups keep coming back all-right or all-wrong is skipped more the surer the estimate.
2. **After scoring** (the history baseline, ours). A group's advantages are `A_i = R_i - b_i` with

       b_i = (H_sum + sum_{j != i} R_j) / (H_count + m - 1)

   where `H_sum`, `H_count` are the discounted sum and count of the prompt's rewards from *earlier* batches and the
   sum runs over the group's other `m - 1` judged completions (no division by the group's std, as Dr. GRPO).
   `b_i` does not depend on completion `i`, so `E[A_i grad log pi(o_i)] = grad E[R]`: the policy-gradient estimate
   stays unbiased (the group-mean baseline of GRPO, which includes `R_i`, shrinks it by `(m - 1) / m`; the test
   checks both). An all-failed group of a prompt that was solved before now has negative advantages: it pushes the
   wrong answers down instead of being discarded, and counts as informative, so fewer rounds are needed.

Sharding and resume: like the prompt history, the beliefs are global (every process records every process's groups
in process order), skip coins are keyed by `(seed, batch_key, round_index, prompt_index)`, and `state_dict` holds
everything; decisions are identical on every process and after a resume.

3. **While generating** (the pilot, `pilot.py`): with `pilot_size = n0`, a prompt is generated `n0` completions
   first and the other `G - n0` only when its pilot is mixed or the rest is worth its tokens; otherwise it stops
   at `n0` (its pilot is recorded here all the same). With `extensions = k`, a whole group that came out
   all-equal gets up to `k` more groups of `G` when they are worth their tokens (`extension.py`), and the prompt's
   `m G` completions are trained as one group of variable size: each extension is a slot of `G` rows of the batch,
   and the baseline runs over the whole group (`joint_histories`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .prompt_history import uniform_coin

# Rewards above this count as a success in the pass-rate estimate (separates 1 from 0, and 1 from -1).
SUCCESS_THRESHOLD = 0.5
# Row column of the adaptive mode: each row's prompt history `(reward sum, count)` from before its group was sampled.
HISTORY_COLUMN = "history_baseline"


@dataclass(frozen=True)
class AdaptiveSettings:
    """The adaptive mode's settings (the `dynamic_sampling_*` fields of `DynamicSamplingArguments`, which
    `DAPOConfig` and `GSPOConfig` mix in)."""

    max_skip_probability: float = 0.9  # the estimate skip's cap; 0 turns the skip off
    history_baseline: bool = True
    decay: float = 0.5  # weight of a prompt's earlier evidence at each new visit, in [0, 1)
    pilot_size: int = 0  # completions generated first for each prompt, the rest only if worth it (0: off; `pilot`)
    extensions: int = 0  # more groups of G an all-equal group may get in its round (0: off; `extension`)

    def __post_init__(self):
        if not 0.0 <= self.max_skip_probability < 1.0:
            raise ValueError(f"max_skip_probability must be in [0, 1), got {self.max_skip_probability}.")
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay}.")
        if self.pilot_size < 0:
            raise ValueError(f"pilot_size must be at least 0 (0 turns the pilot off), got {self.pilot_size}.")
        if self.extensions < 0:
            raise ValueError(f"extensions must be at least 0 (0 turns them off), got {self.extensions}.")
        if self.extensions and not (self.pilot_size and self.history_baseline):
            raise ValueError(
                "extensions are decided by the pilot's value per completion and trained through the history "
                f"baseline: they need pilot_size > 0 and history_baseline=True (got pilot_size={self.pilot_size}, "
                f"history_baseline={self.history_baseline})."
            )


def informative_probability(successes: float, failures: float, group_size: int) -> float:
    """`1 - E[p^G] - E[(1 - p)^G]` for `p ~ Beta(1 + successes, 1 + failures)`: the chance that a group of
    `group_size` completions holds both a success and a failure.

    `E[p^G] = prod_{k < G} (a + k) / (a + b + k)` for `p ~ Beta(a, b)`.
    """
    a, b = 1.0 + successes, 1.0 + failures
    all_right = math.prod((a + k) / (a + b + k) for k in range(group_size))
    all_wrong = math.prod((b + k) / (a + b + k) for k in range(group_size))
    return max(0.0, 1.0 - all_right - all_wrong)


def skip_probability(successes: float, failures: float, group_size: int, max_skip_probability: float) -> float:
    """How likely a prompt is skipped before generation: `1 - v / v_0`, in `[0, max_skip_probability]`."""
    unseen = informative_probability(0.0, 0.0, group_size)  # 1 - 2 / (G + 1)
    value = informative_probability(successes, failures, group_size)
    return min(max(0.0, 1.0 - value / unseen), max_skip_probability)


def history_baseline_advantages(
    rewards: torch.Tensor, group_size: int, history_sum: torch.Tensor, history_count: torch.Tensor
) -> torch.Tensor:
    """Advantages `R_i - b_i` with the leave-one-out baseline over the prompt's history and the group's others.

    Args:
        rewards: `(num_groups * group_size,)` rewards, each prompt's completions contiguous; NaN where a completion
            could not be judged (its advantage is 0 and it is left out of the others' baselines).
        group_size: completions per prompt (G).
        history_sum: `(num_groups,)` discounted sum of the prompt's rewards from earlier batches.
        history_count: `(num_groups,)` their discounted count (0: no history).

    Returns:
        `(num_groups * group_size,)` advantages; 0 where the baseline has nothing to compare with.
    """
    grouped = rewards.view(-1, group_size).to(torch.float64)
    judged = ~torch.isnan(grouped)
    values = torch.where(judged, grouped, 0.0)
    others_sum = values.sum(dim=1, keepdim=True) - values
    others_count = judged.sum(dim=1, keepdim=True) - judged.to(torch.int64)
    denominator = history_count.to(torch.float64).unsqueeze(1) + others_count
    baseline = (history_sum.to(torch.float64).unsqueeze(1) + others_sum) / denominator.clamp(min=1e-12)
    advantages = torch.where(judged & (denominator > 0), values - baseline, 0.0)
    return advantages.view(-1).to(rewards.dtype)


def joint_histories(
    rewards: torch.Tensor,
    group_size: int,
    history_sum: torch.Tensor,
    history_count: torch.Tensor,
    joint: Sequence[Sequence[int]],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per slot of `G` rows, the history that makes `history_baseline_advantages` take each joint group's baseline
    over all its slots: slot `s` of a joint group `J` gets its prompt's history plus the judged rewards of `J`'s
    other slots. So `R_i - b_i`, with `b_i` the mean over the prompt's history and the other `|J| G - 1`
    completions, is computed slot by slot, and TRL's batching keeps seeing groups of `G`.

    Args:
        rewards: `(num_slots * group_size,)` rewards, NaN where unjudged.
        history_sum, history_count: `(num_slots,)` the prompt's history per slot (the same for a joint group's slots).
        joint: lists of slot indices trained as one group (a slot in none is a group of its own).
    """
    grouped = rewards.view(-1, group_size).to(torch.float64)
    judged = ~torch.isnan(grouped)
    slot_sum, slot_count = torch.where(judged, grouped, 0.0).sum(dim=1), judged.sum(dim=1).to(torch.float64)
    history_sum, history_count = history_sum.to(torch.float64).clone(), history_count.to(torch.float64).clone()
    for slots in joint:
        slots = torch.as_tensor(list(slots), dtype=torch.long)
        history_sum[slots] += slot_sum[slots].sum() - slot_sum[slots]
        history_count[slots] += slot_count[slots].sum() - slot_count[slots]
    return history_sum, history_count


def batch_history_advantages(batch, settings) -> torch.Tensor:
    """`(B,)` the adaptive mode's advantages of a `SampledBatch`'s rows (this process's): each row's reward minus the
    leave-one-out baseline over its prompt's earlier rewards and its group's others (`history_baseline_advantages`);
    0 for fillers and unjudged rows."""
    group_size = settings.group_size
    history = torch.tensor(batch.rows.columns[HISTORY_COLUMN][::group_size], dtype=torch.float64).view(-1, 2)
    rewards = settings.advantage_rewards(batch.rewards().cpu())
    return history_baseline_advantages(rewards, group_size, history[:, 0], history[:, 1])


def informative_against_history(
    rewards: torch.Tensor, group_size: int, history_sum: torch.Tensor, history_count: torch.Tensor, atol: float = 1e-6
) -> torch.Tensor:
    """`(num_groups,)` bool: groups whose history-baseline advantages are not all zero (a mixed group, or an all-equal
    group whose reward differs from the prompt's history)."""
    advantages = history_baseline_advantages(rewards, group_size, history_sum, history_count)
    return (advantages.view(-1, group_size).abs() > atol).any(dim=1)


class PassRateBeliefs:
    """Per prompt, the discounted evidence of everything sampled for it: successes and failures of the filter
    reward (the pass-rate posterior), and the sum and count of the rewards (the history baseline).

    At each visit the earlier evidence is multiplied by `decay` before the group's is added, so the estimate follows
    a policy that changes (with G = 8 and decay 0.5 the posterior holds about 16 completions' worth at most).
    """

    def __init__(self, settings: AdaptiveSettings, group_size: int, seed: int = 0):
        self.settings, self.group_size, self.seed = settings, group_size, seed
        # prompt index -> [successes, failures, reward sum, reward count]
        self._evidence: dict[int, list[float]] = {}

    def __len__(self) -> int:
        return len(self._evidence)

    def evidence(self, prompt_index: int) -> tuple[float, float, float, float]:
        return tuple(self._evidence.get(int(prompt_index), (0.0, 0.0, 0.0, 0.0)))

    def visit_evidence(self, prompt_index: int) -> tuple[float, float]:
        """The prompt's `(successes, failures)` as a new visit starts: the earlier evidence, discounted."""
        successes, failures, _, _ = self.evidence(prompt_index)
        return successes * self.settings.decay, failures * self.settings.decay

    def record(
        self,
        prompt_indices: Sequence[int],
        filter_rewards: torch.Tensor,
        rewards: torch.Tensor,
        size: int | None = None,
    ) -> None:
        """Record each group of a round, in order (prompt indices below 0 are unknown and ignored).

        Args:
            prompt_indices: one dataset index per group.
            filter_rewards: `(num_groups * size,)` the filter rewards (successes and failures), NaN if unjudged.
            rewards: `(num_groups * size,)` the rewards advantages are computed from, NaN if unjudged.
            size: completions per group (default G; a stopped pilot's are fewer).
        """
        filtered = filter_rewards.view(-1, size or self.group_size).tolist()
        total = rewards.view(-1, size or self.group_size).tolist()
        for index, group_filter, group_total in zip(prompt_indices, filtered, total, strict=True):
            judged = [value for value in group_filter if not math.isnan(value)]
            scored = [value for value in group_total if not math.isnan(value)]
            if int(index) < 0 or not judged:
                continue
            decay = self.settings.decay
            old = [value * decay for value in self._evidence.get(int(index), (0.0, 0.0, 0.0, 0.0))]
            successes = sum(value > SUCCESS_THRESHOLD for value in judged)
            self._evidence[int(index)] = [
                old[0] + successes,
                old[1] + len(judged) - successes,
                old[2] + sum(scored),
                old[3] + len(scored),
            ]

    def record_round(
        self,
        prompt_indices: Sequence[int],
        filter_rewards: torch.Tensor,
        rewards: torch.Tensor,
        joint: Sequence[Sequence[int]] = (),
    ) -> None:
        """Record a round's slots of `G` completions (as `record`), each joint group's slots as one visit."""
        size = self.group_size
        in_joint = {slot for slots in joint for slot in slots}

        def rows(slots):
            return torch.cat([torch.arange(slot * size, (slot + 1) * size) for slot in slots])

        singles = [slot for slot in range(len(prompt_indices)) if slot not in in_joint]
        if singles:
            chosen = rows(singles)
            self.record([prompt_indices[slot] for slot in singles], filter_rewards[chosen], rewards[chosen])
        for slots in joint:
            chosen = rows(slots)
            self.record([prompt_indices[slots[0]]], filter_rewards[chosen], rewards[chosen], size=len(slots) * size)

    def history(self, prompt_indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """`(num_groups,)` discounted reward sums and counts of the prompts, before this round's groups."""
        evidence = [self.evidence(index) for index in prompt_indices]
        return (
            torch.tensor([row[2] for row in evidence], dtype=torch.float64),
            torch.tensor([row[3] for row in evidence], dtype=torch.float64),
        )

    def skip_probability(self, prompt_index: int) -> float:
        successes, failures, _, _ = self.evidence(prompt_index)
        return skip_probability(successes, failures, self.group_size, self.settings.max_skip_probability)

    def should_skip(self, prompt_indices: Sequence[int], batch_key: int, round_index: int) -> list[bool]:
        """Whether to skip each prompt in this round; the same answer on every process and on resume."""
        if self.settings.max_skip_probability <= 0:
            return [False] * len(prompt_indices)
        return [
            int(index) >= 0
            and uniform_coin(self.seed, batch_key, round_index, int(index)) < self.skip_probability(index)
            for index in prompt_indices
        ]

    def state_dict(self) -> dict:
        return {"evidence": [[index, *values] for index, values in sorted(self._evidence.items())]}

    def load_state_dict(self, state: dict) -> None:
        self._evidence = {int(row[0]): [float(value) for value in row[1:]] for row in state["evidence"]}
