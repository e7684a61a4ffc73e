"""The verdict on one (reference, final answer) pair, the job the worker pool runs, and the cache of verdicts.

`verify_math_answer` is the pure function (`extract_final_answer` then `verify_final_answer`). The order of a
verification: integer against integer without parsing; the answer forms that settle a verdict alone
(`settle_by_forms`); math-verify's comparison (an inequality answers a reference that can only be an interval;
a reference with several answers may be answered one box each); then the other answer forms (`same_by_forms`).
`MathVerifier` runs `verify_final_answer` in a pool worker with math-verify's own timeouts, and `VerdictCache`
keeps verdicts across calls: `get_or_compute` is the one path from keys to cached or fresh verdicts.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from . import labels, sets, structures  # noqa: F401  (register the answer forms, settling ones in this order)
from .compare import equivalent, parse_anchored, parse_answer
from .extract import FinalAnswer, extract_final_answer, reference_answer
from .forms import same_by_forms, settle_by_forms
from .normalize import normalize_math_answer, normalize_math_answer_text

__all__ = [
    "MAX_CHUNK",
    "TIMED_OUT",
    "MathVerifier",
    "VerdictCache",
    "chunks_by_reference",
    "distinct_items",
    "verify_final_answer",
    "verify_math_answer",
]


def verify_math_answer(
    reference: str,
    completion: str,
    *,
    question: str | None = None,
    parsing_timeout: int | None = None,
    verify_timeout: int | None = None,
) -> bool | None:
    """Whether `completion`'s final answer is mathematically equivalent to `reference`.

    Returns None when the reference cannot be parsed ("cannot judge"), False when the completion has no
    answer or a different one. `question`, when given, lets an option's text answer its letter (and the
    reverse) when it lists options, and says which way an ordering runs. `parsing_timeout` / `verify_timeout`
    are math-verify's own limits (whole seconds, `signal.alarm`, so main thread only); past one it raises
    `TimeoutError`. None disables them, for callers that bound time themselves.
    """
    return verify_final_answer(
        reference,
        extract_final_answer(completion, question),
        parsing_timeout=parsing_timeout,
        verify_timeout=verify_timeout,
    )


def verify_final_answer(
    reference: str, answer: FinalAnswer, *, parsing_timeout: int | None = None, verify_timeout: int | None = None
) -> bool | None:
    """`verify_math_answer` on an already extracted `FinalAnswer` (what the pool workers run)."""
    from math_verify.errors import TimeoutException

    try:
        return _verify(reference, answer, parsing_timeout, verify_timeout)
    except TimeoutException:
        raise TimeoutError(f"math-verify timed out on reference {reference[:80]!r}") from None


_INTEGER = re.compile(r"-?\d+")
# A reference that can only be an interval (a bracket, an infinite end, a union): an inequality answers it.
# `(1, 2)` is left out: in MATH it is as often a point as an open interval.
_UNAMBIGUOUS_INTERVAL = re.compile(r"\[|\]|\\infty|∞|\\cup")


def _verify(
    reference: str, answer: FinalAnswer, parsing_timeout: int | None, verify_timeout: int | None
) -> bool | None:
    gold_answer = reference_answer(reference)
    if answer.text is not None:
        # Integer against integer (DAPO-Math, AIME, GSM8K): equal as integers or not; skip the LaTeX parser,
        # which costs ~15 ms an answer.
        gold_text, answer_text = normalize_math_answer(gold_answer), normalize_math_answer(answer.text)
        if _INTEGER.fullmatch(gold_text) and _INTEGER.fullmatch(answer_text):
            return int(gold_text) == int(answer_text)
    gold = list(parse_answer(gold_answer, parsing_timeout))
    if not gold:
        return None
    predicted = list(parse_answer(answer.text, parsing_timeout)) if answer.text is not None else []
    if not predicted and answer.unmarked is not None:
        predicted = parse_anchored(normalize_math_answer_text(answer.unmarked), parsing_timeout)
    forms = functools.partial(
        same_by_forms, gold_answer, answer, parsing_timeout=parsing_timeout, verify_timeout=verify_timeout
    )
    # Answers math-verify misreads (a declared integer family, two units) are settled by their form alone.
    settled = settle_by_forms(gold_answer, answer, parsing_timeout=parsing_timeout, verify_timeout=verify_timeout)
    if settled is not None:
        return settled
    if not predicted:
        return forms()
    # math-verify compares an inequality with an interval reference only when told to.
    interval = bool(_UNAMBIGUOUS_INTERVAL.search(gold_answer))
    if equivalent(gold, predicted, verify_timeout, allow_set_relation_comp=interval):
        return True
    # A reference with several answers may be answered one box each: `\boxed{2} and \boxed{3}` for `2, 3`.
    if answer.boxes is not None and _has_several_elements(gold[0]):
        from latex2sympy2_extended.math_normalization import extract_boxed_content

        run = extract_boxed_content(answer.boxes, mode="last")
        joined = list(parse_answer(run, parsing_timeout)) if "," in run else []
        if joined and equivalent(gold, joined, verify_timeout, allow_set_relation_comp=False):
            return True
    return forms()


def _has_several_elements(value: Any) -> bool:
    import sympy

    return isinstance(value, (sympy.FiniteSet, sympy.Tuple, tuple, list, set)) and len(value) > 1


TIMED_OUT = "timeout"  # what a `MathVerifier` returns when math-verify's own time limit fired
MAX_CHUNK = 8  # answers to one reference sent to a worker as one task


@dataclass(frozen=True)
class MathVerifier:
    """Picklable job the pool runs: `(reference, completion or FinalAnswer) -> bool | None`, with math-verify's
    own timeouts.

    In a pool worker the function runs in the worker's main thread, so math-verify's `signal.alarm` limits
    work there and stop most slow items cheaply; the pool's hard timeout (which kills the worker) is the
    backstop for the ones a signal cannot interrupt.
    """

    parsing_timeout: int | None = None
    verify_timeout: int | None = None

    def __call__(
        self, item: tuple[str, str | FinalAnswer | tuple[FinalAnswer, ...]]
    ) -> bool | None | str | list[bool | None | str]:
        """One verdict for `(reference, completion or FinalAnswer)`; a list of verdicts, in order, for
        `(reference, (FinalAnswer, ...))`: several answers to one reference, so it is parsed once."""
        logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # its timeout warnings; we report timeouts
        reference, answer = item
        if isinstance(answer, tuple):
            return [self._one(reference, each) for each in answer]
        return self._one(reference, extract_final_answer(answer) if isinstance(answer, str) else answer)

    def _one(self, reference: str, answer: FinalAnswer) -> bool | None | str:
        try:
            return verify_final_answer(
                reference, answer, parsing_timeout=self.parsing_timeout, verify_timeout=self.verify_timeout
            )
        except TimeoutError:
            return TIMED_OUT


def distinct_items(keys: list[Hashable]) -> tuple[list[Hashable], list[int]]:
    """`keys` without repeats, in first-seen order, and for each key the index of its distinct item.

    Shapes: `keys` (n,) -> distinct (d,), `index` (n,) with `distinct[index[i]] == keys[i]`, d <= n. In RL a
    group holds G completions of one prompt and their final answers repeat, so d is often a few per group.
    """
    position: dict[Hashable, int] = {}
    index = [position.setdefault(key, len(position)) for key in keys]
    return list(position), index


def chunks_by_reference(references: list[str], max_size: int) -> list[list[int]]:
    """Indices of `references` grouped by equal reference (first-seen order), at most `max_size` a chunk.

    Shapes: `references` (d,) -> chunks whose concatenation is a permutation of `range(d)`. One chunk is one
    pool task: the reference is parsed once for all its answers, and a worker takes one message per chunk
    instead of one per answer.
    """
    groups: dict[str, list[int]] = {}
    for index, reference in enumerate(references):
        groups.setdefault(reference, []).append(index)
    return [
        members[start : start + max_size] for members in groups.values() for start in range(0, len(members), max_size)
    ]


class VerdictCache:
    """A bounded least-recently-used map `(reference, FinalAnswer) -> verdict`, safe across threads.

    Across training steps the same prompts come back (epochs, and dynamic sampling's refills) with answers
    the policy has given before; only finished verdicts are kept, never timeouts or crashes.
    """

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._verdicts: OrderedDict[Hashable, bool | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[bool, bool | None]:
        """`(found, verdict)`."""
        with self._lock:
            if key not in self._verdicts:
                return False, None
            self._verdicts.move_to_end(key)
            return True, self._verdicts[key]

    def put(self, key: Hashable, verdict: bool | None) -> None:
        if self.max_size <= 0:
            return
        with self._lock:
            self._verdicts[key] = verdict
            self._verdicts.move_to_end(key)
            while len(self._verdicts) > self.max_size:
                self._verdicts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._verdicts)

    def get_or_compute(
        self,
        keys: list[Hashable],
        compute: Callable[[list[Hashable]], list[Any]],
        keep: Callable[[Any], bool] = lambda verdict: True,
    ) -> list[Any]:
        """The verdicts of distinct `keys`, in order: the cached ones, and for the others `compute(missing)`
        (one call, `missing` in order, even when empty), whose verdicts are cached where `keep(verdict)`."""
        verdicts: list[Any] = [None] * len(keys)
        missing = []
        for number, key in enumerate(keys):
            found, verdict = self.get(key)
            if found:
                verdicts[number] = verdict
            else:
                missing.append(number)
        for number, verdict in zip(missing, compute([keys[number] for number in missing])):
            verdicts[number] = verdict
            if keep(verdict):
                self.put(keys[number], verdict)
        return verdicts
