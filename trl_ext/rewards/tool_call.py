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
name absent from the reference's `arguments` may take any value). The scoring functions here are pure and are
tested on their own; `ToolCallReward` wires them to TRL's reward signature.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .base import Reward, dataset_column, message_text, scores_for
from .registry import register_reward

__all__ = [
    "ToolCall",
    "ToolCallReward",
    "best_call_matching",
    "call_match_score",
    "parse_reference_calls",
    "parse_tool_calls",
    "score_tool_calls",
    "values_equal",
]

TEXT_FORMATS = ("hermes", "json")
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", flags=re.DOTALL)
_QWEN_XML_FUNCTION = re.compile(r"<function=([^\n>]+)>")
_QWEN_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*)", flags=re.DOTALL)
_GLM_FUNCTION = re.compile(r"[^\s<>{}\[\]\"]+")
_GLM_ARGUMENT = re.compile(r"<arg_key>([^<]+)</arg_key>\s*<arg_value>(.*)", flags=re.DOTALL)
_OBJECT_START = re.compile(r'\{\s*"')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_JSON_INTEGER = re.compile(r"-?(?:0|[1-9]\d*)")
# Free-text JSON objects that fail to decode before the scan of a completion gives up.
_MAX_FAILED_DECODES = 1000
# Above this many (pairable predicted calls) x (reference subsets) x (reference calls), the exact matching gives
# way to a greedy one: a reference with more than a dozen calls is rare, a model spamming calls is not.
_EXACT_MATCHING_BUDGET = 200_000


class _Malformed:
    """Arguments that are not a JSON object (a string that does not parse, a number, a list)."""

    def __repr__(self) -> str:
        return "MALFORMED"

    def __reduce__(self):
        return "MALFORMED_ARGUMENTS"


MALFORMED_ARGUMENTS = _Malformed()


@dataclass(frozen=True)
class ToolCall:
    """One function call. `name` is None for a call the model attempted but wrote unreadably (a `<tool_call>`
    block that is not JSON, or not closed): it matches nothing and counts as an extra call. `arguments` is
    `MALFORMED_ARGUMENTS` when the call names a function but its arguments are not a JSON object.
    `optional_arguments` is only used on reference calls."""

    name: str | None
    arguments: Mapping[str, Any] | _Malformed = field(default_factory=dict)
    optional_arguments: frozenset[str] = frozenset()


MALFORMED_CALL = ToolCall(None, MALFORMED_ARGUMENTS)


# --------------------------------------------------------------------------------------------------------------
# Reading calls


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")  # NaN / Infinity: Python's json accepts them, JSON does not


def _loads(text: str) -> Any:
    """A JSON value, or raise ValueError."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("too deeply nested") from None


def _arguments_of(function: Mapping[str, Any]) -> Mapping[str, Any] | _Malformed:
    """The arguments object of a call: `arguments` (an object or, as in OpenAI's API, a JSON string) or Llama's
    `parameters`; missing or null means no arguments, as TRL normalises them."""
    arguments = function.get("arguments", function.get("parameters"))
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = _loads(arguments)
        except ValueError:
            return MALFORMED_ARGUMENTS
    return arguments if isinstance(arguments, Mapping) else MALFORMED_ARGUMENTS


def _function_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The `{name, arguments}` part of a call object: OpenAI's `function` (or legacy `function_call`) member,
    else the object itself; None if it names no function."""
    for key in ("function", "function_call"):
        if isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    name = obj.get("name")
    return obj if isinstance(name, str) and name.strip() else None


def _call_from_object(obj: Any) -> ToolCall | None:
    """A ToolCall from a call object in any of the accepted shapes, or None if `obj` is not one."""
    if not isinstance(obj, Mapping):
        return None
    function = _function_of(obj)
    if function is None:
        return None
    return ToolCall(function["name"].strip(), _arguments_of(function))


def _looks_like_call(obj: Any) -> bool:
    """A JSON object in free text counts as a call only if it has the keys of one: a name and arguments (or
    parameters), or an OpenAI `function` member. `{"name": "Ada"}` alone is data, not a call."""
    if not isinstance(obj, Mapping):
        return False
    if isinstance(obj.get("function"), Mapping) or isinstance(obj.get("function_call"), Mapping):
        return _function_of(obj) is not None
    return isinstance(obj.get("name"), str) and ("arguments" in obj or "parameters" in obj)


def _calls_in_json_value(value: Any) -> list[ToolCall]:
    """Calls in a decoded JSON object from free text: the object itself, or an assistant message's `tool_calls`."""
    if _looks_like_call(value):
        return [_call_from_object(value)]
    if isinstance(value, Mapping) and isinstance(value.get("tool_calls"), list):
        return [_call_from_object(item) or MALFORMED_CALL for item in value["tool_calls"]]
    return []


def _json_calls_in_text(text: str) -> list[ToolCall]:
    """Function-call objects anywhere in the text (whole, in a code fence, after a `[TOOL_CALLS]` marker or in
    prose), left to right. An object that is not a call is skipped whole, so a call-shaped value nested in other
    data is not taken for a call; arrays of calls are read element by element."""
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    calls, position, failures = [], 0, 0
    # Only an object with a first key can be a call: skipping `{{`, `{}` and TeX groups keeps long texts fast.
    while (found := _OBJECT_START.search(text, position)) is not None:
        start = found.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as error:
            # What the decoder read before failing lies inside one broken object: not calls of their own.
            position = max(start + 1, error.pos)
            failures += 1
            if failures > _MAX_FAILED_DECODES:
                break  # each failure costs O(position) (the error counts lines): bound degenerate output
            continue
        except RecursionError:
            break  # nesting past Python's recursion limit: degenerate output, and every later start would recurse
        except ValueError:
            position = start + 1
            continue
        calls.extend(_calls_in_json_value(value))
        position = end
    return calls


def _tagged_arguments(body: str, open_tag: str, pattern: re.Pattern, close_tag: str) -> dict[str, str]:
    """`{key: value}` from `open_tag...close_tag` pairs, in linear time: each value ends at the next `close_tag`,
    and its pair starts at the last `open_tag` before it (a regex with a lazy group would rescan the rest of the
    text for every unclosed tag of a degenerate completion)."""
    arguments = {}
    for chunk in body.split(close_tag)[:-1]:
        position = chunk.rfind(open_tag)
        match = pattern.match(chunk, position) if position != -1 else None
        if match:
            arguments[match.group(1).strip()] = match.group(2).strip()
    return arguments


def _xml_call(block: str) -> ToolCall | None:
    """A call written as tags inside a `<tool_call>` block, as the Qwen3.5 / Nemotron 3 templates render it
    (`<function=NAME><parameter=KEY>VALUE</parameter>...</function>`) or the GLM-4 ones (`NAME<arg_key>KEY
    </arg_key><arg_value>VALUE</arg_value>...`). Values stay text, as TRL keeps them without a tool schema;
    `values_equal` reads `"3"` as 3 and `"true"` as true."""
    match = _QWEN_XML_FUNCTION.match(block)
    if match:
        body = block[match.end() :].rstrip().removesuffix("</function>")
        return ToolCall(
            match.group(1).strip(), _tagged_arguments(body, "<parameter=", _QWEN_XML_PARAMETER, "</parameter>")
        )
    match = _GLM_FUNCTION.match(block)
    if match:
        body = block[match.end() :]
        arguments = _tagged_arguments(body, "<arg_key>", _GLM_ARGUMENT, "</arg_value>")
        if arguments or not body.strip():
            return ToolCall(match.group(0), arguments)
    return None


def _hermes_calls_in_text(text: str) -> list[ToolCall] | None:
    """Calls in `<tool_call>...</tool_call>` blocks, or None if the text has no such block. A block holds one
    JSON call, a JSON array of calls, or one call in the tag forms of `_xml_call`; a block that is none of these,
    or is not closed (truncated), is an unreadable call."""
    if "<tool_call>" not in text:
        return None
    calls = []
    for match in _TOOL_CALL_BLOCK.finditer(text):
        if not match.group(0).endswith("</tool_call>"):
            calls.append(MALFORMED_CALL)
            continue
        block = match.group(1).strip()
        try:
            value = _loads(block)
        except ValueError:
            calls.append(_xml_call(block) or MALFORMED_CALL)
            continue
        items = value if isinstance(value, list) else [value]
        calls.extend(_call_from_object(item) or MALFORMED_CALL for item in items)
    return calls


def _calls_in_text(text: str, formats: Sequence[str]) -> list[ToolCall]:
    if "hermes" in formats:
        calls = _hermes_calls_in_text(text)
        if calls is not None:
            return calls
    return _json_calls_in_text(text) if "json" in formats else []


def _calls_in_message(message: Mapping[str, Any], formats: Sequence[str]) -> list[ToolCall]:
    tool_calls = message.get("tool_calls")
    if tool_calls:
        return [_call_from_object(item) or MALFORMED_CALL for item in tool_calls]
    return _calls_in_text(message_text(message), formats)


def parse_tool_calls(completion: Any, formats: Sequence[str] = TEXT_FORMATS) -> list[ToolCall]:
    """The tool calls a completion makes, in order.

    `completion` is a string (plain-text datasets), one message, or a list of messages (conversational
    datasets: every `assistant` message counts, tool results and other roles do not). `formats` are the text
    forms read: "hermes" (`<tool_call>` blocks; when a text has any, only they count) and "json" (function-call
    objects in the text). A message's `tool_calls` field is always read.
    """
    if completion is None:
        return []
    if isinstance(completion, str):
        return _calls_in_text(completion, formats)
    if isinstance(completion, Mapping):
        return _calls_in_message(completion, formats)
    if isinstance(completion, Sequence):
        calls = []
        for message in completion:
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                calls.extend(_calls_in_message(message, formats))
        return calls
    raise TypeError(f"A completion must be a string or a list of chat messages, got {type(completion).__name__}.")


def _drop_nulls(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in arguments.items() if value is not None}


def _reference_call(obj: Any) -> ToolCall | None:
    """A reference call with its `optional_arguments`, or None if `obj` is not a usable call."""
    call = _call_from_object(obj)
    if call is None or call.arguments is MALFORMED_ARGUMENTS:
        return None
    optional = obj.get("optional_arguments")
    if optional is None and isinstance(obj.get("function"), Mapping):
        optional = obj["function"].get("optional_arguments")
    if optional is None:
        optional = ()
    if isinstance(optional, str) or not isinstance(optional, Iterable):
        return None
    optional = list(optional)
    if not all(isinstance(name, str) for name in optional):
        return None
    return ToolCall(call.name, call.arguments, frozenset(optional))


def parse_reference_calls(reference: Any) -> list[ToolCall] | None:
    """The expected calls from one reference value, or None when it is missing or unusable.

    Accepted: a call object, a list of call objects (`[]` means no call is expected), or an assistant message
    `{"tool_calls": [...]}`; either as the structure itself or as a JSON string. Any call in it that has no
    name, or arguments that are not an object, makes the whole reference unusable.
    """
    if reference is None:
        return None
    if isinstance(reference, str):
        if not reference.strip():
            return None
        try:
            reference = _loads(reference)
        except ValueError:
            return None
    if isinstance(reference, Mapping) and "tool_calls" in reference and _function_of(reference) is None:
        reference = reference["tool_calls"] or []
    if isinstance(reference, Mapping):
        reference = [reference]
    if isinstance(reference, (str, bytes)) or not isinstance(reference, Sequence):
        return None
    calls = [_reference_call(item) for item in reference]
    return None if any(call is None for call in calls) else calls


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
                predicted = _loads(predicted)
            else:
                reference = _loads(reference)
        except ValueError:
            return False
        if isinstance(predicted, str) or isinstance(reference, str):
            return False
        return values_equal(predicted, reference, string_match=string_match)
    if isinstance(predicted, Mapping) and isinstance(reference, Mapping):
        predicted, reference = _drop_nulls(predicted), _drop_nulls(reference)
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
    expected = _drop_nulls(reference.arguments)
    if predicted.arguments is MALFORMED_ARGUMENTS:
        return 1.0 / (1 + max(len(expected), 1))
    given = _drop_nulls(predicted.arguments)
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
