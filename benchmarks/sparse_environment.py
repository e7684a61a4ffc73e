"""Sparse-reward environment: DAPO with dynamic sampling vs TRL's GRPO on a multi-turn guessing game with a tool.

The game (`NumberGuessingGame`, used through TRL's `environment_factory`): each row is a game with a secret number
from 1 to `SECRET_RANGE`; the model plays by calling the tool `guess(n)`, which answers "higher", "lower" or
"correct", at most `GUESSES_PER_GAME` times; `get_reward` is 1 when a guess hit the secret and 0 otherwise. Each
game's secret is fixed (3 in even games, 7 in odd ones), so a policy can learn it from the prompt (which names
the game, not the secret).

The model: a tiny Llama-architecture model with the character tokenizer and TRL's Qwen2.5 chat template (tool
preamble shortened to the tools' names) and response schema, so TRL parses its `<tool_call>` blocks. A supervised
warm start teaches it to call `guess` with a number drawn uniformly at random, the same for every game: it plays
blind, hits with probability about 1/SECRET_RANGE per guess, and most groups of completions score all 0.

All methods train from the same warm-started checkpoint with the same settings (learning rate, 4 completions per
game, 8 games a step, temperature 1.0, two tool-calling turns) on the same budget of generated completion tokens
(`--token-budget`; tool replies count, as TRL keeps them in the completion ids): TRL's `GRPOTrainer` with its
defaults, `DAPOTrainer` with `DAPOConfig`'s defaults (dynamic sampling judged by the environment's `get_reward`,
carried groups, clip-higher, token-level loss), and `dapo-adaptive`, the same with `dynamic_sampling_mode="adaptive"`
(pass-rate beliefs per game, the estimate skip, advantages against the game's history, no pilot), and
`dapo-adaptive-pilot`, the adaptive mode with its pilot (2 of the 4 completions first, the other 2 only when worth
their tokens); overlong shaping off (the game's completions never approach the limit). A run stops at the first
optimiser step that reaches the budget.

Measured per run: the held-out first-guess accuracy (each game's prompt sampled `--eval-samples` times at
temperature 1.0, the first `guess` call's number compared with the secret; blind play scores 1/SECRET_RANGE) every
`--eval-steps` steps; the steps and generated tokens to first reach the target accuracy (`--target`); the final
accuracy; the mean reward of every rollout generated (filtered ones included); and the fraction of trained groups
that carried signal (a non-zero advantage in the group; DAPO's masked filler groups train on nothing and are not
counted as trained), and those per 1k generated tokens. The JSON is rewritten after every run.

    python benchmarks/sparse_environment.py --out benchmarks/results/sparse_environment.json   # 3 seeds
    python benchmarks/sparse_environment.py --quick --out /tmp/sparse.json                     # smoke: 1 seed
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import common_training_args, format_table, machine_info, quiet_transformers, set_cpu_threads
from _common import without_log_printing, write_json

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from trl_ext import DAPOConfig, DAPOTrainer  # noqa: E402
from trl_ext.tasks import warm_start  # noqa: E402
from trl_ext.tiny import build_tiny_causal_lm, build_tool_calling_tokenizer  # noqa: E402

SECRET_RANGE = 9
GUESSES_PER_GAME = 2
METHODS = (
    "grpo",
    "dapo",
    "dapo-adaptive",
    "dapo-adaptive-pilot",
    "dapo-adaptive-pilot-minibatches",
    "grpo-minibatches",
    "dapo-adaptive-extend-minibatches",
)
# The adaptive arms' pilot sizes: without the pilot, and with the mode's default pilot of 2 of the 4 completions.
PILOT_SIZES = {
    "dapo-adaptive": 0,
    "dapo-adaptive-pilot": 2,
    "dapo-adaptive-pilot-minibatches": 2,
    "dapo-adaptive-extend-minibatches": 2,
}
# Arms whose all-equal groups may get one more group of 4 when worth it, trained with it as one group of 8.
EXTENSIONS = {"dapo-adaptive-extend-minibatches": 1}
# Arms whose rollout (`games_per_step` games of 4 completions, as every arm's) is split into 4 optimiser steps of a
# quarter of it each, as the recipes and DAPO's paper split theirs: the pool of 8 games is one rollout, so the
# steps get smaller rather than the rollout larger. (`grpo-minibatches`: TRL's GRPO with the same split.)
# And groups carried up to 4 steps, as the arithmetic arms.
MINIBATCHES = {"dapo-adaptive-pilot-minibatches": 4, "dapo-adaptive-extend-minibatches": 4}


# ------------------------------------------------------------------------------------------------------ the game


SECRETS = (3, 7)


def secret_of(game: int) -> int:
    """Each game's fixed secret: odd games hide one number, even games another (the prompt's game number is the
    only clue a policy can learn)."""
    return SECRETS[game % len(SECRETS)]


def answer_to(guess: int, secret: int) -> str:
    if guess == secret:
        return "correct"
    return "higher" if secret > guess else "lower"


class NumberGuessingGame:
    """A guessing game for `environment_factory`: reset with a row's `secret`, played through the `guess` tool,
    scored by `get_reward` (1 when a guess hit, else 0)."""

    def __init__(self):
        self.secret = None
        self.guesses: list[int] = []

    def reset(self, secret: int, **kwargs) -> None:
        self.secret, self.guesses = int(secret), []
        return None  # the prompt already says everything

    def guess(self, n: int) -> str:
        """
        Guess the secret number.

        Args:
            n: A whole number from 1 to 9.
        """
        if len(self.guesses) >= GUESSES_PER_GAME:
            return "no guesses left"
        self.guesses.append(int(n))
        return answer_to(int(n), self.secret)

    def get_reward(self) -> float:
        return float(self.secret in self.guesses)


def game_prompt(game: int) -> list[dict]:
    return [{"role": "user", "content": f"Game {game}: find my number (1-{SECRET_RANGE})."}]


def game_dataset(num_games: int) -> Dataset:
    games = list(range(num_games))
    return Dataset.from_dict(
        {"prompt": [game_prompt(g) for g in games], "secret": [secret_of(g) for g in games], "game": games}
    )


# ---------------------------------------------------------------------------------------------------- the model



def guess_call(n: int) -> str:
    return f'<tool_call>\n{{"name": "guess", "arguments": {{"n": {n}}}}}\n</tool_call>'


def render_prompt(tokenizer, game: int, tools: list[dict]) -> str:
    return tokenizer.apply_chat_template(game_prompt(game), tools=tools, tokenize=False, add_generation_prompt=True)


def tool_schemas() -> list[dict]:
    return [get_json_schema(NumberGuessingGame().guess)]


def tool_reply_suffix(tokenizer, reply: str) -> str:
    """The text TRL appends after a completion that called `guess`: the chat template's rendering of the tool
    message and the next assistant header (what `GRPOTrainer._get_tool_suffix_ids` computes, as text)."""
    tool_calls = [{"type": "function", "function": {"name": "guess", "arguments": {}}}]
    call = {"role": "assistant", "content": "", "tool_calls": tool_calls}
    before = [{"role": "user", "content": "x"}, call]
    prefix = tokenizer.apply_chat_template(before, tokenize=False)
    full = tokenizer.apply_chat_template(
        before + [{"role": "tool", "name": "guess", "content": reply}], tokenize=False, add_generation_prompt=True
    )
    return full[len(prefix) :]


def blind_play_examples(tokenizer, num_games: int) -> tuple[list[str], list[str]]:
    """(prompts, answers) of blind play: a first guess of every number alike, and after a wrong one and its reply,
    a second guess of every other number alike. Nothing depends on the secrets."""
    tools = tool_schemas()
    prompts, answers = [], []
    for game in range(num_games):
        first_turn = render_prompt(tokenizer, game, tools)
        for first in range(1, SECRET_RANGE + 1):
            # As many first turns as second turns, so both are learnt alike.
            prompts += [first_turn] * (SECRET_RANGE - 1)
            answers += [guess_call(first)] * (SECRET_RANGE - 1)
            for reply in ("higher", "lower"):
                second_turn = first_turn + guess_call(first) + tokenizer.eos_token + tool_reply_suffix(tokenizer, reply)
                for second in range(1, SECRET_RANGE + 1):
                    if second != first:
                        prompts.append(second_turn)
                        answers.append(guess_call(second))
    return prompts, answers


def save_blind_player(directory: Path, num_games: int, steps: int, seed: int = 0) -> str:
    """Warm start on blind play (`blind_play_examples`): the model learns the call's format and to guess uniformly
    at random, twice, nothing about the secrets."""
    tokenizer = build_tool_calling_tokenizer()
    prompts, answers = blind_play_examples(tokenizer, num_games)
    torch.manual_seed(seed)
    model = build_tiny_causal_lm(tokenizer, hidden_size=64, num_layers=2, num_heads=2, seed=seed)
    warm_start(model, tokenizer, prompts, answers, steps=steps, learning_rate=3e-3, batch_size=16, seed=seed)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


FIRST_GUESS = re.compile(r'"n"\s*:\s*(\d+)')


def first_guess(text: str) -> int | None:
    match = FIRST_GUESS.search(text)
    return int(match.group(1)) if match else None


@torch.no_grad()
def first_guess_accuracy(model, tokenizer, num_games: int, samples: int, seed: int) -> float:
    """The fraction of sampled first turns (temperature 1.0) whose `guess` names the game's secret."""
    tools = tool_schemas()
    was_training = model.training
    model.eval()
    torch.manual_seed(seed)
    hits = total = 0
    tokenizer.padding_side = "left"
    for game in range(num_games):
        encoded = tokenizer([render_prompt(tokenizer, game, tools)] * samples, return_tensors="pt", padding=True)
        encoded = {key: value.to(model.device) for key, value in encoded.items()}
        output = model.generate(
            **encoded, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=56,
            pad_token_id=tokenizer.pad_token_id,
        )
        texts = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
        hits += sum(first_guess(text) == secret_of(game) for text in texts)
        total += len(texts)
    model.train(was_training)
    return hits / total


# ------------------------------------------------------------------------------------------------ measurement


class CountRollouts:
    """Counts every generated completion's tokens and every rollout's game reward, filtered ones included: TRL
    scores each generated batch with one `_calculate_rewards` call, DAPOTrainer each dynamic-sampling round (its
    further call on the assembled batch, `_assembled` set, is not counted again). Records, for every
    trained batch, how many groups reached the loss and how many of those carried signal (rewards not all equal)."""

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        assembled = getattr(self, "_assembled", None) is not None
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if not assembled:
            self.generated_tokens = getattr(self, "generated_tokens", 0) + sum(map(len, completion_ids_list))
            game_rewards = rewards[:, self.reward_func_names.index("NumberGuessingGame")]
            self.rollout_rewards = getattr(self, "rollout_rewards", []) + game_rewards.tolist()
        return rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        group = self.num_generations
        trained = output["completion_mask"].sum(dim=1).view(-1, group).sum(dim=1) > 0  # fillers are masked out
        signal = output["advantages"].view(-1, group).abs().amax(dim=1) > 0
        self.trained_groups = getattr(self, "trained_groups", 0) + int(trained.sum())
        self.signal_groups = getattr(self, "signal_groups", 0) + int((trained & signal).sum())
        return output


class BudgetAndEvaluation(TrainerCallback):
    """Evaluates first-guess accuracy every `eval_steps` steps (and at the end), and stops training at the first
    step whose generated tokens reach the budget."""

    def __init__(self, trainer, token_budget: int, eval_steps: int, num_games: int, samples: int, seed: int):
        self.trainer, self.token_budget, self.eval_steps = trainer, token_budget, eval_steps
        self.num_games, self.samples, self.seed = num_games, samples, seed
        self.curve: list[dict] = []

    def evaluate(self, step: int) -> None:
        if self.curve and self.curve[-1]["step"] == step:
            return
        trainer = self.trainer
        accuracy = first_guess_accuracy(
            trainer.model, trainer.processing_class, self.num_games, self.samples, seed=self.seed
        )
        self.curve.append({"step": step, "tokens": getattr(trainer, "generated_tokens", 0), "accuracy": accuracy})

    def on_train_begin(self, args, state, control, **kwargs):
        self.evaluate(0)

    def on_step_end(self, args, state, control, **kwargs):
        out_of_budget = getattr(self.trainer, "generated_tokens", 0) >= self.token_budget
        if out_of_budget:
            control.should_training_stop = True
        if out_of_budget or state.global_step % self.eval_steps == 0 or state.global_step >= args.max_steps:
            self.evaluate(state.global_step)


def trainer_setup(method: str, settings: dict):
    if method in ("grpo", "grpo-minibatches"):
        minibatches = {"steps_per_generation": 4} if method == "grpo-minibatches" else {}  # steps a quarter (`run`)
        return type("CountingGRPOTrainer", (CountRollouts, GRPOTrainer), {}), GRPOConfig(**settings, **minibatches)
    if method == "dapo":
        config = DAPOConfig(**settings, soft_overlong_punishment=False)
        return type("CountingDAPOTrainer", (CountRollouts, DAPOTrainer), {}), config
    if method in PILOT_SIZES:
        config = DAPOConfig(
            **settings,
            soft_overlong_punishment=False,
            dynamic_sampling_mode="adaptive",
            dynamic_sampling_pilot_size=PILOT_SIZES[method],
            dynamic_sampling_extensions=EXTENSIONS.get(method, 0),
            **({"steps_per_generation": MINIBATCHES[method], "dynamic_sampling_carry_max_staleness": MINIBATCHES[method]}
               if method in MINIBATCHES else {}),
        )
        return type("CountingDAPOTrainer", (CountRollouts, DAPOTrainer), {}), config
    raise ValueError(f"Unknown method {method!r}; use one of {', '.join(METHODS)}.")


def run(method: str, seed: int, args, model_path: str, output_dir: Path) -> dict:
    settings = common_training_args(
        output_dir,
        "cpu",
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        max_steps=args.max_steps,
        per_device_train_batch_size=args.games_per_step * 4,
        num_generations=4,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=GUESSES_PER_GAME,
        temperature=1.0,
        seed=seed,
    )
    if method in MINIBATCHES or method == "grpo-minibatches":
        settings["per_device_train_batch_size"] //= 4
    trainer_class, config = trainer_setup(method, settings)
    trainer = trainer_class(
        model=model_path,
        reward_funcs=[],
        args=config,
        train_dataset=game_dataset(args.games),
        environment_factory=NumberGuessingGame,
    )
    budget = BudgetAndEvaluation(trainer, args.token_budget, args.eval_steps, args.games, args.eval_samples, seed)
    trainer.add_callback(budget)
    started = time.perf_counter()
    without_log_printing(trainer).train()
    seconds = time.perf_counter() - started
    budget.evaluate(trainer.state.global_step)

    curve = budget.curve
    reached = next((point for point in curve if point["accuracy"] >= args.target), None)
    rollout_rewards = trainer.rollout_rewards
    result = {
        "method": method,
        "seed": seed,
        "curve": curve,
        "target": args.target,
        "steps_to_target": reached["step"] if reached else None,
        "tokens_to_target": reached["tokens"] if reached else None,
        "initial_accuracy": curve[0]["accuracy"],
        "final_accuracy": curve[-1]["accuracy"],
        "steps": trainer.state.global_step,
        "generated_tokens": trainer.generated_tokens,
        "rollouts": len(rollout_rewards),
        "rollout_reward_mean": statistics.fmean(rollout_rewards),
        "trained_groups": trainer.trained_groups,
        "signal_groups": trainer.signal_groups,
        "signal_fraction": trainer.signal_groups / trainer.trained_groups if trainer.trained_groups else 0.0,
        "train_seconds": seconds,
    }
    del trainer
    gc.collect()
    return result


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(runs: list[dict]) -> list[dict]:
    summary = []
    for method in METHODS:
        mine = [r for r in runs if r["method"] == method]
        if not mine:
            continue
        summary.append(
            {
                "method": method,
                "seeds": len(mine),
                "reached_target": sum(r["steps_to_target"] is not None for r in mine),
                # Over the seeds that reached it; the count above says how many did.
                "median_steps_to_target": median_or_none([r["steps_to_target"] for r in mine]),
                "median_tokens_to_target": median_or_none([r["tokens_to_target"] for r in mine]),
                "mean_final_accuracy": statistics.fmean(r["final_accuracy"] for r in mine),
                "mean_initial_accuracy": statistics.fmean(r["initial_accuracy"] for r in mine),
                "mean_steps": statistics.fmean(r["steps"] for r in mine),
                "mean_generated_tokens": statistics.fmean(r["generated_tokens"] for r in mine),
                "rollout_reward_mean": statistics.fmean(r["rollout_reward_mean"] for r in mine),
                "signal_fraction": (
                    sum(r["signal_groups"] for r in mine) / max(1, sum(r["trained_groups"] for r in mine))
                ),
                # Groups trained with a non-zero advantage per 1k generated tokens (every rollout counted).
                "informative_groups_per_1k_tokens": (
                    1000 * sum(r["signal_groups"] for r in mine) / max(1, sum(r["generated_tokens"] for r in mine))
                ),
                "mean_train_seconds": statistics.fmean(r["train_seconds"] for r in mine),
            }
        )
    return summary


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the results as JSON to this path")
    parser.add_argument("--quick", action="store_true", help="smoke mode: 1 seed, a few steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (see _common.set_cpu_threads)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed + 1, ...")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--games", type=int, default=8, help="distinct games (prompts), each with its own secret")
    parser.add_argument("--games-per-step", type=int, default=8, help="groups of 4 completions per step")
    parser.add_argument("--token-budget", type=int, default=50_000, help="generated completion tokens per run")
    parser.add_argument("--max-steps", type=int, default=200, help="a cap; runs normally stop on the budget")
    parser.add_argument("--max-completion-length", type=int, default=200)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--warm-start-steps", type=int, default=250)
    parser.add_argument("--eval-steps", type=int, default=2)
    parser.add_argument("--eval-samples", type=int, default=16, help="sampled first turns per game")
    parser.add_argument("--target", type=float, default=0.25, help="first-guess accuracy to reach")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.token_budget, args.max_steps, args.eval_steps, args.eval_samples = 1, 2_000, 2, 1, 4
        args.warm_start_steps, args.games_per_step = 40, 2
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    set_cpu_threads(args.threads)
    quiet_transformers()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    payload = {"settings": vars(args), "machine": machine_info(), "runs": [], "summary": []}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        model_path = save_blind_player(scratch / "model", args.games, args.warm_start_steps)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for method in args.methods:
                result = run(method, seed, args, model_path, scratch / f"{method}-{seed}")
                payload["runs"].append(result)
                payload["summary"] = summarise(payload["runs"])
                print(
                    f"{method} seed {seed}: {result['steps']} steps, {result['generated_tokens']} tokens, "
                    f"accuracy {result['initial_accuracy']:.3f} -> {result['final_accuracy']:.3f}, "
                    f"signal {result['signal_fraction']:.2f}, {result['train_seconds']:.0f} s",
                    flush=True,
                )
                write_json(args.out, payload)
    headers = ["method", "seeds", "reached", "steps to target", "tokens to target", "final acc", "signal", "steps"]
    rows = [
        [
            s["method"], s["seeds"], s["reached_target"], s["median_steps_to_target"], s["median_tokens_to_target"],
            s["mean_final_accuracy"], s["signal_fraction"], s["mean_steps"],
        ]
        for s in payload["summary"]
    ]
    print(format_table(headers, rows))
    return payload


if __name__ == "__main__":
    main()
