"""Sample efficiency on the built-in task: DAPO vs TRL-default GRPO vs GSPO, over several seeds.

Every method starts from the package's default checkpoint (`builtin:tiny-arithmetic`, a 0.67M-parameter model
warm-started on two-digit additions) and trains on `builtin:arithmetic` with the default recipes' shared settings
(recipes/configs/*_default.yaml: learning rate 2e-4 with 5 warm-up steps, 8 completions per prompt, at most 8
new tokens, temperature 1.0, the `exact_match` verifier). Each optimiser step trains on 64 completions for every
method; the methods differ only in what their configs add:

- **dapo**: `DAPOConfig` defaults: clip-higher (0.2 / 0.28), token-level loss, dynamic sampling filtering on
  `exact_match` with surplus informative groups carried to the next batch and used first, soft overlong
  punishment (buffer of 4 tokens, as in the default recipe);
- **dapo-no-carry**: the same with surplus groups discarded (`dynamic_sampling_carry_max_staleness=0`);
- **dapo-history**: the defaults plus the prompt history, which skips prompts whose recent groups were all right
  or all wrong (`dynamic_sampling_max_skip_probability=0.9`);
- **dapo-no-carry-history**: the prompt history without carrying;
- **grpo**: `GRPOConfig` with TRL's defaults (symmetric clip 0.2, TRL's default loss, no filtering, no shaping);
- **gspo**: `GSPOConfig` defaults: sequence-level ratio with the paper's clip range 3e-4 / 4e-4, each rollout of
  4 x 64 completions split into 4 optimiser steps.
- **grpo-minibatches**, **dapo-minibatches**, **dapo-adaptive-pilot-minibatches**: the same as `grpo`, `dapo` and
  `dapo-adaptive-pilot` with each rollout of 4 x 64 completions split into 4 optimiser steps, as the GSPO arms and
  the recipes (`steps_per_generation: 4`) split theirs;
- **dapo-adaptive-extend**, **dapo-adaptive-extend-minibatches**: `dapo-adaptive-pilot` with one extension
  (`dynamic_sampling_extensions=1`: an all-equal group may get 8 more completions when worth their tokens, trained
  with it as one group of 16), without and with the mini-batches.

Held-out pass@1 (8 samples per prompt at temperature 1.0 on the 200 test problems, never trained on) is measured
before training and every `--eval-steps` steps. The target is the starting pass@1 plus `--target-gain` (0.05, about
four standard errors of one evaluation), or an absolute `--target`; the starting point is the same for every method
of a seed (same checkpoint, same evaluation seed). Reported per method: steps and generated completion tokens
(every generated completion counts, including groups dynamic sampling discards) and training wall time (evaluations
excluded) to first reach the target, the median over seeds, and the final accuracy. A plot shows the curves against
steps and against tokens. The JSON is rewritten after every run, so an interrupted run keeps the seeds it finished.

    python benchmarks/sample_efficiency.py --out benchmarks/results/sample_efficiency.json  # 5 seeds x 150 steps
    python benchmarks/sample_efficiency.py --quick --model-path <model dir>                 # smoke: 1 seed, 2 steps
    python benchmarks/sample_efficiency.py --task code --steps 100 --methods grpo dapo dapo-adaptive-pilot \
        --out benchmarks/results/sample_efficiency_code.json   # the built-in code task, judged in the sandbox
    python benchmarks/sample_efficiency.py --merge a.json b.json --out merged.json   # arms run as separate processes
"""

from __future__ import annotations

import argparse
import gc
import json
from dataclasses import asdict
import statistics
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import (
    add_common_arguments,
    check_device,
    common_training_args,
    format_table,
    machine_info,
    median,
    quiet_transformers,
    set_cpu_threads,
    without_log_printing,
    write_json,
)
from paired_seeds import Censored, bootstrap_median_interval, censored_median, describe, paired_ratio
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer
from trl_ext.evaluation import PassAtKCallback
from trl_ext.rewards import get_reward
from trl_ext.tasks import load_raw_dataset, resolve_model_path

DEFAULT_MODEL = "builtin:tiny-arithmetic"
DEFAULT_TASK = "builtin:arithmetic"
# What differs between the built-in tasks (`--task`): the checkpoint, the data, the verifier (also the filter
# reward), the learning rate and the completion length, as their default recipes set them.
TASKS = {
    "arithmetic": {
        "model": DEFAULT_MODEL, "dataset": DEFAULT_TASK,
        "reward": ("exact_match", {"extract": "none", "normalize": False}),
        "learning_rate": 2e-4, "max_completion_length": 8,
    },
    "code": {  # recipes/configs/dapo_code_default.yaml: programs judged by the `code` reward in the sandbox
        "model": "builtin:tiny-code", "dataset": "builtin:code-functions", "reward": ("code", {}),
        "learning_rate": 1e-3, "max_completion_length": 24,
    },
}  # fmt: skip
# Each variant states every switch it depends on, so it means the same whatever DAPOConfig's defaults are.
_ADAPTIVE = {
    "dynamic_sampling_mode": "adaptive", "dynamic_sampling_carry_max_staleness": 1, "dynamic_sampling_pilot_size": 0
}  # fmt: skip
DAPO_VARIANTS = {
    "dapo": {"dynamic_sampling_carry_max_staleness": 1, "dynamic_sampling_max_skip_probability": 0.0},
    "dapo-no-carry": {"dynamic_sampling_carry_max_staleness": 0, "dynamic_sampling_max_skip_probability": 0.0},
    "dapo-history": {"dynamic_sampling_carry_max_staleness": 1, "dynamic_sampling_max_skip_probability": 0.9},
    "dapo-no-carry-history": {"dynamic_sampling_carry_max_staleness": 0, "dynamic_sampling_max_skip_probability": 0.9},
    # The adaptive mode and its ablations: the history baseline alone, the estimate skip alone, both.
    "dapo-adaptive": {
        **_ADAPTIVE, "dynamic_sampling_history_baseline": True, "dynamic_sampling_max_skip_probability": 0.9
    },
    "dapo-adaptive-baseline": {
        **_ADAPTIVE, "dynamic_sampling_history_baseline": True, "dynamic_sampling_max_skip_probability": 0.0
    },
    "dapo-adaptive-skip": {
        **_ADAPTIVE, "dynamic_sampling_history_baseline": False, "dynamic_sampling_max_skip_probability": 0.9
    },
    # Both, and the pilot of 2 completions per prompt (the adaptive mode's defaults).
    "dapo-adaptive-pilot": {
        **_ADAPTIVE, "dynamic_sampling_history_baseline": True, "dynamic_sampling_max_skip_probability": 0.9,
        "dynamic_sampling_pilot_size": 2,
    },
}  # fmt: skip
# The defaults and one extension: an all-equal group may get 8 more completions, trained with it as one group.
DAPO_VARIANTS["dapo-adaptive-extend"] = {**DAPO_VARIANTS["dapo-adaptive-pilot"], "dynamic_sampling_extensions": 1}
# DAPO's paper splits each rollout into mini-batches (16 updates per rollout), as GSPO's does (4): the same two
# arms with one rollout of 4 x 64 completions feeding 4 optimiser steps of 64, as the GSPO arms do.
DAPO_VARIANTS.update({
    f"{name}-minibatches": {**DAPO_VARIANTS[name], "steps_per_generation": 4, "dynamic_sampling_carry_max_staleness": 4}
    for name in ("dapo", "dapo-adaptive-pilot", "dapo-adaptive-extend")
})
GSPO_VARIANTS = {
    "gspo": {"dynamic_sampling": False},
    "gspo-dynamic": {"dynamic_sampling": True, "dynamic_sampling_carry_max_staleness": 4},
    "gspo-adaptive": {
        "dynamic_sampling": True, **DAPO_VARIANTS["dapo-adaptive"], "dynamic_sampling_carry_max_staleness": 4
    },
    "gspo-adaptive-pilot": {
        "dynamic_sampling": True, **DAPO_VARIANTS["dapo-adaptive-pilot"], "dynamic_sampling_carry_max_staleness": 4
    },
}  # fmt: skip
METHODS = (*DAPO_VARIANTS, "grpo", "grpo-minibatches", *GSPO_VARIANTS)


class CountGeneratedTokens:
    """Counts every generated completion and its tokens: TRL scores each generated batch with one
    `_calculate_rewards` call, and DAPOTrainer each dynamic-sampling round; DAPOTrainer's further call on the
    assembled batch (rows already scored in their rounds, `_assembled` set) is not counted again."""

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if getattr(self, "_assembled", None) is not None:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.generated_sequences = getattr(self, "generated_sequences", 0) + len(completion_ids_list)
        self.generated_tokens = getattr(self, "generated_tokens", 0) + sum(len(ids) for ids in completion_ids_list)
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)


class TokensAtStep(TrainerCallback):
    """Generated tokens and sequences, and training wall time, so far after every optimiser step.

    Added before the evaluation callback, so its `on_step_end` runs before the evaluation: the time from a step's
    `on_step_begin` to its `on_step_end` is the step's (generation, scoring and update), without evaluations.
    """

    def __init__(self, trainer):
        self.trainer = trainer
        self.by_step = {0: (0, 0, 0.0)}
        self.train_seconds = 0.0
        self._step_started = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self._step_started is None:
            self._step_started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step_started is not None:
            self.train_seconds += time.perf_counter() - self._step_started
            self._step_started = None
        trainer = self.trainer
        generated = (getattr(trainer, "generated_tokens", 0), getattr(trainer, "generated_sequences", 0))
        self.by_step[state.global_step] = (*generated, self.train_seconds)


def method_setup(method: str, settings: dict, verifier: str = "exact_match"):
    """(trainer class, config) for one method; `settings` are the ones all methods share, `verifier` the name of
    the reward dynamic sampling filters on."""
    if method in DAPO_VARIANTS:
        config = DAPOConfig(
            **settings, dynamic_sampling_filter_reward=verifier, overlong_buffer_length=4, **DAPO_VARIANTS[method]
        )
        return type("CountingDAPOTrainer", (CountGeneratedTokens, DAPOTrainer), {}), config
    if method in ("grpo", "grpo-minibatches"):  # TRL's defaults; the second with the DAPO arms' mini-batches
        minibatches = {"steps_per_generation": 4} if method == "grpo-minibatches" else {}
        return type("CountingGRPOTrainer", (CountGeneratedTokens, GRPOTrainer), {}), GRPOConfig(**settings, **minibatches)
    if method in GSPO_VARIANTS:
        # One rollout of 4 x 64 completions feeds 4 optimiser steps of 64, so every method trains on 64 per step.
        dynamic = {"dynamic_sampling_filter_reward": verifier} if GSPO_VARIANTS[method]["dynamic_sampling"] else {}
        config = GSPOConfig(**settings, steps_per_generation=4, **dynamic, **GSPO_VARIANTS[method])
        return type("CountingGSPOTrainer", (CountGeneratedTokens, GSPOTrainer), {}), config
    raise ValueError(f"Unknown method {method!r}; use one of {', '.join(METHODS)}.")


def run(method: str, seed: int, args, model_path: str, task, output_dir: Path) -> dict:
    spec = TASKS[args.task]
    settings = common_training_args(
        output_dir,
        args.device,
        learning_rate=args.learning_rate if args.learning_rate is not None else spec["learning_rate"],
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=5,
        max_steps=args.steps,
        per_device_train_batch_size=64,
        num_generations=8,
        max_completion_length=spec["max_completion_length"],
        temperature=1.0,
        seed=seed,
    )
    reward_name, reward_kwargs = spec["reward"]
    trainer_class, config = method_setup(method, settings, verifier=reward_name)
    reward = get_reward(reward_name, **reward_kwargs)
    trainer = trainer_class(model=model_path, reward_funcs=[reward], args=config, train_dataset=task["train"])
    evaluation = PassAtKCallback(
        trainer,
        task["test"].select(range(min(args.eval_prompts, len(task["test"])))),
        reward,
        num_samples=args.eval_samples,
        ks=(1,),
        eval_steps=args.eval_steps,
        batch_size=1024,
        seed=seed,
    )
    tokens = TokensAtStep(trainer)
    trainer.add_callback(tokens)  # before the evaluation, whose time it leaves out
    trainer.add_callback(evaluation)
    started = time.perf_counter()
    without_log_printing(trainer).train()
    seconds = time.perf_counter() - started

    curve = []
    for step, result in evaluation.history:
        generated_tokens, generated_sequences, train_seconds = tokens.by_step[step]
        curve.append(
            {
                "step": step,
                "pass@1": result.pass_at_k[1],
                "tokens": generated_tokens,
                "sequences": generated_sequences,
                "train_seconds": train_seconds,
            }
        )
    # The same checkpoint, evaluated with the run's seed, gives every method of a seed the same starting point.
    target = args.target if args.target is not None else curve[0]["pass@1"] + args.target_gain
    reached = next((point for point in curve if point["pass@1"] >= target), None)
    del trainer
    gc.collect()
    return {
        "method": method,
        "seed": seed,
        "curve": curve,
        "target": target,
        "steps_to_target": reached["step"] if reached else None,
        "tokens_to_target": reached["tokens"] if reached else None,
        "seconds_to_target": reached["train_seconds"] if reached else None,
        "initial_pass@1": curve[0]["pass@1"],
        "final_pass@1": curve[-1]["pass@1"],
        "total_tokens": curve[-1]["tokens"],
        "train_seconds": seconds,
        "train_seconds_without_evaluation": tokens.train_seconds,
    }


def summarise(runs: list[dict], methods: list[str]) -> list[dict]:
    summary = []
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        if not mine:
            continue
        reached = [r for r in mine if r["steps_to_target"] is not None]
        finals = [r["final_pass@1"] for r in mine]
        summary.append(
            {
                "method": method,
                "seeds": len(mine),
                "seeds_reaching_target": len(reached),
                # Runs that never reach the target count as "more than the budget": the median is only defined
                # when at least half of the seeds reach it.
                "median_steps_to_target": _median_with_misses([r["steps_to_target"] for r in mine]),
                "median_tokens_to_target": _median_with_misses([r["tokens_to_target"] for r in mine]),
                "median_seconds_to_target": _median_with_misses([r["seconds_to_target"] for r in mine]),
                "mean_final_pass@1": statistics.fmean(finals),
                "stdev_final_pass@1": statistics.stdev(finals) if len(finals) > 1 else 0.0,
                "final_pass@1_per_seed": {r["seed"]: r["final_pass@1"] for r in mine},
                "mean_tokens_per_step": statistics.fmean(r["total_tokens"] / r["curve"][-1]["step"] for r in mine),
                "median_train_seconds": median([r["train_seconds"] for r in mine]),
            }
        )
    return summary


def tokens_to_target(run: dict) -> Censored:
    """A run's generated tokens to the target, censored at the tokens it spent if it never reached it."""
    if run["tokens_to_target"] is not None:
        return Censored(run["tokens_to_target"], True)
    return Censored(run["total_tokens"], False)


def paired_summary(runs: list[dict], methods: list[str], baseline: str = "grpo") -> list[dict]:
    """Per method: median tokens to target with a bootstrap 95% interval over seeds, and the per-seed paired ratio
    against `baseline` (same seed), censored runs marked (`paired_seeds.paired_ratio`)."""
    by_seed = {(r["method"], r["seed"]): r for r in runs}
    summary = []
    for method in methods:
        mine = sorted((r for r in runs if r["method"] == method), key=lambda r: r["seed"])
        if not mine:
            continue
        values = [tokens_to_target(r) for r in mine]
        paired_baseline = [
            tokens_to_target(by_seed[(baseline, r["seed"])]) for r in mine if (baseline, r["seed"]) in by_seed
        ]
        low, high = bootstrap_median_interval(values)
        ratios = {
            r["seed"]: paired_ratio(tokens_to_target(r), tokens_to_target(by_seed[(baseline, r["seed"])]))
            for r in mine
            if (baseline, r["seed"]) in by_seed
        }
        known = sorted(ratio for ratio, kind in ratios.values())
        summary.append(
            {
                "method": method,
                "median_tokens_to_target": asdict(censored_median(values)),
                "interval_95": [asdict(low), asdict(high)],
                f"paired_ratio_to_{baseline}": {seed: [ratio, kind] for seed, (ratio, kind) in ratios.items()},
                f"median_paired_ratio_to_{baseline}": statistics.median(known) if known else None,
                "ratio_of_medians": (
                    censored_median(values).value / censored_median(paired_baseline).value if paired_baseline else None
                ),
            }
        )
    return summary


def _median_with_misses(values: list) -> float | None:
    """Median where a miss (None) ranks above every hit; None when the median itself is a miss."""
    ranked = sorted(values, key=lambda value: (value is None, value if value is not None else 0))
    middle = ranked[(len(ranked) - 1) // 2 : len(ranked) // 2 + 1]
    if any(value is None for value in middle):
        return None
    return float(statistics.fmean(middle))


def plot(runs: list[dict], methods: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {
        "dapo": "tab:blue",
        "dapo-no-carry": "tab:purple",
        "dapo-history": "tab:cyan",
        "dapo-no-carry-history": "tab:brown",
        "grpo": "tab:orange",
        "gspo": "tab:green",
        "dapo-adaptive": "tab:red",
        "dapo-adaptive-baseline": "tab:pink",
        "dapo-adaptive-skip": "tab:olive",
        "gspo-dynamic": "tab:gray",
        "gspo-adaptive": "darkgreen",
        "dapo-adaptive-pilot": "darkred",
        "gspo-adaptive-pilot": "lime",
        "dapo-adaptive-extend": "indigo",
        "dapo-adaptive-extend-minibatches": "violet",
    }
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        if not mine:
            continue
        colour = colours.get(method)
        for r in mine:  # one thin line per seed
            accuracy = [p["pass@1"] for p in r["curve"]]
            axes[0].plot([p["step"] for p in r["curve"]], accuracy, color=colour, alpha=0.25, linewidth=1)
            axes[1].plot([p["tokens"] / 1000 for p in r["curve"]], accuracy, color=colour, alpha=0.25, linewidth=1)
        # The mean over seeds at each evaluation (every run evaluates at the same steps).
        points = range(min(len(r["curve"]) for r in mine))
        mean_accuracy = [statistics.fmean(r["curve"][i]["pass@1"] for r in mine) for i in points]
        mean_steps = [mine[0]["curve"][i]["step"] for i in points]
        mean_tokens = [statistics.fmean(r["curve"][i]["tokens"] for r in mine) / 1000 for i in points]
        label = f"{method} (mean of {len(mine)} seeds)"
        axes[0].plot(mean_steps, mean_accuracy, color=colour, linewidth=2.5, marker="o", markersize=3, label=label)
        axes[1].plot(mean_tokens, mean_accuracy, color=colour, linewidth=2.5, marker="o", markersize=3, label=label)
    target = statistics.fmean(r["target"] for r in runs)
    for axis, xlabel in zip(axes, ("optimiser step", "generated completion tokens (thousands)")):
        axis.axhline(target, color="grey", linestyle="--", linewidth=1)
        axis.set_xlabel(xlabel)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("held-out pass@1")
    axes[0].legend()
    figure.suptitle("Held-out pass@1 on builtin:arithmetic (dashed: mean target)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"wrote {path}")


def print_tables(runs: list[dict], args) -> None:
    """The per-method table and the paired-seed table, as the JSON's `summary` and `paired` hold them."""
    summary = summarise(runs, args.methods)
    rows = [
        [
            s["method"],
            f"{s['seeds_reaching_target']}/{s['seeds']}",
            "not reached" if s["median_steps_to_target"] is None else s["median_steps_to_target"],
            "not reached" if s["median_tokens_to_target"] is None else f"{s['median_tokens_to_target']:.0f}",
            "not reached" if s["median_seconds_to_target"] is None else f"{s['median_seconds_to_target']:.1f}",
            f"{s['mean_final_pass@1']:.3f} +- {s['stdev_final_pass@1']:.3f}",
            s["mean_tokens_per_step"],
            s["median_train_seconds"],
        ]
        for s in summary
    ]
    print()
    print(
        format_table(
            ["method", "reached", "steps to target", "tokens to target", "s to target", f"pass@1 at step {args.steps}",
             "tokens/step", "s/run"],
            rows,
        )
    )  # fmt: skip
    targets = ", ".join(f"{r['target']:.3f}" for r in runs if r["method"] == args.methods[0])
    rule = f">= {args.target}" if args.target is not None else f"starting pass@1 + {args.target_gain}"
    print(
        f"\ntarget: held-out pass@1 {rule} (per seed: {targets}; {args.eval_prompts} prompts x {args.eval_samples} "
        f"samples, evaluated every {args.eval_steps} steps); medians over seeds {args.seeds}."
    )

    paired = paired_summary(runs, args.methods)
    print()
    print(
        format_table(
            ["method", "median tokens to target", "95% interval", "paired ratio to grpo (median)", "per seed"],
            [
                [
                    row["method"],
                    describe(Censored(**row["median_tokens_to_target"])),
                    " - ".join(describe(Censored(**end)) for end in row["interval_95"]),
                    "-" if row["median_paired_ratio_to_grpo"] is None else f"{row['median_paired_ratio_to_grpo']:.2f}",
                    " ".join(
                        f"{'' if kind == '=' else kind}{ratio:.2f}"
                        for ratio, kind in row["paired_ratio_to_grpo"].values()
                    ),
                ]
                for row in paired
            ],
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["dapo", "grpo", "gspo"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=150, help="optimiser steps per run")
    parser.add_argument("--eval-steps", type=int, default=15, help="evaluate every this many steps")
    parser.add_argument("--eval-prompts", type=int, default=200, help="held-out prompts evaluated")
    parser.add_argument("--eval-samples", type=int, default=8, help="samples per held-out prompt")
    parser.add_argument("--task", choices=list(TASKS), default="arithmetic", help="built-in task (default arithmetic)")
    parser.add_argument("--learning-rate", type=float, help="default: the task's (2e-4 arithmetic, 1e-3 code)")
    parser.add_argument("--target", type=float, help="held-out pass@1 to reach (default: start + --target-gain)")
    parser.add_argument(
        "--target-gain", type=float, default=0.05, help="without --target: the run's starting pass@1 plus this"
    )
    parser.add_argument("--model-path", help="starting checkpoint: a directory or builtin:... (default: the task's)")
    parser.add_argument("--plot", help="PNG path for the curves (default: next to --out)")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="train nothing: merge these results (runs of the same settings, run apart) into --out")
    add_common_arguments(parser, model="tiny-128")  # --model is unused here: the checkpoint is --model-path
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out, args.plot)
    if args.quick:
        args.seeds, args.steps, args.eval_steps, args.eval_prompts, args.eval_samples = [0], 2, 1, 16, 2
    check_device(args.device)
    set_cpu_threads(args.threads)
    quiet_transformers()

    model_path = resolve_model_path(args.model_path or TASKS[args.task]["model"])
    task = load_raw_dataset(TASKS[args.task]["dataset"])
    machine = machine_info()
    runs = []

    def payload() -> dict:
        return {
            "benchmark": "sample_efficiency",
            "settings": {key: value for key, value in vars(args).items() if key != "out"},
            "model_path": model_path,
            "machine": machine,
            "summary": summarise(runs, args.methods),
            "paired": paired_summary(runs, args.methods),
            "runs": runs,
        }

    with tempfile.TemporaryDirectory() as scratch:
        # Seeds outermost, so a slow phase of a shared machine does not fall on one method only.
        for seed in args.seeds:
            for method in args.methods:
                result = run(method, seed, args, model_path, task, Path(scratch) / f"{method}-{seed}")
                runs.append(result)
                print(
                    f"{method} seed {seed}: pass@1 {result['initial_pass@1']:.3f} -> {result['final_pass@1']:.3f}, "
                    f"target at step {result['steps_to_target']}, {result['total_tokens']} tokens, "
                    f"{result['train_seconds']:.0f} s",
                    flush=True,
                )
                write_json(args.out, payload())  # an interrupted run keeps the runs it finished

    print_tables(runs, args)
    plot_path = Path(args.plot) if args.plot else (Path(args.out).with_suffix(".png") if args.out else None)
    if plot_path is not None:
        plot(runs, args.methods, plot_path)
    result = payload()
    write_json(args.out, result)
    return result


def merge(paths: list[str], out: str | None, plot_path: str | None) -> dict:
    """One result from several runs of this script with the same settings (arms or seeds run as separate processes):
    their runs, in the order given, with the tables and the plot recomputed. The settings are the first file's,
    with every method of every file."""
    results = [json.loads(Path(path).read_text()) for path in paths]
    runs = [run for result in results for run in result["runs"]]
    methods = list(dict.fromkeys(run["method"] for run in runs))
    settings = {**results[0]["settings"], "methods": methods, "merged_from": [Path(path).name for path in paths]}
    merged = {**results[0], "settings": settings, "summary": summarise(runs, methods),
              "paired": paired_summary(runs, methods), "runs": runs}
    print_tables(runs, argparse.Namespace(**settings))
    plot_file = Path(plot_path) if plot_path else (Path(out).with_suffix(".png") if out else None)
    if plot_file is not None:
        plot(runs, methods, plot_file)
    write_json(out, merged)
    return merged


if __name__ == "__main__":
    main()
