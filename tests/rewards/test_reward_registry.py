"""Registry: names, descriptions, specs (strings, mappings, YAML), argument checking, pickling, TRL's view."""

from __future__ import annotations

import asyncio
import pickle
import threading

import pytest
import yaml
from trl.trainer.utils import get_callable_name, is_async_callable

from trl_ext.rewards import (
    AsyncReward,
    Reward,
    SoftOverlongPunishment,
    build_reward_funcs,
    call_reward,
    completion_text,
    get_reward,
    list_rewards,
    parse_reward_spec,
    register_reward,
)
from trl_ext.rewards.answers import ExactMatchReward, NumericReward
from trl_ext.rewards.format import RegexFormatReward
from trl_ext.rewards.math import MathReward

REQUIRED_NAMES = {
    "code",
    "math", "dapo_answer", "boxed", "gsm8k", "multiple_choice", "exact_match", "numeric", "think_format",
    "regex_format", "json_valid", "json_schema", "soft_overlong", "repetition",
}  # fmt: skip
# Arguments each reward needs to be built at all.
REQUIRED_ARGUMENTS = {
    "regex_format": {"pattern": r"\d+"},
    "json_schema": {"schema": {"type": "object"}},
    "soft_overlong": {"max_length": 16, "buffer_length": 4},
}


def test_every_issue_name_is_registered_with_a_one_line_description():
    rewards = list_rewards()
    assert REQUIRED_NAMES <= set(rewards)
    assert list(rewards) == sorted(rewards)
    for name, description in rewards.items():
        assert description and "\n" not in description, name


@pytest.mark.parametrize("name", sorted(REQUIRED_NAMES))
def test_each_reward_has_a_stable_name_and_pickles(name):
    reward = get_reward(name, **REQUIRED_ARGUMENTS.get(name, {}))
    assert reward.__name__ == name
    assert get_callable_name(reward) == name  # what TRL uses for `rewards/<name>/mean`
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == name
    assert repr(copy) == repr(reward)


def test_aliases_resolve_to_the_canonical_name():
    assert get_reward("accuracy").__name__ == "math"
    assert get_reward("mcq").__name__ == "multiple_choice"
    assert get_reward("soft_overlong_punishment", max_length=8, buffer_length=2).__name__ == "soft_overlong"


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(KeyError) as error:
        get_reward("maths")
    message = str(error.value)
    assert "Unknown reward 'maths'" in message
    for name in ("math", "gsm8k", "json_schema"):
        assert name in message


def test_unknown_argument_lists_the_valid_ones():
    with pytest.raises(TypeError) as error:
        get_reward("numeric", rel_tolerance=0.1)
    message = str(error.value)
    assert "rel_tolerance" in message and "rel_tol" in message and "abs_tol" in message


def test_missing_required_argument_fails_at_construction():
    with pytest.raises(TypeError, match="max_length"):
        get_reward("soft_overlong", buffer_length=4)


def test_invalid_argument_values_fail_at_construction():
    with pytest.raises(ValueError, match="scoring"):
        get_reward("math", scoring="ternary")
    with pytest.raises(ValueError, match="pattern"):
        get_reward("regex_format", pattern="(unclosed")
    with pytest.raises(ValueError, match="buffer_length"):
        get_reward("soft_overlong", max_length=8, buffer_length=9)
    with pytest.raises(ValueError, match="Schema"):
        get_reward("json_schema", schema={"type": "no-such-type"})


def test_string_specs():
    assert parse_reward_spec("math") == ("math", {}, 1.0)
    assert parse_reward_spec("numeric:rel_tol=1e-3,reference_column=answer") == (
        "numeric", {"rel_tol": 1e-3, "reference_column": "answer"}, 1.0,
    )  # fmt: skip
    name, kwargs, _ = parse_reward_spec(r"regex_format:pattern='\d{1,3}',flags=si,required_tags=[a, b]")
    assert (name, kwargs) == ("regex_format", {"pattern": r"\d{1,3}", "flags": "si", "required_tags": ["a", "b"]})
    _, kwargs, _ = parse_reward_spec("think_format:prefilled=true,answer_tag=none")
    assert kwargs == {"prefilled": True, "answer_tag": None}
    with pytest.raises(ValueError, match="arg=value"):
        parse_reward_spec("math:scoring")


def test_mapping_specs_are_checked():
    assert parse_reward_spec({"name": "boxed", "weight": 2}) == ("boxed", {}, 2.0)
    with pytest.raises(ValueError, match="unexpected keys"):
        parse_reward_spec({"name": "boxed", "wieght": 2})
    with pytest.raises(ValueError, match="weight"):
        parse_reward_spec({"name": "boxed", "weight": "heavy"})
    with pytest.raises(TypeError):
        parse_reward_spec(3)


RECIPE = """
reward_funcs:
  - math
  - name: think_format
    weight: 0.25
  - numeric:rel_tol=0.01,reference_column=answer
  - name: regex_format
    kwargs: {pattern: '\\d+$', match: search}
  - name: regex_format
    weight: 0.5
    kwargs: {required_tags: [reasoning, answer]}
  - name: soft_overlong
    weight: 0.5
    kwargs: {max_length: 1024, buffer_length: 256}
"""


def test_yaml_recipe_builds_the_right_functions_and_weights():
    specs = yaml.safe_load(RECIPE)["reward_funcs"]
    funcs, weights = build_reward_funcs(specs)
    assert weights == [1.0, 0.25, 1.0, 1.0, 0.5, 0.5]
    assert [func.__name__ for func in funcs] == [
        "math", "think_format", "numeric", "regex_format", "regex_format_2", "soft_overlong",
    ]  # fmt: skip
    assert isinstance(funcs[0], AsyncReward) and isinstance(funcs[0].reward, MathReward)
    assert isinstance(funcs[2], NumericReward) and funcs[2].rel_tol == 0.01 and funcs[2].reference_column == "answer"
    assert isinstance(funcs[3], RegexFormatReward) and funcs[3].pattern == r"\d+$" and funcs[3].match == "search"
    assert funcs[4].required_tags == ["reasoning", "answer"]
    assert isinstance(funcs[5], SoftOverlongPunishment) and (funcs[5].max_length, funcs[5].buffer_length) == (1024, 256)
    # The functions behave as configured.
    assert funcs[2](completions=["It is 3.13", "It is 3.1"], answer=["3.14", "3.14"]) == [1.0, 0.0]
    assert funcs[3](completions=["abc 42", "42 abc"]) == [1.0, 0.0]
    assert funcs[4](completions=["<reasoning>r</reasoning><answer>4</answer>"]) == [1.0]
    assert funcs[5](completions=["x", "y"], completion_ids=[[0] * 896, [0] * 700]) == [-0.5, 0.0]
    copies = pickle.loads(pickle.dumps(funcs))
    assert [func.__name__ for func in copies] == [func.__name__ for func in funcs]


def test_bad_spec_in_a_recipe_fails_before_training():
    with pytest.raises(KeyError, match="Unknown reward 'think'"):
        build_reward_funcs(["math", "think"])
    with pytest.raises(TypeError, match="Valid arguments"):
        build_reward_funcs([{"name": "gsm8k", "kwargs": {"strictly": True}}])


def test_pooled_rewards_are_async_for_trl_and_callable_synchronously():
    math_reward = get_reward("math")
    assert is_async_callable(math_reward)
    assert not is_async_callable(get_reward("math", asynchronous=False))
    assert not is_async_callable(get_reward("boxed"))
    assert is_async_callable(get_reward("boxed", asynchronous=True))
    columns = {"completions": [r"\boxed{0.5}", "no idea"], "solution": [r"\frac{1}{2}", "3"]}
    assert call_reward(math_reward, **columns) == [1.0, 0.0]
    assert asyncio.run(math_reward(**columns)) == [1.0, 0.0]
    assert get_reward("math", asynchronous=False)(**columns) == [1.0, 0.0]


def test_call_reward_inside_a_running_event_loop():
    async def main():
        return call_reward(get_reward("math"), completions=[r"\boxed{2}"], solution=["2"])

    assert asyncio.run(main()) == [1.0]


def test_plain_and_conversational_completions():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "only"}]) == "only"
    conversation = [
        {"role": "assistant", "content": "calling a tool"},
        {"role": "tool", "content": "42"},
        {"role": "assistant", "content": [{"type": "text", "text": "The answer "}, {"type": "text", "text": "is 42"}]},
    ]
    assert completion_text(conversation) == "The answer is 42"
    assert completion_text([{"role": "user", "content": "no assistant"}]) == "no assistant"
    assert completion_text([]) == ""
    reward = get_reward("exact_match")
    assert reward(completions=["Answer: Paris", [{"role": "assistant", "content": "Answer: Paris"}]],
                  solution=["paris", "paris"]) == [1.0, 1.0]  # fmt: skip


def test_missing_reference_column_names_the_column_and_the_fix():
    with pytest.raises(KeyError) as error:
        get_reward("boxed")(completions=[r"\boxed{1}"], answer=["1"], trainer_state=None)
    message = str(error.value)
    assert "'solution'" in message and "['answer']" in message and "reference_column=" in message
    assert get_reward("boxed", reference_column="answer")(completions=[r"\boxed{1}"], answer=["1"]) == [1.0]


def test_register_a_custom_reward_and_refuse_duplicates():
    @register_reward("test_length_above", description="1 if the completion is longer than `minimum` characters.")
    class LengthAbove(Reward):
        def __init__(self, minimum: int = 3):
            self.minimum = minimum

        def score(self, texts, columns):
            return [float(len(text) > self.minimum) for text in texts]

    reward = get_reward("test_length_above", minimum=2)
    assert reward.__name__ == "test_length_above"
    assert reward(completions=["ab", "abc"]) == [0.0, 1.0]
    assert list_rewards()["test_length_above"].startswith("1 if")
    with pytest.raises(ValueError, match="already registered"):
        register_reward("test_length_above")(LengthAbove)
    with pytest.raises(ValueError, match="already registered"):
        register_reward("other_name", aliases=("math",))(LengthAbove)


def test_async_reward_runs_off_the_event_loop_thread():
    seen = {}

    class ThreadRecorder(Reward):
        def score(self, texts, columns):
            seen["thread"] = threading.current_thread()
            return [0.0] * len(texts)

    async def main():
        seen["loop_thread"] = threading.current_thread()
        return await AsyncReward(ThreadRecorder())(completions=["a"])

    assert asyncio.run(main()) == [0.0]
    assert seen["thread"] is not seen["loop_thread"]


def test_exact_match_keeps_its_arguments_through_pickle():
    reward = get_reward("exact_match", extract="answer_tag", normalize=False)
    copy = pickle.loads(pickle.dumps(reward))
    assert isinstance(copy, ExactMatchReward) and copy.extract == "answer_tag" and copy.normalize is False
    assert copy(completions=["<answer>Paris</answer>"], solution=["Paris"]) == [1.0]


def test_two_async_rewards_overlap_when_gathered_as_trl_does():
    """TRL awaits all async rewards together (`asyncio.gather` on its event-loop thread): two pooled rewards
    that each wait one second finish in about one second, not two."""
    import time

    class Waits(Reward):
        def score(self, texts, columns):
            time.sleep(1.0)  # stands for waiting on the process pool
            return [0.0] * len(texts)

    async def gather():
        return await asyncio.gather(AsyncReward(Waits())(completions=["a"]), AsyncReward(Waits())(completions=["b"]))

    start = time.monotonic()
    assert asyncio.run(gather()) == [[0.0], [0.0]]
    assert time.monotonic() - start < 1.8


def test_dataset_columns_are_checked_before_training():
    from trl_ext.rewards import check_reward_columns
    from trl_ext.rewards.registry import reward_columns

    funcs, _ = build_reward_funcs(["math", "gsm8k:reference_column=answer", "think_format",
                                   {"name": "json_schema", "kwargs": {"schema_column": "schema"}}])  # fmt: skip
    assert reward_columns(funcs[0]) == {"reference_column": "solution"}
    assert reward_columns(funcs[2]) == {}
    check_reward_columns(funcs, ["prompt", "solution", "answer", "schema"])
    with pytest.raises(ValueError) as error:
        check_reward_columns(funcs, ["prompt", "solution"])
    message = str(error.value)
    assert "'gsm8k' reads column 'answer' (argument reference_column)" in message
    assert "'json_schema' reads column 'schema' (argument schema_column)" in message
    assert "['prompt', 'solution']" in message
