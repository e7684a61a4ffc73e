"""TRL's own GRPO script (`trl.scripts.grpo`, what `trl grpo` runs), unmodified, with our trainers in place of TRL's.

The script is imported from the installed TRL and run as it is, with `GRPOTrainer` replaced by `DAPOTrainer` (or
`GSPOTrainer`) and its config by `DAPOConfig` (or `GSPOConfig`): the swap a user makes. Its data comes from a local
folder of JSON Lines files, loaded by the script's own `load_dataset(..., streaming=...)`, and its reward is a
user's function named by import path, as the script allows. The model is the built-in tiny arithmetic model, which
answers about a quarter of the problems right, so groups mix right and wrong answers and dynamic sampling has
something to keep and something to drop.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest
import torch
import trl
from conftest import tiny_training_settings
from trl import DatasetMixtureConfig, GRPOConfig, GRPOTrainer, ModelConfig
from trl.scripts import grpo as trl_grpo_script

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer
from trl_ext.tasks import make_arithmetic_dataset, resolve_model_path

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

GROUP = 4

# A user's reward module, imported by the script from the working directory ("any dotted import path").
USER_REWARDS = '''
def exact_answer(completions, solution, **kwargs):
    return [float(completion.strip() == answer) for completion, answer in zip(completions, solution)]
'''

TRAINERS = {
    "grpo": (GRPOConfig, GRPOTrainer, {}),
    "dapo": (DAPOConfig, DAPOTrainer, {}),
    # GSPO's paper schedule: 4 optimiser updates per rollout.
    "gspo": (GSPOConfig, GSPOTrainer, {}),
}


@pytest.fixture
def script_workdir(tmp_path, monkeypatch):
    """A working directory with the user's reward module and a local dataset folder (train and test splits)."""
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(USER_REWARDS))
    data = tmp_path / "arithmetic"
    data.mkdir()
    splits = make_arithmetic_dataset(num_train=96, num_test=8, seed=0)
    for split, dataset in splits.items():
        with open(data / f"{split}.jsonl", "w") as file:
            for row in dataset:
                file.write(json.dumps(row) + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def run_trl_grpo_script(monkeypatch, workdir, method: str, streaming: bool):
    """Run `trl.scripts.grpo.main` with the method's classes swapped in; returns the trainer and its loss batches."""
    config_class, trainer_class, overrides = TRAINERS[method]
    seen: dict = {"batches": []}

    class Observed(trainer_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen["trainer"] = self

        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            seen["batches"].append(batch)
            return batch

    Observed.__name__ = trainer_class.__name__
    monkeypatch.setattr(trl, "GRPOTrainer", Observed)  # the script does `from trl import GRPOTrainer`

    settings = dict(
        per_device_train_batch_size=16,
        num_generations=GROUP,
        max_completion_length=8,
        max_steps=4,
        learning_rate=2e-4,
        temperature=1.0,
        **overrides,
    )
    training_args = config_class(**tiny_training_settings(workdir, **settings))
    script_args = trl_grpo_script.GRPOScriptArguments(
        dataset_name=str(workdir / "arithmetic"),
        dataset_streaming=streaming,
        reward_funcs=["my_rewards.exact_answer"],
    )
    model_args = ModelConfig(model_name_or_path=resolve_model_path("builtin:tiny-arithmetic"), dtype="float32")
    trl_grpo_script.main(script_args, training_args, model_args, DatasetMixtureConfig())
    return seen["trainer"], seen["batches"]


def answers_of_batch(trainer, batch) -> list[tuple[str, str, str]]:
    """(completion, right answer, prompt) per row, decoded from the batch TRL hands to the loss."""
    prompts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    completions = trainer.processing_class.batch_decode(batch["completion_ids"], skip_special_tokens=True)
    rows = []
    for prompt, completion in zip(prompts, completions, strict=True):
        left, right = map(int, re.fullmatch(r"\s*(\d+)\+(\d+)=", prompt).groups())
        rows.append((completion.strip(), str(left + right), prompt))
    return rows


@pytest.mark.parametrize("method", TRAINERS)
def test_trl_grpo_script_trains_with_the_swap(monkeypatch, script_workdir, method):
    trainer, batches = run_trl_grpo_script(monkeypatch, script_workdir, method, streaming=False)
    assert trainer.state.global_step == 4
    assert (script_workdir / "out" / "model.safetensors").exists()  # the script's own save_model
    if method != "dapo":
        return
    # Dynamic sampling: every group that reaches the loss mixes right and wrong answers (or is a masked filler).
    assert batches
    for batch in batches:
        rows = answers_of_batch(trainer, batch)
        masks = batch["completion_mask"].view(-1, GROUP, batch["completion_mask"].size(1))
        for group in range(len(rows) // GROUP):
            rewards = {float(text == answer) for text, answer, _ in rows[group * GROUP : (group + 1) * GROUP]}
            assert len(rewards) == 2 or not masks[group].any(), rows[group * GROUP : (group + 1) * GROUP]
    rounds = [entry["dynamic_sampling/generation_rounds"] for entry in trainer.state.log_history
              if "dynamic_sampling/generation_rounds" in entry]
    assert rounds and max(rounds) >= 2  # uninformative groups were dropped and refilled


@pytest.mark.parametrize("method", ["grpo", "dapo"])
def test_trl_grpo_script_streams_with_the_swap(monkeypatch, script_workdir, method):
    trainer, batches = run_trl_grpo_script(monkeypatch, script_workdir, method, streaming=True)
    assert trainer.state.global_step == 4
    for batch in batches:
        prompts = [prompt for *_, prompt in answers_of_batch(trainer, batch)]
        groups = [tuple(prompts[i : i + GROUP]) for i in range(0, len(prompts), GROUP)]
        assert all(len(set(group)) == 1 for group in groups)  # whole groups, one prompt each
        assert len(set(groups)) == len(groups)  # no prompt twice in one batch
    assert torch.isfinite(torch.tensor([entry["loss"] for entry in trainer.state.log_history if "loss" in entry])).all()
