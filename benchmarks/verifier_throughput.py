"""Throughput of the `math` verifier on batches shaped like training, vs `trl.rewards.accuracy_reward`.

A batch holds `--prompts` prompts x G = 16 completions (a GRPO/DAPO generation batch). Each completion has
its own ~0.5 kB of reasoning, then a final answer; references mix fractions and decimals, sets, factored and
expanded expressions, intervals, percent, `Answer:` lines, answers in prose, radicals and worked solutions.

- **realistic**: the answers of a group repeat as a policy's do: about half the group gives the right answer
  (in one or two written forms), the rest one of two or three wrong answers;
- **all-distinct**: every completion of a group gives a different final answer (right ones in different
  written forms, wrong ones all different), so no two (reference, answer) pairs of a batch are equal.

Every repetition draws new prompts, so no verdict is reused across repetitions. Verifiers, all timed in one
run, alternating (`accuracy_reward` on a batch of its own of the same shape, see `main`):

- `math`, the registered reward through its process pool (`--workers`, warm; verifies each distinct
  (reference, final answer) pair of a batch once);
- `math`, one at a time in this process (`verify_math_answer` per completion, no reuse);
- `trl.rewards.accuracy_reward`, in this process (conversational completions, as it expects).

Verifications per second = completions / wall-clock seconds of the batch call (median over `--repeats`).
The script checks that the pooled verdicts equal the one-at-a-time verdicts, completion by completion.

    python benchmarks/verifier_throughput.py --out benchmarks/results/verifier_throughput.json
    python benchmarks/verifier_throughput.py --quick
    python benchmarks/verifier_throughput.py --fallback-cost qwen2-0.5b --out benchmarks/results/math_fallback_cost.json
"""

from __future__ import annotations

import argparse
import logging
import random
import time

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, median, write_json

from trl_ext.rewards import get_reward
from trl_ext.rewards.math import extract_final_answer, verify_math_answer
from trl_ext.rewards.pool import default_num_workers

REASONING = (
    "Let us work through the problem step by step. First we rewrite the expression, collect like terms and "
    "check the boundary cases; the substitution $u = x + 1$ simplifies the algebra, and after simplifying we "
    "verify the result against the constraints given in the statement. "
)


GROUP_SIZE = 16


def _problem(kind: int, rng: random.Random) -> tuple[str, list[str], list[str]]:
    """One prompt's reference, right final answers (several written forms) and wrong final answers."""
    a, b = rng.randint(2, 97), rng.randint(2, 97)
    if kind == 0:  # fraction vs decimal
        return rf"\frac{{{a}}}{{{a * 4}}}", [r"\boxed{0.25}", r"\boxed{\frac{1}{4}}", r"\boxed{1/4}"], [
            rf"\boxed{{{0.25 + step / 100:g}}}" for step in range(1, 40)]
    if kind == 1:  # sets in another order
        return rf"\{{{a}, {a + b}\}}", [rf"\boxed{{\{{{a + b}, {a}\}}}}", rf"\boxed{{\{{{a}, {a + b}\}}}}"], [
            rf"\boxed{{\{{{a + b}, {a + step}\}}}}" for step in range(1, 40)]
    if kind == 2:  # factored vs expanded
        return f"x(x+{a})", [rf"\boxed{{x^2+{a}x}}", rf"\boxed{{x(x+{a})}}", rf"\boxed{{{a}x+x^2}}"], [
            rf"\boxed{{x^2+{a + step}x}}" for step in range(1, 40)]
    if kind == 3:  # intervals
        return f"({a}, {a + b}]", [rf"\boxed{{\left({a}, {a + b}\right]}}", rf"\boxed{{({a},{a + b}]}}"], [
            rf"\boxed{{\left({a}, {a + b + step}\right)}}" for step in range(1, 40)]
    if kind == 4:  # DAPO-style answer line
        return str(a * b), [f"Answer: {a * b}", f"Answer: ${a * b}$"], [f"Answer: {a * b + step}" for step in range(1, 40)]
    if kind == 5:  # shorthand TeX
        return f"{a}/{b}", [rf"\boxed{{\frac{{{a}}}{{{b}}}}}", rf"\boxed{{\dfrac{{{2 * a}}}{{{2 * b}}}}}"], [
            rf"\boxed{{\frac{{{a + step}}}{{{b}}}}}" for step in range(1, 40)]
    if kind == 6:  # percent
        return rf"{a}\%", [rf"\boxed{{{a / 100:g}}}", rf"\boxed{{{a}\%}}"], [
            rf"\boxed{{{(a + step) / 100:g}}}" for step in range(1, 40)]
    if kind == 7:  # answer in prose
        return str(a + b), [f"Therefore, the final answer is ${a + b}$."], [
            f"Therefore, the final answer is ${a + b + step}$." for step in range(1, 40)]
    if kind == 8:  # radicals
        return rf"{a}\sqrt{{2}}", [rf"\boxed{{\sqrt{{{2 * a * a}}}}}", rf"\boxed{{{a}\sqrt{{2}}}}"], [
            rf"\boxed{{\sqrt{{{2 * a * a + step}}}}}" for step in range(1, 40)]
    return rf"Adding gives $\boxed{{{a + 2 * b}}}$.", [rf"\boxed{{{a + 2 * b}}}"], [  # a worked solution
        rf"\boxed{{{a + 2 * b + step}}}" for step in range(1, 40)]


def make_batch(num_prompts: int, distinct: bool, seed: int = 0) -> tuple[list[str], list[str], list[bool]]:
    """`num_prompts x GROUP_SIZE` (reference, completion) pairs and whether each completion is right.

    `distinct=False` (realistic): per group, each completion is right with probability 0.5, in one of the
    group's (at most two) favourite written forms, else one of the group's two or three wrong answers.
    `distinct=True`: every completion of a group has a final answer no other completion of the group has.
    """
    rng = random.Random(seed)
    references, completions, truths = [], [], []
    for prompt in range(num_prompts):
        reference, right_forms, wrong_answers = _problem(prompt % 10, rng)
        if distinct:
            # A right answer can be written only so many ways; the rest of the group is wrong, all different.
            finals = [(form, True) for form in right_forms]
            finals += [(wrong, False) for wrong in rng.sample(wrong_answers, GROUP_SIZE - len(finals))]
            rng.shuffle(finals)
        else:
            favourites = right_forms[: rng.randint(1, min(2, len(right_forms)))]
            usual_wrong = rng.sample(wrong_answers, rng.randint(2, 3))
            finals = [
                (rng.choice(favourites), True) if rng.random() < 0.5 else (rng.choice(usual_wrong), False)
                for _ in range(GROUP_SIZE)
            ]
        for sample, (final, right) in enumerate(finals):
            # Every completion's reasoning differs (as sampled text does); only the final answers repeat.
            reasoning = REASONING.replace("step by step", f"step by step (attempt {prompt}.{sample})")
            references.append(reference)
            completions.append(reasoning + final)
            truths.append(right)
    return references, completions, truths


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


PATHOLOGICAL_TIMEOUT = 3.0
# Inputs that make a symbolic comparison run for a very long time, or for ever.
PATHOLOGICAL_INPUTS = {
    "power tower": r"The answer is \boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}",
    "huge factorial": r"The answer is \boxed{(10^{10})!}",
    "deeply nested fraction": "The answer is \\boxed{" + r"\frac{1}{1+" * 40 + "x" + "}" * 40 + "}",
}


def time_pathological_inputs(timeout: float) -> dict[str, tuple[float, float | None]]:
    """Seconds each pathological completion takes to score (workers started beforehand), and its score."""
    reward = get_reward("math", timeout=timeout, asynchronous=False)
    reward(completions=[r"\boxed{1}"], solution=["1"])  # start the workers outside the timing
    timings = {}
    for name, completion in PATHOLOGICAL_INPUTS.items():
        start = time.perf_counter()
        (score,) = reward(completions=[completion], solution=["5"])
        timings[name] = (time.perf_counter() - start, score)
    return timings


FALLBACK_ITEMS = [
    ("What is the probability of drawing a red marble? Express your answer as a common fraction.", r"\frac{5}{13}",
     "0.3846"),
    ("Find all real solutions of $x^2 - 5x + 6 = 0$.", "2, 3", r"x \in \{2, 3\}"),
    ("Simplify $\\sqrt{50}$.", r"5\sqrt{2}", r"\sqrt{2} \cdot 5"),
    ("In which quadrant does the point $(-2, 3)$ lie?", r"\text{II}", "the second quadrant"),
]


def time_fallback(shape: str, repeats: int = 3) -> dict:
    """Seconds per answer the `CausalLMJudge` fallback judges, with a randomly initialised model of `shape` (the
    cost depends on the shape and the prompt length, not on the weights) and the character tokenizer."""
    import tempfile
    from pathlib import Path

    from _common import save_model

    from trl_ext.rewards.math_fallback import CausalLMJudge

    with tempfile.TemporaryDirectory() as directory:
        judge = CausalLMJudge(str(save_model(shape, Path(directory))), device="cpu", batch_size=len(FALLBACK_ITEMS))
        judge.judge_many(FALLBACK_ITEMS)  # warm-up
        seconds = [timed(lambda: judge.judge_many(FALLBACK_ITEMS))[0] for _ in range(repeats)]
        tokens = [len(judge.tokenizer(judge.prompt(*item))["input_ids"]) for item in FALLBACK_ITEMS]
    parameters = sum(parameter.numel() for parameter in judge.model.parameters())
    return {
        "shape": shape, "parameters": parameters, "answers": len(FALLBACK_ITEMS),
        "prompt_tokens_mean": sum(tokens) / len(tokens),
        "seconds_per_answer": median(seconds) / len(FALLBACK_ITEMS),
    }  # fmt: skip


# `math` pooled / `accuracy_reward`, per batch shape: the speed-ups the issue asks for.
SPEEDUP_TARGETS = {"realistic": 3.0, "all-distinct": 1.7}
BATCH_SHAPES = {"realistic": False, "all-distinct": True}  # shape: whether every answer of a group differs


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=128, help="prompts per batch (x 16 completions)")
    parser.add_argument("--workers", type=int, default=default_num_workers(), help="pool size for `math`")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (median reported)")
    parser.add_argument("--quick", action="store_true", help="8 prompts, one repetition")
    parser.add_argument("--out", default=None, help="write the results as JSON to this path")
    parser.add_argument(
        "--fallback-cost", metavar="SHAPE", default=None,
        help="only time `math`'s CausalLMJudge fallback on CPU with a random model of this shape (e.g. qwen2-0.5b)",
    )  # fmt: skip
    return parser.parse_args(argv)


def report_fallback_cost(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(2)
    result = time_fallback(args.fallback_cost)
    print(f"CausalLMJudge, {result['shape']} ({result['parameters'] / 1e6:.0f}M parameters), CPU: "
          f"{result['seconds_per_answer']:.2f} s per rejected answer judged "
          f"({result['prompt_tokens_mean']:.0f} prompt tokens on average, x2 continuations)")
    write_json(args.out, {"benchmark": "math_fallback_cost", **result, "machine": machine_info()})
    return result


def as_verdicts(scores: list) -> list:
    return [None if score is None else score > 0 for score in scores]


def warmed_up_methods(reward, accuracy_reward) -> dict:
    """The verifiers to time, by name, each a function of (references, completions) that returns verdicts."""
    # Warm every method up on the same items, one prompt of each kind (sympy's and the LaTeX parser's caches
    # fill as they meet new forms; the pool's workers live as long as training does).
    warm_references, warm_completions, _ = make_batch(20, distinct=True, seed=1)
    reward(completions=warm_completions, solution=warm_references)
    for reference, completion in zip(warm_references, warm_completions):
        verify_math_answer(reference, completion, parsing_timeout=5, verify_timeout=5)
    accuracy_reward([[{"role": "assistant", "content": c}] for c in warm_completions], warm_references)
    return {
        "math, pooled": lambda refs, comps: as_verdicts(reward(completions=comps, solution=refs)),
        "math, one at a time in process": lambda refs, comps: [
            verify_math_answer(r, c, parsing_timeout=5, verify_timeout=5) for r, c in zip(refs, comps)
        ],
        "trl accuracy_reward, in process": lambda refs, comps: as_verdicts(
            accuracy_reward([[{"role": "assistant", "content": c}] for c in comps], refs)
        ),
    }


def time_batch_shape(methods: dict, shape: str, distinct: bool, args: argparse.Namespace) -> tuple[dict, list]:
    """Every method on `args.repeats` batches of one shape; the shape's results and its table rows."""
    size = args.prompts * GROUP_SIZE
    seconds = {name: [] for name in methods}
    verdicts = {name: [] for name in methods}
    truths = {name: [] for name in methods}
    distinct_pairs = []
    for repeat in range(args.repeats):
        # `accuracy_reward` gets its own batch of the same shape: the two in-process verifiers share sympy's
        # and the LaTeX parser's caches, so on one batch the second would reuse the first one's parses.
        # The pool's workers share nothing with this process; their verdicts are checked against the
        # one-at-a-time verdicts on the same batch.
        batches = {
            "math": make_batch(args.prompts, distinct, seed=100 + repeat),
            "trl": make_batch(args.prompts, distinct, seed=500 + repeat),
        }
        references, completions, _ = batches["math"]
        distinct_pairs.append(len({(r, extract_final_answer(c)) for r, c in zip(references, completions)}))
        # Alternate the order each repetition, so a change in the machine's load hits every method alike.
        order = list(methods) if repeat % 2 == 0 else list(reversed(methods))
        for name in order:
            references, completions, batch_truths = batches["trl" if name.startswith("trl") else "math"]
            elapsed, batch_verdicts = timed(lambda run=methods[name], r=references, c=completions: run(r, c))
            seconds[name].append(elapsed)
            verdicts[name] += batch_verdicts
            truths[name] += batch_truths
    pooled = verdicts["math, pooled"]
    assert pooled == [None if v is None else bool(v) for v in verdicts["math, one at a time in process"]], (
        "pooled (deduplicated) and one-at-a-time verdicts differ"
    )
    entry = {"distinct_pairs_per_batch": median(distinct_pairs), "completions": size}
    rows = []
    for name in methods:
        entry[name] = {
            "verifications_per_s": size / median(seconds[name]),
            "seconds": seconds[name],
            "verdicts_matching_construction": sum(v == t for v, t in zip(verdicts[name], truths[name]))
            / len(truths[name]),
        }
        rows.append([shape, name, size / median(seconds[name]), median(seconds[name])])
    base = entry["trl accuracy_reward, in process"]["verifications_per_s"]
    entry["speedup_vs_trl_accuracy_reward"] = entry["math, pooled"]["verifications_per_s"] / base
    entry["speedup_one_at_a_time_vs_trl"] = entry["math, one at a time in process"]["verifications_per_s"] / base
    return entry, rows


def print_throughput(results: dict, rows: list, methods: dict, size: int, cold_start: float) -> None:
    print(format_table(["batch", "method", "verifications/s", "batch seconds"], rows))
    for shape, entry in results.items():
        print(f"{shape}: `math` pooled / accuracy_reward = {entry['speedup_vs_trl_accuracy_reward']:.2f}x "
              f"(target >= {SPEEDUP_TARGETS[shape]}x); distinct (reference, answer) pairs per batch: "
              f"{entry['distinct_pairs_per_batch']:.0f} of {size}; verdicts matching the construction: "
              + ", ".join(f"{name} {entry[name]['verdicts_matching_construction']:.1%}" for name in methods))
    print(f"worker cold start (spawn + import + load math-verify): {cold_start:.1f} s")


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(argv)
    if args.fallback_cost:
        return report_fallback_cost(args)
    if args.quick:
        args.prompts, args.repeats = 8, 1
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    size = args.prompts * GROUP_SIZE
    print(f"batch: {args.prompts} prompts x G={GROUP_SIZE} = {size} completions, pool workers: {args.workers}, "
          f"repeats: {args.repeats}\n")

    from trl.rewards import accuracy_reward

    reward = get_reward("math", num_workers=args.workers, asynchronous=False)
    cold_start, _ = timed(lambda: reward(completions=[r"\boxed{1}"], solution=["1"]))
    methods = warmed_up_methods(reward, accuracy_reward)
    results, rows = {}, []
    for shape, distinct in BATCH_SHAPES.items():
        results[shape], shape_rows = time_batch_shape(methods, shape, distinct, args)
        rows += shape_rows
    print_throughput(results, rows, methods, size, cold_start)
    reward.pool().close()

    pathological = time_pathological_inputs(timeout=PATHOLOGICAL_TIMEOUT)
    print(f"\npathological inputs, `math` with timeout={PATHOLOGICAL_TIMEOUT:g} s (target: at most timeout + 0.5 s):")
    pathological_rows = [[name, f"{t:.2f}", score] for name, (t, score) in pathological.items()]
    print(format_table(["input", "seconds", "score"], pathological_rows))

    summary = {
        "benchmark": "verifier_throughput",
        "prompts": args.prompts,
        "group_size": GROUP_SIZE,
        "workers": args.workers,
        "repeats": args.repeats,
        "results": results,
        "targets": SPEEDUP_TARGETS,
        "cold_start_seconds": cold_start,
        "pathological_timeout_seconds": PATHOLOGICAL_TIMEOUT,
        "pathological_seconds": {name: seconds for name, (seconds, _) in pathological.items()},
        "machine": machine_info(),
    }
    write_json(args.out, summary)
    return summary


if __name__ == "__main__":
    main()
