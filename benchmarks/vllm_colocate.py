"""DAPOTrainer generating with vLLM colocated (`use_vllm=True`, `vllm_mode="colocate"`): overhead and dynamic sampling.

Two measurements, each made by another benchmark's own runs with vLLM's settings added to every trainer config
(TRL's defaults otherwise, importance-sampling correction included):

- **overhead** (`benchmarks/overhead.py`'s side-by-side pairs): DAPOTrainer with `dynamic_sampling=False` and
  `soft_overlong_punishment=False` against GRPOTrainer, the two training in turns one step at a time, each with its
  own vLLM engine; the figure is the median over repeats of the ratio of median step times. Target: at most 1.02.
- **dynamic sampling** (`benchmarks/dynamic_sampling.py`'s adaptive scheme, DAPOConfig's defaults): at keep rates
  0.25 / 0.5 / 0.75, generation rounds per optimiser step, sequences generated per kept sequence (times p), and the
  rows that go through a log-probability forward outside the training forward per kept row (TRL's old-policy
  forward, which its importance-sampling correction needs, and the forwards carrying adds).

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
from _common import (
    add_common_arguments,
    check_device,
    format_table,
    machine_info,
    median,
    quiet_transformers,
    save_model,
    set_cpu_threads,
    write_json,
)

TARGET_OVERHEAD_RATIO = 1.02
TARGET_FORWARD_ROWS_PER_KEPT = 1.05


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
        repeats.append({"order": order, "ratio": ratio, "median_pair_ratio": pair["median_pair_ratio"], "runs": runs})
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
        "target_ratio": TARGET_OVERHEAD_RATIO,
    }
    summary["meets_target"] = summary["median_ratio"] <= TARGET_OVERHEAD_RATIO
    return {"summary": summary, "repeats": repeats}


def forward_rows_per_kept(steps: list[dict]) -> dict:
    kept = sum(step["kept_sequences"] for step in steps)
    return {
        "forward_rows_per_kept": sum(step["forward_rows"] for step in steps) / kept,
        "carry_forward_rows_per_kept": sum(step["carry_forward_rows"] for step in steps) / kept,
    }


def measure_dynamic_sampling(args, model_dir: Path, scratch: Path) -> list[dict]:
    """`dynamic_sampling.run_scheme`'s adaptive runs (DAPOConfig's defaults) at each keep rate, under vLLM."""
    settings = argparse.Namespace(
        groups=args.groups,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        steps=args.steps,
        seed=args.seed,
        device=args.device,
        beta=0.0,
        max_skip_probability=None,
        confidence=None,
        carry_max_staleness=None,
    )
    dataset = dynamic_sampling.arithmetic_prompts_with_ids(args.num_prompts)
    runs = []
    for keep_rate in args.keep_rates:
        run = dynamic_sampling.run_scheme(
            "adaptive", keep_rate, settings, model_dir, dataset, scratch / f"p{keep_rate}"
        )
        run["all_steps"].update(forward_rows_per_kept(run["steps"]))
        runs.append(run)
        figures = run["all_steps"]
        print(
            f"p={keep_rate}: {figures['rounds_per_step']:.2f} rounds/step, {figures['sequences_per_kept']:.2f} "
            f"sequences/kept (x p {figures['sequences_per_kept_times_p']:.3f}), "
            f"{figures['forward_rows_per_kept']:.3f} forward rows/kept, carry staleness bound "
            f"{run['carry_max_staleness']}",
            flush=True,
        )
    return runs


def report(overhead_result: dict, runs: list[dict]) -> list[dict]:
    summary = overhead_result["summary"]
    print(
        f"\nDAPO (additions off) / GRPO under vLLM: median ratio {summary['median_ratio']:.4f} (range "
        f"{summary['min_ratio']:.4f}-{summary['max_ratio']:.4f}); target <= {TARGET_OVERHEAD_RATIO}: "
        f"{'met' if summary['meets_target'] else 'MISSED'}"
    )
    headers = [
        "p", "rounds/step", "seq/kept", "seq/kept x p", "filled", "forward rows/kept", "carry fwd rows/kept",
        "carried/step", "carry staleness bound",
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
                figures["filled_fraction"],
                figures["forward_rows_per_kept"],
                figures["carry_forward_rows_per_kept"],
                figures["carried_groups_per_step"],
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
    add_common_arguments(parser, model="tiny-128")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.steps, args.keep_rates, args.overhead_steps, args.repeats = 8, 3, [0.5], 3, 1
    check_device(args.device)
    set_cpu_threads(args.threads)
    quiet_transformers()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB per engine on CPU (its default is far larger)
    for module in (overhead, dynamic_sampling):
        generate_with_vllm(module, vllm_settings(args.max_model_length))

    machine = machine_info()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model_dir = save_model(args.model, scratch / "model", seed=args.seed)
        overhead_result = measure_overhead(args, model_dir, scratch)
        runs = measure_dynamic_sampling(args, model_dir, scratch)
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
    main()
