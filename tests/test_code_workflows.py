"""Code RL through the other doors the README and docs show: TRL's own `GRPOTrainer` with a `get_reward("code")`
instance, and the recipes' YAML naming `code` (parsed by the recipe's own parser, loaded and built by the recipe's
own steps), for every row of `benchmarks/code_formats.py`; and the CLI's `trl-ext rewards code`. The reward inside
the trainer is called as TRL calls it: the dataset's right program scores 1.0, a wrong one less, prose 0.0."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import tiny_training_settings
from test_code_journeys import CASES, WITH_OPTIONS, assert_right_and_wrong, dataset_of, sandbox_of
from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.cli import main as cli
from trl_ext.recipe import RecipeArguments, build_rewards, load_datasets, model_init_kwargs
from trl_ext.rewards import get_reward
from trl_ext.sandbox.testing import close_servers

# Seconds per test: BigCodeBench's rows import Matplotlib, slow to start on a busy machine; a right program must not
# time out (wrong ones fail on their values, not on time).
TIMEOUT = 15.0


def reward_options(case: dict) -> dict:
    """The `code` reward's arguments a row needs (a checker column, C++...), empty for most formats."""
    options = dict(case.get("reward", {}))
    if case.get("language") == "cpp":
        options["language"] = "cpp"
    return options


@pytest.fixture(scope="module")
def code_reward():
    reward = get_reward("code", timeout=TIMEOUT)
    yield reward
    close_servers(sandbox_of(reward))


@pytest.mark.parametrize("name", list(CASES))
def test_each_code_format_trains_with_trl_grpo_and_a_code_reward_instance(name, code_reward, tiny_model_dir, tmp_path):
    case = CASES[name]
    reward = get_reward("code", timeout=TIMEOUT, **reward_options(case)) if name in WITH_OPTIONS else code_reward
    dataset = dataset_of(case)
    trainer = GRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward],
        args=GRPOConfig(**tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)),
        train_dataset=dataset,
    )
    assert_right_and_wrong(trainer, dataset, case)
    if reward is not code_reward:
        close_servers(sandbox_of(reward))


def recipe_config(case: dict, dataset_dir: Path, model_dir: str, tmp_path: Path) -> Path:
    """A recipe YAML as a user writes one for a code dataset: `reward_funcs` names `code` (with the row's options
    as a spec), no solution column (the tests are the reference)."""
    options = {**reward_options(case), "timeout": TIMEOUT}
    config = {
        "model_name_or_path": model_dir,
        "dataset_name": str(dataset_dir),
        "solution_column": None,
        "reward_funcs": [{"name": "code", "kwargs": options}],
        "heldout_prompts": 1,
        "heldout_samples": 2,
        "output_dir": str(tmp_path / "out"),
        "use_cpu": True,
        "bf16": False,
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 8,
        "max_steps": 1,
        "report_to": "none",
    }
    path = tmp_path / "code.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_each_code_format_builds_through_the_recipe_with_a_yaml_naming_code(name, tiny_model_dir, tmp_path):
    case = CASES[name]
    dataset_dir = tmp_path / "dataset"
    rows = dataset_of(case)
    rows.select([0, 0, 1]).save_to_disk(str(dataset_dir))  # 3 rows: one is held out, as the recipe does
    config = recipe_config(case, dataset_dir, tiny_model_dir, tmp_path)
    script_args, training_args, model_args = TrlParser(
        (RecipeArguments, DAPOConfig, ModelConfig)
    ).parse_args_and_config(["--config", str(config)])
    # recipes/dapo.py's steps, in its order
    training_args.model_init_kwargs = model_init_kwargs(model_args, training_args)
    train_dataset, eval_dataset = load_datasets(script_args, seed=training_args.seed)
    reward_funcs, eval_reward = build_rewards(script_args, training_args)
    trainer = DAPOTrainer(
        model=model_args.model_name_or_path, reward_funcs=reward_funcs, args=training_args, train_dataset=train_dataset
    )
    assert len(eval_dataset) == 1 and eval_reward is reward_funcs[0]
    assert_right_and_wrong(trainer, train_dataset, case)
    close_servers(sandbox_of(reward_funcs[0]))


def test_cli_shows_one_rewards_arguments(capsys):
    assert cli(["rewards", "code"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("code (alias code_tests): ")
    assert "  tests_format (default 'auto')\n" in out and "detects the format from the row's columns" in out
    assert "  partial_credit (default True)\n" in out and "  site_packages (default 'auto')\n" in out
    assert cli(["rewards", "code_tests"]) == 0 and capsys.readouterr().out == out  # an alias shows its reward
    assert cli(["rewards", "exact_match"]) == 0
    assert "  extract (default 'auto')\n" in capsys.readouterr().out
    assert cli(["rewards", "no_such_reward"]) == 2
    assert "Unknown reward 'no_such_reward'" in capsys.readouterr().err
    assert cli(["rewards"]) == 0
    assert {"code", "math"} <= {line.split()[0] for line in capsys.readouterr().out.splitlines()}


def test_cli_eval_refuses_a_dataset_the_reward_cannot_read_before_loading_the_model(tmp_path):
    dataset_dir = tmp_path / "no-tests"
    dataset_of({"columns": {"answer": "3"}}).save_to_disk(str(dataset_dir))
    with pytest.raises(ValueError, match=r"reward 'code' finds no test column"):
        cli(
            [
                "eval",
                "--model",
                str(tmp_path / "never-loaded"),
                "--dataset",
                str(dataset_dir),
                "--split",
                "train",
                "--reward",
                "code",
                "--n",
                "1",
            ]
        )


@pytest.mark.slow
def test_trl_grpo_trains_a_step_on_a_humaneval_style_dataset_with_the_code_reward(
    code_reward, tiny_model_dir, tmp_path
):
    dataset = dataset_of(CASES["humaneval #0"])
    settings = tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2, max_steps=1)
    trainer = GRPOTrainer(
        model=tiny_model_dir, reward_funcs=[code_reward], args=GRPOConfig(**settings), train_dataset=dataset
    )
    trainer.train()
    assert trainer.state.global_step == 1
    logged = [entry for entry in trainer.state.log_history if "rewards/code/mean" in entry]
    assert logged and 0.0 <= logged[0]["rewards/code/mean"] <= 1.0
