"""The dynamic sampler: the round loop of DAPO's dynamic sampling, and every piece of its state that outlives a batch.

It knows nothing of a trainer. For each generation batch it is handed the batch's rows and a `RoundSource` that
generates and scores the rows of one round (for `DAPOTrainer` and `GSPOTrainer`, through their base
`DynamicSamplingTrainer`: TRL's own generation and reward functions); it runs rounds until every process holds
enough informative prompt groups, and returns the batch to train on. What it keeps between batches (keep rates,
back-off, carried groups, prompt history, the refill stream's position) is saved and restored through `state_dict` /
`load_state_dict`.

Processes take the same decisions: they are made from rewards gathered over every process, the refill draws and
the skip coins are pure functions of the batch, and the carry buffer's decisions depend only on metadata.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from datasets import IterableDataset

from .adaptive import (
    HISTORY_COLUMN,
    SUCCESS_THRESHOLD,
    AdaptiveSettings,
    PassRateBeliefs,
    informative_against_history,
    joint_histories,
)
from .assembly import (
    GeneratedRound,
    Round,
    Rows,
    assemble,
    carried_payload,
    carried_round,
    completion_lengths,
    group_rows,
)
from .backoff import BackoffController, SamplingMode
from .carry import CarriedGroup, CarryBuffer, first_round_plans, surplus_informative_groups
from .dynamic_sampling import (
    KeepRateEstimator,
    filter_rewards,
    groups_to_keep,
    informative_group_mask,
    prompts_for_processes,
    spare_groups_to_fill,
)
from .extension import extend_round, informative_prompts
from .pilot import PilotAndCommit
from .processes import Processes, local_processes  # noqa: F401 (local_processes: re-exported)
from .prompt_history import PromptHistory, group_outcomes
from .refill import RefillSampler, StreamRefillSampler, draw_unskipped, prompt_index, prompt_key

logger = logging.getLogger(__name__)

# Refill candidates a stream's prompt history may skip in a row before it must take them.
STREAM_SKIP_PATIENCE = 10_000
# Generation batches in a row in which every group was informative before the sampler says the filter cannot filter.
ALWAYS_INFORMATIVE_BATCHES = 20


class RoundSource(Protocol):
    """What generates and scores the rows of a round; for `DAPOTrainer` and `GSPOTrainer`, the trainer itself."""

    def generate_and_score(self, inputs: list[dict[str, Any]], held_environments: list) -> tuple[Rows, torch.Tensor]:
        """Generate one completion per row of `inputs` and score it.

        `held_environments` are the environment instances of rows kept from earlier rounds, which this round must
        not reset. Returns this process's rows and the `(N, F)` rewards of every process's rows (gathered).
        """

    def record_behaviour(self, groups: list[CarriedGroup]) -> None:
        """Store in each surplus group's payload what training on it later needs (the behaviour policy's log-probs),
        before it is carried. A collective: every process calls it, with or without groups."""


@dataclass(frozen=True)
class SamplerSettings:
    """What the sampler is told by the training configuration: the `dynamic_sampling_*` fields of
    `DynamicSamplingArguments` (`trl_ext.trainers.sampling_arguments`), which `DAPOConfig` and `GSPOConfig` mix in."""

    group_size: int
    max_rounds: int
    max_oversampling: float
    confidence: float
    on_exhausted: str  # "warn" or "raise"
    carry_max_groups: int
    carry_max_staleness: int
    max_skip_probability: float
    seed: int
    shuffle: bool
    filter_used: torch.Tensor  # (F,) bool: the reward functions that decide informativeness
    filter_weights: torch.Tensor  # (F,) their weights
    adaptive: AdaptiveSettings | None = None  # the adaptive mode (None: DAPO's exact dynamic sampling)
    reward_weights: torch.Tensor | None = None  # (F,) the weights advantages use (None: the filter's)

    def advantage_rewards(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        """`(N,)` the weighted sum of every reward function, as advantages use it; NaN where none could judge."""
        weights = self.filter_weights if self.reward_weights is None else self.reward_weights
        return filter_rewards(rewards_per_func, weights, torch.ones(len(weights), dtype=torch.bool))


@dataclass
class BatchReport:
    """What one generation batch cost and kept; counts are this process's unless said otherwise."""

    rounds_run: int = 0
    rows_per_round: list[int] = field(default_factory=list)  # over all processes
    generated_tokens: int = 0
    trained_tokens: int = 0
    groups_sampled: int = 0  # over all processes
    informative_sampled: int = 0  # over all processes
    equal_groups_sampled: int = 0  # groups (and stopped pilots) whose filter rewards were all equal, over all processes
    fresh_groups_kept: int = 0  # over all processes
    exhausted: bool = False
    backing_off: bool = False
    prompts_skipped: int = 0  # over all processes
    prompts_stopped: int = 0  # prompts stopped after their pilot, over all processes
    prompts_extended: int = 0  # extensions (G more completions for an all-equal group), over all processes
    uninformative_tokens: int = 0  # generated tokens of the groups that ended uninformative
    batch_rows: int = 0  # rows of one plain generation batch, over all processes (what GRPO would generate)
    sampler_seconds: float = 0.0  # the sampler's own time: its wall time less the source's generation and scoring
    carried_groups: int = 0
    carried_staleness: int = 0  # summed over the carried groups
    carry_expired: int = 0  # carried groups too stale to be used
    carry_overflow: int = 0  # carried groups dropped to keep the buffer within its size

    @property
    def carry_dropped(self) -> int:
        return self.carry_expired + self.carry_overflow

    @property
    def generation_budget_used(self) -> float:
        """Completions generated over those of one plain batch (1.0: what GRPO generates)."""
        return sum(self.rows_per_round) / self.batch_rows if self.batch_rows else 0.0


@dataclass
class SampledBatch:
    """The batch to train on: kept rows first, then filler rows (uninformative groups that train on nothing)."""

    rows: Rows
    num_kept_rows: int
    carried_rows: int  # the first rows come from carried groups
    carried_payloads: list[dict]  # each carried group's payload, in row order
    any_carried: bool  # whether any process's batch holds carried rows
    report: BatchReport

    @property
    def filler_rows(self) -> torch.Tensor:
        return torch.arange(self.num_kept_rows, len(self.rows))

    def rewards(self) -> torch.Tensor:
        """`(B, F)` rewards of the rows; NaN for fillers, which are unscorable (zero advantage, out of the baseline)."""
        rewards = torch.stack(list(self.rows.columns["rewards"]))
        rewards[self.num_kept_rows :] = float("nan")
        return rewards


class DynamicSampler:
    """Runs the rounds of dynamic sampling for each generation batch and holds the state that outlives batches.

    Args:
        settings: the sampling configuration.
        dataset: the training dataset, where refill prompts come from (a `datasets.IterableDataset` is read as a
            stream, and its prompts are their own identity).
        processes: the run's processes.
    """

    def __init__(self, settings: SamplerSettings, dataset, processes: Processes):
        self.settings = settings
        self.processes = processes
        if not isinstance(dataset, IterableDataset):
            self.refills = RefillSampler(
                dataset_size=len(dataset),
                seed=settings.seed,
                num_processes=processes.num_processes,
                process_index=processes.process_index,
                shuffle=settings.shuffle,
            )
            # A dataset of an environment that owns its data may hold no prompts: its rows are then not told apart.
            prompts = dataset.select_columns(["prompt"]).to_dict()["prompt"] if "prompt" in dataset.column_names else []
            indices = prompt_index(prompts)
            self.prompt_identity = lambda prompt: indices.get(prompt_key(prompt), -1)
            self._refill_row, self._skip_patience = dataset.__getitem__, len(dataset)
        else:  # a stream
            self.refills = StreamRefillSampler(dataset, seed=settings.seed, shuffle=settings.shuffle)
            self.prompt_identity, self._refill_row = prompt_key, self.refills.row
            self._skip_patience = STREAM_SKIP_PATIENCE
        self.keep_rates = [KeepRateEstimator() for _ in range(processes.num_processes)]
        self.backoff = BackoffController.from_config(settings.max_oversampling, settings.max_rounds)
        self.carry = CarryBuffer(max_groups=settings.carry_max_groups, max_staleness=settings.carry_max_staleness)
        self.prompt_history = (
            PromptHistory(seed=settings.seed, max_skip_probability=settings.max_skip_probability)
            if settings.max_skip_probability > 0 and settings.adaptive is None
            else None
        )
        self.beliefs = (
            PassRateBeliefs(settings.adaptive, settings.group_size, settings.seed) if settings.adaptive else None
        )
        pilot_size = settings.adaptive.pilot_size if settings.adaptive else 0
        self.pilot = PilotAndCommit(pilot_size, settings.group_size, SUCCESS_THRESHOLD) if pilot_size else None
        self._backoff_announced = False
        self._always_informative_batches = 0

    # ------------------------------------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """Everything that outlives a batch. `"shared"` is the same on every process (JSON); `"carry"` is this
        process's carried groups (payloads of tensors and plain containers, for `torch.save`)."""
        return {
            "shared": {
                "keep_rate_windows": [estimator.state_dict() for estimator in self.keep_rates],
                "backoff": self.backoff.state_dict(),
                "prompt_history": self.prompt_history.state_dict() if self.prompt_history else None,
                "beliefs": self.beliefs.state_dict() if self.beliefs is not None else None,
                "pilot": self.pilot.state_dict() if self.pilot is not None else None,
                "refill_stream": getattr(self.refills, "state_dict", dict)(),
            },
            "carry": self.carry.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`. Saved on another number of processes, the keep rates are pooled and every
        process starts from the pooled rate; carried groups are then not restored (pass `"carry": None`)."""
        shared = state["shared"]
        windows = shared["keep_rate_windows"]
        if len(windows) != len(self.keep_rates):
            logger.info(
                f"Resuming on {len(self.keep_rates)} processes from a checkpoint written by {len(windows)}: the saved "
                "keep rates are pooled over the old processes and every process starts from the pooled rate. "
                "Carried groups are generated afresh."
            )
            windows = [KeepRateEstimator.pooled_state(windows)] * len(self.keep_rates)
        elif state.get("carry") is not None:
            self.carry.load_state_dict(state["carry"])
        for estimator, window in zip(self.keep_rates, windows, strict=True):
            estimator.load_state_dict(window)
        if shared.get("backoff"):
            self.backoff.load_state_dict(shared["backoff"])
        if shared.get("refill_stream") and isinstance(self.refills, StreamRefillSampler):
            self.refills.load_state_dict(shared["refill_stream"])
        if self.prompt_history is not None and shared.get("prompt_history"):
            self.prompt_history.load_state_dict(shared["prompt_history"])
        if self.beliefs is not None and shared.get("beliefs"):
            self.beliefs.load_state_dict(shared["beliefs"])
        if self.pilot is not None and shared.get("pilot"):
            self.pilot.load_state_dict(shared["pilot"])

    # --------------------------------------------------------------------------------------------- the loop

    def next_batch(
        self, inputs: list[dict[str, Any]], source: RoundSource, *, policy_version: int, draw_key: int
    ) -> SampledBatch:
        """Generate and score rounds until every process holds `len(inputs) // G` informative groups.

        Args:
            inputs: this process's rows of the generation batch, each prompt repeated G times in a row.
            source: generates and scores a round's rows.
            policy_version: optimizer updates so far (carried groups' staleness is counted in them).
            draw_key: identifies the generation batch (refill draws and skip coins are functions of it).
        """
        started, source = time.perf_counter(), _TimedSource(source)
        batch = self._next_batch(inputs, source, policy_version=policy_version, draw_key=draw_key)
        batch.report.sampler_seconds = time.perf_counter() - started - source.seconds
        return batch

    def _next_batch(
        self, inputs: list[dict[str, Any]], source: RoundSource, *, policy_version: int, draw_key: int
    ) -> SampledBatch:
        settings, processes = self.settings, self.processes
        group_size, rank, num_processes = (settings.group_size, processes.process_index, processes.num_processes)
        groups_needed = len(inputs) // group_size
        max_prompts = max(groups_needed, int(groups_needed * settings.max_oversampling))
        backing_off = self.backoff.mode is SamplingMode.BACKOFF
        report = BatchReport(backing_off=backing_off, batch_rows=len(inputs) * num_processes)

        report.carry_expired = self.carry.expire(policy_version)
        local_indices = [self.prompt_identity(row.get("prompt")) for row in inputs[::group_size]]
        gathered = processes.gather((local_indices, [group.prompt_index for group in self.carry]))
        indices_per_process = [indices for indices, _ in gathered]
        # Groups carried from the last batch count as kept; refills never draw their prompts nor the batch's.
        available = torch.tensor([min(len(carried), groups_needed) for _, carried in gathered])
        batch_indices = [index for indices, carried in gathered for index in indices + carried if index >= 0]
        cursor = 0

        kept_per_process = torch.zeros(num_processes, dtype=torch.long)  # fresh informative groups kept
        surplus: list[CarriedGroup] = []
        rounds: list[Round] = []
        held_environments: list = []  # environments of the rows kept so far: later rounds must not reset them
        report.exhausted = True
        for round_index in range(settings.max_rounds):
            if round_index == 0:
                # Carried groups count first, so the first round generates only for what they leave open (one
                # plain batch when backing off): the sampler's own prompts first, refills for the rest.
                lacking = torch.tensor([groups_needed]) - available
                size = groups_needed if report.backing_off else max(1, self._prompts_for(lacking, max_prompts))
                carried_prompts = {index for _, carried in gathered for index in carried}
                skips = [self._skip_prompts(indices, draw_key, 0) for indices in indices_per_process]
                counts, kept_batch, local_groups = first_round_plans(indices_per_process, skips, carried_prompts, size)
                report.prompts_skipped += sum(map(sum, skips))
                own_rows = [group * group_size + offset for group in local_groups[rank] for offset in range(group_size)]
            else:
                deficits = (groups_needed - available - kept_per_process).clamp(min=0)
                counts = [self._prompts_for(deficits, max_prompts)] * num_processes
                kept_batch, own_rows = [[] for _ in range(num_processes)], []
            refills, cursor, skipped_refills = self._draw_refills(draw_key, batch_indices, cursor, counts, round_index)
            report.prompts_skipped += skipped_refills
            round_inputs = [inputs[row] for row in own_rows] + self._refill_inputs(refills[rank])
            drawn = [own + fresh for own, fresh in zip(kept_batch, refills, strict=True)]
            generated = self._generate(source, round_inputs, drawn, held_environments, report)
            round_rows, stopped_rows = generated.rows, generated.stopped_rows
            round_indices = [index for indices in generated.indices for index in indices]
            first_group = sum(len(indices) for indices in generated.indices[:rank])
            informative = self._judge_round(generated, round_indices, first_group, report)

            deficit = groups_needed - int(available[rank]) - int(kept_per_process[rank])  # what carried ones leave
            kept = groups_to_keep(informative[rank], deficit)
            room = deficit - len(kept) - sum(held.spare for held in rounds)
            spare = (~informative[rank]).nonzero(as_tuple=True)[0][: max(room, 0)]
            selected = round_rows.select(group_rows(torch.cat([kept, spare]), group_size).tolist())
            # Stopped pilots, padded to whole groups, are fillers too: a batch whose rounds all stop stays whole.
            padded = (len(stopped_rows) // group_size) if stopped_rows is not None else 0
            extra = min(max(room - len(spare), 0), padded)
            if extra:
                selected = Rows.concat([selected, stopped_rows.select(list(range(extra * group_size)))])
            rounds.append(Round(rows=selected, kept=len(kept), spare=len(spare) + extra))
            held_environments += selected.columns["environments"] or []
            if self.carry.max_staleness > 0:
                surplus += [
                    CarriedGroup(
                        {"rows": carried_payload(round_rows.select(group_rows(torch.tensor([group]), group_size)))},
                        generated_at=policy_version,
                        prompt_index=round_indices[first_group + group],
                        process_index=rank,
                    )
                    for group in surplus_informative_groups(informative[rank], deficit, self.carry.max_groups).tolist()
                ]
            kept_per_process += torch.minimum(informative.sum(dim=1), groups_needed - available - kept_per_process)
            self.backoff.observe_round(int(informative.sum()), informative.numel())
            if bool((kept_per_process + available >= groups_needed).all()):
                report.exhausted = False
                break
            if self.backoff.mode is SamplingMode.BACKOFF:  # more rounds would not fill the batch
                break
        report.rounds_run = len(rounds)
        report.fresh_groups_kept = int(kept_per_process.sum())
        if report.exhausted and not report.backing_off:  # once backing off, the back-off notice has said it all
            self._on_rounds_exhausted(
                len(rounds), int((kept_per_process + available).min()), groups_needed, policy_version
            )
        report.backing_off = self._announce_backoff(report.backing_off, policy_version)

        # The carried groups the batch counted on, then its fresh ones; this batch's surplus is carried on.
        carried, _ = self.carry.take(int(available[rank]), policy_version)
        any_carried = any(processes.gather(bool(carried)))
        source.record_behaviour(surplus)
        report.carry_overflow = self.carry.add(surplus)
        return self._assemble(rounds, carried, any_carried, groups_needed, policy_version, report)

    def _assemble(
        self,
        rounds: list[Round],
        carried: list[CarriedGroup],
        any_carried: bool,
        groups_needed: int,
        policy_version: int,
        report: BatchReport,
    ) -> SampledBatch:
        """The batch: the carried groups it counted on, its fresh kept groups, then fillers if it ran short."""
        group_size = self.settings.group_size
        if carried:
            rounds.insert(0, carried_round(carried))
        report.carried_groups = len(carried)
        report.carried_staleness = sum(group.staleness(policy_version) for group in carried)
        shortfall = groups_needed - sum(held.kept for held in rounds)
        fillers = spare_groups_to_fill(
            [torch.arange(held.spare) for held in rounds], shortfall if report.exhausted else 0
        )
        rows, num_kept_rows = assemble(rounds, fillers, group_size)
        lengths = zip(rows.columns["prompt_ids"][:num_kept_rows], completion_lengths(rows.generation())[:num_kept_rows])
        report.trained_tokens = sum(len(prompt_ids) + length for prompt_ids, length in lengths)
        self._check_filter_filters(report.equal_groups_sampled == 0)
        return SampledBatch(
            rows=rows,
            num_kept_rows=num_kept_rows,
            carried_rows=len(carried) * group_size,
            carried_payloads=[group.payload for group in carried],
            any_carried=any_carried,
            report=report,
        )

    # ------------------------------------------------------------------------------------------ decisions

    def _generate(
        self, source: RoundSource, inputs: list[dict[str, Any]], drawn: list[list[int]], held_environments: list, report
    ) -> GeneratedRound:
        """A round's rows (this process's), rewards (every process's) and prompts per process; with the pilot, the
        committed prompts' groups (the stopped ones are recorded here), then their extensions."""
        if self.pilot is None:
            rows, rewards_per_func = source.generate_and_score(inputs, held_environments)
            report.rows_per_round.append(len(inputs) * self.processes.num_processes)
            return GeneratedRound(rows, rewards_per_func, drawn)
        settings, rank = self.settings, self.processes.process_index

        def outcomes(rewards_per_func):
            return filter_rewards(rewards_per_func, settings.filter_weights, settings.filter_used).cpu()

        def against_history(indices, rewards_per_func, size=self.pilot.pilot_size):  # informative already
            totals = settings.advantage_rewards(rewards_per_func).cpu()
            return informative_against_history(totals, size, *self.beliefs.history(indices)).tolist()

        generated, stopped_pilots = self.pilot.run(
            source, inputs, drawn, rank, held_environments, self.beliefs.visit_evidence, outcomes,
            against_history if settings.adaptive.history_baseline else None,
        )  # fmt: skip
        for indices, rewards_per_func in stopped_pilots:
            totals = settings.advantage_rewards(rewards_per_func).cpu()
            self.beliefs.record(indices, outcomes(rewards_per_func), totals, size=self.pilot.pilot_size)
            report.prompts_stopped += len(indices)
        report.rows_per_round += generated.rows_per_call
        report.generated_tokens += generated.stopped_tokens
        report.uninformative_tokens += generated.stopped_tokens
        committed = [[indices[j] for j in chosen] for indices, chosen in zip(drawn, generated.committed, strict=True)]
        stopped = [len(all_drawn) - len(chosen) for all_drawn, chosen in zip(drawn, committed, strict=True)]
        round_ = GeneratedRound(generated.rows, generated.rewards_per_func, committed, generated.stopped_rows, stopped)
        if not settings.adaptive.extensions:
            return round_

        def group_against_history(index, rewards_per_func):  # one prompt's group, of any number of slots
            return against_history([index], rewards_per_func, len(rewards_per_func))[0]

        round_, rows_per_call, extended = extend_round(
            round_, self.pilot, settings.adaptive.extensions, source, rank, held_environments,
            self.beliefs.visit_evidence, outcomes, group_against_history,
        )  # fmt: skip
        report.rows_per_round += rows_per_call
        report.prompts_extended += extended
        return round_

    def _judge_round(
        self, generated: GeneratedRound, prompt_indices: list[int], first_group: int, report
    ) -> torch.Tensor:
        """Which slots of a round are informative, `(num_processes, slots per process)`; records the round in the
        keep rates, the prompt history or beliefs and the report. In the adaptive mode each local row gets its prompt's
        history from before this round (`HISTORY_COLUMN`; an extended group's slots also the rewards of its other
        slots, `joint_histories`), and a slot is informative when its history-baseline advantages are not all zero.
        The keep rates count prompts: an extended group is one draw, and prompts stopped after their pilot count as
        drawn and not kept."""
        settings, group_size, rows = self.settings, self.settings.group_size, generated.rows
        rewards = filter_rewards(generated.rewards_per_func, settings.filter_weights, settings.filter_used)
        informative = informative_group_mask(rewards, group_size)
        # Zero-variance groups and stopped pilots show that the filter filters (the history baseline may train them).
        report.equal_groups_sampled += int((~informative).sum()) + sum(generated.stopped or [])
        if self.beliefs is not None:
            totals = settings.advantage_rewards(generated.rewards_per_func).cpu()
            history = joint_histories(totals, group_size, *self.beliefs.history(prompt_indices), generated.joint)
            if settings.adaptive.history_baseline:
                informative |= informative_against_history(totals, group_size, *history).to(informative.device)
            rows.columns[HISTORY_COLUMN] = [
                (float(history[0][slot]), float(history[1][slot]))
                for slot in range(first_group, first_group + len(rows) // group_size) for _ in range(group_size)
            ]  # fmt: skip
            self.beliefs.record_round(prompt_indices, rewards.cpu(), totals, generated.joint)
        elif self.prompt_history is not None:
            self.prompt_history.record(prompt_indices, group_outcomes(rewards.cpu(), group_size))
        informative = informative.view(self.processes.num_processes, -1).cpu()
        stopped = generated.stopped or [0] * self.processes.num_processes
        prompts = informative_prompts(informative, generated.joint)
        for estimator, (kept, drawn), process_stopped in zip(self.keep_rates, prompts, stopped, strict=True):
            estimator.update(kept, drawn + process_stopped)
        report.groups_sampled += informative.numel()
        report.informative_sampled += int(informative.sum())
        lengths = completion_lengths(rows.generation())
        report.generated_tokens += sum(lengths)
        local = informative[self.processes.process_index].repeat_interleave(group_size).tolist()
        report.uninformative_tokens += sum(length for length, kept in zip(lengths, local, strict=True) if not kept)
        return informative

    def _prompts_for(self, deficits: torch.Tensor, max_prompts: int) -> int:
        """Prompts per process for the next round (see `prompts_for_processes`)."""
        rates = [estimator.estimate() for estimator in self.keep_rates]
        return prompts_for_processes(deficits.tolist(), rates, self.settings.confidence, max_prompts)

    def _skip_prompts(self, indices: list[int], draw_key: int, round_index: int) -> list[bool]:
        """Which prompts the prompt history (or, in the adaptive mode, the pass-rate estimate) says not to generate
        for; none without either."""
        if self.beliefs is not None:
            return self.beliefs.should_skip(indices, draw_key, round_index)
        if self.prompt_history is None:
            return [False] * len(indices)
        return self.prompt_history.should_skip(indices, draw_key, round_index)

    def _draw_refills(
        self, draw_key: int, batch_indices: list[int], cursor: int, counts: Sequence[int], round_index: int
    ) -> tuple[list[list[int]], int, int]:
        """`counts[p]` fresh prompts for each process `p`, from the batch's draw order, past skipped prompts.

        Every process computes every process's draw (the order and the skip coins are pure functions), so they
        agree without communicating. Returns the indices per process, the new position in the order and the number
        of prompts skipped.
        """
        chosen, cursor, skipped = draw_unskipped(
            take=lambda start, count: self.refills.take(draw_key, batch_indices, start, count),
            should_skip=lambda indices: self._skip_prompts(indices, draw_key, round_index),
            start=cursor,
            count=sum(counts),
            patience=self._skip_patience,
        )
        starts = [sum(counts[:process]) for process in range(len(counts))]
        return ([chosen[start : start + count] for start, count in zip(starts, counts, strict=True)], cursor, skipped)

    def _refill_inputs(self, indices: list[int]) -> list[dict[str, Any]]:
        """The training rows of `indices`, each repeated once per generation."""
        rows = [self._refill_row(index) for index in indices]
        # One dict per completion, as TRL's sampler yields them: TRL may write per-completion fields into them.
        return [dict(row) for row in rows for _ in range(self.settings.group_size)]

    # --------------------------------------------------------------------------------------------- notices

    def _on_rounds_exhausted(self, rounds_run: int, fewest_kept: int, groups_needed: int, step: int):
        limit = self.settings.max_rounds
        why = (
            f"it reached dynamic_sampling_max_rounds={limit}"
            if rounds_run >= limit
            else "the recent keep rate fell below what over-sampling can fill, so it stopped early and backs off"
        )
        message = (
            f"Dynamic sampling ran {rounds_run} generation round(s) at step {step} and stopped ({why}); a process "
            f"still holds only {fewest_kept} of its {groups_needed} informative prompt groups: most groups get "
            "identical rewards (the task is too easy or too hard for the model, or the reward does not discriminate)."
        )
        if self.settings.on_exhausted == "raise":
            fix = "Raise dynamic_sampling_max_rounds, check" if rounds_run >= limit else "Check"
            raise RuntimeError(
                f"{message} {fix} the rewards, or set dynamic_sampling_on_exhausted='warn' to train on the partial "
                "batch."
            )
        logger.warning(
            message + " The batch is completed with uninformative groups, which train on nothing; see the metric "
            "dynamic_sampling/rounds_exhausted."
        )

    def _announce_backoff(self, was_backing_off: bool, step: int) -> bool:
        """Say when dynamic sampling starts or stops backing off (the first time as a warning). Returns the mode."""
        backing_off = self.backoff.mode is SamplingMode.BACKOFF
        if backing_off and not was_backing_off:
            message = (
                f"Dynamic sampling is backing off at step {step}: fewer than {self.backoff.threshold:.2%} of the "
                "recent prompt groups were informative, so over-sampling cannot fill a batch. Until informative groups "
                "reappear, each step generates one plain batch whose uninformative groups train on nothing; see the "
                "metric dynamic_sampling/backoff. Check that the task suits the model and that the reward "
                "discriminates."
            )
            if self.settings.on_exhausted == "raise":
                raise RuntimeError(message + " Stopping, as dynamic_sampling_on_exhausted='raise' asks.")
            (logger.info if self._backoff_announced else logger.warning)(message)
            self._backoff_announced = True
        elif was_backing_off and not backing_off:
            logger.info(f"Dynamic sampling over-samples again at step {step}.")
        return backing_off

    def _check_filter_filters(self, never_equal: bool):
        """Warn once the filter reward had no all-equal group for `ALWAYS_INFORMATIVE_BATCHES` batches in a row."""
        self._always_informative_batches = self._always_informative_batches + 1 if never_equal else 0
        if self._always_informative_batches == ALWAYS_INFORMATIVE_BATCHES:
            logger.warning(
                f"Dynamic sampling kept every prompt group for {ALWAYS_INFORMATIVE_BATCHES} generation batches in a "
                "row: the filter reward is probably continuous (a reward model, a length or format score), so it "
                "never has zero variance and nothing is filtered. Set `dynamic_sampling_filter_reward` to a verifier "
                "reward (right/wrong), or `dynamic_sampling=False`."
            )


class _TimedSource:
    """A `RoundSource` that adds up the time spent in it, so the sampler's own time can be told apart."""

    def __init__(self, source: RoundSource):
        self.source, self.seconds = source, 0.0

    def generate_and_score(self, inputs, held_environments):
        return self._timed(self.source.generate_and_score, inputs, held_environments)

    def record_behaviour(self, groups):
        return self._timed(self.source.record_behaviour, groups)

    def _timed(self, call, *args):
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.seconds += time.perf_counter() - started
