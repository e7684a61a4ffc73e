"""The `code` reward's judge served over loopback (`trl-ext sandbox serve`) against local judging, on one machine.

The same batch (distinct right programs: HumanEval-style `add` with three asserts, and stdin/stdout programs with
two tests, so that none is judged once for several rows) is scored:

- throughput: by the local reward (`num_workers` = the usable cores), by one server with as many workers, and by
  1, 2 and 4 server processes of one worker each (the client spreads the batch over them by load); repeats
  alternate the arms, each arm's median is reported with its ratio to local judging of the same repeat;
- latency per job under load: 64 jobs sent at once (raw HTTP, one thread each) to one server: p50 and p99 of the
  time from sending a job to its answer;
- the client's overhead per job: one job at a time, one worker, served against local (ms per job).

    python benchmarks/judge_service.py --out benchmarks/results/judge_service.json
    python benchmarks/judge_service.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, median, write_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "judge_service"))
import requests  # noqa: E402
from servers import TOKEN, headers, judge_servers  # noqa: E402

from trl_ext.rewards.code import CodeReward  # noqa: E402
from trl_ext.rewards.pool import default_num_workers  # noqa: E402
from trl_ext.sandbox.testing import close_servers  # noqa: E402

ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]
STDIO_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "10 5\n", "output": "15\n"}]


def batch(size: int) -> tuple[list[str], list]:
    """`size` distinct right programs, half assert rows and half stdin/stdout rows."""
    completions, tests = [], []
    for index in range(size):
        if index % 2:
            completions.append(f"```python\na, b = map(int, input().split())  # {index}\nprint(a + b)\n```")
            tests.append(STDIO_TESTS)
        else:
            completions.append(f"```python\ndef add(a, b):  # {index}\n    return a + b\n```")
            tests.append(ADD_TESTS)
    return completions, tests


def timed(reward: CodeReward, completions, tests) -> float:
    started = time.monotonic()
    scores = reward(completions=completions, tests=tests)
    elapsed = time.monotonic() - started
    assert scores == [1.0] * len(completions), scores  # a benchmark of wrong verdicts would measure nothing
    return elapsed


def throughput(size: int, repeats: int, workers: int) -> dict:
    completions, tests = batch(size)
    arms: dict[str, list[float]] = {}
    with judge_servers(1, "--workers", str(workers)) as wide, judge_servers(4, "--workers", "1") as narrow:
        rewards = {
            "local": CodeReward(num_workers=workers),
            f"1 server x {workers} workers": CodeReward(executor=wide[0][0], executor_token=TOKEN),
            **{f"{n} server(s) x 1 worker": CodeReward(executor=[url for url, _ in narrow[:n]], executor_token=TOKEN)
               for n in (1, 2, 4)},
        }
        for reward in rewards.values():  # warm: sandboxes started, imports done
            timed(reward, *batch(8))
        for _ in range(repeats):
            for name, reward in rewards.items():
                arms.setdefault(name, []).append(size / timed(reward, completions, tests))
        close_servers(rewards["local"].sandbox)
    local = arms["local"]
    return {name: {"programs_per_second": median(values),
                   "ratio_to_local": median([value / base for value, base in zip(values, local)])}
            for name, values in arms.items()}


def latency_under_load(jobs: int, workers: int) -> dict:
    completions, tests = batch(jobs)
    with judge_servers(1, "--workers", str(workers), "--max-queue", str(jobs)) as [(url, _)]:
        bodies = [json.dumps({"completion": c, "row": {"tests": t}}) for c, t in zip(completions, tests)]
        requests.post(f"{url}/v1/judge", data=bodies[0], headers=headers(), timeout=60)  # warm
        seconds, statuses = [], []

        def send(body):
            started = time.monotonic()
            response = requests.post(f"{url}/v1/judge", data=body, headers=headers(), timeout=120)
            seconds.append(time.monotonic() - started)
            statuses.append((response.status_code, response.json().get("score")))

        threads = [threading.Thread(target=send, args=(body,)) for body in bodies]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        total = time.monotonic() - started
    assert statuses == [(200, 1.0)] * jobs, statuses
    ordered = sorted(seconds)
    return {"jobs": jobs, "workers": workers, "p50_seconds": ordered[len(ordered) // 2],
            "p99_seconds": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], "wall_seconds": total}


def client_overhead(size: int, repeats: int) -> dict:
    completions, tests = batch(size)
    local_times, served_times = [], []
    with judge_servers(1, "--workers", "1") as [(url, _)]:
        local, served = CodeReward(num_workers=1), CodeReward(executor=url, executor_token=TOKEN)
        timed(local, *batch(4)), timed(served, *batch(4))
        for _ in range(repeats):
            for completion, test in zip(completions, tests):
                local_times.append(timed(local, [completion], [test]))
                served_times.append(timed(served, [completion], [test]))
        close_servers(local.sandbox)
    return {"local_ms_per_job": 1000 * median(local_times), "served_ms_per_job": 1000 * median(served_times),
            "overhead_ms_per_job": 1000 * (median(served_times) - median(local_times))}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="A smoke run: small batches, one repeat.")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.repeats, args.concurrent = 8, 1, 8
    workers = default_num_workers()
    result = {
        "machine": machine_info(),
        "throughput": throughput(args.batch, args.repeats, workers),
        "latency": latency_under_load(args.concurrent, workers),
        "client_overhead": client_overhead(max(4, args.batch // 8), args.repeats),
        "batch": args.batch, "repeats": args.repeats,
    }
    print(format_table(["arm", "programs/s", "x local"],
                       [[name, f"{arm['programs_per_second']:.1f}", f"{arm['ratio_to_local']:.2f}"]
                        for name, arm in result["throughput"].items()]))
    latency, overhead = result["latency"], result["client_overhead"]
    print(f"{latency['jobs']} jobs at once on one server ({latency['workers']} workers): p50 "
          f"{latency['p50_seconds'] * 1000:.0f} ms, p99 {latency['p99_seconds'] * 1000:.0f} ms")
    print(f"one job at a time: local {overhead['local_ms_per_job']:.1f} ms, served {overhead['served_ms_per_job']:.1f}"
          f" ms (+{overhead['overhead_ms_per_job']:.1f} ms per job)")
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
