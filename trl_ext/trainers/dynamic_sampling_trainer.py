"""`DynamicSamplingTrainer`: the one place where a trainer wires the dynamic sampler into TRL's training step.

`DAPOTrainer` and `GSPOTrainer` subclass it; what each adds is its own objective and defaults. The round loop and
its state live in `trl_ext.sampling.DynamicSampler`; TRL's private methods are reached through
`trl_ext.trainers.trl_bridge` only.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn
from transformers.utils import logging
from trl import GRPOTrainer

from ..sampling import AdaptiveSettings, filter_reward_mask
from ..sampling.sampler import BatchReport, DynamicSampler, SamplerSettings
from .scoring import TRL_CONTINUOUS_REWARD_NAMES, is_shaping_reward, merge_generation_metrics
from .trl_bridge import DynamicSamplingBridge, Processes

logger = logging.get_logger(__name__)


class DynamicSamplingTrainer(DynamicSamplingBridge):
    """`GRPOTrainer` with dynamic sampling, configured by a config that mixes in `DynamicSamplingArguments`.

    Takes `GRPOTrainer`'s arguments. After TRL's set-up it marks which reward functions judge answers (every one
    but the shaping ones: a completion no judging reward scored stays unscorable, whatever a length penalty adds)
    and, with `dynamic_sampling=True` and a training dataset, builds `self.sampler` (an instance of
    `sampler_class`). Then each training generation batch comes from `self.sampler.next_batch`, which generates
    and scores rounds through the bridge until the batch holds only informative groups. With `dynamic_sampling=False`
    the sampler is None and every method defers to `GRPOTrainer`'s.
    """

    # The dynamic sampler's class: a subclass changes how rounds are requested (see benchmarks/dynamic_sampling.py).
    sampler_class = DynamicSampler

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._judging = torch.tensor([not is_shaping_reward(func) for func in self.reward_funcs])
        self._refuse_pilot_with_rollout_func()
        if self.args.dynamic_sampling and self.train_dataset is not None:
            processes = Processes(self.accelerator)
            self.sampler = self.sampler_class(self._sampler_settings(), self.train_dataset, processes)

    __init__.__signature__ = inspect.signature(GRPOTrainer.__init__)

    # ------------------------------------------------------------------------------------------------ set-up

    def _refuse_pilot_with_rollout_func(self):
        """A `rollout_func` may generate per prompt group (as TRL's examples do, asking vLLM for `num_generations`
        completions per distinct prompt): the pilot's rounds of other sizes are refused, or, left at its default,
        turned off."""
        if self.rollout_func is None or not self.args.dynamic_sampling_pilot_size:
            return
        if getattr(self.args, "_pilot_size_defaulted", False) and not self.args.dynamic_sampling_extensions:
            logger.info("A rollout_func generates the rollouts: the adaptive mode's pilot is off.")
            self.args.dynamic_sampling_pilot_size = 0
            return
        extensions = self.args.dynamic_sampling_extensions
        extensions = " and dynamic_sampling_extensions=0 (they need the pilot)" if extensions else ""
        raise ValueError(
            f"dynamic_sampling_pilot_size={self.args.dynamic_sampling_pilot_size} generates each prompt in two calls "
            "of other sizes than num_generations, which a rollout_func may not expect (TRL's examples ask vLLM for "
            f"num_generations completions per prompt): set dynamic_sampling_pilot_size=0{extensions}."
        )

    def _sampler_settings(self) -> SamplerSettings:
        args = self.args
        filter_used, filter_weights = self._resolve_filter_reward()
        return SamplerSettings(
            group_size=self.num_generations,
            max_rounds=args.dynamic_sampling_max_rounds,
            max_oversampling=args.dynamic_sampling_max_oversampling,
            confidence=args.dynamic_sampling_confidence,
            on_exhausted=args.dynamic_sampling_on_exhausted,
            carry_max_groups=args.dynamic_sampling_carry_max_groups,
            carry_max_staleness=args.dynamic_sampling_carry_max_staleness,
            max_skip_probability=args.dynamic_sampling_max_skip_probability,
            seed=args.seed,
            shuffle=args.shuffle_dataset,
            filter_used=filter_used,
            filter_weights=filter_weights,
            adaptive=(
                AdaptiveSettings(
                    max_skip_probability=args.dynamic_sampling_max_skip_probability,
                    history_baseline=args.dynamic_sampling_history_baseline,
                    decay=args.dynamic_sampling_history_decay,
                    pilot_size=args.dynamic_sampling_pilot_size,
                    extensions=args.dynamic_sampling_extensions,
                )
                if args.dynamic_sampling_mode == "adaptive"
                else None
            ),
            reward_weights=self.reward_weights.cpu(),
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

    # ------------------------------------------------------------------------------------- dynamic sampling

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, torch.Tensor | Any]:
        if self.sampler is None or not self.model.training:
            return super()._generate_and_score_completions(inputs)
        logged_before = self._metric_positions()
        tokens_before = self.state.num_input_tokens_seen
        batch = self.sampler.next_batch(
            inputs, self, policy_version=self.state.global_step, draw_key=self._refill_draw_key()
        )
        self._pending_log_columns(batch.rows.extra_logs())
        self._log_batch_metrics(batch.report, logged_before, tokens_before)
        return self.train_on(batch)

    def _refill_draw_key(self) -> int:
        """Identifies this generation batch: unique even when several are generated within one optimiser step
        (`steps_per_generation < gradient_accumulation_steps`), and the same after resuming from a checkpoint."""
        accumulation = self.args.gradient_accumulation_steps
        return self.state.global_step * accumulation + self._step % accumulation

    def _log_batch_metrics(self, report: BatchReport, logged_before: dict[str, int], tokens_before: int):
        """One entry per metric for the generation batch: TRL's per-round entries merged by sample, `num_tokens`
        counting trained rows only, and the `dynamic_sampling/*` metrics (process-local counts summed)."""
        counts = [
            report.generated_tokens,
            report.trained_tokens,
            report.carried_groups,
            report.carried_staleness,
            report.carry_dropped,
            report.uninformative_tokens,
        ]
        generated, trained, carried_groups, staleness_sum, carry_dropped, uninformative_tokens = (
            self.accelerator.gather(torch.tensor(counts, device=self.accelerator.device).unsqueeze(0))
            .sum(dim=0)
            .tolist()
        )
        # TRL counted every round's tokens; count those of the trained rows, and report what was generated.
        self.state.num_input_tokens_seen = tokens_before + trained
        self._metrics["train"]["num_tokens"] = [self.state.num_input_tokens_seen]
        self._replace_metric_entries(
            logged_before, lambda per_round: merge_generation_metrics(per_round, report.rows_per_round)
        )
        sampled = report.groups_sampled
        values = {
            "generation_rounds": report.rounds_run,
            "prompts_sampled": sampled,
            "tokens_generated": generated,
            # Fresh informative groups that made it into the batch (fillers excluded), over all groups generated for.
            "groups_kept_fraction": report.fresh_groups_kept / sampled if sampled else 0.0,
            # (every prompt stopped after its pilot: no group was generated, none had a gradient)
            "generated_zero_std_fraction": 1.0 - report.informative_sampled / sampled if sampled else 1.0,
            "rounds_exhausted": report.exhausted,
            "backoff": report.backing_off,
            "prompts_skipped": report.prompts_skipped,
            "prompts_stopped": report.prompts_stopped,
            "prompts_extended": report.prompts_extended,
            "carried_groups": carried_groups,
            "carried_staleness": staleness_sum / carried_groups if carried_groups else 0.0,
            "carry_dropped": carry_dropped,
            # What a generated token bought: informative groups (kept or not) per 1,000 generated completion tokens.
            "informative_groups_per_1k_tokens": 1000.0 * report.informative_sampled / max(generated, 1),
            "uninformative_tokens": uninformative_tokens,
            "generation_budget_used": report.generation_budget_used,
            # The slowest process's own sampler time, so that every process logs the same value.
            "sampler_seconds": self.accelerator.gather(
                torch.tensor([report.sampler_seconds], device=self.accelerator.device)
            ).max().item(),
        }
        for name, value in values.items():
            self._log_metric(f"dynamic_sampling/{name}", float(value))
