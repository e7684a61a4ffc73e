"""Overhead of DAPOTrainer over TRL's GRPOTrainer when DAPO's additions are switched off.

Both trainers get the same settings (DAPOConfig with `dynamic_sampling=False` and `soft_overlong_punishment=False`
versus a GRPOConfig with the very same field values: the script checks that the two configs agree on every shared
field), the same model weights, data, rewards and seed. Runs alternate in ABBA order (GRPO, DAPO, DAPO, GRPO, ...)
so a slow phase of a shared machine hits both; each run's step time is the median over its steps (the first step,
a warm-up, left out) and the reported figure is the median over repeats of the per-repeat ratio DAPO / GRPO.
Target: at most 1.02.

Because the two trainers do the same computation from the same seed, their training losses must agree step by
step; the script reports the largest difference as a check that the comparison is like for like.

    python benchmarks/overhead.py --out benchmarks/results/overhead.json          # full: 40 steps x 5 repeats
    python benchmarks/overhead.py --quick                                          # smoke: 3 steps x 1 repeat
    python benchmarks/overhead.py --device cuda --model qwen2-0.5b                 # GPU variant
"""

from __future__ import annotations

import argparse
import gc
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
from trl import GRPOConfig, GRPOTrainer

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.rewards import get_reward

# DAPOConfig fields with no GRPOConfig counterpart; every other field must be equal in the two configs.
_DAPO_ONLY_FIELDS = set(DAPOConfig.__dataclass_fields__) - set(GRPOConfig.__dataclass_fields__)


def arithmetic_prompts(num_prompts: int) -> Dataset:
    """`a+b=` prompts with their answers, in a fixed order."""
    pairs = [(a, b) for a in range(100) for b in range(100)][:num_prompts]
    return Dataset.from_dict({"prompt": [f"{a}+{b}=" for a, b in pairs], "solution": [str(a + b) for a, b in pairs]})


def reward_funcs():
    # A verifier plus a format reward that a random model sometimes satisfies, so advantages are not all zero and
    # the backward pass carries a real gradient.
    return [get_reward("numeric", extract="none"), get_reward("regex_format", pattern=r"\d", match="search")]


def shared_settings(args, output_dir: Path) -> dict:
    return common_training_args(
        output_dir,
        args.device,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps,
        learning_rate=1e-4,
        # DAPOConfig defaults to clip-higher; set it in both so the configs are identical.
        epsilon=0.2,
        epsilon_high=0.28,
        seed=args.seed,
    )


def make_configs(args, output_dir: Path) -> dict:
    settings = shared_settings(args, output_dir)
    configs = {
        "grpo": GRPOConfig(**settings),
        "dapo": DAPOConfig(**settings, dynamic_sampling=False, soft_overlong_punishment=False),
    }
    grpo, dapo = configs["grpo"].to_dict(), configs["dapo"].to_dict()
    differing = sorted(key for key in grpo if key not in _DAPO_ONLY_FIELDS and grpo[key] != dapo.get(key))
    if differing:
        raise RuntimeError(f"The GRPO and DAPO configs differ in {differing}: the comparison would not be like for like.")
    return configs


def run_once(name: str, config, model_dir: Path, dataset: Dataset) -> dict:
    trainer_class = {"grpo": GRPOTrainer, "dapo": DAPOTrainer}[name]
    timer = StepTimer()
    trainer = trainer_class(
        model=str(model_dir), reward_funcs=reward_funcs(), args=config, train_dataset=dataset, callbacks=[timer]
    )
    started = time.perf_counter()
    without_log_printing(trainer).train()
    total = time.perf_counter() - started
    steps = timer.step_seconds[1:]  # the first step pays one-off costs (allocations, lazy initialisation)
    result = {
        "trainer": name,
        "median_step_s": median(steps),
        "step_seconds": timer.step_seconds,
        "train_seconds": total,
        "losses": log_history_values(trainer, "loss"),
    }
    del trainer
    gc.collect()
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="optimiser steps per run (the first is a warm-up)")
    parser.add_argument("--repeats", type=int, default=5, help="GRPO/DAPO run pairs, in ABBA order")
    add_common_arguments(parser, model="tiny-128")
    parser.add_argument("--batch-size", type=int, default=16, help="completions per step (per_device_train_batch_size)")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeats = 3, 1
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is a warm-up and is not timed).")
    check_device(args.device)
    set_cpu_threads(args.threads)
    quiet_transformers()

    machine = machine_info()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model_dir = save_model(args.model, scratch / "model", seed=args.seed)
        dataset = arithmetic_prompts(2000)
        configs = make_configs(args, scratch / "out")
        if not args.quick:
            # One short untimed run of each: imports, allocator and thread pools warm up before anything counts.
            warm = argparse.Namespace(**{**vars(args), "steps": 3})
            for name, config in make_configs(warm, scratch / "warm").items():
                run_once(name, config, model_dir, dataset)

        repeats = []
        for repeat in range(args.repeats):
            order = ["grpo", "dapo"] if repeat % 2 == 0 else ["dapo", "grpo"]
            runs = {name: run_once(name, configs[name], model_dir, dataset) for name in order}
            ratio = runs["dapo"]["median_step_s"] / runs["grpo"]["median_step_s"]
            loss_gap = max(
                (abs(a - b) for a, b in zip(runs["grpo"]["losses"], runs["dapo"]["losses"], strict=True)), default=0.0
            )
            repeats.append({"order": order, "ratio": ratio, "max_loss_difference": loss_gap, "runs": runs})
            print(
                f"repeat {repeat + 1}/{args.repeats} ({'-'.join(order)}): GRPO {runs['grpo']['median_step_s']:.4f} s, "
                f"DAPO {runs['dapo']['median_step_s']:.4f} s, ratio {ratio:.4f}",
                flush=True,
            )

    ratios = [repeat["ratio"] for repeat in repeats]
    pooled = {
        name: median([s for repeat in repeats for s in repeat["runs"][name]["step_seconds"][1:]]) for name in ("grpo", "dapo")
    }
    summary = {
        "median_ratio": median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "pooled_median_step_s": pooled,
        "pooled_ratio": pooled["dapo"] / pooled["grpo"],
        "max_loss_difference": max(repeat["max_loss_difference"] for repeat in repeats),
        "target_ratio": 1.02,
    }
    summary["meets_target"] = summary["median_ratio"] <= summary["target_ratio"]

    rows = [
        [i + 1, "-".join(r["order"]), r["runs"]["grpo"]["median_step_s"], r["runs"]["dapo"]["median_step_s"], r["ratio"]]
        for i, r in enumerate(repeats)
    ]
    print()
    print(format_table(["repeat", "order", "GRPO s/step", "DAPO s/step", "DAPO/GRPO"], rows))
    print(
        f"\nmedian ratio over {len(ratios)} repeats: {summary['median_ratio']:.4f} (range {summary['min_ratio']:.4f}-"
        f"{summary['max_ratio']:.4f}; pooled {summary['pooled_ratio']:.4f}); target <= 1.02: "
        f"{'met' if summary['meets_target'] else 'MISSED'}"
    )
    print(f"largest per-step loss difference DAPO vs GRPO: {summary['max_loss_difference']:.3g}")

    payload = {
        "benchmark": "overhead",
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "machine": machine,
        "summary": summary,
        "repeats": repeats,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
