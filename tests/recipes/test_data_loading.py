"""Recipe data: the built-in arithmetic task, local files and folders, and prompt/solution mapping."""

from __future__ import annotations

import pytest
from datasets import Dataset, DatasetDict

from trl_ext.recipe import RecipeArguments, load_datasets
from trl_ext.tasks import (
    BUILTIN_MODELS,
    arithmetic_problems,
    fill_template,
    load_raw_dataset,
    make_arithmetic_dataset,
    prepare_prompts,
    resolve_model_path,
)


def test_arithmetic_task_is_deterministic_disjoint_and_correct():
    first, second = make_arithmetic_dataset(), make_arithmetic_dataset()
    assert (
        first["train"]["prompt"] == second["train"]["prompt"] and first["test"]["prompt"] == second["test"]["prompt"]
    )
    assert (len(first["train"]), len(first["test"])) == (4000, 200)
    assert not set(first["train"]["prompt"]) & set(first["test"]["prompt"])
    for prompt, solution in zip(first["test"]["prompt"], first["test"]["solution"], strict=True):
        left, right = prompt.rstrip("=").split("+")
        assert int(left) + int(right) == int(solution)
    assert make_arithmetic_dataset(seed=1)["test"]["prompt"] != first["test"]["prompt"]


def test_arithmetic_operations_and_limits():
    problems = arithmetic_problems(max_operand=3, operations="+-*")
    assert (3, "-", 2, 1) in problems and (2, "-", 3, -1) not in problems  # no negative answers
    assert (3, "*", 3, 9) in problems
    with pytest.raises(ValueError, match="unknown operators"):
        arithmetic_problems(operations="/")
    with pytest.raises(ValueError, match="distinct problems"):
        make_arithmetic_dataset(num_train=100, num_test=100, max_operand=5)


def test_builtin_model_resolves_to_the_shipped_checkpoint():
    assert resolve_model_path("builtin:tiny-arithmetic") == str(BUILTIN_MODELS["tiny-arithmetic"])
    assert resolve_model_path("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen/Qwen2.5-1.5B-Instruct"
    with pytest.raises(ValueError, match="builtin:tiny-arithmetic"):
        resolve_model_path("builtin:nope")


@pytest.mark.parametrize("suffix", ["jsonl", "json", "parquet", "csv"])
def test_local_files_load_as_a_train_split(tmp_path, suffix):
    rows = Dataset.from_dict({"question": ["1+1?", "2+2?"], "answer": ["2", "4"]})
    path = tmp_path / f"data.{suffix}"
    {"jsonl": rows.to_json, "json": rows.to_json, "parquet": rows.to_parquet, "csv": rows.to_csv}[suffix](str(path))
    loaded = load_raw_dataset(str(path))
    assert list(loaded) == ["train"] and loaded["train"]["question"] == ["1+1?", "2+2?"]


def test_saved_folder_and_builtin_task_load(tmp_path):
    DatasetDict(train=Dataset.from_dict({"prompt": ["a"]}), test=Dataset.from_dict({"prompt": ["b"]})).save_to_disk(
        tmp_path / "saved"
    )
    assert set(load_raw_dataset(str(tmp_path / "saved"))) == {"train", "test"}
    assert set(load_raw_dataset("builtin:arithmetic")) == {"train", "test"}
    with pytest.raises(ValueError, match="builtin:arithmetic"):
        load_raw_dataset("builtin:geometry")


def test_prompts_from_a_template_with_a_system_prompt_and_a_nested_solution():
    rows = Dataset.from_dict({"question": ["What is 2+2?"], "reward_model": [{"ground_truth": 4, "style": "rule"}]})
    prepared = prepare_prompts(
        rows,
        prompt_template="{question} Put the answer in \\boxed{}.",
        system_prompt="Be brief.",
        solution_column="reward_model.ground_truth",
    )
    assert prepared[0]["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2? Put the answer in \\boxed{}."},
    ]
    assert prepared[0]["solution"] == "4"
    assert "question" in prepared.column_names  # other columns still reach the rewards


def test_missing_columns_name_the_field_to_set():
    rows = Dataset.from_dict({"question": ["q"], "answer": ["a"]})
    with pytest.raises(ValueError, match="prompt_column"):
        prepare_prompts(rows)
    with pytest.raises(ValueError, match="solution_column"):
        prepare_prompts(rows, prompt_column="question")
    assert prepare_prompts(rows, prompt_column="question", solution_column="answer")[0] == {
        "question": "q",
        "answer": "a",
        "prompt": "q",
        "solution": "a",
    }


def test_fill_template_leaves_unknown_braces():
    assert fill_template("{a} \\boxed{} {b} {missing}", {"a": 1, "b": "x"}) == "1 \\boxed{} x {missing}"


def test_held_out_rows_come_out_of_the_training_split_when_there_is_no_test_split(tmp_path):
    path = tmp_path / "data.jsonl"
    Dataset.from_dict({"prompt": [f"{i}+0=" for i in range(50)], "solution": [str(i) for i in range(50)]}).to_json(
        str(path)
    )
    train, held_out = load_datasets(RecipeArguments(dataset_name=str(path), heldout_prompts=10, reward_funcs=["math"]))
    assert (len(train), len(held_out)) == (40, 10)
    assert not set(train["prompt"]) & set(held_out["prompt"])
    train, held_out = load_datasets(RecipeArguments(dataset_name=str(path), heldout_prompts=0))
    assert held_out is None and len(train) == 50


def test_recipe_arguments_fail_early():
    with pytest.raises(ValueError, match="heldout_k"):
        RecipeArguments(heldout_k="1,8", heldout_samples=4)
    with pytest.raises(ValueError, match="reward_funcs is empty"):
        RecipeArguments(reward_funcs=[])


def test_heldout_steps_zero_means_before_and_after_only_and_a_negative_value_names_the_field():
    assert RecipeArguments(heldout_steps=0).heldout_steps == 0  # add_pass_at_k_callback passes None for 0
    with pytest.raises(ValueError, match=r"heldout_steps must be a positive number of steps, or null or 0"):
        RecipeArguments(heldout_steps=-5)
