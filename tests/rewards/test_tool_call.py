"""`tool_call`: reading calls in every form TRL produces, comparing them with a reference, scoring, the registry."""

from __future__ import annotations

import itertools
import json
import math
import os
import pickle
import time

import pytest
import trl
import yaml
from datasets import Dataset
from hypothesis import given, settings
from hypothesis import strategies as st
from trl.chat_template_utils import add_response_schema, parse_response
from trl.trainer.utils import get_callable_name

from trl_ext.rewards import build_reward_funcs, call_reward, check_reward_columns, get_reward, list_rewards
from trl_ext.rewards.tool_call import (
    MALFORMED_ARGUMENTS,
    MALFORMED_CALL,
    ToolCall,
    ToolCallReward,
    best_call_matching,
    call_match_score,
    parse_reference_calls,
    parse_tool_calls,
    score_tool_calls,
    values_equal,
)
from trl_ext.tiny import build_char_tokenizer

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
TIME = {"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}


def call(name, **arguments):
    return ToolCall(name, arguments)


def hermes(*calls) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)


def judge(completion, reference, **kwargs):
    return ToolCallReward(**kwargs).judge(completion, reference)


# ----------------------------------------------------------------------------------------------------------------
# Reading calls from completions


def test_hermes_blocks_several_per_completion_with_reasoning_around():
    text = "<think>I need the weather and the time.</think>\n" + hermes(WEATHER, TIME) + "\nDone."
    assert parse_tool_calls(text) == [
        call("get_weather", city="Paris", days=3),
        call("get_time", timezone="Europe/Paris"),
    ]


def test_hermes_block_may_hold_an_array_of_calls():
    assert parse_tool_calls(f"<tool_call>{json.dumps([WEATHER, TIME])}</tool_call>") == [
        call("get_weather", city="Paris", days=3),
        call("get_time", timezone="Europe/Paris"),
    ]


@pytest.mark.parametrize(
    "block",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"',  # JSON cut short
        '{"arguments": {"city": "Paris"}}',  # no name
        "I would like to call the weather tool",  # prose
        "",
    ],
)
def test_unreadable_hermes_block_is_a_call_that_matches_nothing(block):
    calls = parse_tool_calls(f"<tool_call>{block}</tool_call>")
    assert calls == [MALFORMED_CALL]
    # It counts as an extra call: the right call next to it is not enough for full marks.
    text = hermes(WEATHER) + f"<tool_call>{block}</tool_call>"
    assert judge(text, json.dumps(WEATHER)) == 0.0
    assert judge(text, json.dumps(WEATHER), partial_credit=True) == 0.5


def test_unclosed_hermes_block_is_unreadable():
    text = hermes(WEATHER) + '\n<tool_call>\n{"name": "get_time", "arguments": {}}'  # truncated before the close
    assert parse_tool_calls(text) == [call("get_weather", city="Paris", days=3), MALFORMED_CALL]


def test_with_hermes_blocks_json_outside_them_is_not_a_call():
    text = 'Example: {"name": "get_time", "arguments": {}}\n' + hermes(WEATHER)
    assert parse_tool_calls(text) == [call("get_weather", city="Paris", days=3)]
    # Reading only JSON objects, both count (the one inside the tags too).
    assert [c.name for c in parse_tool_calls(text, formats=["json"])] == ["get_time", "get_weather"]
    assert parse_tool_calls(json.dumps(WEATHER), formats=["hermes"]) == []


def test_qwen35_and_glm_tag_forms_inside_tool_call_blocks():
    qwen35 = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    )
    glm = (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
    )
    for text in (qwen35, glm):
        assert parse_tool_calls(text) == [call("get_weather", city="Paris", days="3")]
        assert judge(text, json.dumps(WEATHER)) == 1.0  # "3" written as text equals the reference's 3
    assert parse_tool_calls("<tool_call>get_time</tool_call>") == [call("get_time")]  # GLM, no arguments
    assert parse_tool_calls("<tool_call>get time now</tool_call>") == [MALFORMED_CALL]


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(WEATHER),
        json.dumps([WEATHER]),
        '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}',  # Llama 3.1 / 3.2
        json.dumps(
            {"type": "function", "function": {"name": "get_weather", "arguments": json.dumps(WEATHER["arguments"])}}
        ),
        json.dumps({"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": WEATHER}]}),
        json.dumps({"function_call": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}}),
        "Let me check.\n```json\n" + json.dumps(WEATHER, indent=2) + "\n```",
        "[TOOL_CALLS]" + json.dumps([WEATHER]),
        "I'll call " + json.dumps(WEATHER) + " now.",
    ],
    ids=["object", "array", "llama", "openai", "message", "function_call", "fence", "mistral", "prose"],
)
def test_json_function_call_objects(text):
    assert parse_tool_calls(text) == [call("get_weather", city="Paris", days=3)]
    assert judge(text, json.dumps(WEATHER)) == 1.0


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Ada", "age": 36}',  # data with a name, no arguments
        '{"result": {"name": "get_weather", "arguments": {"city": "Paris"}}}',  # a call nested in other data
        r"The answer is \frac{1}{2} and {x | x > 0}.",
        '{"name": "get_weather", "arguments": {"city": NaN}}',  # NaN is not JSON
        "",
    ],
)
def test_text_without_a_call(text):
    assert parse_tool_calls(text) == []


def test_arguments_that_are_not_an_object():
    (parsed,) = parse_tool_calls('{"name": "get_weather", "arguments": "city=Paris"}')
    assert parsed == ToolCall("get_weather", MALFORMED_ARGUMENTS)
    assert (
        judge('{"name": "get_weather", "arguments": "city=Paris"}', json.dumps(WEATHER), partial_credit=True) == 1 / 3
    )


def test_conversational_tool_calls_field_in_every_assistant_turn():
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": WEATHER}]},
        {"role": "tool", "name": "get_weather", "content": '{"name": "x", "arguments": {}}'},  # a result, not a call
        {"role": "assistant", "content": hermes(TIME)},  # a turn TRL could not parse keeps its text
        {"role": "assistant", "content": "It is sunny."},
    ]
    assert parse_tool_calls(completion) == [
        call("get_weather", city="Paris", days=3),
        call("get_time", timezone="Europe/Paris"),
    ]
    assert judge(completion, json.dumps([TIME, WEATHER])) == 1.0
    assert parse_tool_calls(completion[0]) == [call("get_weather", city="Paris", days=3)]  # a single message
    # TRL's loop sends `arguments` as parsed objects; the OpenAI API sends JSON strings. Both read the same.
    as_string = [
        {
            "role": "assistant",
            "tool_calls": [
                {"type": "function", "function": {**WEATHER, "arguments": json.dumps(WEATHER["arguments"])}}
            ],
        }
    ]
    assert parse_tool_calls(as_string) == parse_tool_calls(completion[:1])


# The chat templates TRL ships that render tool calls as text this reward reads (the others, such as Gemma 4,
# GPT-OSS and LFM2, are read through the `tool_calls` field TRL's `parse_response` fills).
TEMPLATES = ["qwen2_5", "qwen3", "qwen3_instruct_2507", "qwen3_vl", "qwen3_5_nothink", "qwen3_5_think", "qwen3_6",
             "qwen3_8", "glm4moe", "llama3_1", "llama3_2"]  # fmt: skip
TEMPLATE_CALLS = [
    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "metric": True, "hours": [9, 12]}},
    {"name": "get_time", "arguments": {}},
]


def get_weather(city: str, days: int, metric: bool, hours: list[int]):
    """Weather forecast.

    Args:
        city: City name.
        days: Number of days.
        metric: Metric units.
        hours: Hours of the day.
    """


def get_time():
    """The current time."""


@pytest.mark.parametrize("template", TEMPLATES)
def test_calls_rendered_by_trl_chat_templates(template):
    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", f"{template}.jinja")) as file:
        tokenizer.chat_template = file.read()
    calls = TEMPLATE_CALLS[:1] if template.startswith("llama") else TEMPLATE_CALLS  # Llama: one call per turn
    messages = [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": c} for c in calls]},
    ]
    tools = [get_weather, get_time]
    full = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    prompt = tokenizer.apply_chat_template(messages[:1], tools=tools, tokenize=False, add_generation_prompt=True)
    assert full.startswith(prompt)
    text = full[len(prompt) :]
    reference = json.dumps(calls)
    assert len(parse_tool_calls(text)) == len(calls)
    assert judge(text, reference) == 1.0, text
    assert judge(text, json.dumps(calls[::-1]), call_order="strict") == (1.0 if len(calls) == 1 else 0.0)

    # What TRL's trainer hands a reward for a conversational dataset: the message `parse_response` builds.
    add_response_schema(tokenizer)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    prefix = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    message = parse_response(tokenizer, ids, prefix=prefix, tools=tools)
    assert len(message.get("tool_calls") or []) == len(calls), message
    assert judge([message], reference) == 1.0
    wrong = json.dumps([{**calls[0], "arguments": {**calls[0]["arguments"], "city": "Lyon"}}, *calls[1:]])
    assert judge(text, wrong) == judge([message], wrong) == 0.0


@pytest.mark.parametrize("template", ["gemma4", "gptoss", "lfm2_2_5"])
def test_other_templates_are_read_through_trls_parsed_messages(template):
    # Their text forms (`<|tool_call>call:...`, `to=functions....<|call|>`, Python-style calls) are not read as
    # text; TRL's `parse_response` turns them into the `tool_calls` field this reward reads.
    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", f"{template}.jinja")) as file:
        tokenizer.chat_template = file.read()
    calls = TEMPLATE_CALLS[:1] if template == "gptoss" else TEMPLATE_CALLS
    messages = [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": c} for c in calls]},
    ]
    tools = [get_weather, get_time]
    full = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    prompt = tokenizer.apply_chat_template(messages[:1], tools=tools, tokenize=False, add_generation_prompt=True)
    text = full[len(prompt) :]
    assert parse_tool_calls(text) == []
    add_response_schema(tokenizer)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    prefix = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    message = parse_response(tokenizer, ids, prefix=prefix, tools=tools)
    assert judge([message], json.dumps(calls)) == 1.0


# ----------------------------------------------------------------------------------------------------------------
# References


@pytest.mark.parametrize(
    "reference",
    [
        json.dumps(WEATHER),
        WEATHER,
        [WEATHER],
        json.dumps([{"type": "function", "function": WEATHER}]),
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": WEATHER}]},
        {"name": "get_weather", "parameters": {"city": "Paris", "days": 3}},
    ],
)
def test_reference_forms(reference):
    assert parse_reference_calls(reference) == [call("get_weather", city="Paris", days=3)]


def test_empty_reference_means_no_call_expected():
    assert parse_reference_calls("[]") == parse_reference_calls({"role": "assistant", "tool_calls": None}) == []
    assert judge("It is sunny in Paris.", "[]") == 1.0
    assert judge(hermes(WEATHER), "[]") == 0.0
    assert judge(hermes(WEATHER), "[]", partial_credit=True) == 0.0
    assert judge(hermes(WEATHER), "[]", extra_call_penalty=0.0) == 1.0  # extra calls free: nothing to miss


@pytest.mark.parametrize(
    "reference",
    [
        None,
        "",
        "  ",
        "get_weather(city='Paris')",  # not JSON
        '{"arguments": {"city": "Paris"}}',  # no name
        '{"name": "", "arguments": {}}',
        '{"name": "get_weather", "arguments": [1, 2]}',  # arguments not an object
        '{"name": "get_weather", "arguments": "not json"}',
        json.dumps([WEATHER, {"name": 3}]),  # one bad call spoils the reference
        '{"name": "get_weather", "arguments": {}, "optional_arguments": "days"}',
        '{"name": "get_weather", "arguments": {}, "optional_arguments": [1]}',
        "42",
    ],
)
def test_unusable_reference_is_none(reference):
    assert parse_reference_calls(reference) is None
    assert judge(hermes(WEATHER), reference) is None
    assert judge(hermes(WEATHER), reference, partial_credit=True, scoring="dapo") is None


def test_reference_column_stored_by_arrow_as_structs():
    # Arrow merges the keys of every row's arguments and fills the missing ones with null.
    dataset = Dataset.from_dict(
        {
            "tool_calls": [
                [WEATHER],
                [{"name": "get_time", "arguments": {"timezone": "UTC"}, "optional_arguments": ["timezone"]}],
                [],
            ]
        }
    )
    stored = dataset["tool_calls"]
    assert stored[0][0]["arguments"]["timezone"] is None  # the merge this test is about
    completions = [hermes(WEATHER), hermes({"name": "get_time", "arguments": {}}), "no call"]
    assert call_reward(get_reward("tool_call"), completions=completions, tool_calls=list(stored)) == [1.0, 1.0, 1.0]


# ----------------------------------------------------------------------------------------------------------------
# Comparing values and calls


@pytest.mark.parametrize(
    ("predicted", "reference", "equal"),
    [
        (3, 3, True),
        ("3", 3, True),
        (3, "3", True),
        (3.0, 3, True),
        (" 2.50 ", 2.5, True),
        ("1e3", 1000, True),
        (0.1 + 0.2, 0.3, True),
        ("three", 3, False),
        ("3 days", 3, False),
        ("0x10", 16, False),
        ("inf", float("inf"), False),
        (4, 3, False),
        (True, True, True),
        ("true", True, True),
        ("False", False, True),
        (True, 1, False),
        (1, True, False),
        ("yes", True, False),
        ("Paris", "Paris", True),
        ("paris", "Paris", False),
        ("3", "3.0", False),  # two strings compare as strings
        (None, None, True),
        (None, 0, False),
        ("", None, False),
        ({"b": 2, "a": 1}, {"a": 1, "b": 2}, True),
        ({"a": 1, "b": None}, {"a": 1}, True),
        ({"a": 1, "b": 2}, {"a": 1}, False),
        ({"a": "1"}, {"a": 1}, True),
        ([1, 2], [1, 2], True),
        ([2, 1], [1, 2], False),
        ([1, 2], [1, 2, 3], False),
        ("[1, 2]", [1, 2], True),
        ('{"a": 1}', {"a": 1}, True),
        ("[1, 2", [1, 2], False),
        ('"[1, 2]"', [1, 2], False),
        ([1], 1, False),
        ({"a": 1}, "a", False),
    ],
)
def test_values_equal(predicted, reference, equal):
    assert values_equal(predicted, reference) is equal


def test_normalized_strings():
    assert values_equal(" New  york ", "New York", string_match="normalized")
    assert not values_equal(" New  york ", "New York")
    assert (
        judge(
            hermes({"name": "f", "arguments": {"city": "paris"}}),
            '{"name": "f", "arguments": {"city": "Paris"}}',
            string_match="normalized",
        )
        == 1.0
    )


def test_call_match_score_counts_name_and_arguments():
    reference = ToolCall("f", {"a": 1, "b": "x"})
    assert call_match_score(call("g", a=1, b="x"), reference) is None
    assert call_match_score(call("f", b="x", a="1"), reference) == 1.0
    assert call_match_score(call("f", a=2, b="x"), reference) == 2 / 3
    assert call_match_score(call("f", a=1), reference) == 2 / 3  # required `b` left out
    assert call_match_score(call("f", a=1, b="x", c=0), reference) == 3 / 4  # extra argument
    assert call_match_score(call("f", a=1, b="x", c=0), reference, extra_arguments="ignore") == 1.0
    assert call_match_score(call("f", a=1, b="x", c=None), reference) == 1.0  # null counts as not given
    assert call_match_score(call("f"), reference) == 1 / 3
    assert call_match_score(ToolCall("f", MALFORMED_ARGUMENTS), reference) == 1 / 3
    assert call_match_score(ToolCall("f", MALFORMED_ARGUMENTS), ToolCall("f", {})) == 1 / 2
    assert call_match_score(MALFORMED_CALL, reference) is None


def test_optional_arguments():
    reference = json.dumps(
        {
            "name": "get_weather",
            "arguments": {"city": "Paris", "unit": "celsius"},
            "optional_arguments": ["unit", "lang"],
        }
    )

    def made(**arguments):
        return hermes({"name": "get_weather", "arguments": arguments})

    assert judge(made(city="Paris"), reference) == 1.0  # optional left out
    assert judge(made(city="Paris", unit="celsius"), reference) == 1.0
    assert judge(made(city="Paris", unit="kelvin"), reference) == 0.0  # given, so it must match
    assert judge(made(city="Paris", lang="fr"), reference) == 1.0  # optional without a value: any value
    assert judge(made(unit="celsius"), reference) == 0.0  # the required one is still required
    assert judge(made(city="Paris", unit="kelvin"), reference, partial_credit=True) == 2 / 3


def test_call_order():
    reference = json.dumps([WEATHER, TIME])
    swapped = hermes(TIME, WEATHER)
    assert judge(swapped, reference) == 1.0
    assert judge(swapped, reference, call_order="strict") == 0.0
    # One call in order; the other is both missing from its place and an extra call: 1 / (2 + 1).
    assert judge(swapped, reference, call_order="strict", partial_credit=True) == 1 / 3
    assert judge(hermes(WEATHER, TIME), reference, call_order="strict") == 1.0
    # An extra call does not shift the alignment of the others.
    assert judge(hermes(TIME, WEATHER, TIME), reference, call_order="strict", partial_credit=True) == 2 / 3


def test_partial_credit_and_extra_call_penalty():
    reference = json.dumps([WEATHER, TIME])
    assert judge(hermes(WEATHER), reference, partial_credit=True) == 0.5  # one call missing
    assert judge(hermes(WEATHER, TIME, TIME), reference, partial_credit=True) == 2 / 3
    assert judge(hermes(WEATHER, TIME, TIME), reference, partial_credit=True, extra_call_penalty=0.5) == 2 / 2.5
    assert judge(hermes(WEATHER, TIME, TIME), reference, partial_credit=True, extra_call_penalty=0.0) == 1.0
    assert judge(hermes(WEATHER, TIME, TIME), reference, extra_call_penalty=0.0) == 1.0
    assert judge(hermes(WEATHER, TIME, TIME), reference) == 0.0
    wrong_city = {"name": "get_weather", "arguments": {"city": "Lyon", "days": 3}}
    assert judge(hermes(wrong_city, TIME), reference, partial_credit=True) == (2 / 3 + 1) / 2
    assert judge(hermes(wrong_city, TIME), reference) == 0.0
    assert judge("no call", reference, partial_credit=True) == 0.0


def test_repeated_function_names_are_matched_to_the_best_reference():
    reference = json.dumps([{"name": "f", "arguments": {"x": 1, "y": 1}}, {"name": "f", "arguments": {"x": 2, "y": 2}}])
    made = hermes({"name": "f", "arguments": {"x": 2, "y": 2}}, {"name": "f", "arguments": {"x": 1, "y": 1}})
    assert judge(made, reference) == 1.0
    # In order: both pairs with the name right and both arguments wrong (1/3 each), or one perfect pair and an
    # extra call (1 / (2 + 1)); either way 1/3.
    assert judge(made, reference, call_order="strict", partial_credit=True) == pytest.approx(1 / 3)


def test_dapo_scoring_maps_partial_credit_linearly():
    reference = json.dumps([WEATHER, TIME])
    assert judge(hermes(WEATHER, TIME), reference, scoring="dapo") == 1.0
    assert judge(hermes(WEATHER), reference, scoring="dapo") == -1.0
    assert judge(hermes(WEATHER), reference, scoring="dapo", partial_credit=True) == 0.0


# ----------------------------------------------------------------------------------------------------------------
# Properties

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
names = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
arguments = st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), json_values, max_size=4)
calls = st.builds(lambda name, args: {"name": name, "arguments": args}, names, arguments)


def render(calls_, form: str):
    if form == "hermes":
        return hermes(*calls_)
    if form == "json":
        return json.dumps(calls_)
    if form == "openai":
        return json.dumps(
            [
                {"type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for c in calls_
            ]
        )
    if form == "llama":
        return " ".join(json.dumps({"name": c["name"], "parameters": c["arguments"]}) for c in calls_)
    return [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": c} for c in calls_]}]


@settings(max_examples=150, deadline=None)
@given(st.lists(calls, max_size=4), st.sampled_from(["hermes", "json", "openai", "llama", "conversational"]))
def test_every_form_reads_back_and_matches_its_own_reference(calls_, form):
    completion = render(calls_, form)
    parsed = parse_tool_calls(completion)
    assert [c.name for c in parsed] == [c["name"] for c in calls_]
    assert judge(completion, json.dumps(calls_)) == 1.0
    assert judge(completion, calls_, call_order="strict") == 1.0


@settings(max_examples=150, deadline=None)
@given(st.lists(calls, min_size=1, max_size=4), st.randoms(use_true_random=False), st.booleans())
def test_order_insensitive_by_default_and_scores_stay_in_range(calls_, random, partial):
    shuffled = list(calls_)
    random.shuffle(shuffled)
    assert judge(hermes(*shuffled), json.dumps(calls_), partial_credit=partial) == 1.0
    # An extra call costs full marks; partial credit stays inside [0, 1).
    extra = hermes(*shuffled, {"name": "unexpected", "arguments": {}})
    value = judge(extra, json.dumps(calls_), partial_credit=True)
    assert 0.0 <= value < 1.0
    assert judge(extra, json.dumps(calls_)) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(-(10**15), 10**15), st.floats(allow_nan=False, allow_infinity=False)))
def test_numbers_equal_their_json_text_and_float_form(number):
    assert values_equal(json.dumps(number), number)
    assert values_equal(number, json.dumps(number))
    assert values_equal(float(number), number)
    assert not values_equal(str(number) + "x", number)


pair_scores = st.integers(1, 4).flatmap(
    lambda m: st.lists(st.lists(st.one_of(st.none(), st.floats(0.05, 1.0)), min_size=m, max_size=m), max_size=5).map(
        lambda rows: (rows, m)
    )
)


def brute_force(scores, num_reference, strict, penalty):
    best = 1.0 if num_reference == 0 and not scores else 0.0
    rows = range(len(scores))
    for k in range(0, min(len(scores), num_reference) + 1):
        for chosen_rows in itertools.combinations(rows, k):
            column_choices = (
                itertools.combinations(range(num_reference), k)
                if strict
                else itertools.permutations(range(num_reference), k)
            )
            for columns in column_choices:
                if any(scores[i][j] is None for i, j in zip(chosen_rows, columns)):
                    continue
                total = sum(scores[i][j] for i, j in zip(chosen_rows, columns))
                denominator = num_reference + penalty * (len(scores) - k)
                best = max(best, 1.0 if denominator == 0 else total / denominator)
    return best


@settings(max_examples=300, deadline=None)
@given(pair_scores, st.booleans(), st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_matching_is_the_best_over_all_matchings(case, strict, penalty):
    scores, num_reference = case
    found = best_call_matching(
        scores, num_reference, call_order="strict" if strict else "any", extra_call_penalty=penalty
    )
    assert found == pytest.approx(brute_force(scores, num_reference, strict, penalty))


def test_large_inputs_stay_fast():
    reference = [ToolCall("f", {"i": i}) for i in range(20)]  # past the exact matching's budget: greedy
    predicted = [ToolCall("f", {"i": i}) for i in reversed(range(20))] * 10
    assert score_tool_calls(predicted, reference, partial_credit=True) == pytest.approx(20 / (20 + 180))
    assert score_tool_calls(predicted[:20], reference) == 1.0
    # Degenerate output: deep unterminated nesting, brace runs, TeX. Each would take seconds if every `{` were
    # decoded again from scratch.
    call_text = hermes(WEATHER).replace("<tool_call>", "").replace("</tool_call>", "")
    for text in ('{"a": ' * 20000, '{"a": [' * 15000, "{" * 100000, r"\frac{1}{2} " * 10000, '{"a": 1 ' * 15000):
        started = time.perf_counter()
        assert parse_tool_calls(text) == []
        assert parse_tool_calls(call_text + text) == [call("get_weather", city="Paris", days=3)]
        assert time.perf_counter() - started < 1.0
    for text in (
        "<tool_call><function=f>" + "<parameter=a>x" * 20000 + "</tool_call>",  # tags never closed
        "<tool_call>f" + "<arg_key>a</arg_key><arg_value>x" * 20000 + "</tool_call>",
        "<tool_call>" * 50000,
    ):
        started = time.perf_counter()
        assert len(parse_tool_calls(text)) == 1
        assert time.perf_counter() - started < 1.0


text_pieces = st.sampled_from(
    list('{}[]":,<>/= \nabx_123') + ["<tool_call>", "</tool_call>", '"name"', '"arguments"', "<function=", "<arg_key>"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(text_pieces, max_size=60).map("".join))
def test_parsing_never_raises_on_arbitrary_text(text):
    for call_ in parse_tool_calls(text):
        assert call_.name is None or isinstance(call_.name, str)


# ----------------------------------------------------------------------------------------------------------------
# The registered reward


def test_registered_picklable_with_a_stable_name():
    assert "tool_call" in list_rewards()
    reward = get_reward("tool_call", partial_credit=True, call_order="strict")
    assert reward.__name__ == get_callable_name(reward) == "tool_call"
    assert get_reward("function_call").__name__ == "tool_call"
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "tool_call" and repr(copy) == repr(reward)
    assert copy.judge(hermes(WEATHER), json.dumps([WEATHER, TIME])) == 0.5


def test_from_a_yaml_recipe_with_its_own_column():
    recipe = yaml.safe_load(
        """
        reward_funcs:
          - name: tool_call
            weight: 0.5
            kwargs: {reference_column: expected_calls, partial_credit: true, formats: [hermes]}
          - tool_call:call_order=strict,scoring=dapo
        """
    )
    funcs, weights = build_reward_funcs(recipe["reward_funcs"])
    assert [f.__name__ for f in funcs] == ["tool_call", "tool_call_2"] and weights == [0.5, 1.0]
    assert call_reward(funcs[0], completions=[hermes(WEATHER)], expected_calls=[json.dumps([WEATHER, TIME])]) == [0.5]
    with pytest.raises(ValueError, match="expected_calls"):
        check_reward_columns(funcs, ["prompt", "tool_calls"])
    with pytest.raises(KeyError, match=r"'expected_calls'.*reference_column"):
        call_reward(funcs[0], completions=[hermes(WEATHER)], tool_calls=["[]"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"call_order": "sorted"}, "call_order"),
        ({"extra_arguments": "fail"}, "extra_arguments"),
        ({"string_match": "fuzzy"}, "string_match"),
        ({"extra_call_penalty": -1}, "extra_call_penalty"),
        ({"extra_call_penalty": math.nan}, "extra_call_penalty"),
        ({"formats": ["xml"]}, "formats"),
        ({"partial_credit": "yes"}, "partial_credit"),
        ({"scoring": "ternary"}, "scoring"),
        ({"reference_column": ""}, "reference_column"),
    ],
)
def test_invalid_arguments_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        get_reward("tool_call", **kwargs)


def test_formats_empty_reads_only_the_tool_calls_field():
    reward = ToolCallReward(formats=[])
    assert reward.judge(hermes(WEATHER), json.dumps(WEATHER)) == 0.0
    assert (
        reward.judge(
            [{"role": "assistant", "tool_calls": [{"type": "function", "function": WEATHER}]}], json.dumps(WEATHER)
        )
        == 1.0
    )
    assert ToolCallReward(formats="hermes").formats == ["hermes"]


def test_batch_with_none_for_unusable_rows():
    reward = get_reward("tool_call", scoring="dapo")
    completions = [hermes(WEATHER), hermes(TIME), "no call", hermes(WEATHER)]
    references = [json.dumps(WEATHER), json.dumps(WEATHER), "[]", None]
    assert call_reward(reward, completions=completions, tool_calls=references) == [1.0, -1.0, 1.0, None]
