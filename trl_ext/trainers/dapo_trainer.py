"""`DAPOTrainer`: TRL's `GRPOTrainer` with DAPO's dynamic sampling and built-in soft overlong punishment."""

from __future__ import annotations

import copy
import inspect
import json
import os
from typing import Any

import torch
from datasets import IterableDataset
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging
from trl import GRPOTrainer

from ..rewards import SoftOverlongPunishment, check_reward_columns
from ..sampling import (
    KeepRateEstimator,
    RefillSampler,
    concat_selected_rows,
    filter_rewards,
    groups_to_keep,
    informative_group_mask,
    prompts_to_request,
    spare_groups_to_fill,
)
from .dapo_config import DAPOConfig

logger = logging.get_logger(__name__)

# Saved in each checkpoint so a resumed run requests the prompts the interrupted one would have.
DYNAMIC_SAMPLING_STATE_FILE = "dynamic_sampling_state.json"

# The name of TRL's `get_soft_overlong_punishment` reward.
_TRL_OVERLONG_REWARD_NAME = "soft_overlong_punishment_reward"


def _is_overlong_punishment(reward_func) -> bool:
    """Whether a reward function is a soft overlong punishment (ours or TRL's): it never decides informativeness."""
    return isinstance(reward_func, SoftOverlongPunishment) or getattr(reward_func, "__name__", None) == (
        _TRL_OVERLONG_REWARD_NAME
    )


class DAPOTrainer(GRPOTrainer):
    """Trainer for DAPO ([arXiv 2503.14476](https://huggingface.co/papers/2503.14476)).

    A drop-in replacement for [`~trl.GRPOTrainer`], with the same constructor: swap the import and the class
    names (`GRPOTrainer` -> `DAPOTrainer`, `GRPOConfig` -> `DAPOConfig`) and the script trains with DAPO. On top of
    TRL's clip-higher and token-level loss, it adds:

    - **dynamic sampling**: after generation and scoring, prompt groups whose filter reward has zero variance are
      dropped and fresh prompts are generated until the batch holds only informative groups. Every process takes
      the same decisions from gathered rewards and runs the same number of rounds. The number of prompts per round
      adapts to the keep rate of recent rounds, so a typical step needs one round;
    - **soft overlong punishment**, added as the reward function `soft_overlong_punishment`.

    Metrics, per generation batch: `dynamic_sampling/generation_rounds`, `dynamic_sampling/prompts_sampled`,
    `dynamic_sampling/groups_kept_fraction`, `dynamic_sampling/zero_std_fraction` (before filtering) and
    `dynamic_sampling/rounds_exhausted`. TRL's own reward and completion metrics describe every generated sample,
    kept or not.
    """

    _tag_names = ["trl", "dapo", "trl-ext"]
    _name = "DAPO"

    def __init__(self, *args, **kwargs):
        arguments = _GRPO_INIT_SIGNATURE.bind(self, *args, **kwargs)
        arguments.apply_defaults()
        arguments = dict(arguments.arguments)
        del arguments["self"]

        config = arguments["args"]
        if config is None:
            model = arguments["model"]
            model_name = model if isinstance(model, str) else model.config._name_or_path
            config = DAPOConfig(f"{model_name.split('/')[-1]}-DAPO")
        elif not isinstance(config, DAPOConfig):
            raise TypeError(
                f"DAPOTrainer needs a DAPOConfig, got {type(config).__name__}. Replace `GRPOConfig(...)` with "
                "`DAPOConfig(...)` (same arguments): `from trl_ext import DAPOConfig`."
            )
        reward_funcs = arguments["reward_funcs"]
        reward_funcs = [] if reward_funcs is None else reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        train_dataset = arguments["train_dataset"]
        if getattr(train_dataset, "column_names", None):
            check_reward_columns(reward_funcs, train_dataset.column_names)
        if config.soft_overlong_punishment:
            if any(_is_overlong_punishment(func) for func in reward_funcs):
                logger.warning(
                    "The reward functions already include a soft overlong punishment, so DAPOTrainer does not add "
                    "its own (soft_overlong_punishment=True) a second time. Remove one of the two to silence this."
                )
            else:
                config, arguments["reward_funcs"], arguments["reward_processing_classes"] = _with_overlong_punishment(
                    config, reward_funcs, arguments["reward_processing_classes"]
                )
        arguments["args"] = config
        super().__init__(**arguments)

        if self.args.dynamic_sampling and self.train_dataset is not None:
            self._setup_dynamic_sampling()

    __init__.__signature__ = inspect.signature(GRPOTrainer.__init__)

    def _setup_dynamic_sampling(self):
        if isinstance(self.train_dataset, IterableDataset):
            raise ValueError(
                "Dynamic sampling draws extra prompts by index, which an IterableDataset does not allow. Pass a "
                "map-style `datasets.Dataset` as train_dataset, or set `dynamic_sampling=False` in DAPOConfig."
            )
        if self._is_vlm:
            raise ValueError(
                "Dynamic sampling does not support vision-language models yet. Set `dynamic_sampling=False` in "
                "DAPOConfig."
            )
        self._filter_mask, self._filter_weights = self._resolve_filter_reward()
        self._refill_sampler = RefillSampler(
            dataset_size=len(self.train_dataset),
            seed=self.args.seed,
            num_processes=self.accelerator.num_processes,
            process_index=self.accelerator.process_index,
        )
        self._keep_rates = [KeepRateEstimator() for _ in range(self.accelerator.num_processes)]
        self._last_rewards_per_func: torch.Tensor | None = None

    def _resolve_filter_reward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Which reward functions decide informativeness, and with what weights."""
        names = self.reward_func_names
        wanted = self.args.dynamic_sampling_filter_reward
        if wanted is not None:
            if wanted not in names:
                raise ValueError(
                    f"dynamic_sampling_filter_reward={wanted!r} is not one of the trainer's reward functions: "
                    f"{names}. Use one of these names, or None for the weighted sum of all of them."
                )
            used = torch.tensor([name == wanted for name in names])
            return used, torch.ones(len(names))
        used = torch.tensor([not _is_overlong_punishment(func) for func in self.reward_funcs])
        if not used.any():
            raise ValueError(
                "Dynamic sampling needs a reward that judges answers, but the only reward functions are overlong "
                f"penalties ({names}). Add a verifier reward, or set `dynamic_sampling=False` in DAPOConfig."
            )
        return used, self.reward_weights

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if hasattr(self, "_keep_rates") and self.args.should_save:
            checkpoint = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            state = {"keep_rate_windows": [estimator.state_dict() for estimator in self._keep_rates]}
            with open(os.path.join(checkpoint, DYNAMIC_SAMPLING_STATE_FILE), "w") as file:
                json.dump(state, file)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, DYNAMIC_SAMPLING_STATE_FILE) if checkpoint else None
        if hasattr(self, "_keep_rates") and path and os.path.exists(path):
            with open(path) as file:
                windows = json.load(file)["keep_rate_windows"]
            if len(windows) == len(self._keep_rates):  # else the run was resumed on another process count
                for estimator, window in zip(self._keep_rates, windows, strict=True):
                    estimator.load_state_dict(window)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # Keep the gathered rewards of the last round: the filter decides from them.
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, torch.Tensor | Any]:
        if self.args.dynamic_sampling and self.model.training:
            return self._generate_informative_batch(inputs)
        return super()._generate_and_score_completions(inputs)

    def _generate_informative_batch(self, inputs: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Generate and score rounds until every process holds `len(inputs) // G` informative groups.

        Decisions come from rewards gathered over all processes, so every process runs the same rounds with the
        same number of prompts (scoring holds collectives). A process that fills its quota early keeps generating
        with the others and discards the surplus.
        """
        group_size = self.num_generations
        num_processes, rank = self.accelerator.num_processes, self.accelerator.process_index
        groups_needed = len(inputs) // group_size
        max_prompts = max(groups_needed, int(groups_needed * self.args.dynamic_sampling_max_oversampling))
        draw_key = self._refill_draw_key()

        kept_per_process = torch.zeros(num_processes, dtype=torch.long)
        # Per round, only the rows the batch may still use: its kept groups, then spare uninformative ones.
        rounds, kept_counts, spare_counts = [], [], []
        groups_sampled = informative_sampled = 0

        extra = self._prompts_for(torch.full((num_processes,), groups_needed), max_prompts) - groups_needed
        round_inputs = inputs + self._refill_inputs(extra, draw_key, round_index=0)
        for round_index in range(self.args.dynamic_sampling_max_rounds):
            if round_index > 0:
                num_prompts = self._prompts_for(groups_needed - kept_per_process, max_prompts)
                round_inputs = self._refill_inputs(num_prompts, draw_key, round_index)
            output = super()._generate_and_score_completions(round_inputs)

            rewards = filter_rewards(self._last_rewards_per_func, self._filter_weights, self._filter_mask)
            informative = informative_group_mask(rewards, group_size).view(num_processes, -1).cpu()
            for estimator, process_informative in zip(self._keep_rates, informative, strict=True):
                estimator.update(int(process_informative.sum()), process_informative.numel())
            groups_sampled += informative.numel()
            informative_sampled += int(informative.sum())

            kept = groups_to_keep(informative[rank], groups_needed - int(kept_per_process[rank]))
            room = groups_needed - int(kept_per_process[rank]) - len(kept) - sum(spare_counts)
            spare = (~informative[rank]).nonzero(as_tuple=True)[0][: max(room, 0)]
            rounds.append(_select_groups(output, torch.cat([kept, spare]), group_size, self._tokenizer.pad_token_id))
            kept_counts.append(len(kept))
            spare_counts.append(len(spare))
            kept_per_process += torch.minimum(informative.sum(dim=1), groups_needed - kept_per_process)
            if bool((kept_per_process >= groups_needed).all()):
                exhausted = False
                break
        else:
            exhausted = True
            self._on_rounds_exhausted(int(kept_per_process.min()), groups_needed)

        spare_groups = [torch.arange(kept, kept + spare) for kept, spare in zip(kept_counts, spare_counts)]
        shortfall = groups_needed - sum(kept_counts)
        filling = spare_groups_to_fill(spare_groups, shortfall) if exhausted else [s[:0] for s in spare_groups]
        rows = []
        for output, kept, filler in zip(rounds, kept_counts, filling, strict=True):
            # Filler groups train on nothing: their advantage could still be non-zero through rewards outside
            # the filter (e.g. the overlong punishment), so zero it.
            output["advantages"][_group_rows(filler, group_size)] = 0.0
            rows.append(_group_rows(torch.cat([torch.arange(kept), filler]), group_size))
        batch = concat_selected_rows(rounds, rows, pad_token_id=self._tokenizer.pad_token_id)
        # The token-level loss divides by the number of loss tokens in the batch: count the kept rows only.
        loss_mask = batch["completion_mask"] * batch["tool_mask"] if "tool_mask" in batch else batch["completion_mask"]
        batch["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()

        metrics = self._metrics["train"]
        metrics["dynamic_sampling/generation_rounds"].append(float(len(rounds)))
        metrics["dynamic_sampling/prompts_sampled"].append(float(groups_sampled))
        # Informative groups that made it into the batch (fillers excluded), over all groups generated for.
        metrics["dynamic_sampling/groups_kept_fraction"].append(int(kept_per_process.sum()) / groups_sampled)
        metrics["dynamic_sampling/zero_std_fraction"].append(1.0 - informative_sampled / groups_sampled)
        metrics["dynamic_sampling/rounds_exhausted"].append(float(exhausted))
        return batch

    def _prompts_for(self, deficits: torch.Tensor, max_prompts: int) -> int:
        """Prompts per process for the next round: enough for the process that needs most, given its keep rate.

        Keep rates are tracked per process (processes may see very different ones), and each process aims at
        the confidence that makes all of them succeed together with probability `dynamic_sampling_confidence`.
        """
        per_process_confidence = self.args.dynamic_sampling_confidence ** (1 / len(deficits))
        requests = []
        for deficit, estimator in zip(deficits.tolist(), self._keep_rates, strict=True):
            keep_rate = estimator.estimate()
            requests.append(
                prompts_to_request(
                    deficit,
                    keep_rate=1.0 if keep_rate is None else keep_rate,
                    confidence=per_process_confidence,
                    max_prompts=max_prompts,
                )
            )
        return max(requests)

    def _refill_draw_key(self) -> int:
        """Identifies this generation batch: unique even when several are generated within one optimiser step
        (`steps_per_generation < gradient_accumulation_steps`), and the same after resuming from a checkpoint."""
        accumulation = self.args.gradient_accumulation_steps
        return self.state.global_step * accumulation + self._step % accumulation

    def _refill_inputs(self, num_prompts: int, draw_key: int, round_index: int) -> list[dict[str, Any]]:
        """`num_prompts` fresh training rows for this process, each repeated once per generation."""
        indices = self._refill_sampler.indices(num_prompts, draw_key, round_index) if num_prompts > 0 else []
        rows = [self.train_dataset[index] for index in indices]
        # One dict per completion, as TRL's sampler yields them: TRL may write per-completion fields into them.
        return [dict(row) for row in rows for _ in range(self.num_generations)]

    def _on_rounds_exhausted(self, fewest_kept: int, groups_needed: int):
        message = (
            f"Dynamic sampling ran {self.args.dynamic_sampling_max_rounds} generation rounds "
            f"(dynamic_sampling_max_rounds) at step {self.state.global_step} and a process still holds only "
            f"{fewest_kept} of its {groups_needed} informative prompt groups: most groups get identical rewards "
            "(the task is too easy or too hard for the model, or the reward does not discriminate)."
        )
        if self.args.dynamic_sampling_on_exhausted == "raise":
            raise RuntimeError(
                message + " Raise dynamic_sampling_max_rounds, check the rewards, or set "
                "dynamic_sampling_on_exhausted='warn' to train on the partial batch."
            )
        logger.warning(
            message + " The batch is completed with uninformative groups (zero advantage, no gradient); see the "
            "metric dynamic_sampling/rounds_exhausted."
        )


_GRPO_INIT_SIGNATURE = inspect.signature(GRPOTrainer.__init__)


def _select_groups(output: dict[str, Any], groups: torch.Tensor, group_size: int, pad_token_id: int) -> dict:
    """The rows of `groups` in one round's output (dropping the rest frees their memory right away)."""
    return concat_selected_rows([output], [_group_rows(groups, group_size)], pad_token_id=pad_token_id)


def _group_rows(groups: torch.Tensor, group_size: int) -> torch.Tensor:
    """Row indices of the completions of `groups`, whose completions are stored contiguously."""
    return (groups.unsqueeze(1) * group_size + torch.arange(group_size)).flatten()


def _with_overlong_punishment(config: DAPOConfig, reward_funcs, reward_processing_classes):
    """Append the soft overlong punishment to the reward functions, without touching the user's objects."""
    punishment = SoftOverlongPunishment(config.max_completion_length, config.overlong_buffer_length)
    config = copy.copy(config)
    user_weights = config.reward_weights if config.reward_weights is not None else [1.0] * len(reward_funcs)
    config.reward_weights = [*user_weights, config.overlong_penalty_factor]
    if reward_processing_classes is not None:
        if not isinstance(reward_processing_classes, list):
            reward_processing_classes = [reward_processing_classes]
        reward_processing_classes = [*reward_processing_classes, None]
    return config, [*reward_funcs, punishment], reward_processing_classes
