"""Overhead of DAPOTrainer over TRL's GRPOTrainer when DAPO's additions are switched off.

Both trainers get the same settings (DAPOConfig with `dynamic_sampling=False` and `soft_overlong_punishment=False`
versus a GRPOConfig with the very same field values: the script checks that the two configs agree on every shared
field), the same model weights, data, rewards and seed. The two trainers train side by side in two threads that
take turns one optimiser step at a time (GRPO, DAPO, GRPO, DAPO, ...; the one that starts alternates between
repeats), so a busy phase of a shared machine falls on both alike; each keeps its own random state, so each
generates exactly what it would alone. A run's step time is the median over its steps (the first step, a warm-up,
left out); the reported figure is the median over repeats of the per-repeat ratio DAPO / GRPO. Target: at most 1.02.

Because the two trainers do the same computation from the same seed, their training losses must agree step by
step; the script reports the largest difference as a check that the comparison is like for like.

    python benchmarks/overhead.py --out benchmarks/results/overhead.json          # full: 40 steps x 6 repeats
    python benchmarks/overhead.py --quick                                          # smoke: 3 steps x 1 repeat
    python benchmarks/overhead.py --device cuda --model qwen2-0.5b                 # GPU variant
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import threading
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
from transformers import TrainerCallback, set_seed
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
        raise RuntimeError(
            f"The GRPO and DAPO configs differ in {differing}: the comparison would not be like for like."
        )
    return configs


class LockStep(TrainerCallback):
    """Makes two trainers, each training in its own thread, take turns one optimiser step at a time.

    A trainer holds the turn from one `on_step_begin` to its next, so its whole iteration (step, logging, fetching
    the next batch) runs while the other thread is blocked: the two alternate A, B, A, B... and adjacent steps see
    the same machine, however the load of a shared machine drifts. Each trainer's random state (torch, Python,
    NumPy) is swapped in and out with the turn, so each generates exactly what it would generate alone.
    """

    def __init__(self, turns: "Turns", name: str, timer: StepTimer):
        self.turns, self.name, self.timer = turns, name, timer
        self.random_state = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.random_state is None:  # first step: both trainers start from the seeded state
            self.turns.barrier.wait()
            self.random_state = self.turns.seeded_state
        else:
            self.random_state = _random_state()
            self.turns.pass_turn(self.name)
        self.turns.wait_turn(self.name)
        _set_random_state(self.random_state)
        self.timer.on_step_begin(args, state, control, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        self.timer.on_step_end(args, state, control, **kwargs)


class Turns:
    def __init__(self, first: str, second: str, seed: int):
        self.order = (first, second)
        self.turn = first
        self.finished: set[str] = set()
        self.condition = threading.Condition()
        self.barrier = threading.Barrier(2)
        set_seed(seed)
        self.seeded_state = _random_state()

    def _other(self, name: str) -> str:
        return self.order[1] if name == self.order[0] else self.order[0]

    def wait_turn(self, name: str) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.turn == name)

    def pass_turn(self, name: str) -> None:
        with self.condition:
            if self._other(name) not in self.finished:
                self.turn = self._other(name)
                self.condition.notify_all()

    def finish(self, name: str) -> None:
        with self.condition:
            self.finished.add(name)
            self.turn = self._other(name)
            self.condition.notify_all()


def _random_state():
    import random

    import numpy as np
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda, random.getstate(), np.random.get_state()


def _set_random_state(state) -> None:
    import random

    import numpy as np
    import torch

    cpu, cuda, python, numpy_state = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    random.setstate(python)
    np.random.set_state(numpy_state)


def run_pair(order: list[str], configs: dict, model_dir: Path, dataset: Dataset, seed: int) -> dict:
    """Train GRPO and DAPO side by side, alternating steps; `order[0]` takes the first step."""
    turns = Turns(order[0], order[1], seed)
    trainers, timers, errors = {}, {}, []
    for name in order:
        trainer_class = {"grpo": GRPOTrainer, "dapo": DAPOTrainer}[name]
        timers[name] = StepTimer()
        trainers[name] = trainer_class(
            model=str(model_dir),
            reward_funcs=reward_funcs(),
            args=configs[name],
            train_dataset=dataset,
            callbacks=[LockStep(turns, name, timers[name])],
        )
        without_log_printing(trainers[name])

    def train(name):
        try:
            trainers[name].train()
        except BaseException as error:  # re-raised in the main thread
            errors.append(error)
            turns.barrier.abort()
        finally:
            turns.finish(name)

    threads = [threading.Thread(target=train, args=(name,), name=f"train-{name}") for name in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]

    runs = {}
    for name in order:
        steps = timers[name].step_seconds[1:]  # the first step pays one-off costs (allocations, lazy init)
        runs[name] = {
            "median_step_s": median(steps),
            "step_seconds": timers[name].step_seconds,
            "losses": log_history_values(trainers[name], "loss"),
        }
    # Step k of one trainer ran right next to step k of the other: compare them pairwise.
    dapo_steps, grpo_steps = runs["dapo"]["step_seconds"][1:], runs["grpo"]["step_seconds"][1:]
    pair_ratios = [d / g for d, g in zip(dapo_steps, grpo_steps, strict=True)]
    del trainers
    gc.collect()
    return {"runs": runs, "median_pair_ratio": median(pair_ratios)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="optimiser steps per run (the first is a warm-up)")
    parser.add_argument("--repeats", type=int, default=6, help="GRPO/DAPO run pairs, in ABBA order")
    add_common_arguments(parser, model="tiny-128")
    parser.add_argument("--batch-size", type=int, default=16, help="completions per step (per-device batch)")
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
            # A short untimed pair: imports, allocator and thread pools warm up before anything counts.
            warm = argparse.Namespace(**{**vars(args), "steps": 3})
            run_pair(["grpo", "dapo"], make_configs(warm, scratch / "warm"), model_dir, dataset, args.seed)

        repeats = []
        for repeat in range(args.repeats):
            order = ["grpo", "dapo"] if repeat % 2 == 0 else ["dapo", "grpo"]
            pair = run_pair(order, configs, model_dir, dataset, args.seed)
            runs = pair["runs"]
            ratio = runs["dapo"]["median_step_s"] / runs["grpo"]["median_step_s"]
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
                f"repeat {repeat + 1}/{args.repeats} ({'-'.join(order)}): GRPO {runs['grpo']['median_step_s']:.4f} s, "
                f"DAPO {runs['dapo']['median_step_s']:.4f} s, ratio {ratio:.4f}",
                flush=True,
            )

    ratios = [repeat["ratio"] for repeat in repeats]
    pooled = {
        name: median([s for repeat in repeats for s in repeat["runs"][name]["step_seconds"][1:]])
        for name in ("grpo", "dapo")
    }
    summary = {
        "median_ratio": median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "pooled_median_step_s": pooled,
        "pooled_ratio": pooled["dapo"] / pooled["grpo"],
        "median_pair_ratio": median([repeat["median_pair_ratio"] for repeat in repeats]),
        "max_loss_difference": max(repeat["max_loss_difference"] for repeat in repeats),
        "target_ratio": 1.02,
    }
    summary["meets_target"] = summary["median_ratio"] <= summary["target_ratio"]

    rows = [
        [i + 1, "-".join(r["order"]), r["runs"]["grpo"]["median_step_s"], r["runs"]["dapo"]["median_step_s"],
         r["ratio"]]
        for i, r in enumerate(repeats)
    ]
    print()
    print(format_table(["repeat", "order", "GRPO s/step", "DAPO s/step", "DAPO/GRPO"], rows))
    print(
        f"\nmedian ratio over {len(ratios)} repeats: {summary['median_ratio']:.4f} (range {summary['min_ratio']:.4f}-"
        f"{summary['max_ratio']:.4f}; pooled {summary['pooled_ratio']:.4f}; median step-pair ratio "
        f"{summary['median_pair_ratio']:.4f}); target <= 1.02: "
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
