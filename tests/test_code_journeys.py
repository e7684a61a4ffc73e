"""Code RL as a user runs it: a dataset in a public code benchmark's schema (the rows of
`benchmarks/code_formats.py`, one per format, with a `prompt` column), `DAPOTrainer` or `GSPOTrainer` with
`get_reward("code")` and no argument, or with the registry's name `"code"`. The trainer is built (its checks run
before training), and the reward it holds is called the way TRL calls it (every dataset column but `prompt` as a
keyword): the dataset's right program scores 1.0, a wrong one less (the default gives partial credit per test),
and prose 0.0. One format also trains a step."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest
from conftest import tiny_training_settings
from datasets import Dataset

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer
from trl_ext.rewards import get_reward
from trl_ext.sandbox.testing import close_servers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import code_formats as table  # noqa: E402

CASES = {f"{name} #{i}": case for name, cases in table.CASES.items() for i, case in enumerate(cases)}
# C++ rows (the reward's `language="cpp"`) and rows whose dataset needs a reward option (a checker column...).
WITH_OPTIONS = [name for name, case in CASES.items() if case.get("language") == "cpp" or case.get("reward")]


def dataset_of(case: dict) -> Dataset:
    columns = dict(case["columns"])
    columns.setdefault("prompt", "Write the program.")  # HumanEval's own `prompt` is the function's signature
    return Dataset.from_list([columns, columns])


def scores_in_trainer(trainer, dataset: Dataset, completions: list[str]) -> list[float | None]:
    """The trainer's first reward on one row, called as TRL's `_calculate_rewards` calls it."""
    row = dataset[0]
    keys = [key for key in row if key not in ("prompt", "completion", "completion_ids")]
    kwargs = {key: [row[key]] * len(completions) for key in keys}
    scores = trainer.reward_funcs[0](
        prompts=[row["prompt"]] * len(completions), completions=completions, completion_ids=[[0]] * len(completions),
        trainer_state=None, **kwargs,
    )
    return asyncio.run(scores) if inspect.iscoroutine(scores) else scores  # TRL awaits an asynchronous reward


def assert_right_and_wrong(trainer, dataset: Dataset, case: dict) -> None:
    right, wrong = table.completions_of(case)[0][1], table.completions_of(case)[1][1]
    scores = scores_in_trainer(trainer, dataset, [right, wrong, table.PROSE])
    assert scores[0] == 1.0 and scores[1] < 1.0 and scores[2] == 0.0, scores


def sandbox_of(reward):
    return getattr(reward, "reward", reward).sandbox


@pytest.fixture(scope="module")
def code_reward():
    reward = get_reward("code", timeout=4.0)
    yield reward
    close_servers(sandbox_of(reward))


@pytest.mark.parametrize("name", [name for name in CASES if name not in WITH_OPTIONS])
def test_each_code_format_trains_with_dapo_and_the_reward_with_no_argument(name, code_reward, tiny_model_dir, tmp_path):
    case = CASES[name]
    dataset = dataset_of(case)
    trainer = DAPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[code_reward],
        args=DAPOConfig(**tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)),
        train_dataset=dataset,
    )
    assert_right_and_wrong(trainer, dataset, case)


@pytest.mark.parametrize("name", WITH_OPTIONS)
def test_rows_needing_an_option_train_with_it(name, tiny_model_dir, tmp_path):
    case = CASES[name]
    options = dict(case.get("reward", {}), timeout=4.0)
    if case.get("language") == "cpp":
        options["language"] = "cpp"
    reward = get_reward("code", **options)
    dataset = dataset_of(case)
    trainer = DAPOTrainer(
        model=tiny_model_dir, reward_funcs=[reward], train_dataset=dataset,
        args=DAPOConfig(**tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)),
    )
    assert_right_and_wrong(trainer, dataset, case)
    close_servers(sandbox_of(reward))


def test_registry_names_resolve_in_dapo_and_gspo(tiny_model_dir, tmp_path):
    case = table.CASES["mbpp"][0]
    dataset = dataset_of(case)
    settings = tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)
    dapo = DAPOTrainer(model=tiny_model_dir, reward_funcs=["code"], args=DAPOConfig(**settings), train_dataset=dataset)
    gspo = GSPOTrainer(model=tiny_model_dir, reward_funcs="code", args=GSPOConfig(**settings), train_dataset=dataset)
    for trainer in (dapo, gspo):
        assert trainer.reward_funcs[0].__name__ == "code"
        assert_right_and_wrong(trainer, dataset, case)
        close_servers(sandbox_of(trainer.reward_funcs[0]))


def test_a_body_only_humaneval_completion_runs_after_its_prompt(code_reward, tiny_model_dir, tmp_path):
    # A base model completes the function's body; HumanEval's harness runs prompt + completion.
    case = table.CASES["humaneval"][0]
    dataset = dataset_of(case)
    trainer = DAPOTrainer(
        model=tiny_model_dir, reward_funcs=[code_reward], train_dataset=dataset,
        args=DAPOConfig(**tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)),
    )
    body = "    return sum(v * v for v in values if v % 2 == 0)\n"
    wrong_body = "    return sum(v * v for v in values)\n"
    assert scores_in_trainer(trainer, dataset, [body, wrong_body, table.fenced(case["canonical"])]) == [1.0, 0.0, 1.0]


def test_a_dataset_the_code_reward_cannot_read_fails_before_training(code_reward, tiny_model_dir, tmp_path):
    settings = tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)
    no_tests = Dataset.from_list([{"prompt": "Write add.", "answer": "3"}] * 2)
    with pytest.raises(ValueError, match=r"reward 'code' finds no test column.*\['answer', 'prompt'\]|finds no test column"):
        DAPOTrainer(model=tiny_model_dir, reward_funcs=[code_reward], args=DAPOConfig(**settings), train_dataset=no_tests)
    ambiguous = Dataset.from_list([{"prompt": "p", **table.CASES["mbpp"][0]["columns"], "input_output": '{"inputs": ["1"], "outputs": ["1"]}'}] * 2)
    with pytest.raises(ValueError, match=r"several test formats \['mbpp', 'apps'\].*tests_format="):
        DAPOTrainer(model=tiny_model_dir, reward_funcs=[code_reward], args=DAPOConfig(**settings), train_dataset=ambiguous)
    no_prompt = Dataset.from_list([{"question": "Write add.", **table.CASES["mbpp"][0]["columns"]}] * 2)
    with pytest.raises(ValueError, match=r"no 'prompt' column.*rename_column\('question', 'prompt'\)"):
        DAPOTrainer(model=tiny_model_dir, reward_funcs=[code_reward], args=DAPOConfig(**settings), train_dataset=no_prompt)


@pytest.mark.slow
def test_dapo_trains_a_step_on_a_humaneval_style_dataset(code_reward, tiny_model_dir, tmp_path):
    dataset = dataset_of(table.CASES["humaneval"][0])
    trainer = DAPOTrainer(
        model=tiny_model_dir, reward_funcs=[code_reward], train_dataset=dataset,
        args=DAPOConfig(**tiny_training_settings(
            tmp_path, num_generations=2, per_device_train_batch_size=2, max_steps=1, dynamic_sampling=False,
        )),
    )
    trainer.train()
    assert trainer.state.global_step == 1
    assert any("rewards/code/mean" in entry for entry in trainer.state.log_history)
