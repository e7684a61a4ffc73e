"""What the scripts in `recipes/` share: their data/reward/evaluation arguments and the checks and loading
steps that come before training. Each function is one step a recipe calls in order, so the recipe still
reads top to bottom.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset

from .evaluation import PassAtKCallback, PassAtKResult, parse_ks
from .rewards import build_reward_funcs
from .tasks import load_raw_dataset, prepare_prompts, resolve_model_path

logger = logging.getLogger(__name__)


@dataclass
class RecipeArguments:
    """Data, reward and evaluation arguments of the recipes; the trainer's and model's come from their own configs.

    Parameters:
        > Data

        dataset_name (`str`, defaults to `"builtin:arithmetic"`):
            A Hub dataset name, a local file (`.json`, `.jsonl`, `.parquet`, `.csv`) or folder (`save_to_disk` or
            data files), or a built-in task (`builtin:arithmetic`).
        dataset_config (`str` or `None`): Hub configuration name (e.g. `main` for `openai/gsm8k`).
        dataset_train_split (`str`, defaults to `"train"`): split to train on.
        dataset_test_split (`str`, defaults to `"test"`):
            held-out split for pass@1; if the evaluation dataset has no such split, `heldout_prompts` rows are held
            out of the training split instead (never trained on).
        heldout_dataset_name / heldout_dataset_config (`str` or `None`):
            evaluate on another dataset (e.g. AIME 2024) prepared with the same columns; defaults to `dataset_name`.
        prompt_column, solution_column, prompt_template, system_prompt, conversational:
            how prompts and reference answers are built, see `trl_ext.tasks.prepare_prompts`.
        max_train_samples (`int` or `None`): keep only this many training rows (after shuffling with the seed).

        > Rewards

        reward_funcs (`list`, defaults to `["math"]`):
            registry reward specs: `"name"`, `"name:arg=value,..."`, or in YAML `{name, weight, kwargs}` mappings.
            The weights become the trainer's `reward_weights`. `trl-ext rewards` lists the names.
        heldout_reward (`str` or `None`): the verifier for pass@k; defaults to the first of `reward_funcs`.

        > Held-out evaluation (pass@k before, during and after training)

        heldout_prompts (`int`, defaults to `200`): prompts evaluated; 0 turns evaluation off.
        heldout_samples (`int`, defaults to `4`): samples per prompt.
        heldout_k (`str`, defaults to `"1"`): comma-separated k values, each at most `heldout_samples`.
        heldout_steps (`int` or `None`): also evaluate every this many steps; `None` or 0: only before and after.
        heldout_temperature, heldout_top_p (`float` or `None`): sampling settings; default to the trainer's.
        heldout_batch_size (`int`, defaults to `64`): sequences per `generate` call.
        plot (`bool`, defaults to `True`): write `training_curves.png` into `output_dir` at the end.
    """

    dataset_name: str = field(
        default="builtin:arithmetic", metadata={"help": "Hub name, local path, or builtin:<task>."}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset configuration name."})
    dataset_train_split: str = field(default="train", metadata={"help": "Split to train on."})
    dataset_test_split: str = field(default="test", metadata={"help": "Held-out split for pass@k."})
    heldout_dataset_name: str | None = field(
        default=None, metadata={"help": "Evaluation dataset (default: dataset_name)."}
    )
    heldout_dataset_config: str | None = field(default=None, metadata={"help": "Evaluation dataset configuration."})
    prompt_column: str = field(default="prompt", metadata={"help": "Column holding the prompt (text or messages)."})
    solution_column: str | None = field(
        default="solution",
        metadata={"help": "Column with reference answers (dotted for nested fields); null for none."},
    )
    prompt_template: str | None = field(
        default=None,
        metadata={"help": "Build the prompt from columns, e.g. '{question}\\nPut the answer in \\boxed{}.'"},
    )
    system_prompt: str | None = field(default=None, metadata={"help": "System message; makes prompts conversational."})
    conversational: bool = field(
        default=False, metadata={"help": "Send text prompts as user messages (chat template)."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training rows."})
    reward_funcs: list[str] = field(
        default_factory=lambda: ["math"],
        metadata={"help": "Registry reward specs ('name' or 'name:arg=value'); see `trl-ext rewards`."},
    )
    heldout_reward: str | None = field(default=None, metadata={"help": "Verifier for pass@k (default: first reward)."})
    heldout_prompts: int = field(default=200, metadata={"help": "Held-out prompts to evaluate; 0 disables."})
    heldout_samples: int = field(default=4, metadata={"help": "Samples per held-out prompt."})
    heldout_k: str = field(default="1", metadata={"help": "Comma-separated k values for pass@k."})
    heldout_steps: int | None = field(
        default=None, metadata={"help": "Also evaluate every this many steps (null or 0: only before and after)."}
    )
    heldout_temperature: float | None = field(default=None, metadata={"help": "Default: the trainer's temperature."})
    heldout_top_p: float | None = field(default=None, metadata={"help": "Default: the trainer's top_p."})
    heldout_batch_size: int = field(default=64, metadata={"help": "Sequences per generate call during evaluation."})
    plot: bool = field(default=True, metadata={"help": "Write training_curves.png into output_dir at the end."})

    def __post_init__(self):
        if not self.reward_funcs:
            raise ValueError("reward_funcs is empty: name at least one registry reward (see `trl-ext rewards`).")
        if self.heldout_prompts < 0 or self.heldout_samples < 1:
            raise ValueError(
                f"heldout_prompts must be >= 0 (0 disables) and heldout_samples >= 1, got {self.heldout_prompts} "
                f"and {self.heldout_samples}."
            )
        if self.heldout_steps is not None and self.heldout_steps < 0:
            raise ValueError(
                f"heldout_steps must be a positive number of steps, or null or 0 to evaluate only before and after "
                f"training, got {self.heldout_steps}."
            )
        if self.heldout_prompts:
            try:
                parse_ks(self.heldout_k, self.heldout_samples)
            except ValueError as error:
                raise ValueError(
                    f"heldout_k={self.heldout_k!r} with heldout_samples={self.heldout_samples}: {error}"
                ) from None
        if self.plot and importlib.util.find_spec("matplotlib") is None:
            raise ValueError(
                "plot: true needs matplotlib (a dependency of trl-ext): pip install matplotlib, or set plot: false."
            )


def check_model_args(model_args, training_args) -> None:
    """Refuse model/trainer combinations that cannot work, before anything is loaded.

    Raises `ValueError` naming the fields to change.
    """
    if not model_args.model_name_or_path:
        raise ValueError("Set model_name_or_path (a Hub name, a local folder, or builtin:tiny-arithmetic).")
    quantized = model_args.load_in_4bit or model_args.load_in_8bit
    if model_args.load_in_4bit and model_args.load_in_8bit:
        raise ValueError("Set only one of load_in_4bit and load_in_8bit.")
    if quantized and not model_args.use_peft:
        raise ValueError(
            "A 4-bit or 8-bit model cannot be trained directly: set use_peft: true to train LoRA adapters on it "
            "(QLoRA), or drop load_in_4bit / load_in_8bit."
        )
    if quantized and getattr(training_args, "use_vllm", False):
        raise ValueError(
            "use_vllm cannot generate with a bitsandbytes 4-bit/8-bit model: TRL would have to load the quantized "
            "weights into vLLM, which it does not support. Set use_vllm: false (generate with transformers) or train "
            "LoRA on the unquantized model (load_in_4bit: false)."
        )
    if quantized and importlib.util.find_spec("bitsandbytes") is None:
        raise ValueError("load_in_4bit / load_in_8bit need bitsandbytes: pip install 'trl-ext[qlora]'.")
    if model_args.use_peft and model_args.lora_dropout > 0 and not getattr(training_args, "disable_dropout", True):
        logger.warning(
            "lora_dropout=%s with disable_dropout=False: dropout makes the training forward pass differ from the "
            "one that scored the samples, which biases the importance ratios of RL. Set lora_dropout: 0.",
            model_args.lora_dropout,
        )


def model_init_kwargs(model_args, training_args) -> dict[str, Any]:
    """`model_init_kwargs` for the trainer from TRL's `ModelConfig` (revision, attention, dtype); config values win."""
    kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    kwargs.update(training_args.model_init_kwargs or {})
    return kwargs


def model_path(model_args) -> str:
    """The model to load: `builtin:<name>` resolves to the checkpoint shipped with the package."""
    return resolve_model_path(model_args.model_name_or_path)


def _prepare(script_args: RecipeArguments, dataset: Dataset) -> Dataset:
    return prepare_prompts(
        dataset,
        prompt_column=script_args.prompt_column,
        solution_column=script_args.solution_column,
        prompt_template=script_args.prompt_template,
        system_prompt=script_args.system_prompt,
        conversational=script_args.conversational,
    )


def load_datasets(script_args: RecipeArguments, seed: int = 0) -> tuple[Dataset, Dataset | None]:
    """The training dataset and the held-out evaluation dataset (`None` when `heldout_prompts` is 0)."""
    splits = load_raw_dataset(script_args.dataset_name, script_args.dataset_config)
    if script_args.dataset_train_split not in splits:
        raise ValueError(
            f"dataset_train_split={script_args.dataset_train_split!r} is not a split of {script_args.dataset_name} "
            f"(splits: {list(splits)})."
        )
    train = splits[script_args.dataset_train_split]
    evaluation = None
    if script_args.heldout_prompts > 0:
        if script_args.heldout_dataset_name:
            eval_splits = load_raw_dataset(script_args.heldout_dataset_name, script_args.heldout_dataset_config)
            if script_args.dataset_test_split not in eval_splits:
                raise ValueError(
                    f"dataset_test_split={script_args.dataset_test_split!r} is not a split of "
                    f"{script_args.heldout_dataset_name} (splits: {list(eval_splits)})."
                )
            evaluation = eval_splits[script_args.dataset_test_split]
        elif script_args.dataset_test_split in splits:
            evaluation = splits[script_args.dataset_test_split]
        else:
            # No held-out split: hold some training rows out, so they are never trained on.
            if script_args.heldout_prompts >= len(train):
                raise ValueError(
                    f"heldout_prompts={script_args.heldout_prompts} would hold out the whole training split "
                    f"({len(train)} rows); lower it or give a dataset_test_split."
                )
            held_out = train.train_test_split(test_size=script_args.heldout_prompts, seed=seed)
            train, evaluation = held_out["train"], held_out["test"]
        evaluation = _prepare(script_args, evaluation.select(range(min(script_args.heldout_prompts, len(evaluation)))))
    if script_args.max_train_samples is not None:
        train = train.shuffle(seed=seed).select(range(min(script_args.max_train_samples, len(train))))
    return _prepare(script_args, train), evaluation


def build_rewards(script_args: RecipeArguments, training_args) -> tuple[list[Callable], Callable]:
    """The reward functions from the registry, with their weights set on `training_args.reward_weights`,
    and the verifier used for pass@k."""
    reward_funcs, weights = build_reward_funcs(script_args.reward_funcs)
    if training_args.reward_weights is None:
        # Only pass weights when a spec sets one, so TRL's own default (all 1.0) stays in charge otherwise.
        if any(weight != 1.0 for weight in weights):
            training_args.reward_weights = weights
    elif any(weight != 1.0 for weight in weights):
        raise ValueError(
            "Reward weights are set twice: in reward_funcs specs and in reward_weights. Keep one of them."
        )
    if script_args.heldout_reward is not None:
        heldout_reward, _ = build_reward_funcs([script_args.heldout_reward])
        return reward_funcs, heldout_reward[0]
    return reward_funcs, reward_funcs[0]


def add_pass_at_k_callback(
    trainer, script_args: RecipeArguments, eval_dataset: Dataset | None, heldout_reward: Callable
) -> PassAtKCallback | None:
    """Attach held-out pass@k evaluation (before the first update, every `heldout_steps`, after training)."""
    if eval_dataset is None:
        return None
    callback = PassAtKCallback(
        trainer,
        eval_dataset,
        heldout_reward,
        num_samples=script_args.heldout_samples,
        ks=script_args.heldout_k,
        eval_steps=script_args.heldout_steps or None,  # 0: only before and after training
        temperature=script_args.heldout_temperature,
        top_p=script_args.heldout_top_p,
        batch_size=script_args.heldout_batch_size,
        seed=trainer.args.seed,
    )
    trainer.add_callback(callback)
    return callback


def before_after(callback: PassAtKCallback | None) -> str:
    """One line comparing the held-out pass@k before and after training, e.g.
    `held-out pass@1 (200 prompts x 4 samples): before 0.281 -> after 0.553`."""
    if callback is None or not callback.history:
        return "No held-out evaluation (heldout_prompts: 0)."
    first: PassAtKResult = callback.history[0][1]
    last: PassAtKResult = callback.history[-1][1]
    parts = [f"pass@{k} before {first.pass_at_k[k]:.3f} -> after {last.pass_at_k[k]:.3f}" for k in first.pass_at_k]
    return f"held-out ({first.num_prompts} prompts x {first.num_samples} samples): " + "; ".join(parts)
