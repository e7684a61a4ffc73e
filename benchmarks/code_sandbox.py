"""Throughput of the `code` reward's sandbox, and the adversarial table.

Throughput: the same batch of completions (a correct `add` with three assert tests, and a stdin/stdout program
with two tests) scored one at a time, then as one batch over `--workers` threads (the reward's default is one
per usable core), for each isolation backend available. A "run" is one completion: one sandbox with one test
process per test.

Adversarial table: the programs of `tests/rewards/test_code_reward.py` (fork bomb, memory bomb, network,
`sys.exit(0)` before the tests, monkey-patching...), each with its verdict and time, under bubblewrap.

    python benchmarks/code_sandbox.py --out benchmarks/results/code_sandbox.json
    python benchmarks/code_sandbox.py --quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, median, write_json

from trl_ext.rewards.code import CodeReward
from trl_ext.rewards.pool import default_num_workers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "rewards"))
from test_code_reward import ADD, ADD_TESTS, SECRET, SUM_PROGRAM, SUM_TESTS, adversarial_cases, fenced  # noqa: E402


def throughput(isolation: str, batch: int, workers: int, repeats: int) -> dict:
    reward = CodeReward(timeout=4.0, isolation=isolation)
    completions = [fenced(ADD) if i % 2 == 0 else fenced(SUM_PROGRAM) for i in range(batch)]
    tests = [ADD_TESTS if i % 2 == 0 else SUM_TESTS for i in range(batch)]
    reward(completions=completions[:2], tests=tests[:2])  # warm-up: probes, page cache
    sequential, parallel = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for completion, row_tests in zip(completions, tests):
            assert reward(completions=[completion], tests=[row_tests]) == [1.0]
        sequential.append(batch / (time.perf_counter() - started))
        parallel_reward = CodeReward(timeout=4.0, isolation=isolation, num_workers=workers)
        started = time.perf_counter()
        assert parallel_reward(completions=completions, tests=tests) == [1.0] * batch
        parallel.append(batch / (time.perf_counter() - started))
    return {"isolation": isolation, "sequential_runs_per_s": median(sequential), "parallel_runs_per_s": median(parallel)}


def adversarial_table(timeout: float) -> list[dict]:
    os.environ["TRL_EXT_FAKE_SECRET"] = SECRET
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    reward = CodeReward(timeout=timeout, memory_mb=256, isolation="bwrap")
    rows = []
    for name, (program, tests) in adversarial_cases(server.getsockname()[1]).items():
        started = time.perf_counter()
        report = reward.evaluate(fenced(program), tests)
        rows.append(
            {
                "case": name,
                "score": reward._score(report),
                "verdicts": ", ".join(sorted({outcome.status for outcome in report.outcomes})),
                "seconds": time.perf_counter() - started,
                "tests": len(tests),
            }
        )
    server.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32, help="completions per batch")
    parser.add_argument("--workers", type=int, default=default_num_workers(), help="threads for the parallel batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1.0, help="per-test timeout of the adversarial table")
    parser.add_argument("--quick", action="store_true", help="batch 8, one repeat")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.repeats = 8, 1
    backends = [b for b, tool in (("bwrap", "bwrap"), ("unshare", "unshare")) if shutil.which(tool)] + ["none"]
    speed = [throughput(backend, args.batch, args.workers, args.repeats) for backend in backends]
    print(f"Throughput, batch of {args.batch} completions ({args.workers} workers for the parallel batch):")
    print(
        format_table(
            ["isolation", "sequential runs/s", "parallel runs/s"],
            [[row["isolation"], row["sequential_runs_per_s"], row["parallel_runs_per_s"]] for row in speed],
        )
    )
    table = adversarial_table(args.timeout) if shutil.which("bwrap") else []
    if table:
        print(f"\nAdversarial programs under bubblewrap (per-test timeout {args.timeout:g} s):")
        print(
            format_table(
                ["case", "tests", "score", "verdicts", "seconds"],
                [[r["case"], r["tests"], r["score"], r["verdicts"], r["seconds"]] for r in table],
            )
        )
    write_json(args.out, {"machine": machine_info(), "args": vars(args), "throughput": speed, "adversarial": table})


if __name__ == "__main__":
    main()
