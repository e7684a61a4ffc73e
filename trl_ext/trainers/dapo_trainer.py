"""`DAPOTrainer`: TRL's `GRPOTrainer` with DAPO's dynamic sampling and built-in soft overlong punishment."""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import os
from typing import Any

import torch
from accelerate.utils import gather_object
from datasets import IterableDataset
from torch import nn
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging
from trl import GRPOTrainer
from trl.trainer.utils import pad

from ..rewards import SoftOverlongPunishment, check_reward_columns
from ..sampling import (
    BackoffController,
    CarriedGroup,
    CarryBuffer,
    KeepRateEstimator,
    PromptHistory,
    RefillSampler,
    SamplingMode,
    StreamRefillSampler,
    draw_unskipped,
    filter_reward_mask,
    filter_rewards,
    first_round_plans,
    group_outcomes,
    groups_to_keep,
    informative_group_mask,
    prompt_index,
    prompt_key,
    prompts_for_processes,
    spare_groups_to_fill,
    surplus_informative_groups,
)
from ..sampling.assembly import (
    Round,
    Rows,
    assemble,
    carried_payload,
    carried_round,
    completion_lengths,
    extra_per_row_fields,
    group_rows,
    images_as_tensors,
    images_from_tensors,
    rollout_rows,
    sampled_log_probs,
)
from ..sampling.environments import free_instances, lent_pool, stand_ins
from .dapo_config import DAPOConfig
from .scoring import (
    TRL_CONTINUOUS_REWARD_NAMES,
    is_shaping_reward,
    mark_unjudged_completions,
    merge_generation_metrics,
)

logger = logging.get_logger(__name__)
# TRL's GRPOTrainer logger: warnings that TRL would give in the same situation go where TRL users look for them.
_TRL_LOGGER = logging.get_logger("trl.trainer.grpo_trainer")

# Saved in each checkpoint so a resumed run requests the prompts the interrupted one would have.
DYNAMIC_SAMPLING_STATE_FILE = "dynamic_sampling_state.json"

# Refill candidates a stream's prompt history may skip in a row before it must take them.
STREAM_SKIP_PATIENCE = 10_000

# Each process saves its carried groups in its own file of the checkpoint.
CARRY_STATE_FILE = "dynamic_sampling_carry_{process}.pt"
# Batch key: rows whose old log-probs come from the training forward (a batch holding carried groups).
FRESH_OLD_LOGPS = "old_per_token_logps_from_training_forward"

# Generation batches in a row in which every group was informative before the trainer says the filter cannot filter.
ALWAYS_INFORMATIVE_BATCHES = 20

class _RoundGenerated(Exception):
    """Carries one round's generation out of TRL's `_generate_and_score_completions` (see `_generate_round`)."""

    def __init__(self, generation: tuple, prompts: list):
        super().__init__("generation round")
        self.generation, self.prompts = generation, prompts


class DAPOTrainer(GRPOTrainer):
    """Trainer for DAPO ([arXiv 2503.14476](https://huggingface.co/papers/2503.14476)).

    A drop-in replacement for [`~trl.GRPOTrainer`], with the same constructor: swap the import and the class
    names (`GRPOTrainer` -> `DAPOTrainer`, `GRPOConfig` -> `DAPOConfig`) and the script trains with DAPO. On top of
    TRL's clip-higher and token-level loss, it adds:

    - **dynamic sampling**: generated completions are scored first; prompt groups whose filter reward has zero
      variance are dropped and fresh prompts are generated until the batch holds only informative groups. Only then
      does TRL run its log-probability forwards (old policy, reference model) and compute advantages, on the kept
      rows alone. Every process takes the same decisions from gathered rewards and runs the same number of rounds.
      The number of prompts per round adapts to the keep rate of recent rounds, so a typical step needs one round.
      Surplus informative groups are carried, with the behaviour policy's log-probs, to the next batch, which uses
      them first and generates only for what they leave open;
    - **soft overlong punishment**, added as the reward function `soft_overlong_punishment`;
    - **"cannot judge" stays unscorable**: a completion that every judging reward scored `None` is left out of the
      advantages, whatever shaping rewards (length, repetition) add to it.

    Metrics: TRL's `reward`, `reward_std`, `rewards/*` and `frac_reward_zero_std` describe the trained batch;
    `completions/*` describe every generated completion, weighted by sample. Per generation batch:
    `dynamic_sampling/generation_rounds`, `dynamic_sampling/prompts_sampled`, `dynamic_sampling/tokens_generated`,
    `dynamic_sampling/groups_kept_fraction`, `dynamic_sampling/zero_std_fraction` (before filtering),
    `dynamic_sampling/rounds_exhausted` and `dynamic_sampling/backoff` (nothing informative: one plain round per
    step), `dynamic_sampling/carried_groups`, `dynamic_sampling/carried_staleness`, `dynamic_sampling/carry_dropped`
    (carried surplus groups), and `dynamic_sampling/prompts_skipped` (the opt-in prompt history).
    """

    _tag_names = ["trl", "dapo", "trl-ext"]
    _name = "DAPO"
    # Per-generation-batch state of dynamic sampling; None outside `_generate_and_score_completions`.
    _generating_round = False
    _assembled_batch: Rows | None = None
    _assembled_rewards: torch.Tensor | None = None
    # `(old_per_token_logps, rows)` of the micro-batch being trained whose rows take their old log-probs from the
    # training forward; set only while `_compute_loss` runs.
    _old_logps_from_training_forward: tuple[torch.Tensor, torch.Tensor] | None = None

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
        reward_funcs = (
            [] if reward_funcs is None else reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        )
        train_dataset = arguments["train_dataset"]
        if getattr(train_dataset, "column_names", None):
            check_reward_columns(reward_funcs, train_dataset.column_names)
        # Without a reward function TRL refuses to train ("No reward source"): never hide that behind the penalty.
        if config.soft_overlong_punishment and reward_funcs:
            if any(_is_overlong(func) for func in reward_funcs):
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

        self._judging = torch.tensor([not is_shaping_reward(func) for func in self.reward_funcs])
        if self.args.dynamic_sampling and self.train_dataset is not None:
            self._setup_dynamic_sampling()

    __init__.__signature__ = inspect.signature(GRPOTrainer.__init__)

    # ------------------------------------------------------------------------------------------------ set-up

    def _setup_dynamic_sampling(self):
        self._filter_mask, self._filter_weights = self._resolve_filter_reward()
        dataset = self.train_dataset
        if isinstance(dataset, IterableDataset):  # a stream: refills come from it, prompts are their own identity
            self._refill_sampler = StreamRefillSampler(dataset, seed=self.args.seed, shuffle=self.args.shuffle_dataset)
            self._prompt_identity, self._refill_row = prompt_key, self._refill_sampler.row
            self._skip_patience = STREAM_SKIP_PATIENCE
        else:
            self._refill_sampler = RefillSampler(
                dataset_size=len(dataset),
                seed=self.args.seed,
                num_processes=self.accelerator.num_processes,
                process_index=self.accelerator.process_index,
                shuffle=self.args.shuffle_dataset,
            )
            # A dataset of an environment that owns its data may hold no prompts: its rows are then not told apart.
            indices = prompt_index(dataset["prompt"] if "prompt" in dataset.column_names else [])
            self._prompt_identity = lambda prompt: indices.get(prompt_key(prompt), -1)
            self._refill_row, self._skip_patience = dataset.__getitem__, len(dataset)
        self._keep_rates = [KeepRateEstimator() for _ in range(self.accelerator.num_processes)]
        self._backoff = BackoffController.from_config(
            self.args.dynamic_sampling_max_oversampling, self.args.dynamic_sampling_max_rounds
        )
        self._backoff_announced = False
        self._always_informative_batches = 0
        self._carry = CarryBuffer(
            max_groups=self.args.dynamic_sampling_carry_max_groups,
            max_staleness=self.args.dynamic_sampling_carry_max_staleness,
        )
        self._carried_logps: list[torch.Tensor] = []
        self._any_carried = False
        self._prompt_history = (
            PromptHistory(seed=self.args.seed, max_skip_probability=self.args.dynamic_sampling_max_skip_probability)
            if self.args.dynamic_sampling_max_skip_probability > 0
            else None
        )

    def _resolve_filter_reward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Which reward functions decide informativeness, and with what weights."""
        names, wanted = self.reward_func_names, self.args.dynamic_sampling_filter_reward
        used = filter_reward_mask(names, self._judging.tolist(), wanted)
        if wanted is not None:
            return torch.tensor(used), torch.ones(len(names))
        continuous = [
            name
            for name, func, judging in zip(names, self.reward_funcs, used, strict=True)
            if judging
            and (isinstance(func, nn.Module) or getattr(func, "__name__", None) in TRL_CONTINUOUS_REWARD_NAMES)
        ]
        if continuous:
            logger.warning(
                f"Dynamic sampling filters on the sum of the rewards, which includes {continuous}: a reward model or "
                "a length-scaled reward almost never gives a group identical rewards, so no group would be dropped. "
                "Set `dynamic_sampling_filter_reward` to the name of a verifier reward (one of "
                f"{[name for name in names if name not in continuous]}) to filter on right/wrong outcomes."
            )
        return torch.tensor(used), self.reward_weights

    # --------------------------------------------------------------------------------------------- checkpoints

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if not hasattr(self, "_keep_rates"):
            return
        checkpoint = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        if len(self._carry):  # every process saves its own carried groups
            os.makedirs(checkpoint, exist_ok=True)
            carry_file = CARRY_STATE_FILE.format(process=self.accelerator.process_index)
            torch.save(images_as_tensors(self._carry.state_dict()), os.path.join(checkpoint, carry_file))
        if self.args.should_save:
            state = {
                "keep_rate_windows": [estimator.state_dict() for estimator in self._keep_rates],
                "backoff": self._backoff.state_dict(),
                "prompt_history": self._prompt_history.state_dict() if self._prompt_history else None,
                "refill_stream": getattr(self._refill_sampler, "state_dict", dict)(),
            }
            with open(os.path.join(checkpoint, DYNAMIC_SAMPLING_STATE_FILE), "w") as file:
                json.dump(state, file)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, DYNAMIC_SAMPLING_STATE_FILE) if checkpoint else None
        if not (hasattr(self, "_keep_rates") and path and os.path.exists(path)):
            return
        with open(path) as file:
            state = json.load(file)
        windows = state["keep_rate_windows"]
        carry_path = os.path.join(checkpoint, CARRY_STATE_FILE.format(process=self.accelerator.process_index))
        if len(windows) == len(self._keep_rates) and os.path.exists(carry_path):
            self._carry.load_state_dict(images_from_tensors(torch.load(carry_path, weights_only=True)))
        elif len(windows) != len(self._keep_rates):
            logger.info("Carried groups are not resumed on another number of processes: they are generated afresh.")
        if "backoff" in state:
            self._backoff.load_state_dict(state["backoff"])
        if state.get("refill_stream") and isinstance(self._refill_sampler, StreamRefillSampler):
            self._refill_sampler.load_state_dict(state["refill_stream"])
        if self._prompt_history is not None and state.get("prompt_history"):
            self._prompt_history.load_state_dict(state["prompt_history"])
        if len(windows) != len(self._keep_rates):
            logger.info(
                f"Resuming on {len(self._keep_rates)} processes from a checkpoint written by {len(windows)}: the "
                "saved keep rates are pooled over the old processes and every process starts from the pooled rate."
            )
            windows = [KeepRateEstimator.pooled_state(windows)] * len(self._keep_rates)
        for estimator, window in zip(self._keep_rates, windows, strict=True):
            estimator.load_state_dict(window)

    # ------------------------------------------------------------------------------------------------ scoring

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._assembled_rewards is not None:  # dynamic sampling scored these rows while assembling the batch
            rewards_per_func, self._assembled_rewards = self._assembled_rewards, None
            return rewards_per_func
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        rewards_per_func, unjudged = mark_unjudged_completions(rewards_per_func, self._judging)
        if not self._judging.all():  # else TRL's own check has warned already
            self._warn_unjudged(unjudged, inputs, prompts, completions)
        return rewards_per_func

    def _warn_unjudged(self, unjudged: torch.Tensor, inputs, prompts, completions):
        """TRL's warning for a completion no reward could judge, with the same wording (and logger), when only the
        shaping rewards scored it."""
        rows = len(prompts)
        local = unjudged[self.accelerator.process_index * rows : (self.accelerator.process_index + 1) * rows]
        if not local.any():
            return
        row = int(local.nonzero()[0][0])
        row_kwargs = {key: value for key, value in inputs[row].items() if key not in ("prompt", "completion")}
        row_kwargs.update(prompt=prompts[row], completion=completions[row])
        shaping = [name for name, judging in zip(self.reward_func_names, self._judging.tolist()) if not judging]
        _TRL_LOGGER.warning(
            f"All reward functions returned None for the following kwargs:\n{row_kwargs}\nOnly shaping rewards "
            f"({shaping}) scored it; {int(local.sum())} such completion(s) in this batch are left out of the "
            "advantages. Please ensure that at least one reward function returns a valid reward."
        )

    # ------------------------------------------------------------------------------------- dynamic sampling

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, torch.Tensor | Any]:
        if not (self.args.dynamic_sampling and self.model.training):
            return super()._generate_and_score_completions(inputs)
        self._filler_rows = torch.zeros(0, dtype=torch.long)
        self._carried_logps, self._any_carried = [], False
        batch = self._generate_informative_batch(inputs)
        # TRL scores the assembled batch: its `_generate` hands back the rows already generated, its
        # `_calculate_rewards` the rewards already computed, and only then do the log-probability forwards run.
        self._assembled_batch = batch
        try:  # the rows' environments were reset and played already: TRL resets stand-ins instead
            with self._environments_lent(lambda pool: stand_ins(pool, len(batch))):
                output = super()._generate_and_score_completions(batch.columns["inputs"])
        finally:
            self._assembled_batch = self._assembled_rewards = None
        if self.environment_factories:  # what reward functions saw: each kept row's own (none for carried rows)
            self.environments = batch.columns["environments"]
        if self._any_carried:
            output["old_per_token_logps"], fresh_rows = self._with_behaviour_log_probs(output)
            if fresh_rows is not None:
                output[FRESH_OLD_LOGPS] = fresh_rows
        if len(self._filler_rows):
            # Filler groups train on nothing: out of the loss, the KL and entropy terms, and the token normaliser.
            output["completion_mask"][self._filler_rows.to(output["completion_mask"].device)] = 0
            loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
            output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return output

    def _generate(self, prompts: list):
        if self._generating_round:  # stop TRL right after generating: see `_generate_round`
            raise _RoundGenerated(super()._generate(prompts), prompts)
        if self._assembled_batch is None:
            return super()._generate(prompts)
        prompts[:] = self._assembled_batch.columns["prompts"]  # as TRL prepared them in their own round
        return self._assembled_batch.generation()

    def _environments_lent(self, lend):
        """While the context runs, TRL draws environments from `lend(pool)`; see `trl_ext.sampling.environments`."""
        return lent_pool(self, lend) if self.environment_factories else contextlib.nullcontext()

    def _generate_round(self, inputs: list[dict[str, Any]]) -> tuple[tuple, list]:
        """TRL's `_generate` output for `inputs`, and their prompts as TRL prepared them.

        TRL prepares a batch before generating (an environment instance per row, reset with the row's fields, its
        observation appended to the prompt; images put into the messages; per-row tool dicts): running its own
        `_generate_and_score_completions` up to `_generate` makes every round exactly what TRL would generate for
        these rows. `_generate` stops it there, before any log-probability forward.
        """
        self._generating_round = True
        try:
            super()._generate_and_score_completions(inputs)
        except _RoundGenerated as generated:
            return generated.generation, generated.prompts
        finally:
            self._generating_round = False
        raise RuntimeError("TRL's _generate_and_score_completions returned without calling _generate.")

    def _score_round(self, inputs: list[dict[str, Any]], held_environments: list) -> tuple[Rows, torch.Tensor]:
        """Generate and score one round: its rows (with their local rewards) and the gathered `(N, F)` rewards.

        Environments still needed by rows of earlier rounds are kept out of TRL's pool, so this round resets others.
        """
        with self._environments_lent(lambda pool: free_instances(pool, held_environments)):
            generation, prompts = self._generate_round(inputs)
        # Reward functions see a rollout function's extra fields as dataset columns, as TRL merges them.
        for name, values in extra_per_row_fields(generation[5], len(inputs)).items():
            for row, value in zip(inputs, values, strict=True):
                row[name] = value
        rewards_per_func = self._calculate_rewards(inputs, prompts, generation[3], generation[1])
        extra_logs = dict(self._pending_extra_logs)
        self._pending_extra_logs.clear()
        rank = self.accelerator.process_index
        rows = rollout_rows(
            generation,
            inputs=inputs,
            prompts=prompts,
            rewards=rewards_per_func[rank * len(inputs) : (rank + 1) * len(inputs)],
            extra_logs=extra_logs,
            environments=list(self.environments) if self.environment_factories else None,
        )
        return rows, rewards_per_func

    def _generate_informative_batch(self, inputs: list[dict[str, Any]]) -> Rows:
        """Generate and score rounds until every process holds `len(inputs) // G` informative groups.

        Decisions come from rewards gathered over all processes, so every process runs the same rounds with the
        same number of prompts (scoring holds collectives). A process that fills its quota early keeps generating
        with the others and discards the surplus.

        Returns the rows of the assembled batch; their gathered rewards wait in `self._assembled_rewards` for TRL's
        call to `_calculate_rewards`.
        """
        group_size = self.num_generations
        num_processes, rank = self.accelerator.num_processes, self.accelerator.process_index
        groups_needed = len(inputs) // group_size
        max_prompts = max(groups_needed, int(groups_needed * self.args.dynamic_sampling_max_oversampling))
        logged_before = {name: len(values) for name, values in self._metrics["train"].items()}
        tokens_before = self.state.num_input_tokens_seen

        draw_key = self._refill_draw_key()
        version = self.state.global_step  # the policy generating this batch, in optimiser updates
        carry_dropped = self._carry.expire(version)
        local_indices = [self._prompt_identity(row.get("prompt")) for row in inputs[::group_size]]
        carried_indices = [group.prompt_index for group in self._carry]
        gathered = gather_object([(local_indices, carried_indices)])
        indices_per_process = [indices for indices, _ in gathered]
        # Groups carried from the last batch count as kept; refills never draw their prompts nor the batch's.
        available = torch.tensor([min(len(carried), groups_needed) for _, carried in gathered])
        batch_indices = [index for indices, carried in gathered for index in indices + carried if index >= 0]
        cursor = prompts_skipped = 0

        kept_per_process = torch.zeros(num_processes, dtype=torch.long)  # fresh informative groups kept
        surplus: list[CarriedGroup] = []
        rounds: list[Round] = []
        held_environments: list = []  # environments of the rows kept so far: later rounds must not reset them
        rows_per_round, generated_tokens = [], 0
        groups_sampled = informative_sampled = 0
        exhausted = True
        backing_off = self._backoff.mode is SamplingMode.BACKOFF
        for round_index in range(self.args.dynamic_sampling_max_rounds):
            if round_index == 0:
                # Carried groups count first, so the first round generates only for what they leave open (one
                # plain batch when backing off): the sampler's own prompts first, refills for the rest.
                size = (
                    groups_needed if backing_off else max(1, self._prompts_for(groups_needed - available, max_prompts))
                )
                carried_prompts = {index for _, carried in gathered for index in carried}
                skips = [self._skip_prompts(indices, draw_key, 0) for indices in indices_per_process]
                counts, kept_batch, local_groups = first_round_plans(indices_per_process, skips, carried_prompts, size)
                local_groups = local_groups[rank]
                prompts_skipped += sum(map(sum, skips))
                own_rows = [group * group_size + offset for group in local_groups for offset in range(group_size)]
            else:
                deficits = (groups_needed - available - kept_per_process).clamp(min=0)
                counts = [self._prompts_for(deficits, max_prompts)] * num_processes
                kept_batch, own_rows = [[] for _ in range(num_processes)], []
            refills, cursor, skipped_refills = self._draw_refills(draw_key, batch_indices, cursor, counts, round_index)
            prompts_skipped += skipped_refills
            round_inputs = [inputs[row] for row in own_rows] + self._refill_inputs(refills[rank])
            round_indices = [index for own, drawn in zip(kept_batch, refills, strict=True) for index in own + drawn]
            round_rows, rewards_per_func = self._score_round(round_inputs, held_environments)
            rows_per_round.append(len(round_inputs) * num_processes)
            generated_tokens += sum(completion_lengths(round_rows.generation()))

            rewards = filter_rewards(rewards_per_func, self._filter_weights, self._filter_mask)
            informative = informative_group_mask(rewards, group_size).view(num_processes, -1).cpu()
            if self._prompt_history is not None:
                self._prompt_history.record(round_indices, group_outcomes(rewards.cpu(), group_size))
            for estimator, process_informative in zip(self._keep_rates, informative, strict=True):
                estimator.update(int(process_informative.sum()), process_informative.numel())
            groups_sampled += informative.numel()
            informative_sampled += int(informative.sum())

            deficit = groups_needed - int(available[rank]) - int(kept_per_process[rank])  # what carried ones leave
            kept = groups_to_keep(informative[rank], deficit)
            room = deficit - len(kept) - sum(held.spare for held in rounds)
            spare = (~informative[rank]).nonzero(as_tuple=True)[0][: max(room, 0)]
            selected = round_rows.select(group_rows(torch.cat([kept, spare]), group_size).tolist())
            rounds.append(Round(rows=selected, kept=len(kept), spare=len(spare)))
            held_environments += selected.columns["environments"] or []
            if self._carry.max_staleness > 0:
                first_group = sum(len(own) + len(drawn) for own, drawn in list(zip(kept_batch, refills))[:rank])
                surplus += [
                    CarriedGroup(
                        {"rows": carried_payload(round_rows.select(group_rows(torch.tensor([group]), group_size)))},
                        generated_at=version,
                        prompt_index=round_indices[first_group + group],
                        process_index=rank,
                    )
                    for group in surplus_informative_groups(informative[rank], deficit, self._carry.max_groups).tolist()
                ]
            kept_per_process += torch.minimum(informative.sum(dim=1), groups_needed - available - kept_per_process)
            self._backoff.observe_round(int(informative.sum()), informative.numel())
            if bool((kept_per_process + available >= groups_needed).all()):
                exhausted = False
                break
            if self._backoff.mode is SamplingMode.BACKOFF:  # more rounds would not fill the batch
                break
        if exhausted and not backing_off:  # once backing off, the back-off notice has said it all
            self._on_rounds_exhausted(len(rounds), int((kept_per_process + available).min()), groups_needed)
        backing_off = self._announce_backoff(was_backing_off=backing_off)

        # The carried groups the batch counted on, then its fresh ones; this batch's surplus is carried on.
        rounds_run = len(rounds)
        carried, _ = self._carry.take(int(available[rank]), version)
        if carried:
            rounds.insert(0, carried_round(carried))
            self._carried_logps = [logps for group in carried for logps in group.payload["logps"]]
        self._any_carried = bool(
            self.accelerator.gather(torch.tensor([len(carried)], device=self.accelerator.device)).sum()
        )
        carry_dropped += self._carry_surplus(surplus)
        shortfall = groups_needed - sum(held.kept for held in rounds)
        fillers = spare_groups_to_fill([torch.arange(held.spare) for held in rounds], shortfall if exhausted else 0)
        batch, num_kept_rows = assemble(rounds, fillers, group_size)
        self._filler_rows = torch.arange(num_kept_rows, len(batch))
        # Fillers are unscorable: zero advantage, and out of the baseline, the batch scale and the logged rewards.
        batch_rewards = torch.stack([row.to(self.accelerator.device) for row in batch.columns["rewards"]])
        batch_rewards[num_kept_rows:] = float("nan")
        self._assembled_rewards = self.accelerator.gather(batch_rewards)
        for column, values in batch.extra_logs().items():
            self._pending_extra_logs[column].extend(values)

        generation = batch.generation()
        lengths = zip(generation[0][:num_kept_rows], completion_lengths(generation)[:num_kept_rows], strict=True)
        self._log_batch_metrics(
            logged_before,
            rows_per_round,
            tokens_before=tokens_before,
            generated_tokens=generated_tokens,
            trained_tokens=sum(len(prompt_ids) + length for prompt_ids, length in lengths),
            rounds_run=rounds_run,
            groups_sampled=groups_sampled,
            informative_sampled=informative_sampled,
            fresh_groups_kept=int(kept_per_process.sum()),
            exhausted=exhausted,
            backing_off=backing_off,
            prompts_skipped=prompts_skipped,
            carried=carried,
            version=version,
            carry_dropped=carry_dropped,
        )
        self._check_filter_filters(informative_sampled == groups_sampled)
        return batch

    def _log_batch_metrics(
        self,
        logged_before: dict[str, int],
        rows_per_round: list[int],
        *,
        tokens_before: int,
        generated_tokens: int,
        trained_tokens: int,
        rounds_run: int,
        groups_sampled: int,
        informative_sampled: int,
        fresh_groups_kept: int,
        exhausted: bool,
        backing_off: bool,
        prompts_skipped: int,
        carried: list[CarriedGroup],
        version: int,
        carry_dropped: int,
    ):
        """One entry per metric for the generation batch: TRL's per-round entries merged by sample, `num_tokens`
        counting trained rows only, and the `dynamic_sampling/*` metrics (process-local counts summed)."""
        metrics = self._metrics["train"]
        staleness_sum = sum(group.staleness(version) for group in carried)
        counts = [generated_tokens, trained_tokens, len(carried), staleness_sum, carry_dropped]
        generated, trained, carried_groups, staleness_sum, carry_dropped = (
            self.accelerator.gather(torch.tensor(counts, device=self.accelerator.device).unsqueeze(0))
            .sum(dim=0)
            .tolist()
        )
        # TRL counted every round's tokens; count those of the trained rows, and report what was generated.
        self.state.num_input_tokens_seen = tokens_before + trained
        metrics["num_tokens"] = [self.state.num_input_tokens_seen]
        per_round = {name: values[logged_before.get(name, 0) :] for name, values in metrics.items()}
        for name, value in merge_generation_metrics(per_round, rows_per_round).items():
            del metrics[name][logged_before.get(name, 0) :]
            metrics[name].append(value)

        metrics["dynamic_sampling/generation_rounds"].append(float(rounds_run))
        metrics["dynamic_sampling/prompts_sampled"].append(float(groups_sampled))
        metrics["dynamic_sampling/tokens_generated"].append(float(generated))
        # Fresh informative groups that made it into the batch (fillers excluded), over all groups generated for.
        metrics["dynamic_sampling/groups_kept_fraction"].append(fresh_groups_kept / groups_sampled)
        metrics["dynamic_sampling/zero_std_fraction"].append(1.0 - informative_sampled / groups_sampled)
        metrics["dynamic_sampling/rounds_exhausted"].append(float(exhausted))
        metrics["dynamic_sampling/backoff"].append(float(backing_off))
        metrics["dynamic_sampling/prompts_skipped"].append(float(prompts_skipped))
        metrics["dynamic_sampling/carried_groups"].append(float(carried_groups))
        metrics["dynamic_sampling/carried_staleness"].append(staleness_sum / carried_groups if carried_groups else 0.0)
        metrics["dynamic_sampling/carry_dropped"].append(float(carry_dropped))

    def _carry_surplus(self, surplus: list[CarriedGroup]) -> int:
        """Record the log-probs of the policy that generated the surplus groups, then carry them. Returns how many
        groups the buffer dropped to stay within its size.

        Where the generation backend returned the sampled tokens' log-probs (a `rollout_func`, vLLM), those are the
        behaviour policy's, as TRL takes them for its importance-sampling correction; other rows take one no-grad
        forward of the current policy, which generated them.
        """
        rows = [(group, row) for group in surplus for row in range(self.num_generations)]
        logps = [sampled_log_probs(group.payload["rows"], row) for group, row in rows]
        missing = [position for position, values in enumerate(logps) if values is None]
        forwarded = self._log_probs_of_rows(
            [
                (group.payload["rows"]["prompt_ids"][row], group.payload["rows"]["completion_ids"][row])
                for group, row in (rows[position] for position in missing)
            ]
        )
        for position, values in zip(missing, forwarded, strict=True):
            logps[position] = values
        for position, group in enumerate(surplus):
            group.payload["logps"] = logps[position * self.num_generations : (position + 1) * self.num_generations]
        return self._carry.add(surplus)

    def _log_probs_of_rows(self, rows: list[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
        """Per-token log-probs of the current policy for `(prompt_ids, completion_ids)` rows, one tensor per row.

        A forward is collective under ZeRO-3 and FSDP, so every process runs the same number of micro-batches:
        processes with fewer rows pad with copies of a row (or of a dummy one) and drop the results.
        """
        most = int(self.accelerator.gather(torch.tensor([len(rows)], device=self.accelerator.device)).max())
        if most == 0:
            return []
        padded = rows + [rows[0] if rows else ([self._tokenizer.pad_token_id], [self._tokenizer.pad_token_id])] * (
            most - len(rows)
        )
        device = self.accelerator.device
        prompt_ids = pad(
            [torch.tensor(p) for p, _ in padded], padding_value=self._tokenizer.pad_token_id, padding_side="left"
        )
        prompt_mask = pad(
            [torch.ones(len(p), dtype=torch.long) for p, _ in padded], padding_value=0, padding_side="left"
        )
        completion_ids = pad(
            [torch.tensor(c) for _, c in padded], padding_value=self._tokenizer.pad_token_id, padding_side="right"
        )
        completion_mask = pad(
            [torch.ones(len(c), dtype=torch.long) for _, c in padded], padding_value=0, padding_side="right"
        )
        logps = self._policy_log_probs(
            prompt_ids.to(device), prompt_mask.to(device), completion_ids.to(device), completion_mask.to(device)
        )
        return [logps[row, : len(completion)].cpu() for row, (_, completion) in enumerate(rows)]

    def _policy_log_probs(self, prompt_ids, prompt_mask, completion_ids, completion_mask) -> torch.Tensor:
        """`(B, T)` per-token log-probs of the completions under the current policy, as TRL computes them."""
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model,
                torch.cat([prompt_ids, completion_ids], dim=1),
                torch.cat([prompt_mask, completion_mask], dim=1),
                completion_ids.size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        return logps

    def _with_behaviour_log_probs(self, output: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`old_per_token_logps` for a batch holding carried groups, and which rows still lack theirs.

        The carried rows' are those of the policy that generated them, recorded then. The fresh rows' are the
        current policy's: TRL computed them when generation and updates are not aligned; when they are aligned, TRL
        takes them from the training forward (`per_token_logps.detach()`), and so do these rows, without a forward
        of their own (see `_compute_loss`). Returns the tensor and, in the aligned case, the `(B,)` mask of fresh rows.
        """
        old = output.get("old_per_token_logps")
        fresh_rows = None
        if old is None:
            completion_ids = output["completion_ids"]
            old = torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
            fresh_rows = torch.ones(old.size(0), dtype=torch.bool, device=old.device)
            fresh_rows[: len(self._carried_logps)] = False
        else:
            old = old.clone()
        for row, logps in enumerate(self._carried_logps):
            width = min(len(logps), old.size(1))
            old[row] = 0.0
            old[row, :width] = logps[:width].to(old.device, old.dtype)
        return old, fresh_rows

    def _compute_loss(self, model, inputs):
        fresh_rows = inputs.get(FRESH_OLD_LOGPS)
        if fresh_rows is None or not bool(fresh_rows.any()):
            return super()._compute_loss(model, inputs)
        self._old_logps_from_training_forward = (inputs["old_per_token_logps"], fresh_rows)
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._old_logps_from_training_forward = None

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        outputs = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        # The first forward of `_compute_loss` is the training forward: its log-probs, detached, are the fresh rows'
        # old log-probs, exactly what TRL uses for every row when no `old_per_token_logps` is given.
        pending, self._old_logps_from_training_forward = self._old_logps_from_training_forward, None
        if pending is not None:
            old, fresh_rows = pending
            old[fresh_rows] = outputs[0].detach()[fresh_rows].to(old.dtype)
        return outputs

    def _announce_backoff(self, was_backing_off: bool) -> bool:
        """Say when dynamic sampling starts or stops backing off (the first time as a warning). Returns the mode."""
        backing_off = self._backoff.mode is SamplingMode.BACKOFF
        if backing_off and not was_backing_off:
            message = (
                f"Dynamic sampling is backing off at step {self.state.global_step}: fewer than "
                f"{self._backoff.threshold:.2%} of the recent prompt groups were informative, so over-sampling "
                "cannot fill a batch. Until informative groups reappear, each step generates one plain batch whose "
                "uninformative groups train on nothing; see the metric dynamic_sampling/backoff. Check that the "
                "task suits the model and that the reward discriminates."
            )
            if self.args.dynamic_sampling_on_exhausted == "raise":
                raise RuntimeError(message + " Stopping, as dynamic_sampling_on_exhausted='raise' asks.")
            (logger.info if self._backoff_announced else logger.warning)(message)
            self._backoff_announced = True
        elif was_backing_off and not backing_off:
            logger.info(f"Dynamic sampling over-samples again at step {self.state.global_step}.")
        return backing_off

    def _check_filter_filters(self, all_informative: bool):
        self._always_informative_batches = self._always_informative_batches + 1 if all_informative else 0
        if self._always_informative_batches == ALWAYS_INFORMATIVE_BATCHES:
            logger.warning(
                f"Dynamic sampling kept every prompt group for {ALWAYS_INFORMATIVE_BATCHES} generation batches in a "
                "row: the filter reward is probably continuous (a reward model, a length or format score), so it "
                "never has zero variance and nothing is filtered. Set `dynamic_sampling_filter_reward` to a verifier "
                "reward (right/wrong), or `dynamic_sampling=False`."
            )

    def _prompts_for(self, deficits: torch.Tensor, max_prompts: int) -> int:
        """Prompts per process for the next round (see `prompts_for_processes`)."""
        rates = [estimator.estimate() for estimator in self._keep_rates]
        return prompts_for_processes(deficits.tolist(), rates, self.args.dynamic_sampling_confidence, max_prompts)

    def _refill_draw_key(self) -> int:
        """Identifies this generation batch: unique even when several are generated within one optimiser step
        (`steps_per_generation < gradient_accumulation_steps`), and the same after resuming from a checkpoint."""
        accumulation = self.args.gradient_accumulation_steps
        return self.state.global_step * accumulation + self._step % accumulation

    def _skip_prompts(self, indices: list[int], draw_key: int, round_index: int) -> list[bool]:
        """Which prompts the prompt history says not to generate for (never without a history)."""
        if self._prompt_history is None:
            return [False] * len(indices)
        return self._prompt_history.should_skip(indices, draw_key, round_index)

    def _draw_refills(self, draw_key: int, batch_indices: list[int], cursor: int, counts: list[int], round_index: int):
        """`counts[p]` fresh prompts for each process `p`, from the batch's draw order, past skipped prompts.

        Every process computes every process's draw (the order and the skip coins are pure functions), so they
        agree without communicating. Returns the indices per process, the new position in the order and the number
        of prompts skipped.
        """
        chosen, cursor, skipped = draw_unskipped(
            take=lambda start, count: self._refill_sampler.take(draw_key, batch_indices, start, count),
            should_skip=lambda indices: self._skip_prompts(indices, draw_key, round_index),
            start=cursor,
            count=sum(counts),
            patience=self._skip_patience,
        )
        starts = [sum(counts[:process]) for process in range(len(counts))]
        return [chosen[start : start + count] for start, count in zip(starts, counts, strict=True)], cursor, skipped

    def _refill_inputs(self, indices: list[int]) -> list[dict[str, Any]]:
        """The training rows of `indices`, each repeated once per generation."""
        rows = [self._refill_row(index) for index in indices]
        # One dict per completion, as TRL's sampler yields them: TRL may write per-completion fields into them.
        return [dict(row) for row in rows for _ in range(self.num_generations)]

    def _on_rounds_exhausted(self, rounds_run: int, fewest_kept: int, groups_needed: int):
        message = (
            f"Dynamic sampling ran {rounds_run} generation round(s) (at most dynamic_sampling_max_rounds="
            f"{self.args.dynamic_sampling_max_rounds}) at step {self.state.global_step} and a process still holds only "
            f"{fewest_kept} of its {groups_needed} informative prompt groups: most groups get identical rewards "
            "(the task is too easy or too hard for the model, or the reward does not discriminate)."
        )
        if self.args.dynamic_sampling_on_exhausted == "raise":
            raise RuntimeError(
                message + " Raise dynamic_sampling_max_rounds, check the rewards, or set "
                "dynamic_sampling_on_exhausted='warn' to train on the partial batch."
            )
        logger.warning(
            message + " The batch is completed with uninformative groups, which train on nothing; see the metric "
            "dynamic_sampling/rounds_exhausted."
        )


_GRPO_INIT_SIGNATURE = inspect.signature(GRPOTrainer.__init__)


def _is_overlong(reward_func) -> bool:
    return isinstance(reward_func, SoftOverlongPunishment) or getattr(reward_func, "__name__", None) == (
        "soft_overlong_punishment_reward"
    )


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
