"""Dynamic sampling, simulated: what each request rule costs, with and without carrying surplus groups over.

No model and no trainer loop: every prompt group is informative independently with probability `p` (a binomial
draw per round and process), and each scheme decides, step after step, how many prompts a generation round
requests, as the trainer would. The decisions are the package's own: the adaptive request is
`DAPOTrainer._prompts_for` called on the trainer's `KeepRateEstimator`s (`prompts_to_request` at the configured
confidence, per-process keep rates), the carry schemes hold their surplus in `trl_ext.sampling.CarryBuffer`, and the
back-off scenario uses `BackoffController`. What the simulation leaves out: generation time (rounds are counted,
not timed) and any change of the keep rate over training.

Schemes (32 prompt groups per process and step, at most 10 rounds, at most 8x the batch per round):

- **adaptive**: DAPOTrainer before carry: each round requests enough prompts to fill the batch with probability
  `confidence` at the estimated keep rate, and discards the surplus informative groups;
- **adaptive+carry**: the same request for what the batch still lacks after taking the carried groups; surplus
  informative groups go to a `CarryBuffer` (at most one batch of groups, staleness at most 1 optimizer update,
  one update per step) and are used first at the next step;
- **expected+carry**: with carry, each round requests about the expected number of prompts, `lacking / p_hat`,
  instead of a confidence tail (the same request at confidence 0.5, the median);
- **verl**: every round generates 3x the batch, accumulates, and discards the surplus.

A step's batch is full when it holds 32 informative groups per process; a kept sequence belongs to an informative
group of a trained batch. Groups left in the buffer at the end of a run count as generated and not kept.
Reported per scheme and keep rate: sequences generated per kept sequence times p (1.0 = nothing wasted), rounds per
step, and for the carry schemes the staleness and the carried share of the trained groups; over long runs (steady
state) and over many 30-step runs (the length of `benchmarks/dynamic_sampling.py`, first-step costs included).

    python benchmarks/dynamic_sampling_sim.py --out benchmarks/results/dynamic_sampling_sim.json   # about 2 min
    python benchmarks/dynamic_sampling_sim.py --quick                                                # seconds
"""

from __future__ import annotations

import argparse
import math
import types
from dataclasses import dataclass, field

import _common  # noqa: F401  (offline environment, import path)
import numpy as np
import torch
from _common import format_table, machine_info, write_json

from trl_ext.sampling.backoff import BackoffController, SamplingMode
from trl_ext.sampling.carry import CarriedGroup, CarryBuffer
from trl_ext.sampling.dynamic_sampling import KeepRateEstimator
from trl_ext.trainers.dapo_trainer import DAPOTrainer

TARGET_ROUNDS_PER_STEP = 1.2
TARGET_SEQUENCES_PER_KEPT_TIMES_P = 1.05
MAX_ROUNDS = 10  # DAPOConfig's dynamic_sampling_max_rounds
MAX_OVERSAMPLING = 8.0  # DAPOConfig's dynamic_sampling_max_oversampling
VERL_GEN_BATCH_MULTIPLE = 3


@dataclass(frozen=True)
class Scheme:
    name: str
    rule: str  # "tail": DAPOTrainer._prompts_for at `confidence`; "verl": a fixed 3x the batch per round
    confidence: float = 0.95
    carry: bool = False
    max_staleness: int = 1
    backoff: bool = False


SCHEMES = [
    Scheme("adaptive", "tail"),
    Scheme("adaptive c=0.9", "tail", confidence=0.9),
    Scheme("adaptive+carry", "tail", carry=True),
    Scheme("adaptive+carry c=0.9", "tail", confidence=0.9, carry=True),
    Scheme("adaptive+carry c=0.99", "tail", confidence=0.99, carry=True),
    Scheme("expected+carry", "tail", confidence=0.5, carry=True),
    Scheme("verl", "verl"),
]


@dataclass
class Totals:
    steps: int = 0
    rounds: int = 0
    groups_generated: int = 0
    groups_kept: int = 0
    filled_steps: int = 0
    zero_round_steps: int = 0
    carried_used: int = 0
    carried_expired: int = 0
    carried_overflow: int = 0
    carried_left: int = 0
    staleness_sum: int = 0
    backoff_steps: int = 0
    per_step_generated: list[int] = field(default_factory=list)


def trainer_request(confidence: float, estimators: list[KeepRateEstimator]):
    """DAPOTrainer's own `_prompts_for`, bound to the simulated estimators and confidence."""
    trainer = types.SimpleNamespace(
        args=types.SimpleNamespace(dynamic_sampling_confidence=confidence), _keep_rates=estimators
    )
    return lambda deficits, max_prompts: DAPOTrainer._prompts_for(trainer, deficits, max_prompts)


def run(scheme: Scheme, keep_rate: float, steps: int, groups: int, processes: int, rng: np.random.Generator) -> Totals:
    """One training run of `steps` steps; the policy version advances by one per step."""
    estimators = [KeepRateEstimator() for _ in range(processes)]
    if scheme.rule == "tail":
        request = trainer_request(scheme.confidence, estimators)
    else:
        request = lambda deficits, max_prompts: VERL_GEN_BATCH_MULTIPLE * groups  # noqa: E731
    buffers = [CarryBuffer(max_groups=groups, max_staleness=scheme.max_staleness) for _ in range(processes)]
    backoff = BackoffController.from_config(MAX_OVERSAMPLING, MAX_ROUNDS) if scheme.backoff else None
    max_prompts = int(groups * MAX_OVERSAMPLING)
    totals = Totals()
    for version in range(steps):
        kept = torch.zeros(processes, dtype=torch.long)
        for process, buffer in enumerate(buffers):
            taken, expired = buffer.take(groups, policy_version=version)
            kept[process] = len(taken)
            totals.carried_used += len(taken)
            totals.carried_expired += expired
            totals.staleness_sum += sum(group.staleness(version) for group in taken)
        rounds = generated = 0
        in_backoff = backoff is not None and backoff.mode is SamplingMode.BACKOFF
        totals.backoff_steps += in_backoff
        while rounds < MAX_ROUNDS and bool((kept < groups).any()):
            deficits = groups - kept
            num_prompts = groups if in_backoff else request(deficits, max_prompts)
            informative = torch.from_numpy(rng.binomial(num_prompts, keep_rate, size=processes))
            for estimator, found in zip(estimators, informative.tolist(), strict=True):
                estimator.update(found, num_prompts)
            rounds += 1
            generated += num_prompts * processes
            used = torch.minimum(informative, deficits)
            kept += used
            if scheme.carry:
                for process, surplus in enumerate((informative - used).tolist()):
                    surplus_groups = [CarriedGroup(None, version, prompt_index=-1, process_index=process)] * surplus
                    totals.carried_overflow += buffers[process].add(surplus_groups)
            if backoff is not None:
                backoff.observe_round(int(informative.sum()), num_prompts * processes)
                if backoff.mode is SamplingMode.BACKOFF:
                    break
        totals.steps += 1
        totals.rounds += rounds
        totals.zero_round_steps += rounds == 0
        totals.groups_generated += generated
        totals.groups_kept += int(kept.sum())
        totals.filled_steps += bool((kept >= groups).all())
        totals.per_step_generated.append(generated)
    totals.carried_left = sum(len(buffer) for buffer in buffers)
    return totals


def summarise(runs: list[Totals], keep_rate: float, groups: int, processes: int) -> dict:
    steps = sum(t.steps for t in runs)
    generated = sum(t.groups_generated for t in runs)
    kept = sum(t.groups_kept for t in runs)
    used = sum(t.carried_used for t in runs)
    per_kept = generated / kept if kept else float("inf")
    return {
        "runs": len(runs),
        "steps": steps,
        "rounds_per_step": sum(t.rounds for t in runs) / steps,
        "sequences_per_kept": per_kept,
        "sequences_per_kept_times_p": per_kept * keep_rate,
        "filled_fraction": sum(t.filled_steps for t in runs) / steps,
        "steps_without_generation": sum(t.zero_round_steps for t in runs) / steps,
        "carried_fraction_of_kept": used / kept if kept else 0.0,
        "mean_staleness_of_carried": sum(t.staleness_sum for t in runs) / used if used else 0.0,
        "carried_expired_per_step": sum(t.carried_expired for t in runs) / steps,
        "carried_overflow_per_step": sum(t.carried_overflow for t in runs) / steps,
        "carried_left_at_end_per_run": sum(t.carried_left for t in runs) / len(runs),
        "generated_per_step_over_batch": generated / steps / (groups * processes),
        "max_generated_per_step_over_batch": max(max(t.per_step_generated) for t in runs) / (groups * processes),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-rates", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    parser.add_argument("--groups", type=int, default=32, help="prompt groups per process and step")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--steady-steps", type=int, default=3000, help="steps of the long run")
    parser.add_argument("--short-runs", type=int, default=100, help="number of 30-step runs")
    parser.add_argument("--short-steps", type=int, default=30)
    parser.add_argument("--backoff-steps", type=int, default=50, help="steps of the constant-reward scenario")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke mode: short runs")
    parser.add_argument("--out", help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    if args.quick:
        args.steady_steps, args.short_runs, args.backoff_steps = 200, 5, 20

    results = []
    rows = []
    for keep_rate in args.keep_rates:
        for scheme in SCHEMES:
            # One seed per (keep rate, scheme) so the schemes are comparable and the run is reproducible.
            rng = np.random.default_rng([args.seed, round(keep_rate * 1000), SCHEMES.index(scheme)])
            steady = summarise(
                [run(scheme, keep_rate, args.steady_steps, args.groups, args.processes, rng)],
                keep_rate, args.groups, args.processes,
            )  # fmt: skip
            short = summarise(
                [
                    run(scheme, keep_rate, args.short_steps, args.groups, args.processes, rng)
                    for _ in range(args.short_runs)
                ],
                keep_rate, args.groups, args.processes,
            )  # fmt: skip
            results.append({"scheme": scheme.name, "keep_rate": keep_rate, "steady": steady, "short_runs": short})
            rows.append(
                [
                    keep_rate, scheme.name, steady["rounds_per_step"], steady["sequences_per_kept_times_p"],
                    short["rounds_per_step"], short["sequences_per_kept_times_p"], steady["filled_fraction"],
                    steady["carried_fraction_of_kept"], steady["mean_staleness_of_carried"],
                    steady["carried_expired_per_step"] + steady["carried_overflow_per_step"],
                ]
            )  # fmt: skip
            print(f"p={keep_rate} {scheme.name}: done", flush=True)

    # Constant rewards (nothing informative): what a step costs with and without back-off.
    backoff_rows = []
    backoff_results = []
    for keep_rate in (0.0, 0.005, 0.05):
        for scheme in (Scheme("adaptive", "tail"), Scheme("adaptive+backoff", "tail", backoff=True)):
            rng = np.random.default_rng([args.seed, 7, round(keep_rate * 1000), scheme.backoff])
            for groups in sorted({args.groups, 4, 1}, reverse=True):
                totals = run(scheme, keep_rate, args.backoff_steps, groups, args.processes, rng)
                summary = summarise([totals], max(keep_rate, 1e-12), groups, args.processes)
                first = totals.per_step_generated[0] / (groups * args.processes)
                later = totals.per_step_generated[1:]
                later_mean = sum(later) / len(later) / (groups * args.processes) if later else float("nan")
                entry = {
                    "scheme": scheme.name,
                    "keep_rate": keep_rate,
                    "groups": groups,
                    "steps": args.backoff_steps,
                    "first_step_generated_over_batch": first,
                    "later_steps_generated_over_batch": later_mean,
                    "rounds_per_step": summary["rounds_per_step"],
                    "backoff_step_fraction": totals.backoff_steps / totals.steps,
                    "kept_per_step_over_batch": totals.groups_kept / totals.steps / (groups * args.processes),
                }
                backoff_results.append(entry)
                backoff_rows.append(
                    [keep_rate, groups, scheme.name, first, later_mean, summary["rounds_per_step"],
                     entry["backoff_step_fraction"], entry["kept_per_step_over_batch"]]
                )  # fmt: skip

    headers = [
        "p", "scheme", "rounds/step", "seq/kept x p", "rounds/step (30)", "seq/kept x p (30)", "filled",
        "carried share", "staleness", "lost carried/step",
    ]  # fmt: skip
    print()
    print(format_table(headers, rows))
    print(
        f"\n{args.groups} groups x {args.processes} process(es) per step; steady = one run of {args.steady_steps} "
        f"steps; (30) = {args.short_runs} runs of {args.short_steps} steps. Targets: <= {TARGET_ROUNDS_PER_STEP} "
        f"rounds/step and <= {TARGET_SEQUENCES_PER_KEPT_TIMES_P} sequences per kept x p."
    )
    print()
    print(
        format_table(
            [
                "p", "groups", "scheme", "first step x batch", "later steps x batch", "rounds/step", "back-off steps",
                "kept / batch",
            ],  # fmt: skip
            backoff_rows,
        )
    )

    verdicts = []
    for result in results:
        for length in ("steady", "short_runs"):
            figures = result[length]
            verdicts.append(
                {
                    "scheme": result["scheme"],
                    "keep_rate": result["keep_rate"],
                    "run_length": length,
                    "rounds_target_met": figures["rounds_per_step"] <= TARGET_ROUNDS_PER_STEP,
                    "sequences_target_met": figures["sequences_per_kept_times_p"] <= TARGET_SEQUENCES_PER_KEPT_TIMES_P,
                }
            )
    payload = {
        "benchmark": "dynamic_sampling_sim",
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "constants": {"max_rounds": MAX_ROUNDS, "max_oversampling": MAX_OVERSAMPLING, "verl_multiple": 3},
        "machine": machine_info(),
        "targets": {
            "rounds_per_step": TARGET_ROUNDS_PER_STEP,
            "sequences_per_kept_times_p": TARGET_SEQUENCES_PER_KEPT_TIMES_P,
        },
        "verdicts": verdicts,
        "results": results,
        "constant_rewards": backoff_results,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
