"""Dynamic sampling: DAPOTrainer's adaptive over-sampling against verl's and ms-swift's schemes.

A reward under the script's control fixes the keep rate `p`: exactly a fraction `p` of the training prompts,
picked by a hash of their id, are informative (their completions get different rewards); the others get reward 0
for every completion, whatever the model generates. The three schemes run in the same DAPOTrainer loop (the same
generation, scoring, filtering and batch assembly); they differ only in how many prompts each generation round
requests, how many rounds they may run, and what they do when the rounds run out:

- **adaptive** (DAPOTrainer as shipped): each round requests enough prompts to fill the batch with probability
  `dynamic_sampling_confidence` (DAPOConfig's default, or `--confidence`) at the keep rate estimated from recent
  rounds; at most 10 rounds. Surplus informative groups are carried to the next batch
  (`dynamic_sampling_carry_max_staleness`, DAPOConfig's default or `--carry-max-staleness`; 0 discards them).
- **verl**: every round generates a fixed batch of 3x the train batch of prompts (`gen_batch_size`), keeps the
  informative groups, accumulates across rounds until the train batch is full and trims; at most 10 rounds
  (`max_num_gen_batches`; verl raises after them).
- **resample** (ms-swift's `dynamic_sample` with its default `max_resample_times=3`): every round regenerates a
  train batch of fresh prompts and accumulates informative groups. ms-swift checks the original batch and the
  first two resamples; when they fall short it has already generated a third resample, which it discards, and it
  trains on the original batch, uninformative groups included. The benchmark reproduces that cost (the extra round
  is generated) and counts, for such a step, only the original batch's informative groups as kept.

Reported per scheme and keep rate: generation rounds per optimiser step, sequences generated per kept sequence
(a kept sequence belongs to an informative group of the trained batch) and wall time per step; all over every
step, and over the steps after the first (before its first round the adaptive scheme has no keep-rate estimate).
Targets for the adaptive scheme: at most 1.2 rounds per step and at most 1.05/p sequences per kept one (1.25/p
before surplus groups were carried).

verl and ms-swift discard surplus groups, so those two schemes run with carrying off.

Also reported: the rows that go through a log-probability forward outside the training forward (TRL's reference
forward with `--beta > 0`, its old-policy forward when generation and updates are not aligned, and, with carrying,
the behaviour-policy forwards over the surplus rows carried), counted per
step from the calls to `_get_per_token_logps_and_entropies` made while the batch is generated and scored; the
carry forwards are also counted on their own. DAPOTrainer
scores and filters every round before those forwards, so they see the trained batch only; a trainer that
forwards before filtering would forward every generated row (the `generated rows` column). The prompt history
(`dynamic_sampling_max_skip_probability`, `--max-skip-probability`) skips prompts whose recent groups were all
uninformative; its skips are reported per step. The history raises the keep rate of the prompts actually generated
above `p`, so sequences per kept one are also reported times the observed keep rate.

    python benchmarks/dynamic_sampling.py --out benchmarks/results/dynamic_sampling.json  # full: 32 x 4, 30 steps
    python benchmarks/dynamic_sampling.py --beta 0.04 --out ...                          # count reference forwards
    python benchmarks/dynamic_sampling.py --quick                                          # smoke: 8 x 4, 3 steps
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import random
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import (
    StepTimer,
    add_common_arguments,
    check_device,
    common_training_args,
    format_table,
    log_history_values,
    machine_info,
    median,
    quiet_transformers,
    save_model,
    set_cpu_threads,
    without_log_printing,
    write_json,
)
from datasets import Dataset

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.sampling import DynamicSampler, informative_group_mask

TARGET_ROUNDS_PER_STEP = 1.2
TARGET_SEQUENCES_PER_KEPT_TIMES_P = 1.05
VERL_GEN_BATCH_MULTIPLE = 3  # verl's DAPO recipe: gen_batch_size = 3 x train_batch_size
VERL_MAX_NUM_GEN_BATCHES = 10
SWIFT_MAX_RESAMPLE_TIMES = 3  # ms-swift's default
ADAPTIVE_MAX_ROUNDS = 10  # DAPOConfig's default dynamic_sampling_max_rounds


def informative_ids(ids: list[int], keep_rate: float, salt: str = "") -> frozenset[int]:
    """A pseudo-random subset of exactly `round(keep_rate * len(ids))` ids: those with the smallest hashes."""

    def draw(prompt_id: int) -> bytes:
        return hashlib.blake2b(f"{salt}:{prompt_id}".encode(), digest_size=8).digest()

    return frozenset(sorted(ids, key=draw)[: round(keep_rate * len(ids))])


class ControlledReward:
    """Gives the completions of an informative prompt distinct rewards and those of any other prompt 0.0.

    TRL passes each process's completions with the `group_size` completions of a prompt next to each other, so
    the position modulo `group_size` differs within a group.
    """

    __name__ = "controlled"

    def __init__(self, informative: frozenset[int], group_size: int):
        self.informative, self.group_size = informative, group_size

    def __call__(self, prompts, completions, id, **kwargs):
        return [
            float(position % self.group_size) if prompt_id in self.informative else 0.0
            for position, prompt_id in enumerate(id)
        ]


class MeasuredDAPOTrainer(DAPOTrainer):
    """DAPOTrainer that records, for every step, each generation round's (informative, sampled) prompt groups.

    TRL scores every generation round with one `_calculate_rewards` call; the record is taken there, from the
    controlled reward (the only reward function), with the same informativeness test the trainer applies.
    """

    scheme = "adaptive"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.round_log: list[list[tuple[int, int]]] = []
        self.discarded_rounds: list[int] = []
        self.generation_seconds: list[float] = []
        self.forward_rows: list[int] = []  # rows through a log-prob forward while generating and scoring, per step
        self.carry_forward_rows: list[int] = []  # of which: the behaviour-policy forwards carrying adds
        self._scoring = False
        self._train_groups = self.args.generation_batch_size // self.num_generations // self.accelerator.num_processes
        self.sampler.train_groups = self._train_groups

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        self.round_log.append([])
        self.discarded_rounds.append(0)
        self.forward_rows.append(0)
        self.carry_forward_rows.append(0)
        started = time.perf_counter()
        self._scoring = True
        try:
            batch = super()._generate_and_score_completions(inputs)
        finally:
            self._scoring = False
        self.generation_seconds.append(time.perf_counter() - started)
        return batch

    def _get_per_token_logps_and_entropies(self, model, input_ids, *args, **kwargs):
        if self._scoring:  # the old-policy and reference forwards; the training forward runs in compute_loss
            self.forward_rows[-1] += input_ids.size(0)
        return super()._get_per_token_logps_and_entropies(model, input_ids, *args, **kwargs)

    def _policy_log_probs(self, prompt_ids, *args, **kwargs):
        if self._scoring:  # DAPOTrainer's no-grad forwards for carried groups (it calls the method counted above)
            self.carry_forward_rows[-1] += prompt_ids.size(0)
        return super()._policy_log_probs(prompt_ids, *args, **kwargs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        assembling = self._assembled is not None  # TRL scoring the assembled batch: not a generation round
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if not assembling:
            informative = informative_group_mask(rewards_per_func[:, 0].cpu(), self.num_generations)
            self.round_log[-1].append((int(informative.sum()), informative.numel()))
        return rewards_per_func

    def kept_groups(self, rounds: list[tuple[int, int]], discarded: int, carried: int) -> int:
        """Informative groups in the batch the step trains on (the shared loop keeps every one it found, up to
        the batch size, then the groups carried from earlier batches, and completes a short batch with
        uninformative groups)."""
        looked_at = rounds[: len(rounds) - discarded]
        return min(self._train_groups, sum(informative for informative, _ in looked_at) + carried)


class VerlSampler(DynamicSampler):
    """Every round generates for a fixed `3 x` the train batch of prompts, whatever the batch still lacks."""

    train_groups = 0  # groups per process in a train batch (set by the trainer)

    def _prompts_for(self, deficits, max_prompts) -> int:
        return VERL_GEN_BATCH_MULTIPLE * self.train_groups


class VerlTrainer(MeasuredDAPOTrainer):
    scheme = "verl"
    sampler_class = VerlSampler


class ResampleSampler(DynamicSampler):
    """Every round regenerates one train batch of fresh prompts; ms-swift's fallback when they fall short."""

    train_groups = 0  # groups per process in a train batch (set by the trainer)

    def _prompts_for(self, deficits, max_prompts) -> int:
        return self.train_groups

    def next_batch(self, inputs, source, *, policy_version, draw_key):
        batch = super().next_batch(inputs, source, policy_version=policy_version, draw_key=draw_key)
        if batch.report.exhausted:
            # ms-swift generates one more resample before its loop tests the retry counter, then discards it:
            # generate and score it (recorded by the trainer's `_calculate_rewards`), and count it as generated.
            draw = random.Random(f"{self.settings.seed}:{draw_key}")
            groups = len(inputs) // self.settings.group_size
            extra = self._refill_inputs(draw.sample(range(self.refills.dataset_size), groups))
            source.generate_and_score(extra, [])
            source.discarded_rounds[-1] += 1
            batch.report.rows_per_round.append(len(extra) * self.processes.num_processes)
        return batch


class ResampleTrainer(MeasuredDAPOTrainer):
    scheme = "resample"
    sampler_class = ResampleSampler

    def kept_groups(self, rounds, discarded, carried):
        looked_at = rounds[: len(rounds) - discarded]
        if sum(informative for informative, _ in looked_at) >= self._train_groups:
            return self._train_groups
        return looked_at[0][0]  # ms-swift trains on the original batch: only its informative groups count


SCHEMES = {
    "adaptive": (MeasuredDAPOTrainer, ADAPTIVE_MAX_ROUNDS),
    "verl": (VerlTrainer, VERL_MAX_NUM_GEN_BATCHES),
    "resample": (ResampleTrainer, SWIFT_MAX_RESAMPLE_TIMES),
}


def arithmetic_prompts_with_ids(num_prompts: int) -> Dataset:
    pairs = [(a, b) for a in range(100) for b in range(100)][:num_prompts]
    return Dataset.from_dict({"prompt": [f"{a}+{b}=" for a, b in pairs], "id": list(range(len(pairs)))})


def scheme_config(scheme: str, max_rounds: int, args, output_dir: Path) -> DAPOConfig:
    """The scheme's DAPOConfig: the command line's settings, and the scheme's own rounds and carry."""
    if scheme != "adaptive":  # verl and ms-swift discard surplus groups
        carry = {"dynamic_sampling_carry_max_staleness": 0}
    elif args.carry_max_staleness is not None:
        carry = {"dynamic_sampling_carry_max_staleness": args.carry_max_staleness}
    else:
        carry = {}
    return DAPOConfig(
        **common_training_args(
            output_dir,
            args.device,
            per_device_train_batch_size=args.groups * args.num_generations,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_steps=args.steps,
            learning_rate=1e-4,
            seed=args.seed,
            soft_overlong_punishment=False,
            dynamic_sampling_max_rounds=max_rounds,
            dynamic_sampling_on_exhausted="warn",
            beta=args.beta,
            **(
                {"dynamic_sampling_max_skip_probability": args.max_skip_probability}
                if args.max_skip_probability is not None
                else {}
            ),
            **({"dynamic_sampling_confidence": args.confidence} if args.confidence is not None else {}),
            **carry,
        )
    )


def check_record_against_metrics(trainer: MeasuredDAPOTrainer, scheme: str) -> None:
    """The record must agree with the trainer's own metrics (the extra round ms-swift discards is not the loop's)."""
    logged_rounds = log_history_values(trainer, "dynamic_sampling/generation_rounds")
    logged_prompts = log_history_values(trainer, "dynamic_sampling/prompts_sampled")
    recorded_rounds = [len(r) - d for r, d in zip(trainer.round_log, trainer.discarded_rounds, strict=True)]
    recorded_prompts = [
        sum(g for _, g in r[: len(r) - d]) for r, d in zip(trainer.round_log, trainer.discarded_rounds, strict=True)
    ]
    if logged_rounds != recorded_rounds or logged_prompts != recorded_prompts:
        raise RuntimeError(
            f"{scheme}: recorded rounds {recorded_rounds} / prompts {recorded_prompts} disagree with the trainer's "
            f"metrics {logged_rounds} / {logged_prompts}."
        )


def step_records(trainer: MeasuredDAPOTrainer, timer: StepTimer, group: int) -> list[dict]:
    """One record per optimiser step: its rounds, what they generated and kept, carry, and timings."""
    carried_groups = [int(value) for value in log_history_values(trainer, "dynamic_sampling/carried_groups")]
    tokens_generated = log_history_values(trainer, "dynamic_sampling/tokens_generated")
    prompts_skipped = log_history_values(trainer, "dynamic_sampling/prompts_skipped")
    backoff = log_history_values(trainer, "dynamic_sampling/backoff")
    carried_staleness = log_history_values(trainer, "dynamic_sampling/carried_staleness")
    carry_dropped = log_history_values(trainer, "dynamic_sampling/carry_dropped")
    steps = []
    for (
        rounds, discarded, step_s, generation_s, forward_rows, carry_forward_rows, tokens, skipped, backing_off,
        carried, staleness, dropped,
    ) in zip(
        trainer.round_log,
        trainer.discarded_rounds,
        timer.step_seconds,
        trainer.generation_seconds,
        trainer.forward_rows,
        trainer.carry_forward_rows,
        tokens_generated,
        prompts_skipped,
        backoff,
        carried_groups,
        carried_staleness,
        carry_dropped,
        strict=True,
    ):  # fmt: skip
        kept = trainer.kept_groups(rounds, discarded, carried)
        steps.append(
            {
                "rounds": len(rounds),
                "rounds_detail": rounds,
                "groups_generated": sum(groups for _, groups in rounds),
                "informative_generated": sum(informative for informative, _ in rounds),
                "kept_groups": kept,
                "filled": kept == trainer._train_groups,
                "sequences_generated": group * sum(groups for _, groups in rounds),
                "kept_sequences": group * kept,
                # Rows through the old-policy / reference forwards; before filtering moved ahead of them, every
                # generated row of the step's rounds was forwarded (sequences_generated).
                "forward_rows": forward_rows,
                "carry_forward_rows": carry_forward_rows,
                "carried_groups": carried,
                "carried_staleness": staleness,
                "carry_dropped": int(dropped),
                "tokens_generated": tokens,
                "prompts_skipped": skipped,
                "backoff": bool(backing_off),
                "step_s": step_s,
                "generation_s": generation_s,
            }
        )
    return steps


def run_scheme(scheme: str, keep_rate: float, args, model_dir: Path, dataset: Dataset, output_dir: Path) -> dict:
    trainer_class, max_rounds = SCHEMES[scheme]
    config = scheme_config(scheme, max_rounds, args, output_dir)
    timer = StepTimer()
    salt = str(args.seed)
    trainer = trainer_class(
        model=str(model_dir),
        reward_funcs=[ControlledReward(informative_ids(dataset["id"], keep_rate, salt), args.num_generations)],
        args=config,
        train_dataset=dataset,
        callbacks=[timer],
    )
    without_log_printing(trainer).train()
    check_record_against_metrics(trainer, scheme)
    steps = step_records(trainer, timer, args.num_generations)
    del trainer
    gc.collect()
    return {
        "scheme": scheme,
        "keep_rate": keep_rate,
        "confidence": config.dynamic_sampling_confidence if scheme == "adaptive" else None,
        "beta": config.beta,
        "max_skip_probability": config.dynamic_sampling_max_skip_probability,
        "carry_max_staleness": config.dynamic_sampling_carry_max_staleness,
        "steps": steps,
        **summarise(steps, keep_rate),
    }


def summarise(steps: list[dict], keep_rate: float) -> dict:
    def figures(selected: list[dict]) -> dict:
        generated = sum(step["sequences_generated"] for step in selected)
        kept = sum(step["kept_sequences"] for step in selected)
        per_kept = generated / kept if kept else float("inf")
        observed = sum(s["informative_generated"] for s in selected) / sum(s["groups_generated"] for s in selected)
        return {
            "observed_keep_rate": observed,
            "rounds_per_step": sum(step["rounds"] for step in selected) / len(selected),
            "sequences_per_kept": per_kept,
            "sequences_per_kept_times_p": per_kept * keep_rate,
            # The prompt history skips uninformative prompts, so the rate the generated prompts are kept at
            # rises above p: times that rate, the figure measures the scheme's own over-generation.
            "sequences_per_kept_times_observed_p": per_kept * observed,
            "filled_fraction": sum(step["filled"] for step in selected) / len(selected),
            "generated_rows_per_step": generated / len(selected),
            "forward_rows_per_step": sum(step["forward_rows"] for step in selected) / len(selected),
            "carry_forward_rows_per_step": sum(step["carry_forward_rows"] for step in selected) / len(selected),
            "carried_groups_per_step": sum(step["carried_groups"] for step in selected) / len(selected),
            "carry_dropped_per_step": sum(step["carry_dropped"] for step in selected) / len(selected),
            "tokens_generated_per_step": sum(step["tokens_generated"] for step in selected) / len(selected),
            "prompts_skipped_per_step": sum(step["prompts_skipped"] for step in selected) / len(selected),
            "median_step_s": median([step["step_s"] for step in selected]),
            "median_generation_s": median([step["generation_s"] for step in selected]),
        }

    result = {"all_steps": figures(steps)}
    if len(steps) > 1:
        result["after_first_step"] = figures(steps[1:])
    return result


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-rates", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    parser.add_argument("--schemes", nargs="+", choices=sorted(SCHEMES), default=["adaptive", "verl", "resample"])
    parser.add_argument("--groups", type=int, default=32, help="prompt groups per optimiser step (train batch)")
    parser.add_argument("--num-generations", type=int, default=4, help="completions per prompt (G)")
    parser.add_argument("--steps", type=int, default=30, help="optimiser steps per scheme and keep rate")
    parser.add_argument("--max-completion-length", type=int, default=8)
    parser.add_argument("--num-prompts", type=int, default=4000, help="training prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--beta",
        type=float,
        default=0.0,
        help="KL coefficient; > 0 runs TRL's reference forward, whose rows the benchmark counts",
    )
    parser.add_argument(
        "--max-skip-probability",
        type=float,
        help="dynamic_sampling_max_skip_probability (default: DAPOConfig's; 0 turns the prompt history off)",
    )
    parser.add_argument(
        "--carry-max-staleness",
        type=int,
        help="dynamic_sampling_carry_max_staleness for the adaptive scheme (default: DAPOConfig's; 0 discards surplus)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        help="dynamic_sampling_confidence (default: DAPOConfig's); only the adaptive scheme uses it",
    )
    add_common_arguments(parser, model="tiny-128")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.steps, args.keep_rates = 8, 3, [0.5]
    return args


def run_schemes(args: argparse.Namespace) -> list[dict]:
    """Every scheme at every keep rate, each from the same saved model; one line printed per run."""
    dataset = arithmetic_prompts_with_ids(args.num_prompts)
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model_dir = save_model(args.model, scratch / "model", seed=args.seed)
        for keep_rate in args.keep_rates:
            for scheme in args.schemes:
                run = run_scheme(scheme, keep_rate, args, model_dir, dataset, scratch / f"{scheme}-{keep_rate}")
                runs.append(run)
                figures = run["all_steps"]
                print(
                    f"p={keep_rate} {scheme}: {figures['rounds_per_step']:.2f} rounds/step, "
                    f"{figures['sequences_per_kept']:.2f} sequences/kept, {figures['forward_rows_per_step']:.1f} of "
                    f"{figures['generated_rows_per_step']:.1f} generated rows/step forwarded, "
                    f"{figures['median_step_s']:.3f} s/step",
                    flush=True,
                )
    return runs


def print_runs_table(args: argparse.Namespace, runs: list[dict]) -> None:
    headers = [
        "p", "scheme", "observed p", "rounds/step", "seq/kept", "seq/kept x p", "filled", "s/step", "rounds/step*",
        "seq/kept x p*", "seq/kept x obs p", "generated rows/step", "forward rows/step", "carry fwd rows/step",
        "carried/step", "skipped/step",
    ]  # fmt: skip
    rows = []
    for run in runs:
        all_steps, later = (run["all_steps"], run.get("after_first_step", run["all_steps"]))
        rows.append(
            [
                run["keep_rate"],
                run["scheme"],
                all_steps["observed_keep_rate"],
                all_steps["rounds_per_step"],
                all_steps["sequences_per_kept"],
                all_steps["sequences_per_kept_times_p"],
                all_steps["filled_fraction"],
                all_steps["median_step_s"],
                later["rounds_per_step"],
                later["sequences_per_kept_times_p"],
                all_steps["sequences_per_kept_times_observed_p"],
                all_steps["generated_rows_per_step"],
                all_steps["forward_rows_per_step"],
                all_steps["carry_forward_rows_per_step"],
                all_steps["carried_groups_per_step"],
                all_steps["prompts_skipped_per_step"],
            ]
        )
    print()
    print(format_table(headers, rows))
    print(
        f"\n{args.groups} groups x {args.num_generations} completions per step, {args.steps} steps; '*' = steps after "
        "the first; filled = fraction of steps whose batch held only informative groups; s/step = median wall time; "
        f"forward rows = rows through the old-policy/reference log-prob forwards (beta={args.beta}); before filtering "
        "came first, every generated row went through them; carry fwd rows = those of them that carrying adds; carried = "
        "groups from earlier batches trained on; skipped = prompts the prompt history skipped."
    )


def adaptive_verdicts(runs: list[dict]) -> list[dict]:
    """The adaptive scheme's runs against the targets, each also printed."""
    verdicts = []
    for run in runs:
        if run["scheme"] != "adaptive":
            continue
        figures = run["all_steps"]
        rounds_ok = figures["rounds_per_step"] <= TARGET_ROUNDS_PER_STEP
        sequences_ok = figures["sequences_per_kept_times_p"] <= TARGET_SEQUENCES_PER_KEPT_TIMES_P
        verdicts.append(
            {
                "keep_rate": run["keep_rate"],
                "confidence": run["confidence"],
                "rounds_per_step": figures["rounds_per_step"],
                "rounds_target_met": rounds_ok,
                "sequences_per_kept_times_p": figures["sequences_per_kept_times_p"],
                "sequences_target_met": sequences_ok,
                "sequences_per_kept_times_observed_p": figures["sequences_per_kept_times_observed_p"],
                "carry_max_staleness": run["carry_max_staleness"],
                "max_skip_probability": run["max_skip_probability"],
                "generated_rows_per_step": figures["generated_rows_per_step"],
                "forward_rows_per_step": figures["forward_rows_per_step"],
                "carry_forward_rows_per_step": figures["carry_forward_rows_per_step"],
            }
        )
        print(
            f"adaptive (confidence {run['confidence']}) at p={run['keep_rate']}: rounds/step "
            f"{figures['rounds_per_step']:.2f} (target <= "
            f"{TARGET_ROUNDS_PER_STEP}: {'met' if rounds_ok else 'MISSED'}), sequences per kept x p "
            f"{figures['sequences_per_kept_times_p']:.3f} (target <= {TARGET_SEQUENCES_PER_KEPT_TIMES_P}: "
            f"{'met' if sequences_ok else 'MISSED'}), x observed p {figures['sequences_per_kept_times_observed_p']:.3f}"
        )
    return verdicts


def main(argv=None):
    args = parse_arguments(argv)
    check_device(args.device)
    set_cpu_threads(args.threads)
    quiet_transformers()
    machine = machine_info()
    runs = run_schemes(args)
    print_runs_table(args, runs)
    verdicts = adaptive_verdicts(runs)
    payload = {
        "benchmark": "dynamic_sampling",
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "machine": machine,
        "targets": {
            "rounds_per_step": TARGET_ROUNDS_PER_STEP,
            "sequences_per_kept_times_p": TARGET_SEQUENCES_PER_KEPT_TIMES_P,
        },
        "verdicts": verdicts,
        "runs": runs,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
