"""Throughput of the `math` verifier: pooled vs one at a time, and vs `trl.rewards.accuracy_reward`.

The same batches of mixed completions (right and wrong answers: fractions and decimals, sets, factored and
expanded expressions, intervals, percent, `Answer:` lines, answers in prose, after ~0.5 kB of reasoning;
every item has its own numbers, and every repetition its own batch, so no parse cache helps) are verified

- one at a time in this process (`verify_math_answer`, math-verify's signal timeouts on, as a plain reward
  function running in the main thread would);
- by the registered `math` reward through the process pool, with 1 worker and with `--workers` workers
  (workers started and warm beforehand: start-up is reported separately);
- by `trl.rewards.accuracy_reward`, one at a time in this process (conversational completions, as it expects).

Verifications per second = completions / wall-clock seconds of the batch call (median over `--repeats`).
Agreement: the fraction of completions on which the two verifiers give the same verdict; accuracy: the
fraction of verdicts that match how the completion was built (right or wrong answer).

    python benchmarks/verifier_throughput.py --out benchmarks/results/verifier_throughput.json
    python benchmarks/verifier_throughput.py --quick
"""

from __future__ import annotations

import argparse
import logging
import random
import time

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, median, write_json

from trl_ext.rewards import get_reward
from trl_ext.rewards.math_equivalence import verify_math_answer
from trl_ext.rewards.pool import default_num_workers

REASONING = (
    "Let us work through the problem step by step. First we rewrite the expression, collect like terms and "
    "check the boundary cases; the substitution $u = x + 1$ simplifies the algebra, and after simplifying we "
    "verify the result against the constraints given in the statement. "
)


def make_batch(size: int, seed: int = 0) -> tuple[list[str], list[str], list[bool]]:
    """`size` (reference, completion) pairs, about 60% right, each with its own numbers, and whether each
    completion is right by construction."""
    rng = random.Random(seed)
    references, completions, truths = [], [], []
    for index in range(size):
        a, b = rng.randint(2, 97), rng.randint(2, 97)
        kind = index % 10
        right = rng.random() < 0.6
        if kind == 0:  # fraction vs decimal
            reference = rf"\frac{{{a}}}{{{a * 4}}}"
            answer = rf"\boxed{{{0.25 if right else 0.26}}}"
        elif kind == 1:  # sets in another order
            reference = rf"\{{{a}, {a + b}\}}"
            answer = rf"\boxed{{\{{{a + b}, {a if right else a + 1}\}}}}"
        elif kind == 2:  # factored vs expanded
            reference = f"x(x+{a})"
            answer = rf"\boxed{{x^2+{a if right else a + 1}x}}"
        elif kind == 3:  # intervals
            reference = f"({a}, {a + b}]"
            answer = rf"\boxed{{\left({a}, {a + b}\right{']' if right else ')'}}}"
        elif kind == 4:  # DAPO-style answer line
            reference = str(a * b)
            answer = f"Answer: {a * b if right else a * b + 1}"
        elif kind == 5:  # shorthand TeX
            reference = f"{a}/{b}"
            answer = rf"\boxed{{\frac{{{a if right else a + 1}}}{{{b}}}}}"
        elif kind == 6:  # percent
            reference = rf"{a}\%"
            answer = rf"\boxed{{{round(a / 100 + (0 if right else 0.5), 2)}}}"
        elif kind == 7:  # answer in prose
            reference = str(a + b)
            answer = f"Therefore, the final answer is ${a + b if right else a + b + 2}$."
        elif kind == 8:  # radicals
            reference = rf"{a}\sqrt{{2}}"
            answer = rf"\boxed{{\sqrt{{{2 * a * a if right else 2 * a * a + 1}}}}}"
        else:  # a worked solution as the reference
            reference = rf"Adding gives $\boxed{{{a + 2 * b}}}$."
            answer = rf"\boxed{{{a + 2 * b if right else a - 2 * b}}}"
        references.append(reference)
        completions.append(REASONING + answer)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=2000, help="completions in the batch")
    parser.add_argument("--workers", type=int, default=default_num_workers(), help="pool size for the pooled run")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (median reported)")
    parser.add_argument("--quick", action="store_true", help="200 completions, one repetition")
    parser.add_argument("--out", default=None, help="write the results as JSON to this path")
    args = parser.parse_args()
    if args.quick:
        args.size, args.repeats = 200, 1
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    batches = [make_batch(args.size, seed=100 + repeat) for repeat in range(args.repeats)]
    print(f"batch: {args.size} completions, pool workers: {args.workers}, repeats: {args.repeats}\n")

    rows, results = [], {}

    def measure(label: str, verify_batch) -> None:
        """Time `verify_batch(references, completions) -> verdicts` on each batch; record the median rate."""
        seconds, verdicts = [], []
        for references, completions, _ in batches:
            elapsed, batch_verdicts = timed(lambda: verify_batch(references, completions))
            seconds.append(elapsed)
            verdicts += batch_verdicts
        rate = args.size / median(seconds)
        results[label] = {"verifications_per_s": rate, "seconds": median(seconds), "verdicts": verdicts}
        rows.append([label, rate, median(seconds)])

    def as_verdicts(scores: list) -> list:
        return [None if score is None else score > 0 for score in scores]

    # One at a time, in this (main) thread, after warming sympy and math-verify up on other items.
    warm_references, warm_completions, _ = make_batch(50, seed=1)
    for reference, completion in zip(warm_references, warm_completions):
        verify_math_answer(reference, completion, parsing_timeout=5, verify_timeout=5)
    measure(
        "one at a time, in process",
        lambda references, completions: [
            verify_math_answer(reference, completion, parsing_timeout=5, verify_timeout=5)
            for reference, completion in zip(references, completions)
        ],
    )

    startup = {}
    for workers in sorted({1, args.workers}):
        reward = get_reward("math", num_workers=workers, asynchronous=False)
        # Cold start: spawn the workers and load math-verify (on the warm-up items, not the timed ones).
        startup[workers], _ = timed(lambda: reward(completions=warm_completions, solution=warm_references))
        measure(
            f"pooled, {workers} worker(s)",
            lambda references, completions: as_verdicts(reward(completions=completions, solution=references)),
        )
        reward.pool().close()

    from trl.rewards import accuracy_reward

    accuracy_reward([[{"role": "assistant", "content": c}] for c in warm_completions], warm_references)
    measure(
        "trl accuracy_reward, in process",
        lambda references, completions: as_verdicts(
            accuracy_reward([[{"role": "assistant", "content": c}] for c in completions], references)
        ),
    )

    ours = results[f"pooled, {args.workers} worker(s)"]["verdicts"]
    in_process = [None if v is None else bool(v) for v in results["one at a time, in process"]["verdicts"]]
    assert ours == in_process, "pooled and in-process verdicts differ"
    trl_verdicts = results["trl accuracy_reward, in process"]["verdicts"]
    agreement = sum(a == b for a, b in zip(ours, trl_verdicts)) / len(ours)
    expected_right = sum(1 for v in ours if v) / len(ours)
    truths = [truth for *_, batch_truths in batches for truth in batch_truths]
    accuracy = {
        label: sum(verdict == truth for verdict, truth in zip(verdicts, truths)) / len(truths)
        for label, verdicts in (("math", ours), ("trl accuracy_reward", trl_verdicts))
    }

    print(format_table(["method", "verifications/s", "batch seconds"], rows))
    cold = ", ".join(f"{workers} worker(s) {seconds:.1f} s" for workers, seconds in startup.items())
    print(f"\nworker cold start (spawn + import + load math-verify): {cold}")
    print(f"verdicts: {expected_right:.1%} judged correct by `math` ({sum(truths) / len(truths):.1%} right by "
          f"construction); agreement with accuracy_reward {agreement:.1%}")
    matching = ", ".join(f"{label} {value:.1%}" for label, value in accuracy.items())
    print(f"verdicts matching the construction: {matching}")
    base = results["one at a time, in process"]["verifications_per_s"]
    pooled = results[f"pooled, {args.workers} worker(s)"]["verifications_per_s"]
    print(f"speed-up of the pool ({args.workers} workers) over one at a time: {pooled / base:.2f}x")

    pathological = time_pathological_inputs(timeout=PATHOLOGICAL_TIMEOUT)
    print(f"\npathological inputs, `math` with timeout={PATHOLOGICAL_TIMEOUT:g} s (target: at most timeout + 0.5 s):")
    print(format_table(["input", "seconds", "score"], [[name, f"{t:.2f}", score] for name, (t, score) in pathological.items()]))

    for entry in results.values():
        entry.pop("verdicts")
    write_json(
        args.out,
        {
            "benchmark": "verifier_throughput",
            "size": args.size,
            "workers": args.workers,
            "repeats": args.repeats,
            "results": results,
            "cold_start_seconds": startup,
            "fraction_correct": expected_right,
            "agreement_with_trl_accuracy_reward": agreement,
            "verdict_accuracy_vs_construction": accuracy,
            "pathological_timeout_seconds": PATHOLOGICAL_TIMEOUT,
            "pathological_seconds": {name: seconds for name, (seconds, _) in pathological.items()},
            "machine": machine_info(),
        },
    )


if __name__ == "__main__":
    main()
