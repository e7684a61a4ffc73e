"""What putting the program's changes back costs the judge, measured inside one process (no sandbox).

Three figures, each the median over repeats, in milliseconds:

1. the module snapshot's restore in a forked test process after a program's top-level code (`add` only), as the
   harness does before a program's asserts run: what every judged program pays;
2. the call guard's snapshot and restore around one call into the program, in a process that has made them before
   (NumPy and pandas loaded, as BigCodeBench-style rows do): what each further call, or each resumption of a
   generator the program returned, pays;
3. a fresh forked test process making its call guard and guarding two calls: what the first calls pay;
4. the same, the guard given the copies made before the fork (`call_guard.warm_copies`), as the harness gives them
   to each test process now.

Run it with `PYTHONPATH=<another checkout>` to measure that checkout's code side by side (alternate the two).

    python benchmarks/snapshot_cost.py --out benchmarks/results/snapshot_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # from a checkout: its own `trl_ext`, without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy  # noqa: E402,F401  (loaded as a BigCodeBench-style row loads them)
import pandas  # noqa: E402,F401

from trl_ext.sandbox import call_guard, test_process  # noqa: E402

PROGRAM = compile("def add(a, b):\n    return a + b\n", "solution.py", "exec")


def in_forked_children(body, repeats: int) -> list[float]:
    """`body()`'s duration in seconds, each time in a child forked from this process."""
    durations = []
    for _ in range(repeats):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            started = time.perf_counter()
            body()
            os.write(write_end, repr(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(write_end)
        durations.append(float(os.read(read_end, 64)))
        os.close(read_end)
        os.waitpid(pid, 0)
    return durations


def module_restore(repeats: int) -> list[float]:
    restore = test_process._module_snapshot((), False)

    def body():
        sys.modules["solution"] = namespace = type(sys)("solution")
        exec(PROGRAM, vars(namespace))  # noqa: S102 - our own two-line program
        restore()

    return in_forked_children(body, repeats)


def guarded_call(repeats: int) -> list[float]:
    bound = call_guard.context(sys.modules, {}, (None,) * 6, test_process._VERSIONS)
    call_guard.take_snapshot(bound)()
    durations = []
    for _ in range(repeats):
        started = time.perf_counter()
        call_guard.take_snapshot(bound)()
        durations.append(time.perf_counter() - started)
    return durations


def first_calls(repeats: int, warm: bool = False) -> list[float]:
    copies = call_guard.warm_copies(sys.modules, test_process._VERSIONS) if warm else None

    def body():
        sys.modules["solution"] = type(sys)("solution")  # as in a test process: the program's module is new
        bound = call_guard.context(sys.modules, {}, (None,) * 6, test_process._VERSIONS, copies=copies)
        for _ in range(2):
            call_guard.take_snapshot(bound)()

    return in_forked_children(body, repeats)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    figures = {
        "module restore in a forked test process": module_restore(args.repeats),
        "one guarded call, copies made before": guarded_call(args.repeats),
        "call guard made and two calls, in a fresh forked process": first_calls(max(args.repeats // 5, 1)),
        "the same, given the copies made before the fork": first_calls(max(args.repeats // 5, 1), warm=True),
    }
    result = {name: round(statistics.median(durations) * 1e3, 3) for name, durations in figures.items()}
    for name, milliseconds in result.items():
        print(f"{name}: {milliseconds} ms")
    print(f"loaded modules: {len(sys.modules)}; code measured: {Path(call_guard.__file__).parents[2]}")
    if args.out:
        Path(args.out).write_text(json.dumps({"milliseconds": result, "repeats": args.repeats,
                                              "loaded_modules": len(sys.modules)}, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
