"""Adaptive sampling, simulated: informative groups per generated token, with known per-prompt pass rates.

No model and no trainer. Every prompt has a true pass rate `p_i`; a completion's reward is Bernoulli(`p_i`) (1 or 0)
and its length is drawn per prompt. The package's own `DynamicSampler` (the object that `DAPOTrainer` and
`GSPOTrainer` run, through their base `DynamicSamplingTrainer`) decides, step after step, which prompts to generate
for, what to keep, what to carry and (in the adaptive mode) what to skip and which all-equal groups the history
baseline makes informative. All arms see the same world (pass rates, lengths),
the same dataloader order, the same refill orders and skip coins (the sampler's seed), and the same random numbers
for the `k`-th generation of a prompt (common random numbers): the comparison is paired per seed.

The world (one per seed):

- **pass rates**, a mix that resembles RL-on-verifiable-rewards data: 35% "hard", `p ~ Beta(0.5, 50)` (mean 0.01,
  median 0.005); 25% "easy", `p ~ 1 - Beta(0.5, 50)`; 40% "in between", `p ~ Beta(1.2, 1.2)` (nearly uniform).
  With G = 8 about 39% of fresh groups are mixed. `--mix sparse` takes 70% hard, 10% easy, 20% in between (about
  24% mixed), nearer the sparse environment of the issue's target.
- **lengths**: each prompt has a mean completion length `L_i ~ LogNormal(log 400, 0.4)` clipped to [50, 2000]
  tokens; each completion's length is `L_i * exp(0.3 z - 0.045)`, `z ~ N(0, 1)`, independent of its reward.
- **drift** (`--drift`, off by default): a "learning" policy. Each prompt's pass rate is `sigmoid(theta_i)` and
  every trained group moves `theta_i` by `lr * (1/G) sum_j A_j (o_j - p_i)`, the REINFORCE step of a per-prompt
  Bernoulli policy with the arm's own advantages `A_j` (group mean `R - mean(R)`, no std; or the adaptive mode's
  leave-one-out history baseline). With 0/1 rewards and a baseline in [0, 1] every term is >= 0: pass rates only
  rise, faster for the arms that train more signal, and the beliefs must follow them. Under drift the arms end in
  different worlds (each has learned its own amount), so their ratios mix efficiency with progress. And with the
  history baseline a prompt whose history holds both a success and a failure makes every later group informative
  (the discounted history forgets a reward only after some 15 to 20 visits) whatever its pass rate has become, and
  a prompt is trained on (and drifts) only once it has been mixed: `adaptive-baseline`'s and the oracle's counts,
  tokens and skips come out exactly the same with and without drift (`adaptive`'s nearly: its skip reads the
  pass-rate posterior); only their signal differs.

Arms (B prompt groups of G completions per step; the DAPO arms use DAPOConfig's defaults: 10 rounds, 8x
over-sampling, confidence 0.95, carry of at most B groups for 1 update):

1. **grpo**: the sampler set to one plain round (`max_rounds=1`, `max_oversampling=1`, no carry): every generated
   group trains; the mixed ones are counted as informative;
2. **dapo**: dynamic sampling, `adaptive=None`, carry on;
3. **adaptive-skip**: `AdaptiveSettings(history_baseline=False, max_skip_probability=0.9)`;
4. **adaptive-baseline**: `AdaptiveSettings(history_baseline=True, max_skip_probability=0.0)`;
5. **adaptive**: `AdaptiveSettings(pilot_size=0)` (both);
6. **adaptive-baseline-pilot**: the history baseline and the pilot (`pilot_size=2`), no skip;
7. **adaptive-pilot**: all three, the adaptive mode's defaults with `G = 8` (the pilot: 2 completions per prompt
   first, the other 6 only when the chance that they bring the missing outcome, per completion, is at least the
   recent yield of mixed groups per completion; `trl_ext/sampling/pilot.py`);
8. **adaptive-pilot-extend**, **adaptive-pilot-extend-2**: the defaults with one or two extensions
   (`extensions=1`, `2`: an all-equal group may get `G` more completions when worth their tokens, trained with them
   as one group; `trl_ext/sampling/extension.py`);
9. **oracle** (an upper reference, not a competitor): the `adaptive-baseline` sampler whose skip is replaced by the
   truth. It knows each prompt's current `p_i` and reads the sampler's own per-prompt history; it generates for a
   prompt only if `q_i = 1 - p_i^G [no failure in history] - (1 - p_i)^G [no success in history]` (the true chance
   that the group is informative as the history baseline counts it: mixed, or all-equal with a history mean that
   differs) is at least a threshold `t`; otherwise the prompt is skipped, for free, and replaced by the next prompt
   of the draw order. `t` is chosen by a sweep on separate tuning seeds, maximising informative groups trained per
   1k generated tokens. It does not know the lengths, and it keeps the sampler's request rule and rounds. With a
   high `t` nearly every group it generates is informative, so it sits at the metric's ceiling, one group per
   `G * mean length` tokens (about 0.29 per 1k here), by training a small subset of the prompts over and over
   (about 200 of 2,000 in 200 steps): a bound on the count, not a sampling rule to copy.

Reported per arm, over seeds (mean and a bootstrap 95% interval over seeds; ratios to `dapo` paired per seed):
informative groups *trained* per 1k generated tokens (the headline: the groups with a non-zero advantage that reach
the gradient; DAPO's surplus groups that are dropped do not count), informative groups *generated* per 1k tokens,
completion tokens generated per step, tokens of groups that ended uninformative, prompts skipped, rounds per step,
and the policy-gradient signal per 1k tokens: the sum over trained groups of `(1/G) sum_j A_j (o_j - p_i)`, which is
the per-prompt Bernoulli policy's REINFORCE estimate of `d E[R] / d theta_i`. An all-wrong group that the history
baseline keeps has a non-zero advantage (it counts as informative) but carries `b * p_i`, little when `p_i` is small:
the signal column says how much of the count is gradient.

Accounting checks, asserted at every step of every run: the sampler's generated tokens equal the tokens the source
generated; the sampler's informative groups equal those recomputed from the rewards the source produced (mixed, or,
for the history-baseline arms, a non-zero leave-one-out advantage against an independently kept discounted history);
every trained batch holds B groups (informative ones, then fillers only when the rounds ran out); every kept group
has a non-zero advantage and no filler is mixed.

    python benchmarks/adaptive_sim.py --out benchmarks/results/adaptive_sim.json                     # static
    python benchmarks/adaptive_sim.py --drift --out benchmarks/results/adaptive_sim_drifting.json    # drifting
    python benchmarks/adaptive_sim.py --mix sparse --out benchmarks/results/adaptive_sim_sparse.json  # sparse mix
    python benchmarks/adaptive_sim.py --prompts 500 --out benchmarks/results/adaptive_sim_500_prompts.json
    python benchmarks/adaptive_sim.py --quick                                                        # seconds

Each full run takes about 1 to 2 minutes with `--workers 2`.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import _common  # noqa: F401  (offline environment, import path)
import numpy as np
import torch
from _common import machine_info, write_json
from adaptive_sim_checks import ATOL, HistoryMirror
from adaptive_sim_report import arms_table, per_run_metrics, run_description, summarise, target_note
from datasets import Dataset
from dynamic_sampling_sim import MAX_OVERSAMPLING, MAX_ROUNDS

from trl_ext.sampling import AdaptiveSettings, DynamicSampler, SamplerSettings
from trl_ext.sampling.assembly import rollout_rows
from trl_ext.sampling.adaptive import batch_history_advantages
from trl_ext.sampling.sampler import local_processes

# The target, measured there on the sparse environment: informative groups per 1k generated tokens >= 2x DAPO.
TARGET_RATIO_TO_DAPO = 2.0
COMPONENTS = {  # component: how its pass rates are drawn
    "hard": "p ~ Beta(0.5, 50)",
    "easy": "p ~ 1 - Beta(0.5, 50)",
    "in between": "p ~ Beta(1.2, 1.2)",
}
MIXES = {  # mix: shares of (hard, easy, in between)
    "default": (0.35, 0.25, 0.40),
    "sparse": (0.70, 0.10, 0.20),  # most prompts out of reach, as on the sparse environment
}
MEDIAN_LENGTH, LENGTH_SIGMA, LENGTH_RANGE, LENGTH_JITTER = 400.0, 0.4, (50, 2000), 0.3
CONFIDENCE = 0.95  # DAPOConfig's dynamic_sampling_confidence
CARRY_STALENESS = 1  # DAPOConfig's default: one optimiser update per generation batch
CHUNK = 16  # generations of a prompt whose random numbers are drawn at once
DECAY = AdaptiveSettings().decay


@dataclass(frozen=True)
class Arm:
    name: str
    adaptive: AdaptiveSettings | None = None
    plain: bool = False  # one plain round, every group trains (GRPO)
    oracle: bool = False


ARMS = [
    Arm("grpo", plain=True),
    Arm("dapo"),
    Arm("adaptive-skip", AdaptiveSettings(history_baseline=False, max_skip_probability=0.9)),
    Arm("adaptive-baseline", AdaptiveSettings(history_baseline=True, max_skip_probability=0.0)),
    Arm("adaptive", AdaptiveSettings()),
    Arm("adaptive-baseline-pilot", AdaptiveSettings(history_baseline=True, max_skip_probability=0.0, pilot_size=2)),
    Arm("adaptive-pilot", AdaptiveSettings(pilot_size=2)),
    Arm("adaptive-pilot-extend", AdaptiveSettings(pilot_size=2, extensions=1)),
    Arm("adaptive-pilot-extend-2", AdaptiveSettings(pilot_size=2, extensions=2)),
    Arm("oracle", AdaptiveSettings(history_baseline=True, max_skip_probability=0.0), oracle=True),
]
ARM_NAMES = [arm.name for arm in ARMS]
DEFAULT_ARM = "adaptive-pilot"  # the adaptive mode as `DAPOConfig(dynamic_sampling_mode="adaptive")` runs it


# ------------------------------------------------------------------------------------------------ the world


def make_world(seed: int, num_prompts: int, mix: str = "default") -> dict:
    """Per-prompt true pass rates and mean completion lengths (see the module docstring)."""
    rng = np.random.default_rng([seed, 0xA5])
    component = rng.choice(len(COMPONENTS), size=num_prompts, p=MIXES[mix])
    hard = rng.beta(0.5, 50.0, size=num_prompts)
    easy = 1.0 - rng.beta(0.5, 50.0, size=num_prompts)
    between = rng.beta(1.2, 1.2, size=num_prompts)
    pass_rates = np.choose(component, [hard, easy, between])
    lengths = np.clip(np.exp(np.log(MEDIAN_LENGTH) + LENGTH_SIGMA * rng.standard_normal(num_prompts)), *LENGTH_RANGE)
    return {"pass_rates": pass_rates, "mean_lengths": lengths, "component": component}


def informative_chance(p: np.ndarray | float, group_size: int) -> np.ndarray | float:
    """The chance that a group of `group_size` completions is mixed: `1 - p^G - (1 - p)^G`."""
    return 1.0 - p**group_size - (1.0 - p) ** group_size


class BernoulliPrompts:
    """A `RoundSource`: each completion of prompt `i` is right with probability `pass_rates[i]` (reward 1, else 0).

    The `k`-th generation of a prompt uses the same uniforms and length noise in every arm of a seed (a stream per
    prompt, keyed by the seed and the prompt). Counts what it generated, and logs every round for the checks.
    """

    def __init__(self, world: dict, group_size: int, seed: int):
        self.pass_rates, self.mean_lengths = world["pass_rates"], world["mean_lengths"]
        self.group_size, self.seed = group_size, seed
        self.visits: dict[int, int] = {}
        self._streams: dict[int, tuple[np.random.Generator, list[np.ndarray], list[np.ndarray]]] = {}
        self._zeros: dict[int, list[int]] = {}
        self.tokens = 0
        self.rounds: list[tuple[list[int], np.ndarray]] = []  # (prompt indices, (groups, G) rewards) per round

    def _draws(self, prompt: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The uniforms and length noise of the prompt's generations `start` to `start + count` (the `k`-th
        generation of a prompt draws the same numbers in every arm, whatever increments it is generated in)."""
        if prompt not in self._streams:
            self._streams[prompt] = (np.random.default_rng([self.seed, 0x5EED, prompt]), [], [])
        rng, uniforms, normals = self._streams[prompt]
        while len(uniforms) < start + count:  # extend in fixed chunks, so every arm sees the same numbers
            uniforms.extend(rng.random((CHUNK, self.group_size)).reshape(-1))
            normals.extend(rng.standard_normal((CHUNK, self.group_size)).reshape(-1))
        return np.array(uniforms[start : start + count]), np.array(normals[start : start + count])

    def generate_and_score(self, inputs, held_environments):
        runs: list[list[int]] = []  # [prompt, completions] per prompt, in order (its rows are contiguous)
        for row in inputs:
            if runs and runs[-1][0] == int(row["pid"]):
                runs[-1][1] += 1
            else:
                runs.append([int(row["pid"]), 1])
        rewards, lengths, rates = [], [], []
        for prompt, count in runs:
            start = self.visits.get(prompt, 0)
            self.visits[prompt] = start + count
            uniform, normal = self._draws(prompt, start, count)
            p = float(self.pass_rates[prompt])
            rewards.append((uniform < p).astype(np.float64))
            jitter = np.exp(LENGTH_JITTER * normal - LENGTH_JITTER**2 / 2)
            lengths.extend(np.maximum(1, np.rint(self.mean_lengths[prompt] * jitter)).astype(int).tolist())
            rates += [p] * count
        self.rounds.append(([prompt for prompt, _ in runs], rewards))
        self.tokens += sum(lengths)
        completion_ids = [self._zeros.setdefault(length, [0] * length) for length in lengths]
        generation = ([[0]] * len(inputs), completion_ids, None, [""] * len(inputs), None, {"p": rates}, None, [])
        scores = torch.tensor(np.concatenate(rewards).reshape(-1, 1), dtype=torch.float32)
        rows = rollout_rows(
            generation, inputs=inputs, prompts=[row["prompt"] for row in inputs], rewards=scores, extra_logs={},
            environments=None,
        )  # fmt: skip
        return rows, scores

    def record_behaviour(self, groups) -> None:
        return None


class OracleSampler(DynamicSampler):
    """The `adaptive-baseline` sampler whose skip knows the truth: it generates for a prompt only when the true
    chance of an informative group (as the history baseline counts it) is at least `threshold`."""

    threshold = 0.0
    pass_rates: np.ndarray

    def informative_chance(self, prompt: int) -> float:
        successes, failures, _, _ = self.beliefs.evidence(prompt)
        p, group_size = float(self.pass_rates[prompt]), self.settings.group_size
        all_right = p**group_size if failures <= ATOL else 0.0
        all_wrong = (1.0 - p) ** group_size if successes <= ATOL else 0.0
        return 1.0 - all_right - all_wrong

    def _skip_prompts(self, indices, draw_key, round_index):
        return [index >= 0 and self.informative_chance(index) < self.threshold for index in indices]


def sampler_settings(arm: Arm, groups: int, group_size: int, seed: int) -> SamplerSettings:
    return SamplerSettings(
        group_size=group_size,
        max_rounds=1 if arm.plain else MAX_ROUNDS,
        max_oversampling=1.0 if arm.plain else MAX_OVERSAMPLING,
        confidence=CONFIDENCE,
        on_exhausted="warn",
        carry_max_groups=0 if arm.plain else groups,
        carry_max_staleness=0 if arm.plain else CARRY_STALENESS,
        max_skip_probability=0.0,
        seed=seed,
        shuffle=True,
        filter_used=torch.tensor([True]),
        filter_weights=torch.tensor([1.0]),
        adaptive=arm.adaptive,
    )


# -------------------------------------------------------------------------------------------------- one run


def prompt_order(seed: int, num_prompts: int, needed: int) -> list[int]:
    """The dataloader's prompt order: a fresh permutation per epoch, the same in every arm."""
    order: list[int] = []
    epoch = 0
    while len(order) < needed:
        order += np.random.default_rng([seed, 0x0D, epoch]).permutation(num_prompts).tolist()
        epoch += 1
    return order


def run_arm(arm: Arm, seed: int, config: dict, threshold: float | None = None) -> dict:
    """One training run of `config["steps"]` steps of one arm; returns its totals (asserting the checks). The
    sampler's exhausted/back-off notices are silenced while it runs (and only then: tests run it in-process)."""
    logger = logging.getLogger("trl_ext.sampling.sampler")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return _run_arm(arm, seed, config, threshold)
    finally:
        logger.setLevel(level)


def _run_arm(arm: Arm, seed: int, config: dict, threshold: float | None) -> dict:
    torch.set_num_threads(1)
    steps, groups, group_size, num_prompts = config["steps"], config["groups"], config["group_size"], config["prompts"]
    world = make_world(seed, num_prompts, config["mix"])
    initial_rates = world["pass_rates"].copy()
    theta = np.log(np.clip(initial_rates, 1e-9, 1 - 1e-9)) - np.log1p(-np.clip(initial_rates, 1e-9, 1 - 1e-9))
    pids = list(range(num_prompts))
    dataset = Dataset.from_dict({"prompt": [f"prompt {i}" for i in pids], "pid": pids})
    settings = sampler_settings(arm, groups, group_size, seed)
    if arm.oracle:
        sampler = OracleSampler(settings, dataset, local_processes())
        sampler.threshold, sampler.pass_rates = threshold, world["pass_rates"]
    else:
        sampler = DynamicSampler(settings, dataset, local_processes())
    source = BernoulliPrompts(world, group_size, seed)
    mirror = HistoryMirror(settings.adaptive.decay if settings.adaptive else DECAY)
    use_history = bool(settings.adaptive and settings.adaptive.history_baseline)
    order = prompt_order(seed, num_prompts, steps * groups)
    totals = dict.fromkeys(
        ["generated_tokens", "uninformative_tokens", "groups_generated", "informative_generated",
         "informative_trained", "prompts_skipped", "prompts_stopped", "prompts_extended", "rounds", "exhausted_steps",
         "carried_groups", "pg_signal"], 0
    )  # fmt: skip
    totals["pg_signal"] = 0.0
    for step in range(steps):
        prompts = order[step * groups : (step + 1) * groups]
        inputs = [{"prompt": f"prompt {prompt}", "pid": prompt} for prompt in prompts for _ in range(group_size)]
        tokens_before, rounds_before = source.tokens, len(source.rounds)
        batch = sampler.next_batch(inputs, source, policy_version=step, draw_key=step)
        report = batch.report

        # Every generated token counted once; informative groups as the rewards say; B groups trained.
        assert report.generated_tokens == source.tokens - tokens_before, (arm.name, step)
        assert len(report.rows_per_round) == len(source.rounds) - rounds_before, (arm.name, step)
        pilot = bool(settings.adaptive and settings.adaptive.pilot_size)
        recomputed = mirror.informative_in_calls(source.rounds[rounds_before:], group_size, use_history, pilot)
        assert report.informative_sampled == recomputed, (arm.name, step, report.informative_sampled, recomputed)
        assert len(batch.rows) == groups * group_size, (arm.name, step)
        kept_groups = batch.num_kept_rows // group_size
        assert kept_groups == report.fresh_groups_kept + report.carried_groups, (arm.name, step)
        assert kept_groups == groups or report.exhausted, (arm.name, step)
        assert report.uninformative_tokens <= report.generated_tokens
        if kept_groups < groups:  # fillers: groups that were not informative (never mixed)
            fillers = torch.stack(batch.rows.columns["rewards"][batch.num_kept_rows :])[:, 0].view(-1, group_size)
            assert bool((fillers.max(dim=1).values == fillers.min(dim=1).values).all()), (arm.name, step)

        # The trained groups' policy-gradient signal (and, with drift, the policy's step).
        if kept_groups:
            rows = batch.num_kept_rows
            rewards = batch.rewards()[:rows, 0].double().view(kept_groups, group_size)
            if use_history:
                advantages = batch_history_advantages(batch, settings)[:rows].double().view(kept_groups, group_size)
            else:
                advantages = rewards - rewards.mean(dim=1, keepdim=True)
            rates = torch.tensor(batch.rows.columns["extra_fields.p"][:rows:group_size], dtype=torch.float64)
            assert bool((advantages.abs() > ATOL).any(dim=1).all()), (arm.name, step, "a kept group is uninformative")
            signal = (advantages * (rewards - rates.unsqueeze(1))).mean(dim=1)
            assert bool((signal >= -1e-9).all()), "0/1 rewards and a baseline in [0, 1]: every term is >= 0"
            totals["pg_signal"] += float(signal.sum())
            if config["drift_lr"] > 0:
                kept_prompts = [row["pid"] for row in batch.rows.columns["inputs"][:rows:group_size]]
                for prompt, value in zip(kept_prompts, signal.tolist()):
                    theta[prompt] += config["drift_lr"] * value
                    world["pass_rates"][prompt] = 1.0 / (1.0 + math.exp(-theta[prompt]))

        totals["generated_tokens"] += report.generated_tokens
        totals["uninformative_tokens"] += report.uninformative_tokens
        totals["groups_generated"] += report.groups_sampled
        totals["informative_generated"] += report.informative_sampled
        totals["informative_trained"] += kept_groups
        totals["prompts_skipped"] += report.prompts_skipped
        totals["prompts_stopped"] += report.prompts_stopped
        totals["prompts_extended"] += report.prompts_extended
        totals["rounds"] += report.rounds_run
        totals["exhausted_steps"] += report.exhausted
        totals["carried_groups"] += report.carried_groups
    assert totals["generated_tokens"] == source.tokens
    totals["steps"] = steps
    totals["source_tokens"] = source.tokens
    totals["mean_pass_rate_start"] = float(initial_rates.mean())
    totals["mean_pass_rate_end"] = float(world["pass_rates"].mean())
    totals["distinct_prompts_generated"] = len(source.visits)
    return totals


def _task(task: tuple) -> tuple:
    arm_name, seed, config, threshold = task
    arm = ARMS[ARM_NAMES.index(arm_name)]
    return task, run_arm(arm, seed, config, threshold)


def run_tasks(tasks: list[tuple], workers: int) -> list[tuple]:
    if workers <= 1:
        return [_task(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_task, tasks, chunksize=1))


def describe_world(seed: int, num_prompts: int, group_size: int, mix: str) -> dict:
    world = make_world(seed, num_prompts, mix)
    p = world["pass_rates"]
    chance = informative_chance(p, group_size)
    return {
        "mix": mix,
        "components": {
            name: {"share": share, "pass_rate": text} for (name, text), share in zip(COMPONENTS.items(), MIXES[mix])
        },
        "lengths": f"per prompt L ~ LogNormal(log {MEDIAN_LENGTH:.0f}, {LENGTH_SIGMA}) clipped to "
        f"{list(LENGTH_RANGE)}; per completion L * exp({LENGTH_JITTER} z - {LENGTH_JITTER**2 / 2:.3f}), "
        "independent of the reward",
        "seed_shown": seed,
        "mean_pass_rate": float(p.mean()),
        "mean_chance_of_a_mixed_group": float(chance.mean()),
        "fraction_with_chance_below_0.1": float((chance < 0.1).mean()),
        "mean_completion_length": float(world["mean_lengths"].mean()),
    }


# ------------------------------------------------------------------------------------------------ the command


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=2000, help="dataset size N")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--groups", type=int, default=16, help="prompt groups per step (B)")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0, help="first seed; seeds are seed, seed + 1, ...")
    parser.add_argument("--mix", choices=sorted(MIXES), default="default", help="shares of hard/easy/in-between")
    parser.add_argument("--drift", action="store_true", help="pass rates rise as prompts are trained on")
    parser.add_argument("--drift-lr", type=float, default=4.0, help="the drift's step size (with --drift)")
    parser.add_argument("--oracle-thresholds", type=float, nargs="+",
                        default=[0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98])  # fmt: skip
    parser.add_argument("--tuning-seeds", type=int, default=2, help="seeds of the oracle's threshold sweep")
    parser.add_argument("--workers", type=int, default=2, help="processes running the arms")
    parser.add_argument("--quick", action="store_true", help="smoke mode: a small world, a few steps and seeds")
    parser.add_argument("--out", help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts, args.steps, args.seeds, args.tuning_seeds = 300, 12, 2, 1
        args.oracle_thresholds, args.workers = [0.5, 0.9], 1
    return args


def run_config(args: argparse.Namespace) -> dict:
    """What every run of every arm shares (it travels to the worker processes with each task)."""
    return {
        "steps": args.steps,
        "groups": args.groups,
        "group_size": args.group_size,
        "prompts": args.prompts,
        "drift_lr": args.drift_lr if args.drift else 0.0,
        "mix": args.mix,
    }


def tune_oracle(args: argparse.Namespace, config: dict) -> dict:
    """The oracle's threshold, swept on seeds that are not evaluated (so that its choice does not flatter it)."""
    tuning_seeds = [args.seed + 10_000 + k for k in range(args.tuning_seeds)]
    tasks = [("oracle", seed, config, t) for t in args.oracle_thresholds for seed in tuning_seeds]
    per_threshold: dict[float, list[float]] = {}
    for (_, _, _, threshold), totals in run_tasks(tasks, args.workers):
        per_threshold.setdefault(threshold, []).append(per_run_metrics(totals)["informative_trained_per_1k_tokens"])
    sweep = {threshold: float(np.mean(values)) for threshold, values in per_threshold.items()}
    return {
        "threshold": max(sweep, key=sweep.get),
        "sweep_informative_trained_per_1k_tokens": sweep,
        "tuning_seeds": tuning_seeds,
    }


def run_arms(seeds: list[int], config: dict, oracle_threshold: float, workers: int) -> dict[str, list[dict]]:
    """Every arm on every seed; per arm, the runs' totals in seed order."""
    tasks = [(arm.name, seed, config, oracle_threshold if arm.oracle else None) for seed in seeds for arm in ARMS]
    totals_per_arm: dict[str, list[dict]] = {name: [] for name in ARM_NAMES}
    for (arm_name, _, _, _), totals in run_tasks(tasks, workers):  # tasks are in seed order within each arm
        totals_per_arm[arm_name].append(totals)
    return totals_per_arm


def results_payload(args, seeds, world, oracle, summary, totals_per_arm, wall_seconds) -> dict:
    adaptive_ratio = summary[DEFAULT_ARM]["informative_trained_per_1k_tokens_ratio_to_dapo"]
    return {
        "benchmark": "adaptive_sim",
        "scenario": "drifting" if args.drift else "static",
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
        "constants": {
            "max_rounds": MAX_ROUNDS,
            "max_oversampling": MAX_OVERSAMPLING,
            "confidence": CONFIDENCE,
            "carry_max_groups": args.groups,
            "carry_max_staleness": CARRY_STALENESS,
            "adaptive_defaults": vars(AdaptiveSettings()),
        },
        "arms": {
            arm.name: {
                "adaptive": vars(arm.adaptive) if arm.adaptive else None,
                "plain": arm.plain,
                "oracle": arm.oracle,
            }
            for arm in ARMS
        },
        "world": world,
        "oracle": oracle,
        "target": {
            "ratio_to_dapo": TARGET_RATIO_TO_DAPO,
            "arm": DEFAULT_ARM,
            "adaptive_ratio_mean": adaptive_ratio["mean"],
            "adaptive_ratio_ci95": adaptive_ratio["ci95"],
            "met": adaptive_ratio["ci95"][0] >= TARGET_RATIO_TO_DAPO,
        },
        "checks": {
            "asserted_every_step": [
                "sampler generated_tokens == tokens the source generated",
                "sampler informative_sampled == informative groups recomputed from the source's rewards",
                "trained batch == B groups; kept == B unless the rounds ran out",
            ],
            "generated_tokens_equal_source_tokens": all(
                totals["generated_tokens"] == totals["source_tokens"]
                for runs in totals_per_arm.values()
                for totals in runs
            ),
        },
        "seeds": seeds,
        "summary": summary,
        "totals": totals_per_arm,
        "machine": machine_info(),
        "wall_seconds": wall_seconds,
    }


def main(argv=None):
    args = parse_arguments(argv)
    config = run_config(args)
    started = time.perf_counter()
    torch.set_num_threads(1)
    oracle = tune_oracle(args, config)
    seeds = [args.seed + k for k in range(args.seeds)]
    totals_per_arm = run_arms(seeds, config, oracle["threshold"], args.workers)
    metrics = {name: [per_run_metrics(totals) for totals in runs] for name, runs in totals_per_arm.items()}
    summary = summarise(metrics)

    print(arms_table(summary, ARM_NAMES, args.drift))
    world = describe_world(seeds[0], args.prompts, args.group_size, args.mix)
    print("\n" + run_description(args, world, len(seeds), oracle))
    adaptive_ratio = summary[DEFAULT_ARM]["informative_trained_per_1k_tokens_ratio_to_dapo"]
    print(target_note(TARGET_RATIO_TO_DAPO, adaptive_ratio, time.perf_counter() - started))
    payload = results_payload(args, seeds, world, oracle, summary, totals_per_arm, time.perf_counter() - started)
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
