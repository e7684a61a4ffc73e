"""Length shaping: DAPO's soft overlong punishment."""

from __future__ import annotations

from collections.abc import Sequence


def soft_overlong_penalty(length: int, max_length: int, buffer_length: int) -> float:
    """DAPO's soft overlong punishment (arXiv 2503.14476, Eq. 13) for one completion of `length` tokens.

    With `L_max = max_length` and `L_cache = buffer_length`: 0 up to `L_max - L_cache` tokens, then a linear ramp
    down to -1 at `L_max`, and -1 beyond. A completion cut at the generation limit has exactly `L_max` tokens and
    so gets -1.
    """
    if not 0 < buffer_length <= max_length:
        raise ValueError(f"buffer_length must be in (0, max_length={max_length}], got {buffer_length}.")
    expected_length = max_length - buffer_length
    if length <= expected_length:
        return 0.0
    if length <= max_length:
        return (expected_length - length) / buffer_length
    return -1.0


class SoftOverlongPunishment:
    """Reward function adding DAPO's soft overlong punishment, computed from completion token counts.

    A picklable callable with TRL's reward signature; `__name__` names its metric (`rewards/<name>/mean`). It
    scores as TRL's `get_soft_overlong_punishment` does (a test pins that), but is built on the pure function
    above, which the registry's `soft_overlong` shares, and has a name of its own so that `DAPOTrainer` can tell
    its built-in punishment apart from the user's rewards.
    """

    __name__ = "soft_overlong_punishment"
    # Shapes the reward, never judges an answer: trainers keep it out of the informativeness filter and never let
    # it turn a completion that no verifier could judge into a scored one.
    shaping = True

    def __init__(self, max_length: int, buffer_length: int):
        soft_overlong_penalty(0, max_length, buffer_length)  # validate the arguments now, not mid-run
        self.max_length = max_length
        self.buffer_length = buffer_length

    def __call__(self, completions: Sequence, completion_ids: Sequence[Sequence[int]], **kwargs) -> list[float]:
        return [soft_overlong_penalty(len(ids), self.max_length, self.buffer_length) for ids in completion_ids]

    def __repr__(self) -> str:
        return f"SoftOverlongPunishment(max_length={self.max_length}, buffer_length={self.buffer_length})"
