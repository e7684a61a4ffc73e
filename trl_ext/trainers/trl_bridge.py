"""Where dynamic sampling meets TRL's `GRPOTrainer` internals: the one module that touches its private methods.

`trl_ext.sampling.DynamicSampler` runs the rounds and decides; this bridge lets TRL do, for each round and for the
assembled batch, exactly what it would do for a plain batch. Everything here depends on TRL 1.16's private
methods and attributes, listed so that a TRL upgrade is checked against one file:

- `_generate_and_score_completions`: run once per round up to `_generate` (TRL prepares the round: an environment
  instance per row, reset with the row, its observation appended to the prompt; images put into the messages;
  per-row tool dicts), and once for the assembled batch (TRL's log-probability forwards and advantages);
- `_generate`: stops a round's call right after generation (recording the sampled tokens' log-probs while
  `transformers` generates), and hands the assembled rows to the batch's call;
- `_calculate_rewards`: hands the assembled batch's rewards back; marks completions no judging reward scored;
- `_compute_loss` / `_get_per_token_logps_and_entropies`: fresh rows of a batch holding carried groups take their
  old log-probs from the training forward, as TRL's own rows do;
- `_save_checkpoint` / `_load_optimizer_and_scheduler`: the sampler's state in each checkpoint;
- `_get_output_dir`, and the attributes `_environment_pool`, `environments`, `_pending_extra_logs`, `_metrics`,
  `_tokenizer`.

Round generation leaves TRL's `_generate_and_score_completions` by an exception raised in `_generate`: TRL writes
the round's preparation inline in that method, so stopping it there is the only way to reuse the preparation without
copying it, or paying for log-probability forwards of rows the filter then drops.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import torch
from accelerate.utils import gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging
from trl import GRPOTrainer
from trl.trainer.utils import pad

from ..sampling import CarriedGroup
from ..sampling.assembly import (
    POLICY_LOGPROBS,
    Rows,
    extra_per_row_fields,
    images_as_tensors,
    images_from_tensors,
    rollout_rows,
    sampled_log_probs,
)
from ..sampling.environments import free_instances, merge_instances, stand_ins
from ..sampling.adaptive import HISTORY_COLUMN, batch_history_advantages
from ..sampling.sampler import SampledBatch
from .sampled_scores import SampledTokenScores, scores_agree
from .scoring import mark_unjudged_completions

logger = logging.get_logger(__name__)
# TRL's GRPOTrainer logger: warnings that TRL would give in the same situation go where TRL users look for them.
_TRL_LOGGER = logging.get_logger("trl.trainer.grpo_trainer")

# Saved in each checkpoint so a resumed run requests the prompts the interrupted one would have.
DYNAMIC_SAMPLING_STATE_FILE = "dynamic_sampling_state.json"
# Each process saves its carried groups in its own file of the checkpoint.
CARRY_STATE_FILE = "dynamic_sampling_carry_{process}.pt"
# Batch key: rows whose old log-probs come from the training forward (a batch holding carried groups).
FRESH_OLD_LOGPS = "old_per_token_logps_from_training_forward"


class _RoundGenerated(Exception):
    """Carries one round's generation out of TRL's `_generate_and_score_completions` (see module docstring)."""

    def __init__(self, generation: tuple, prompts: list):
        super().__init__("generation round")
        self.generation, self.prompts = generation, prompts


class Processes:
    """The trainer's processes as `DynamicSampler` sees them."""

    def __init__(self, accelerator):
        self.num_processes, self.process_index = (accelerator.num_processes, accelerator.process_index)

    def gather(self, value: Any) -> list[Any]:
        return gather_object([value])


class DynamicSamplingBridge(GRPOTrainer):
    """`GRPOTrainer` that can generate and score one round at a time and train on a batch assembled from rounds.

    Subclasses create `self.sampler` (a `DynamicSampler`, or None) and set `self._judging`, the `(F,)` mask of the
    reward functions that judge answers (the others only shape them).
    """

    sampler = None
    _judging: torch.Tensor
    # The assembled batch while TRL scores it; None otherwise.
    _assembled: SampledBatch | None = None
    _generating_round = False
    # Log-probs recorded while the round's `transformers` generation ran (None: not recorded).
    _round_scores: list[list[float]] | None = None
    # Whether recorded log-probs matched the training forward when first checked (None: not checked yet).
    _recorded_scores_agree: bool | None = None
    # `(old_per_token_logps, rows)` of the micro-batch being trained whose rows take their old log-probs from the
    # training forward; set only while `_compute_loss` runs.
    _old_logps_from_training_forward: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def _corrects_with_current_policy(self) -> bool:
        """Whether TRL corrects for the generation backend with the current policy's log-probs (vLLM's importance
        sampling): TRL then forwards every trained row, and a carried row's correction term is the current policy
        over the log-probs vLLM returned when it sampled the row."""
        return bool(self.use_vllm and self.vllm_importance_sampling_correction)

    # ------------------------------------------------------------------------------------- rounds (RoundSource)

    def generate_and_score(self, inputs: list[dict[str, Any]], held_environments: list) -> tuple[Rows, torch.Tensor]:
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
        rows.columns[POLICY_LOGPROBS] = self._round_scores
        return rows, rewards_per_func

    def record_behaviour(self, groups: list[CarriedGroup]) -> None:
        """Store each surplus group's behaviour log-probs in its payload (`"logps"`), before it is carried.

        With vLLM's importance-sampling correction nothing is stored: TRL forwards every trained row with the
        current policy, and a carried row's correction uses the log-probs vLLM returned when it sampled the row.
        Otherwise the behaviour policy's log-probs are those the backend returned (a `rollout_func`, vLLM without
        the correction), or those recorded while `transformers` generated (checked once against a forward), or, for
        the rest, one no-grad forward of the current policy, which generated them.
        """
        if self._corrects_with_current_policy:
            return
        rows = [(group.payload["rows"], row) for group in groups for row in range(self.num_generations)]
        backend = [sampled_log_probs(columns, row) for columns, row in rows]
        recorded = [
            None if self._recorded_scores_agree is False else sampled_log_probs(columns, row, POLICY_LOGPROBS)
            for columns, row in rows
        ]
        logps = [b if b is not None else r for b, r in zip(backend, recorded, strict=True)]
        checking = self._recorded_scores_agree is None and any(r is not None for r in recorded)
        forwarded_rows = [
            position
            for position, (value, record) in enumerate(zip(logps, recorded, strict=True))
            if value is None or (checking and record is not None)
        ]
        forwarded = self._log_probs_of_rows(
            [(rows[p][0]["prompt_ids"][rows[p][1]], rows[p][0]["completion_ids"][rows[p][1]]) for p in forwarded_rows]
        )
        if checking:
            pairs = [(recorded[p], value) for p, value in zip(forwarded_rows, forwarded) if recorded[p] is not None]
            self._recorded_scores_agree = scores_agree(pairs)
            if not self._recorded_scores_agree:
                logger.warning(
                    "The log-probs recorded while generating differ from the training forward's (the model computes "
                    "its logits after the output layer, e.g. with soft-capping): carried groups take a forward of "
                    "their own instead."
                )
        for position, values in zip(forwarded_rows, forwarded, strict=True):
            logps[position] = values
        for position, group in enumerate(groups):
            group.payload["logps"] = logps[position * self.num_generations : (position + 1) * self.num_generations]

    def _generate_round(self, inputs: list[dict[str, Any]]) -> tuple[tuple, list]:
        """TRL's `_generate` output for `inputs`, and their prompts as TRL prepared them."""
        self._generating_round = True
        try:
            super()._generate_and_score_completions(inputs)
        except _RoundGenerated as generated:
            return generated.generation, generated.prompts
        finally:
            self._generating_round = False
        raise RuntimeError("TRL's _generate_and_score_completions returned without calling _generate.")

    def _generate(self, prompts: list):
        if self._generating_round:  # stop TRL right after generating: see `_generate_round`
            self._round_scores = None
            with self._recording_scores() as recorder:
                generation = super()._generate(prompts)
            if recorder is not None:
                self._round_scores = recorder.log_probs(generation[1])
            raise _RoundGenerated(generation, prompts)
        if self._assembled is None:
            return super()._generate(prompts)
        prompts[:] = self._assembled.rows.columns["prompts"]  # as TRL prepared them in their own round
        return self._assembled.rows.generation()

    def _recording_scores(self):
        """Record the sampled tokens' log-probs while `transformers` generates one turn per row and the records are
        still trusted; otherwise record nothing."""
        single_turn_transformers = not (
            self.use_vllm
            or self.use_transformers_continuous_batching
            or self.rollout_func is not None
            or self.tools
            or self.environment_factories
        )
        carrying = self.sampler is not None and self.sampler.carry.max_staleness > 0
        if not (single_turn_transformers and carrying and self._recorded_scores_agree is not False):
            return contextlib.nullcontext()
        return SampledTokenScores(self.accelerator.unwrap_model(self.model), temperature=self.temperature)

    def _environments_lent(self, lend):
        """While the context runs, TRL draws environments from `lend(pool)`; afterwards the pool is the original
        one with the instances TRL created meanwhile (see `trl_ext.sampling.environments`)."""
        if not self.environment_factories:
            return contextlib.nullcontext()
        return lent_pool(self, lend)

    # -------------------------------------------------------------------------------------- the assembled batch

    def train_on(self, batch: SampledBatch) -> dict[str, Any]:
        """TRL's training inputs for an assembled batch: its `_generate` hands back the rows already generated, its
        `_calculate_rewards` the rewards already computed, and only then do the log-probability forwards run."""
        self._assembled = batch
        try:  # the rows' environments were reset and played already: TRL resets stand-ins instead
            with self._environments_lent(lambda pool: stand_ins(pool, len(batch.rows))):
                output = super()._generate_and_score_completions(batch.rows.columns["inputs"])
        finally:
            self._assembled = None
        if self.environment_factories:  # what reward functions saw: each kept row's own (none for carried rows)
            self.environments = batch.rows.columns["environments"]
        if batch.any_carried and not self._corrects_with_current_policy:
            output["old_per_token_logps"], fresh_rows = self._with_behaviour_log_probs(output, batch)
            if fresh_rows is not None:
                output[FRESH_OLD_LOGPS] = fresh_rows
        if batch.rows.columns.get(HISTORY_COLUMN) is not None and self.sampler.settings.adaptive.history_baseline:
            output["advantages"] = batch_history_advantages(batch, self.sampler.settings).to(output["advantages"])
        fillers = batch.filler_rows
        if len(fillers):
            # Filler groups train on nothing: out of the loss, the KL and entropy terms, and the token normaliser.
            output["completion_mask"][fillers.to(output["completion_mask"].device)] = 0
            loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
            output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return output

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._assembled is not None:  # the sampler scored these rows while assembling the batch
            return self.accelerator.gather(self._assembled.rewards().to(self.accelerator.device))
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

    def _with_behaviour_log_probs(
        self, output: dict[str, Any], batch: SampledBatch
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`old_per_token_logps` for a batch holding carried groups, and which rows still lack theirs.

        The carried rows' are those of the policy that generated them, recorded then. The fresh rows' are the
        current policy's: TRL computed them when generation and updates are not aligned; when they are aligned, TRL
        takes them from the training forward (`per_token_logps.detach()`), and so do these rows, without a forward
        of their own (see `_compute_loss`). Returns the tensor and, in the aligned case, the `(B,)` mask of fresh rows.
        """
        carried_logps = [logps for payload in batch.carried_payloads for logps in payload["logps"]]
        old = output.get("old_per_token_logps")
        fresh_rows = None
        if old is None:
            completion_ids = output["completion_ids"]
            old = torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
            fresh_rows = torch.ones(old.size(0), dtype=torch.bool, device=old.device)
            fresh_rows[: len(carried_logps)] = False
        else:
            old = old.clone()
        for row, logps in enumerate(carried_logps):
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
        pending, self._old_logps_from_training_forward = (self._old_logps_from_training_forward, None)
        if pending is not None:
            old, fresh_rows = pending
            old[fresh_rows] = outputs[0].detach()[fresh_rows].to(old.dtype)
        return outputs

    def _log_probs_of_rows(self, rows: list[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
        """Per-token log-probs of the current policy for `(prompt_ids, completion_ids)` rows, one tensor per row.

        A forward is collective under ZeRO-3 and FSDP, so every process runs the same number of micro-batches:
        processes with fewer rows pad with copies of a row (or of a dummy one) and drop the results.
        """
        most = int(self.accelerator.gather(torch.tensor([len(rows)], device=self.accelerator.device)).max())
        if most == 0:
            return []
        pad_id = self._tokenizer.pad_token_id
        padded = rows + [rows[0] if rows else ([pad_id], [pad_id])] * (most - len(rows))
        prompt_ids = pad([torch.tensor(p) for p, _ in padded], padding_value=pad_id, padding_side="left")
        prompt_mask = pad(
            [torch.ones(len(p), dtype=torch.long) for p, _ in padded], padding_value=0, padding_side="left"
        )
        completion_ids = pad([torch.tensor(c) for _, c in padded], padding_value=pad_id, padding_side="right")
        completion_mask = pad(
            [torch.ones(len(c), dtype=torch.long) for _, c in padded], padding_value=0, padding_side="right"
        )
        device = self.accelerator.device
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

    # ---------------------------------------------------------------------------------------------- metrics

    def _metric_positions(self) -> dict[str, int]:
        """How many entries each training metric holds now (to tell a batch's entries apart later)."""
        return {name: len(values) for name, values in self._metrics["train"].items()}

    def _replace_metric_entries(self, since: dict[str, int], merge) -> None:
        """Replace the entries logged after `since` by `merge(entries)` (name -> one value per metric)."""
        metrics = self._metrics["train"]
        per_round = {name: values[since.get(name, 0) :] for name, values in metrics.items()}
        for name, value in merge(per_round).items():
            del metrics[name][since.get(name, 0) :]
            metrics[name].append(value)

    def _log_metric(self, name: str, value: float) -> None:
        self._metrics["train"][name].append(value)

    def _pending_log_columns(self, columns: dict[str, list]) -> None:
        for column, values in columns.items():
            self._pending_extra_logs[column].extend(values)

    # ------------------------------------------------------------------------------------------ checkpoints

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.sampler is None:
            return
        checkpoint = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        state = self.sampler.state_dict()
        if len(self.sampler.carry):  # every process saves its own carried groups
            os.makedirs(checkpoint, exist_ok=True)
            carry_file = CARRY_STATE_FILE.format(process=self.accelerator.process_index)
            torch.save(images_as_tensors(state["carry"]), os.path.join(checkpoint, carry_file))
        if self.args.should_save:
            with open(os.path.join(checkpoint, DYNAMIC_SAMPLING_STATE_FILE), "w") as file:
                json.dump(state["shared"], file)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, DYNAMIC_SAMPLING_STATE_FILE) if checkpoint else None
        if self.sampler is None or not (path and os.path.exists(path)):
            return
        with open(path) as file:
            shared = json.load(file)
        carry_path = os.path.join(checkpoint, CARRY_STATE_FILE.format(process=self.accelerator.process_index))
        carry = images_from_tensors(torch.load(carry_path, weights_only=True)) if os.path.exists(carry_path) else None
        self.sampler.load_state_dict({"shared": shared, "carry": carry})


@contextlib.contextmanager
def lent_pool(trainer, lend):
    """Let TRL draw environments from `lend(pool)` instead of `trainer._environment_pool` while the context runs;
    afterwards the pool is the original one with the instances TRL created meanwhile."""
    pool = trainer._environment_pool
    trainer._environment_pool = lent = lend(pool)
    try:
        yield
    finally:
        trainer._environment_pool = merge_instances(pool, lent)
