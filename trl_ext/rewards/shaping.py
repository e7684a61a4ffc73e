"""Shaping rewards: `soft_overlong` (DAPO's soft overlong punishment) and `repetition` (n-gram penalty).

Both are penalties: 0 for a well-behaved completion, down to a negative floor. They are added to an answer
verifier's reward (TRL sums the weighted rewards), never used alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from .base import Reward, completion_text
from .length import SoftOverlongPunishment
from .registry import register_reward

__all__ = ["RepetitionPenalty", "repetition_penalty"]

register_reward(
    "soft_overlong",
    aliases=("soft_overlong_punishment", "overlong"),
    description="DAPO soft overlong punishment: 0 up to max_length - buffer_length tokens, linear to -1 at max_length.",
)(SoftOverlongPunishment)


def repetition_penalty(units: Sequence, ngram_size: int, max_penalty: float) -> float:
    """`max_penalty * (1 - distinct n-grams / n-grams)` over the completion's n-grams of `units`.

    `units` are words or token ids. 0 for no repeated n-gram (or fewer than `ngram_size` units), approaching
    `max_penalty` (<= 0) as one n-gram fills the completion. This is the repetition penalty of "Demystifying
    Long Chain-of-Thought Reasoning in LLMs" (arXiv 2502.03373).
    """
    if ngram_size < 1:
        raise ValueError(f"ngram_size must be >= 1, got {ngram_size}.")
    if max_penalty > 0:
        raise ValueError(f"max_penalty must be <= 0 (a penalty), got {max_penalty}.")
    total = len(units) - ngram_size + 1
    if total <= 0:
        return 0.0
    distinct = len({tuple(units[index : index + ngram_size]) for index in range(total)})
    return max_penalty * (1.0 - distinct / total)


@register_reward("repetition", aliases=("repetition_penalty",))
class RepetitionPenalty(Reward):
    """Repeated n-gram penalty: `max_penalty * (1 - distinct n-grams / n-grams)`, 0 when nothing repeats.

    Args:
        ngram_size: n-gram length.
        max_penalty: the floor (<= 0) approached by a completion that repeats one n-gram throughout.
        unit: "words" (whitespace-separated, lower-cased) or "tokens" (the completion's token ids).
    """

    shaping = True  # a penalty added to a verifier's reward, never a judge of the answer

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0, unit: Literal["words", "tokens"] = "words"):
        repetition_penalty([], ngram_size, max_penalty)  # validate now, not mid-run
        if unit not in ("words", "tokens"):
            raise ValueError(f"Reward 'repetition': unit must be 'words' or 'tokens', got {unit!r}.")
        self.ngram_size = ngram_size
        self.max_penalty = max_penalty
        self.unit = unit

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        if self.unit == "tokens":
            if completion_ids is None:
                raise TypeError("Reward 'repetition' with unit='tokens' needs `completion_ids` (TRL passes them).")
            return [repetition_penalty(list(ids), self.ngram_size, self.max_penalty) for ids in completion_ids]
        return [
            repetition_penalty(completion_text(completion).lower().split(), self.ngram_size, self.max_penalty)
            for completion in completions
        ]
