"""DAPOTrainer generating with vLLM colocated (`use_vllm=True`, `vllm_mode="colocate"`): overhead and dynamic sampling.

Two measurements, with vLLM's settings added to TRL's defaults (importance-sampling correction included):

- **overhead** (`benchmarks/overhead.py`'s side-by-side pairs, its configs, data and rewards): DAPOTrainer with
  `dynamic_sampling=False` and `soft_overlong_punishment=False` against GRPOTrainer, the two training in turns one
  step at a time, each with its own vLLM engine; the figure is the median over repeats of the ratio of median step
  times. Target: at most 1.02.
- **dynamic sampling** (`benchmarks/dynamic_sampling.py`'s controlled task: its prompts and its reward, which makes
  exactly a fraction p of the prompts informative), DAPOConfig's defaults: at p = 0.25 / 0.5 / 0.75, generation
  rounds per optimiser step, sequences generated per kept sequence (times p), both from the trainer's
  `dynamic_sampling/*` metrics, and the rows that go through TRL's log-probability forward without gradient (its
  old-policy forward, which the importance-sampling correction needs, and any forward carrying adds) per kept row.
  Targets: 1.2 rounds per step, 1.05 sequences per kept one times p, 1.05 forward rows per kept row.

vLLM's CPU build runs it on a machine without a GPU (see docs/contributing.md for the environment); vLLM's CPU
attention needs a head dimension of at least 32, which the `tiny-128` shape has (4 heads of 32).

    python benchmarks/vllm_colocate.py --out benchmarks/results/vllm_colocate.json   # full: 4 pairs, 30 steps per p
    python benchmarks/vllm_colocate.py --quick                     # smoke: 3 steps, one pair, p = 0.5
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
import dynamic_sampling
import overhead
import torch
from _common import (
    StepTimer,
    add_common_arguments,
    check_device,
    common_training_args,
    format_table,
    machine_info,
    median,
    quiet_transformers,
    save_model,
    set_cpu_threads,
    without_log_printing,
    write_json,
)

from trl_ext import DAPOConfig, DAPOTrainer

TARGET_OVERHEAD_RATIO = 1.02
TARGET_FORWARD_ROWS_PER_KEPT = 1.05
PARTS = ("overhead", "dynamic_sampling")


def vllm_settings(max_model_length: int) -> dict:
    return {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": max_model_length}


def generate_with_vllm(module, settings: dict) -> None:
    """Make every trainer config `module` builds (through `_common.common_training_args`) generate with vLLM."""
    build = module.common_training_args

    def with_vllm(output_dir, device, **overrides):
        return build(output_dir, device, **{**settings, **overrides})

    module.common_training_args = with_vllm


def measure_overhead(args, model_dir: Path, scratch: Path) -> dict:
    """GRPO and DAPO side by side under vLLM, in `overhead.run_pair`'s lock-step pairs, alternating who starts."""
    settings = argparse.Namespace(
        steps=args.overhead_steps,
        batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        seed=args.seed,
        device=args.device,
    )
    dataset = overhead.arithmetic_prompts(2000)
    repeats = []
    for repeat in range(args.repeats):
        order = ["grpo", "dapo"] if repeat % 2 == 0 else ["dapo", "grpo"]
        configs = overhead.make_configs(settings, scratch / f"overhead-{repeat}")
        pair = overhead.run_pair(order, configs, model_dir, dataset, args.seed)
        runs = pair["runs"]
        ratio = runs["dapo"]["median_step_s"] / runs["grpo"]["median_step_s"]
        # Same seed, same vLLM engine seed: the two trainers must sample and compute the same thing.
        loss_gap = max(
            (abs(a - b) for a, b in zip(runs["grpo"]["losses"], runs["dapo"]["losses"], strict=True)), default=0.0
        )
        repeats.append(
            {
                "order": order,
                "ratio": ratio,
                "median_pair_ratio": pair["median_pair_ratio"],
                "max_loss_difference": loss_gap,
                "runs": runs,
            }
        )
        print(
            f"overhead repeat {repeat + 1}/{args.repeats} ({'-'.join(order)}): GRPO "
            f"{runs['grpo']['median_step_s']:.4f} s, DAPO {runs['dapo']['median_step_s']:.4f} s, ratio {ratio:.4f}",
            flush=True,
        )
    ratios = [repeat["ratio"] for repeat in repeats]
    summary = {
        "median_ratio": median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "median_pair_ratio": median([repeat["median_pair_ratio"] for repeat in repeats]),
        "max_loss_difference": max(repeat["max_loss_difference"] for repeat in repeats),
        "target_ratio": TARGET_OVERHEAD_RATIO,
    }
    summary["meets_target"] = summary["median_ratio"] <= TARGET_OVERHEAD_RATIO
    return {"summary": summary, "repeats": repeats}


class NoGradForwardRows:
    """Counts, per optimiser step, the rows of `trainer` that go through TRL's log-probability forward without
    gradient: TRL's old-policy (and reference) forwards and any forward carrying adds, not the training forward."""

    def __init__(self, trainer):
        self.rows: dict[int, int] = {}
        forward = trainer._get_per_token_logps_and_entropies

        def counting(model, input_ids, *args, **kwargs):
            if not torch.is_grad_enabled():
                step = trainer.state.global_step
                self.rows[step] = self.rows.get(step, 0) + input_ids.size(0)
            return forward(model, input_ids, *args, **kwargs)

        trainer._get_per_token_logps_and_entropies = counting


def step_figures(trainer, forward_rows: NoGradForwardRows, timer: StepTimer) -> list[dict]:
    """Per step, from the trainer's logged `dynamic_sampling/*` metrics: rounds, groups generated and kept."""
    group, train_groups = trainer.num_generations, trainer.args.generation_batch_size // trainer.num_generations
    entries = [entry for entry in trainer.state.log_history if "dynamic_sampling/generation_rounds" in entry]
    steps = []
    for index, (entry, step_s) in enumerate(zip(entries, timer.step_seconds, strict=True)):
        sampled = entry["dynamic_sampling/prompts_sampled"]
        carried = entry["dynamic_sampling/carried_groups"]
        fresh_kept = round(entry["dynamic_sampling/groups_kept_fraction"] * sampled)
        kept = (
            train_groups if not entry["dynamic_sampling/rounds_exhausted"] else min(train_groups, fresh_kept + carried)
        )
        steps.append(
            {
                "rounds": int(entry["dynamic_sampling/generation_rounds"]),
                "groups_generated": int(sampled),
                "kept_groups": int(kept),
                "carried_groups": int(carried),
                "carry_dropped": int(entry["dynamic_sampling/carry_dropped"]),
                "sequences_generated": int(group * sampled),
                "kept_sequences": int(group * kept),
                "forward_rows": forward_rows.rows.get(index, 0),
                "step_s": step_s,
            }
        )
    return steps


def summarise(steps: list[dict], keep_rate: float) -> dict:
    generated, kept = sum(s["sequences_generated"] for s in steps), sum(s["kept_sequences"] for s in steps)
    return {
        "rounds_per_step": sum(s["rounds"] for s in steps) / len(steps),
        "sequences_per_kept": generated / kept,
        "sequences_per_kept_times_p": generated / kept * keep_rate,
        "forward_rows_per_kept": sum(s["forward_rows"] for s in steps) / kept,
        "carried_groups_per_step": sum(s["carried_groups"] for s in steps) / len(steps),
        "carry_dropped_per_step": sum(s["carry_dropped"] for s in steps) / len(steps),
        "median_step_s": median([s["step_s"] for s in steps]),
    }


def run_keep_rate(keep_rate: float, args, model_dir: Path, dataset, output_dir: Path) -> dict:
    """DAPOConfig's defaults under vLLM on `dynamic_sampling.py`'s controlled task: a fraction `keep_rate` of the
    prompts is informative."""
    config = DAPOConfig(
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
            **vllm_settings(args.max_model_length),
        )
    )
    informative = dynamic_sampling.informative_ids(dataset["id"], keep_rate, str(args.seed))
    timer = StepTimer()
    trainer = DAPOTrainer(
        model=str(model_dir),
        reward_funcs=[dynamic_sampling.ControlledReward(informative, args.num_generations)],
        args=config,
        train_dataset=dataset,
        callbacks=[timer],
    )
    forward_rows = NoGradForwardRows(trainer)
    without_log_printing(trainer).train()
    steps = step_figures(trainer, forward_rows, timer)
    return {
        "keep_rate": keep_rate,
        "carry_max_staleness": config.dynamic_sampling_carry_max_staleness,
        "importance_sampling_correction": config.vllm_importance_sampling_correction,
        "steps": steps,
        "all_steps": summarise(steps, keep_rate),
        "after_first_step": summarise(steps[1:], keep_rate) if len(steps) > 1 else None,
    }


def measure_dynamic_sampling(args, model_dir: Path, scratch: Path) -> list[dict]:
    dataset = dynamic_sampling.arithmetic_prompts_with_ids(args.num_prompts)
    runs = []
    for keep_rate in args.keep_rates:
        run = run_keep_rate(keep_rate, args, model_dir, dataset, scratch / f"p{keep_rate}")
        runs.append(run)
        figures = run["all_steps"]
        print(
            f"p={keep_rate}: {figures['rounds_per_step']:.2f} rounds/step, {figures['sequences_per_kept']:.2f} "
            f"sequences/kept (x p {figures['sequences_per_kept_times_p']:.3f}), "
            f"{figures['forward_rows_per_kept']:.3f} forward rows/kept, {figures['carried_groups_per_step']:.1f} "
            f"carried groups/step (staleness bound {run['carry_max_staleness']})",
            flush=True,
        )
    return runs


def report(overhead_result: dict | None, runs: list[dict]) -> list[dict]:
    if overhead_result is not None:
        summary = overhead_result["summary"]
        print(
            f"\nDAPO (additions off) / GRPO under vLLM: median ratio {summary['median_ratio']:.4f} (range "
            f"{summary['min_ratio']:.4f}-{summary['max_ratio']:.4f}; median step-pair ratio "
            f"{summary['median_pair_ratio']:.4f}); target <= {TARGET_OVERHEAD_RATIO}: "
            f"{'met' if summary['meets_target'] else 'MISSED'}; largest loss difference "
            f"{summary['max_loss_difference']:.3g}"
        )
    if not runs:
        return []
    headers = [
        "p", "rounds/step", "seq/kept", "seq/kept x p", "forward rows/kept", "carried/step", "dropped/step",
        "s/step", "carry staleness bound",
    ]  # fmt: skip
    rows, verdicts = [], []
    for run in runs:
        figures = run["all_steps"]
        rows.append(
            [
                run["keep_rate"],
                figures["rounds_per_step"],
                figures["sequences_per_kept"],
                figures["sequences_per_kept_times_p"],
                figures["forward_rows_per_kept"],
                figures["carried_groups_per_step"],
                figures["carry_dropped_per_step"],
                figures["median_step_s"],
                run["carry_max_staleness"],
            ]
        )
        verdicts.append(
            {
                "keep_rate": run["keep_rate"],
                "rounds_per_step": figures["rounds_per_step"],
                "rounds_target_met": figures["rounds_per_step"] <= dynamic_sampling.TARGET_ROUNDS_PER_STEP,
                "sequences_per_kept_times_p": figures["sequences_per_kept_times_p"],
                "sequences_target_met": figures["sequences_per_kept_times_p"]
                <= dynamic_sampling.TARGET_SEQUENCES_PER_KEPT_TIMES_P,
                "forward_rows_per_kept": figures["forward_rows_per_kept"],
                "forward_rows_target_met": figures["forward_rows_per_kept"] <= TARGET_FORWARD_ROWS_PER_KEPT,
            }
        )
    print()
    print(format_table(headers, rows))
    return verdicts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-rates", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    parser.add_argument("--groups", type=int, default=32, help="prompt groups per step (dynamic sampling runs)")
    parser.add_argument("--steps", type=int, default=30, help="optimiser steps per keep rate")
    parser.add_argument("--num-prompts", type=int, default=4000)
    parser.add_argument("--overhead-steps", type=int, default=30, help="steps per overhead run (the first untimed)")
    parser.add_argument("--repeats", type=int, default=4, help="GRPO/DAPO overhead pairs, alternating who starts")
    parser.add_argument("--batch-size", type=int, default=16, help="completions per step (overhead runs)")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=8)
    parser.add_argument("--max-model-length", type=int, default=64, help="vllm_max_model_length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    add_common_arguments(parser, model="tiny-128")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.steps, args.keep_rates, args.overhead_steps, args.repeats = 8, 3, [0.5], 3, 1
    check_device(args.device)
    set_cpu_threads(args.threads)
    quiet_transformers()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB per engine on CPU (its default is far larger)
    generate_with_vllm(overhead, vllm_settings(args.max_model_length))

    machine = machine_info()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model_dir = save_model(args.model, scratch / "model", seed=args.seed)
        overhead_result = measure_overhead(args, model_dir, scratch) if "overhead" in args.parts else None
        runs = measure_dynamic_sampling(args, model_dir, scratch) if "dynamic_sampling" in args.parts else []
    verdicts = report(overhead_result, runs)

    import vllm

    machine["vllm"] = vllm.__version__
    payload = {
        "benchmark": "vllm_colocate",
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "machine": machine,
        "targets": {
            "overhead_ratio": TARGET_OVERHEAD_RATIO,
            "rounds_per_step": dynamic_sampling.TARGET_ROUNDS_PER_STEP,
            "sequences_per_kept_times_p": dynamic_sampling.TARGET_SEQUENCES_PER_KEPT_TIMES_P,
            "forward_rows_per_kept": TARGET_FORWARD_ROWS_PER_KEPT,
        },
        "overhead": overhead_result,
        "verdicts": verdicts,
        "runs": runs,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    from _common import keep_vllm_cpu_linear_weights

    keep_vllm_cpu_linear_weights()  # TRL's weight sync must reach vLLM on AVX-512 CPUs too (see its docstring)
    main()
