"""Dynamic sampling, simulated: what each request rule costs, with and without carrying surplus groups over.

No model and no trainer: every prompt group is informative independently with probability `p`, and the package's
own `DynamicSampler` (the object `DAPOTrainer` runs) decides, step after step, how many prompts each generation round
requests, what it keeps, what it carries and when it backs off. Each simulated process is a thread; the sampler's
collectives are exchanges between the threads. A group holds two completions, rewarded (1, 0) when informative and
(0, 0) otherwise. What the simulation leaves out: generation time (rounds are counted, not timed) and any change of
the keep rate over training.

Schemes (32 prompt groups per process and step, at most 10 rounds, at most 8x the batch per round):

- **adaptive**: DAPOTrainer before carry: each round requests enough prompts to fill the batch with probability
  `confidence` at the estimated keep rate, and discards the surplus informative groups;
- **adaptive+carry**: the same request for what the batch still lacks after taking the carried groups; surplus
  informative groups go to a `CarryBuffer` (at most one batch of groups, staleness at most 1 optimizer update,
  one update per step) and are used first at the next step;
- **expected+carry**: with carry, each round requests about the expected number of prompts, `lacking / p_hat`,
  instead of a confidence tail (the same request at confidence 0.5, the median);
- **verl**: every round generates 3x the batch, accumulates, and discards the surplus (the sampler with its request
  rule replaced and carrying off).

A step's batch is full when it holds 32 informative groups per process; a kept sequence belongs to an informative
group of a trained batch. Groups left in the buffer at the end of a run count as generated and not kept. Every
batch generates at least one prompt per process, as the trainer does, even when carried groups would fill it.
Reported per scheme and keep rate: sequences generated per kept sequence times p (1.0 = nothing wasted), rounds per
step, and for the carry schemes the staleness and the carried share of the trained groups; over long runs (steady
state) and over many 30-step runs (the length of `benchmarks/dynamic_sampling.py`, first-step costs included).

    python benchmarks/dynamic_sampling_sim.py --out benchmarks/results/dynamic_sampling_sim.json   # about 15 min
    python benchmarks/dynamic_sampling_sim.py --quick                                                # seconds
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass, field

import _common  # noqa: F401  (offline environment, import path)
import numpy as np
import torch
from _common import format_table, machine_info, write_json
from datasets import Dataset

from trl_ext.sampling import BackoffController, DynamicSampler, SamplerSettings
from trl_ext.sampling.assembly import rollout_rows

TARGET_ROUNDS_PER_STEP = 1.2
TARGET_SEQUENCES_PER_KEPT_TIMES_P = 1.05
MAX_ROUNDS = 10  # DAPOConfig's dynamic_sampling_max_rounds
MAX_OVERSAMPLING = 8.0  # DAPOConfig's dynamic_sampling_max_oversampling
VERL_GEN_BATCH_MULTIPLE = 3


@dataclass(frozen=True)
class Scheme:
    name: str
    rule: str  # "tail": the sampler's request at `confidence`; "verl": a fixed 3x the batch per round
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


GROUP_SIZE = 2
DATASET_SIZE = 4096


@dataclass
class Totals:
    steps: int = 0
    rounds: int = 0
    groups_generated: int = 0
    groups_kept: int = 0
    filled_steps: int = 0
    carried_used: int = 0
    carried_expired: int = 0
    carried_overflow: int = 0
    carried_left: int = 0
    staleness_sum: int = 0
    backoff_steps: int = 0
    per_step_generated: list[int] = field(default_factory=list)


class Lockstep:
    """Simulated processes as threads: a gather hands every thread the values all of them put in."""

    def __init__(self, num_processes: int):
        self.num_processes = num_processes
        self._barrier = threading.Barrier(num_processes)
        self._slots: list = [None] * num_processes

    def process(self, index: int):
        lockstep = self

        class Process:
            num_processes, process_index = lockstep.num_processes, index

            def gather(self, value):
                return lockstep.exchange(index, value)

        return Process()

    def exchange(self, index: int, value) -> list:
        self._slots[index] = value
        self._barrier.wait()
        values = list(self._slots)
        self._barrier.wait()
        return values


class BernoulliGroups:
    """A `RoundSource` in which each prompt group is informative with probability `keep_rate`."""

    def __init__(self, keep_rate: float, rng: np.random.Generator, process):
        self.keep_rate, self.rng, self.process = keep_rate, rng, process

    def generate_and_score(self, inputs, held_environments):
        groups = len(inputs) // GROUP_SIZE
        informative = self.rng.random(groups) < self.keep_rate
        rewards = torch.tensor([[1.0 if found and row == 0 else 0.0] for found in informative for row in (0, 1)])
        generation = ([[0]] * len(inputs), [[1]] * len(inputs), None, [""] * len(inputs), None, {}, None, [])
        rows = rollout_rows(
            generation, inputs=inputs, prompts=[row["prompt"] for row in inputs], rewards=rewards, extra_logs={},
            environments=None,
        )  # fmt: skip
        gathered = torch.cat(self.process.gather(rewards)) if self.process.num_processes > 1 else rewards
        return rows, gathered

    def record_behaviour(self, groups) -> None:
        return None


class NeverBackingOff(BackoffController):
    """The sampler before back-off existed: it over-samples whatever the keep rate."""

    def observe_round(self, informative: int, groups: int) -> bool:
        return False


class VerlSampler(DynamicSampler):
    """verl's request rule: every round generates for 3x the batch, whatever it still lacks."""

    groups = 0

    def _prompts_for(self, deficits, max_prompts) -> int:
        return VERL_GEN_BATCH_MULTIPLE * self.groups


def make_sampler(scheme: Scheme, groups: int, dataset: Dataset, process, seed: int) -> DynamicSampler:
    settings = SamplerSettings(
        group_size=GROUP_SIZE,
        max_rounds=MAX_ROUNDS,
        max_oversampling=MAX_OVERSAMPLING,
        confidence=scheme.confidence,
        on_exhausted="warn",
        carry_max_groups=groups if scheme.carry else 0,
        carry_max_staleness=scheme.max_staleness if scheme.carry else 0,
        max_skip_probability=0.0,
        seed=seed,
        shuffle=True,
        filter_used=torch.tensor([True]),
        filter_weights=torch.tensor([1.0]),
    )
    sampler = (VerlSampler if scheme.rule == "verl" else DynamicSampler)(settings, dataset, process)
    sampler.groups = groups
    if not scheme.backoff:
        sampler.backoff = NeverBackingOff.from_config(MAX_OVERSAMPLING, MAX_ROUNDS)
    return sampler


def run(scheme: Scheme, keep_rate: float, steps: int, groups: int, processes: int, rng: np.random.Generator) -> Totals:
    """One training run of `steps` steps, each process a thread; the policy version advances by one per step."""
    dataset = Dataset.from_dict({"prompt": [f"prompt {index}" for index in range(DATASET_SIZE)]})
    lockstep = Lockstep(processes)
    seeds = rng.integers(2**31, size=processes + 1)
    reports: list[list] = [[] for _ in range(processes)]
    samplers: list[DynamicSampler] = []

    def process_run(index: int):
        process = lockstep.process(index)
        sampler = make_sampler(scheme, groups, dataset, process, int(seeds[-1]))
        samplers.append(sampler)
        source = BernoulliGroups(keep_rate, np.random.default_rng(int(seeds[index])), process)
        for version in range(steps):
            first = ((version * processes + index) * groups) % (DATASET_SIZE - groups)
            prompts = dataset[first : first + groups]["prompt"]
            inputs = [{"prompt": prompt} for prompt in prompts for _ in range(GROUP_SIZE)]
            batch = sampler.next_batch(inputs, source, policy_version=version, draw_key=version)
            reports[index].append(batch.report)

    if processes == 1:
        process_run(0)
    else:
        threads = [threading.Thread(target=process_run, args=(index,)) for index in range(processes)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    totals = Totals()
    for step_reports in zip(*reports, strict=True):
        first = step_reports[0]  # counts over all processes are the same in every report
        totals.steps += 1
        totals.rounds += first.rounds_run
        totals.groups_generated += first.groups_sampled
        totals.groups_kept += first.fresh_groups_kept + sum(report.carried_groups for report in step_reports)
        totals.filled_steps += not first.exhausted
        totals.carried_used += sum(report.carried_groups for report in step_reports)
        totals.carried_expired += sum(report.carry_expired for report in step_reports)
        totals.carried_overflow += sum(report.carry_overflow for report in step_reports)
        totals.staleness_sum += sum(report.carried_staleness for report in step_reports)
        totals.backoff_steps += first.backing_off  # backing off when the step ended
        totals.per_step_generated.append(first.groups_sampled)
    totals.carried_left = sum(len(sampler.carry) for sampler in samplers)
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
        "carried_fraction_of_kept": used / kept if kept else 0.0,
        "mean_staleness_of_carried": sum(t.staleness_sum for t in runs) / used if used else 0.0,
        "carried_expired_per_step": sum(t.carried_expired for t in runs) / steps,
        "carried_overflow_per_step": sum(t.carried_overflow for t in runs) / steps,
        "carried_left_at_end_per_run": sum(t.carried_left for t in runs) / len(runs),
        "generated_per_step_over_batch": generated / steps / (groups * processes),
        "max_generated_per_step_over_batch": max(max(t.per_step_generated) for t in runs) / (groups * processes),
    }


def parse_arguments(argv=None) -> argparse.Namespace:
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
    return args


def run_schemes(args: argparse.Namespace) -> tuple[list[dict], list[list]]:
    """Every scheme at every keep rate, one long run and many short ones; the results and their table rows."""
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
    return results, rows


def run_constant_rewards(args: argparse.Namespace) -> tuple[list[dict], list[list]]:
    """Constant rewards (nothing informative): what a step costs with and without back-off."""
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
    return backoff_results, backoff_rows


def print_tables(args: argparse.Namespace, rows: list[list], backoff_rows: list[list]) -> None:
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
    backoff_headers = [
        "p", "groups", "scheme", "first step x batch", "later steps x batch", "rounds/step", "back-off steps",
        "kept / batch",
    ]  # fmt: skip
    print(format_table(backoff_headers, backoff_rows))


def target_verdicts(results: list[dict]) -> list[dict]:
    """Per scheme, keep rate and run length: whether the rounds and sequences targets are met."""
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
    return verdicts


def main(argv=None):
    args = parse_arguments(argv)
    torch.set_num_threads(1)  # tensors of a few hundred values: threads only contend
    results, rows = run_schemes(args)
    backoff_results, backoff_rows = run_constant_rewards(args)
    print_tables(args, rows, backoff_rows)
    payload = {
        "benchmark": "dynamic_sampling_sim",
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "constants": {"max_rounds": MAX_ROUNDS, "max_oversampling": MAX_OVERSAMPLING, "verl_multiple": 3},
        "machine": machine_info(),
        "targets": {
            "rounds_per_step": TARGET_ROUNDS_PER_STEP,
            "sequences_per_kept_times_p": TARGET_SEQUENCES_PER_KEPT_TIMES_P,
        },
        "verdicts": target_verdicts(results),
        "results": results,
        "constant_rewards": backoff_results,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
