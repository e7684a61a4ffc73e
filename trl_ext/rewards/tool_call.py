"""Tool use: `tool_call` (the completion calls the reference functions with the reference arguments).

Tool calls are read from a completion in the forms TRL's tool-calling chat templates produce:

- conversational completions: the `tool_calls` field of each assistant message, as TRL's `parse_response` fills
  it (`{"type": "function", "function": {"name": ..., "arguments": {...}}}`); every assistant turn of a
  multi-turn completion counts, and a turn without the field (the tokenizer has no response schema, or TRL could
  not parse the calls) is read from its text;
- text: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Hermes, Qwen), several per
  completion; without such blocks, JSON function-call objects anywhere in the text: `{"name": ...,
  "arguments": {...}}`, Llama's `{"name": ..., "parameters": {...}}`, OpenAI's `{"type": "function",
  "function": {"name": ..., "arguments": "<JSON string>"}}`, or `{"tool_calls": [...]}`.

The reference (one value per row of a dataset column) is a call, a list of calls (`[]`: no call is expected),
or an assistant message with `tool_calls`, as a JSON string or as the structure itself. A reference call may
carry `"optional_arguments": [names]`: those arguments may be left out, and if given must match (an optional
name absent from the reference's `arguments` may take any value). Reading the calls lives in `tool_call_parsing`;
the scoring functions here are pure and are tested on their own; `ToolCallReward` wires them to TRL's reward
signature.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .base import Reward, dataset_column, scores_for
from .registry import register_reward
from .tool_call_parsing import (
    MALFORMED_ARGUMENTS,
    MALFORMED_CALL,
    TEXT_FORMATS,
    ToolCall,
    drop_nulls,
    loads_json,
    parse_reference_calls,
    parse_tool_calls,
)

__all__ = [
    "MALFORMED_ARGUMENTS",
    "MALFORMED_CALL",
    "ToolCall",
    "ToolCallReward",
    "best_call_matching",
    "call_match_score",
    "parse_reference_calls",
    "parse_tool_calls",
    "score_tool_calls",
    "values_equal",
]

_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_JSON_INTEGER = re.compile(r"-?(?:0|[1-9]\d*)")
# Above this many (pairable predicted calls) x (reference subsets) x (reference calls), the exact matching gives
# way to a greedy one: a reference with more than a dozen calls is rare, a model spamming calls is not.
_EXACT_MATCHING_BUDGET = 200_000


# --------------------------------------------------------------------------------------------------------------
# Comparing calls


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _as_number(value: Any) -> int | float | None:
    """A JSON number, or a string that spells one (`"3"`, `" 2.50 "`, `"1e3"`); booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value if not isinstance(value, float) or math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        if _JSON_INTEGER.fullmatch(text):
            return int(text)
        if _JSON_NUMBER.fullmatch(text):
            number = float(text)
            return number if math.isfinite(number) else None
    return None


def _normalize_string(text: str) -> str:
    return " ".join(text.casefold().split())


def values_equal(predicted: Any, reference: Any, *, string_match: str = "exact") -> bool:
    """Whether an argument value the model gave equals the reference value, as JSON values with sensible coercion.

    - numbers: `3`, `3.0` and `"3"` are equal; floats compare to a relative 1e-9; `"three"` is not a number;
    - booleans: `true` and `"true"` (any case) are equal; a boolean is never a number (`true` is not `1`);
    - strings: exactly, or with `string_match="normalized"` ignoring case and runs of white space;
    - objects: the same keys, in any order, with equal values; a key set to null counts as absent;
    - arrays: the same length and equal items in order (JSON arrays are ordered);
    - a string holding JSON (`"[1, 2]"`) is read as that JSON when the other side is an object or array;
    - null equals only null.
    """
    if predicted is None or reference is None:
        return predicted is None and reference is None
    if isinstance(predicted, bool) or isinstance(reference, bool):
        left, right = _as_bool(predicted), _as_bool(reference)
        return left is not None and left == right
    if isinstance(predicted, (int, float)) or isinstance(reference, (int, float)):
        left, right = _as_number(predicted), _as_number(reference)
        if left is None or right is None:
            return False
        if isinstance(left, int) and isinstance(right, int):
            return left == right
        return left == right or math.isclose(left, right, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(predicted, str) and isinstance(reference, str):
        if string_match == "normalized":
            return _normalize_string(predicted) == _normalize_string(reference)
        return predicted == reference
    if isinstance(predicted, str) != isinstance(reference, str):
        # Double-encoded containers: the model wrote an object or array as a JSON string (or the reference did).
        try:
            if isinstance(predicted, str):
                predicted = loads_json(predicted)
            else:
                reference = loads_json(reference)
        except ValueError:
            return False
        if isinstance(predicted, str) or isinstance(reference, str):
            return False
        return values_equal(predicted, reference, string_match=string_match)
    if isinstance(predicted, Mapping) and isinstance(reference, Mapping):
        predicted, reference = drop_nulls(predicted), drop_nulls(reference)
        return predicted.keys() == reference.keys() and all(
            values_equal(predicted[key], reference[key], string_match=string_match) for key in reference
        )
    if isinstance(predicted, Sequence) and isinstance(reference, Sequence):
        return len(predicted) == len(reference) and all(
            values_equal(left, right, string_match=string_match) for left, right in zip(predicted, reference)
        )
    return False


def call_match_score(
    predicted: ToolCall, reference: ToolCall, *, extra_arguments: str = "penalize", string_match: str = "exact"
) -> float | None:
    """How well a predicted call matches a reference call, in (0, 1]; None if the function names differ.

    The score is the fraction of items right, where the items are the function name (right, since the names
    match), each required reference argument, each optional one the model gave, and (with
    `extra_arguments="penalize"`) each argument the reference does not name. An argument set to null counts as
    not given, on both sides. Arguments that are not a JSON object get the name's credit only.
    """
    if predicted.name is None or predicted.name != reference.name:
        return None
    expected = drop_nulls(reference.arguments)
    if predicted.arguments is MALFORMED_ARGUMENTS:
        return 1.0 / (1 + max(len(expected), 1))
    given = drop_nulls(predicted.arguments)
    right = items = 1  # the name
    for key, value in expected.items():
        if key in given:
            items += 1
            right += values_equal(given[key], value, string_match=string_match)
        elif key not in reference.optional_arguments:
            items += 1  # a required argument left out
    if extra_arguments == "penalize":
        extra = [key for key in given if key not in expected and key not in reference.optional_arguments]
        items += len(extra)
    return right / items


def _pair_scores(predicted, reference, extra_arguments, string_match) -> list[list[float | None]]:
    return [
        [
            call_match_score(call, expected, extra_arguments=extra_arguments, string_match=string_match)
            for expected in reference
        ]
        for call in predicted
    ]


def _ratio(total: float, matched: int, num_predicted: int, num_reference: int, extra_call_penalty: float) -> float:
    denominator = num_reference + extra_call_penalty * (num_predicted - matched)
    return 1.0 if denominator == 0 else total / denominator


def best_call_matching(
    scores: Sequence[Sequence[float | None]],
    num_reference: int,
    *,
    call_order: str = "any",
    extra_call_penalty: float = 1.0,
) -> float:
    """The best score in [0, 1] over matchings of predicted calls (rows) to reference calls (columns).

    `scores[i][j]` is `call_match_score` of predicted call i with reference call j (None: cannot pair). A
    matching pairs each call at most once; with `call_order="strict"` the pairs must keep the order of both
    lists. Its score is `sum of pair scores / (num_reference + extra_call_penalty * unmatched predicted calls)`:
    a missing call costs its share of the reference, an extra call `extra_call_penalty` shares. With no
    reference call and no extra call the score is 1. Exact (dynamic programming) up to a size budget, greedy
    beyond it.
    """
    num_predicted = len(scores)
    if call_order == "strict":
        # best[k][j]: the highest total over order-preserving matchings of k pairs using the first j references.
        limit = min(num_predicted, num_reference)
        best = [[0.0] * (num_reference + 1)] + [[-math.inf] * (num_reference + 1) for _ in range(limit)]
        for row in scores:
            if all(score is None for score in row):
                continue
            for k in range(limit, 0, -1):
                for j in range(num_reference, 0, -1):
                    if row[j - 1] is not None:
                        best[k][j] = max(best[k][j], best[k - 1][j - 1] + row[j - 1])
            for k in range(limit + 1):
                for j in range(1, num_reference + 1):
                    best[k][j] = max(best[k][j], best[k][j - 1])
        return max(
            _ratio(best[k][num_reference], k, num_predicted, num_reference, extra_call_penalty)
            for k in range(limit + 1)
            if best[k][num_reference] > -math.inf
        )
    pairable = [i for i, row in enumerate(scores) if any(score is not None for score in row)]
    if len(pairable) * (2**num_reference) * max(num_reference, 1) > _EXACT_MATCHING_BUDGET:
        return _greedy_matching(scores, num_reference, extra_call_penalty)
    # best[mask]: the highest total over matchings that use exactly the reference calls in `mask`.
    best = {0: 0.0}
    for i in pairable:
        for mask, total in list(best.items()):
            for j, score in enumerate(scores[i]):
                if score is not None and not mask >> j & 1:
                    key = mask | 1 << j
                    if best.get(key, -1.0) < total + score:
                        best[key] = total + score
    return max(
        _ratio(total, mask.bit_count(), num_predicted, num_reference, extra_call_penalty)
        for mask, total in best.items()
    )


def _greedy_matching(scores, num_reference: int, extra_call_penalty: float) -> float:
    pairs = sorted(
        ((score, i, j) for i, row in enumerate(scores) for j, score in enumerate(row) if score is not None),
        reverse=True,
    )
    used_predicted, used_reference, total = set(), set(), 0.0
    for score, i, j in pairs:
        if i not in used_predicted and j not in used_reference:
            used_predicted.add(i)
            used_reference.add(j)
            total += score
    return _ratio(total, len(used_predicted), len(scores), num_reference, extra_call_penalty)


def score_tool_calls(
    predicted: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    *,
    partial_credit: bool = False,
    call_order: str = "any",
    extra_call_penalty: float = 1.0,
    extra_arguments: str = "penalize",
    string_match: str = "exact",
) -> float:
    """Score in [0, 1] of the calls a completion made against the expected ones (see `best_call_matching` and
    `call_match_score`). Without `partial_credit` it is 1 when that score is 1 (every expected call made with
    the right arguments, no extra call unless `extra_call_penalty` is 0) and 0 otherwise."""
    scores = _pair_scores(predicted, reference, extra_arguments, string_match)
    value = best_call_matching(scores, len(reference), call_order=call_order, extra_call_penalty=extra_call_penalty)
    if partial_credit:
        return value
    return 1.0 if value >= 1.0 - 1e-9 else 0.0


# --------------------------------------------------------------------------------------------------------------
# The reward


def _check_choice(value: Any, choices: Sequence[str], argument: str) -> None:
    if value not in choices:
        raise ValueError(f"Reward 'tool_call': {argument} must be one of {list(choices)}, got {value!r}.")


@register_reward("tool_call", aliases=("function_call",))
class ToolCallReward(Reward):
    """The completion calls the reference functions with the reference arguments (Hermes/Qwen, JSON, `tool_calls`).

    Args:
        reference_column: dataset column with the expected calls per row: a call `{"name": ..., "arguments":
            {...}}` (OpenAI's `{"type": "function", "function": {...}}` and Llama's `parameters` also work), a
            list of calls (`[]`: the model should call nothing), or an assistant message with `tool_calls`; best
            stored as a JSON string (Arrow merges the keys of every row's arguments into one struct and refuses
            an argument whose type differs between rows). A call may list `optional_arguments`.
        partial_credit: False: 1 only if the calls are exactly right, else 0. True: the fraction earned, where
            each expected call is worth one share (split between its name and its arguments) and each extra call
            costs `extra_call_penalty` shares.
        call_order: "any" (calls made in one turn are usually independent) or "strict" (matched calls must come
            in the reference's order).
        extra_call_penalty: shares an unexpected call costs (0: extra calls are free); >= 0.
        extra_arguments: "penalize" (an argument the reference does not name is wrong, as a tool would receive
            it) or "ignore".
        string_match: "exact", or "normalized" (ignore case and runs of white space in string values).
        formats: text forms of a call to read: "hermes" (`<tool_call>` blocks) and/or "json" (function-call
            objects in the text); `[]` reads only a conversational completion's `tool_calls` fields, which are
            always read.
        scoring: "binary" (1 / 0, partial credit in between) or "dapo" (+1 / -1, partial credit in between).

    Returns None for a row whose reference is missing or unusable (not JSON, a call without a name, arguments
    that are not an object).
    """

    def __init__(
        self,
        reference_column: str = "tool_calls",
        partial_credit: bool = False,
        call_order: Literal["any", "strict"] = "any",
        extra_call_penalty: float = 1.0,
        extra_arguments: Literal["penalize", "ignore"] = "penalize",
        string_match: Literal["exact", "normalized"] = "exact",
        formats: Sequence[str] = TEXT_FORMATS,
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="tool_call")
        if not isinstance(reference_column, str) or not reference_column:
            raise ValueError(f"Reward 'tool_call': reference_column must be a column name, got {reference_column!r}.")
        if not isinstance(partial_credit, bool):
            raise ValueError(f"Reward 'tool_call': partial_credit must be true or false, got {partial_credit!r}.")
        _check_choice(call_order, ("any", "strict"), "call_order")
        _check_choice(extra_arguments, ("penalize", "ignore"), "extra_arguments")
        _check_choice(string_match, ("exact", "normalized"), "string_match")
        if (
            isinstance(extra_call_penalty, bool)
            or not isinstance(extra_call_penalty, (int, float))
            or not extra_call_penalty >= 0
            or not math.isfinite(extra_call_penalty)
        ):
            raise ValueError(
                f"Reward 'tool_call': extra_call_penalty must be a number >= 0, got {extra_call_penalty!r}."
            )
        if isinstance(formats, str):
            formats = [formats]
        formats = list(formats)
        unknown = [name for name in formats if name not in TEXT_FORMATS]
        if unknown:
            raise ValueError(f"Reward 'tool_call': formats must be a list from {list(TEXT_FORMATS)}, got {formats!r}.")
        self.reference_column = reference_column
        self.partial_credit = partial_credit
        self.call_order = call_order
        self.extra_call_penalty = float(extra_call_penalty)
        self.extra_arguments = extra_arguments
        self.string_match = string_match
        self.formats = formats
        self.scoring = scoring

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        # The raw completions, not their text: a conversational completion's calls live in `tool_calls` fields.
        if completions is None:
            raise TypeError(f"Reward {self.__name__!r} needs `completions`.")
        references = dataset_column(
            columns, self.reference_column, len(completions), reward=self.__name__, argument="reference_column"
        )
        return [self.judge(completion, reference) for completion, reference in zip(completions, references)]

    def judge(self, completion: Any, reference: Any) -> float | None:
        """The reward of one completion against one reference value (None if the reference is unusable)."""
        expected = parse_reference_calls(reference)
        if expected is None:
            return None
        value = score_tool_calls(
            parse_tool_calls(completion, self.formats),
            expected,
            partial_credit=self.partial_credit,
            call_order=self.call_order,
            extra_call_penalty=self.extra_call_penalty,
            extra_arguments=self.extra_arguments,
            string_match=self.string_match,
        )
        return self.incorrect_score + value * (self.correct_score - self.incorrect_score)
