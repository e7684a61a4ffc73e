"""Reading tool calls: from a completion (`parse_tool_calls`) and from a dataset's reference (`parse_reference_calls`).

The forms read are those `tool_call` (`trl_ext.rewards.tool_call`) documents: the `tool_calls` field of assistant
messages, `<tool_call>` blocks (Hermes, Qwen, and their XML variants), and JSON function-call objects in free text.
A call whose arguments cannot be decoded is kept, marked `MALFORMED_ARGUMENTS`, so that it scores as a wrong call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import message_text

TEXT_FORMATS = ("hermes", "json")
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", flags=re.DOTALL)
_QWEN_XML_FUNCTION = re.compile(r"<function=([^\n>]+)>")
_QWEN_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*)", flags=re.DOTALL)
_GLM_FUNCTION = re.compile(r"[^\s<>{}\[\]\"]+")
_GLM_ARGUMENT = re.compile(r"<arg_key>([^<]+)</arg_key>\s*<arg_value>(.*)", flags=re.DOTALL)
_OBJECT_START = re.compile(r'\{\s*"')
# Free-text JSON objects that fail to decode before the scan of a completion gives up.
_MAX_FAILED_DECODES = 1000


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


def loads_json(text: str) -> Any:
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
            arguments = loads_json(arguments)
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
            value = loads_json(block)
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


def drop_nulls(arguments: Mapping[str, Any]) -> dict[str, Any]:
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
            reference = loads_json(reference)
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
