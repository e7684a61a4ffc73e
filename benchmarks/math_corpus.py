"""Verdict corpus for the `math` reward, side by side with plain math-verify and TRL's `accuracy_reward`.

Two parts:

- Math-Verify's own equivalence cases (gold, prediction, expected verdict, and the options each test runs
  with), read at run time from the `tests/` of the `math-verify` source distribution of the installed version,
  downloaded from PyPI with pip and cached outside the tree (`~/.cache/trl-ext/math-verify-sdist/`; see
  `math_verify_sdist`). Reported: agreement of each verifier with the expected verdicts, over all cases and
  over the cases whose options are the ones a reward uses (strict variables, float rounding 6, no set/relation
  comparison in the gold's direction).
- `tests/data/math_corpus/answer_formats.json` (written for this project, see the README there): references in
  the answer formats of MATH, NuminaMath, GSM8K and DAPO-Math, and hard-but-correct forms (units, intervals,
  sets, matrices, percentages, scientific notation, degrees, text), each with right and wrong completions.
  Reported: recall (right completions accepted) and false-positive rate (wrong completions accepted), and the
  wrong completions a verifier accepts that plain math-verify rejects.
- `tests/data/math_corpus/answer_forms.json` (written for this project): right answers whose form differs from
  the reference's, in six classes (labelled or structured forms, a renamed variable or integer parameter, units
  and angles, precision, text and options, inequalities and set-builder notation), each reference with
  near-miss wrong twins; some rows carry the question (listed options, a requested rounding or order).
  Reported: recall and false positives by class.

The three verifiers: `math` (`verify_math_answer`, what the registered reward runs in its workers); plain
math-verify as open-r1 calls it (parse the reference with `LatexExtractionConfig()`, the completion with
`LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)` and open-r1's
normalisation, then `verify(gold, answer)`); `trl.rewards.accuracy_reward`. A verifier that returns None
("cannot judge") has not accepted the completion.

    python benchmarks/math_corpus.py --out benchmarks/results/math_corpus.json
    python benchmarks/math_corpus.py --math-verify-sdist PATH/TO/math_verify-X.Y.Z.tar.gz  # no download
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

CORPUS_DIR = _REPO_ROOT / "tests" / "data" / "math_corpus"
ANSWER_FORMATS = CORPUS_DIR / "answer_formats.json"
ANSWER_FORMS = CORPUS_DIR / "answer_forms.json"

# The equivalence tests of Math-Verify's suite (the other files test extraction configs and timeouts).
MATH_VERIFY_TEST_FILES = (
    "tests/test_all.py",
    "tests/test_boxed.py",
    "tests/test_numina_cases.py",
    "tests/test_open_thoughts.py",
    "tests/test_strict.py",
    "tests/test_yujianll.py",
)
# The options a reward runs with; a case run by its test with other options is "not applicable".
REWARD_OPTIONS = {"precision": 6, "strict": True, "allow_set_relation_comp": False}
# A pre-downloaded sdist (an offline machine, a CI cache): used instead of downloading.
SDIST_ENV = "TRL_EXT_MATH_VERIFY_SDIST"


# ------------------------------------------------------------------------------------------ Math-Verify's cases


class MathVerifyCasesUnavailable(RuntimeError):
    """The math-verify source distribution could not be downloaded or read."""


def cache_dir() -> Path:
    """Where downloads are kept between runs: `$TRL_EXT_CACHE`, else `$XDG_CACHE_HOME/trl-ext`, else
    `~/.cache/trl-ext`; never inside the repository."""
    if os.environ.get("TRL_EXT_CACHE"):
        return Path(os.environ["TRL_EXT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trl-ext"


def installed_math_verify_version() -> str:
    return importlib.metadata.version("math-verify")


def math_verify_sdist(version: str | None = None, cache: Path | None = None) -> Path:
    """The `math-verify` source distribution of `version` (default: the installed one), downloaded from the
    package index by pip (`pip download --no-deps --no-binary :all:`) into `cache/math-verify-sdist/<version>/`
    the first time, then reused. `$TRL_EXT_MATH_VERIFY_SDIST` names a tarball to use instead.

    Raises `MathVerifyCasesUnavailable` with pip's reason and the fix when the download fails.
    """
    if os.environ.get(SDIST_ENV):
        path = Path(os.environ[SDIST_ENV])
        if not path.is_file():
            raise MathVerifyCasesUnavailable(f"{SDIST_ENV}={path} is not a file: point it at a math_verify-*.tar.gz.")
        return path
    version = version or installed_math_verify_version()
    target = (cache or cache_dir()) / "math-verify-sdist" / version
    found = sorted(target.glob("*.tar.gz"))
    if found:
        return found[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--dest", download,
                   "--quiet", f"math-verify=={version}"]  # fmt: skip
        try:
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            done = None
        tarballs = sorted(Path(download).glob("*.tar.gz"))
        if done is None or done.returncode != 0 or not tarballs:
            reason = "timed out after 600 s" if done is None else (done.stderr or done.stdout).strip()[-800:]
            raise MathVerifyCasesUnavailable(
                f"Could not download the math-verify {version} source distribution (`{' '.join(command[2:])}`): "
                f"{reason or 'no .tar.gz was saved'}. Fix: make the package index reachable, or download "
                f"math_verify-{version}.tar.gz elsewhere and set {SDIST_ENV} to its path."
            )
        # Moved into place only once complete, so an interrupted download is never taken for a cached one.
        staged = Path(download) / "ready"
        staged.mkdir()
        shutil.move(str(tarballs[0]), staged / tarballs[0].name)
        if target.exists():  # another process finished first
            found = sorted(target.glob("*.tar.gz"))
            if found:
                return found[0]
            shutil.rmtree(target)
        staged.rename(target)
    return min(target.glob("*.tar.gz"))


def _test_sources(sdist: Path) -> dict[str, str]:
    """`{"tests/test_all.py": source, ...}` for the equivalence test files the sdist ships."""
    sources = {}
    try:
        with tarfile.open(sdist, "r:gz") as archive:
            for member in archive.getmembers():
                # Members are `math_verify-0.9.0/tests/test_all.py`: drop the top folder.
                relative = member.name.partition("/")[2]
                if relative in MATH_VERIFY_TEST_FILES and member.isfile():
                    sources[relative] = archive.extractfile(member).read().decode("utf-8")
    except (OSError, tarfile.TarError) as error:
        raise MathVerifyCasesUnavailable(
            f"Cannot read {sdist}: {error}. Delete it so it is downloaded again."
        ) from None
    if not sources:
        raise MathVerifyCasesUnavailable(
            f"{sdist} holds none of {list(MATH_VERIFY_TEST_FILES)}: this math-verify release does not ship its "
            "tests in its sdist; install a release that does (0.9.0 does)."
        )
    return sources


_MATH_FUNCTIONS = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "sin": math.sin, "cos": math.cos}


def _literal(node: ast.AST):
    """A test argument's value: a literal, or an f-string whose fields are `math.<function>(<number>)` with a
    format spec (one case writes `f"{math.sqrt(17):.15f}"`). Evaluated from the syntax tree: no code from the
    download is run."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if not isinstance(node, ast.JoinedStr):
        raise ValueError(f"unsupported test argument {ast.dump(node)[:120]}")  # noqa: TRY004
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
            continue
        call = value.value
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and getattr(call.func.value, "id", None) == "math"
            and call.func.attr in _MATH_FUNCTIONS
        ):
            raise ValueError(f"unsupported f-string field {ast.dump(call)[:120]}")
        number = _MATH_FUNCTIONS[call.func.attr](*(ast.literal_eval(argument) for argument in call.args))
        spec = "".join(str(part.value) for part in value.format_spec.values) if value.format_spec else ""
        parts.append(format(number, spec))
    return "".join(parts)


def _call_options(function: ast.FunctionDef) -> tuple[str, dict]:
    """How a test function compares: `compare_strings(gold, pred, **options)` (its keyword options, constants or
    parameter names) or `verify(parse(gold), parse(pred))` with math-verify's defaults."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "compare_strings":
            options = {}
            for keyword in node.keywords:
                value = keyword.value
                options[keyword.arg] = {"parameter": value.id} if isinstance(value, ast.Name) else _literal(value)
            return "compare_strings", options
    return "parse_defaults", {}


def cases_from_test_source(relative: str, source: str) -> list[dict]:
    """Every parametrised equivalence case of one Math-Verify test file, read from its syntax tree."""
    cases = []
    for function in ast.parse(source).body:
        if not isinstance(function, ast.FunctionDef):
            continue
        for decorator in function.decorator_list:
            if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "parametrize"):
                continue
            names = [name.strip() for name in ast.literal_eval(decorator.args[0]).split(",")]
            if not {"gold", "pred"} <= set(names):
                continue
            harness, call_options = _call_options(function)
            for index, row in enumerate(decorator.args[1].elts):
                values = dict(zip(names, (_literal(element) for element in row.elts)))
                # `compare_strings`' defaults, then what the test passes.
                options = {"match_types": ["latex", "expr"], **REWARD_OPTIONS}
                for key, value in call_options.items():
                    options[key] = values[value["parameter"]] if isinstance(value, dict) else value
                expected = values.get("expected", values.get("result"))
                cases.append(
                    {
                        "id": f"{relative.removeprefix('tests/')}::{function.name}[{index}]",
                        "gold": values["gold"],
                        "pred": values["pred"],
                        "expected": int(expected),
                        "harness": harness,
                        "options": options if harness == "compare_strings" else {},
                    }
                )
    return cases


def import_math_verify_cases(sdist: Path) -> dict:
    """Every parametrised equivalence case of the test files a math-verify sdist ships, with where they came
    from (file name and SHA-256 of the sdist)."""
    sources = _test_sources(sdist)
    cases = [case for relative, source in sorted(sources.items()) for case in cases_from_test_source(relative, source)]
    return {
        "source": f"{sdist.name} (math-verify source distribution from the package index)",
        "sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
        "files": sorted(sources),
        "cases": cases,
    }


_MATH_SPAN = re.compile(r"\$\$.+?\$\$|\$[^$]*\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)


def states_its_answer(prediction: str) -> bool:
    """Whether a prediction marks its answer: a box, an answer phrase math-verify finds with
    `try_extract_without_anchor=False` (as TRL's `accuracy_reward` and open-r1 parse completions), or nothing
    but the answer (no word outside math once a trailing unit or percent word is taken off). Math-Verify's
    suite also tests guessing an answer from unmarked prose (`The identity matrix is $...$.`), which a reward
    does not do: a policy rewarded for it learns to end with any number."""
    from latex2sympy2_extended.math_normalization import units_regex
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    from trl_ext.rewards.extraction import boxed_spans

    if boxed_spans(prediction):
        return True
    anchored = [
        LatexExtractionConfig(try_extract_without_anchor=False),
        ExprExtractionConfig(try_extract_without_anchor=False),
    ]
    if parse(prediction, anchored):
        return True
    outside = re.sub(r"\s*\b(?:percent|percentage|pct)\b", "", _MATH_SPAN.sub(" 0 ", prediction))
    return not re.search(r"[A-Za-z]{3,}", units_regex.sub(r"\1", outside.strip()))


def applicable(case: dict) -> bool:
    """Whether a Math-Verify case runs with the options a reward uses (any extraction targets)."""
    options = case["options"]
    return all(options.get(key, value) == value for key, value in REWARD_OPTIONS.items())


# ------------------------------------------------------------------------------------------ the verifiers


def load_cases(sdist: Path | None = None) -> list[dict]:
    """Math-Verify's cases from `sdist` (default: `math_verify_sdist()`, downloading it if not cached), each with
    `marked`: whether its prediction states its answer (`states_its_answer`)."""
    cases = import_math_verify_cases(sdist or math_verify_sdist())["cases"]
    for case in cases:
        case["marked"] = states_its_answer(case["pred"])
    return cases


def load_answer_formats() -> list[dict]:
    """`(reference, completion, right)` rows of the answer-format corpus, with each row's category and source."""
    rows = []
    for entry in json.loads(ANSWER_FORMATS.read_text())["references"]:
        for key, right in (("right", True), ("wrong", False)):
            for completion in entry.get(key, []):
                rows.append(
                    {
                        "reference": entry["reference"],
                        "completion": completion,
                        "right": right,
                        "category": entry["category"],
                        "source": entry["source"],
                    }
                )
    return rows


def load_answer_forms() -> list[dict]:
    """`(reference, completion, right)` rows of the answer-forms corpus, with each row's class, form and question
    (None where the row has none)."""
    rows = []
    for entry in json.loads(ANSWER_FORMS.read_text())["references"]:
        for key, right in (("right", True), ("wrong", False)):
            for completion in entry[key]:
                rows.append(
                    {
                        "reference": entry["reference"],
                        "question": entry.get("question"),
                        "completion": completion,
                        "right": right,
                        "category": entry["class"],
                        "form": entry["form"],
                        "before_rules": entry.get("before_rules", False),
                        "after_rules": entry.get("after_rules", False),
                    }
                )
    return rows


def math_reward_verdict(reference: str, completion: str, question: str | None = None) -> bool | None:
    from trl_ext.rewards.math import verify_math_answer

    return verify_math_answer(reference, completion, question=question, parsing_timeout=5, verify_timeout=5)


def plain_math_verify_verdict(reference: str, completion: str, question: str | None = None) -> bool | None:
    """math-verify as open-r1's `accuracy_reward` calls it; None where the reference does not parse."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    gold = parse(reference, extraction_mode="first_match", extraction_config=[LatexExtractionConfig()])
    if not gold:
        return None
    answer = parse(
        completion,
        extraction_config=[
            LatexExtractionConfig(
                normalization_config=NormalizationConfig(
                    nits=False, malformed_operators=False, basic_latex=True, boxed="all", units=True
                ),
                boxed_match_priority=0,
                try_extract_without_anchor=False,
            )
        ],
        extraction_mode="first_match",
    )
    try:
        return bool(verify(gold, answer))
    except Exception:  # noqa: BLE001 - open-r1 scores a failed comparison as wrong
        return False


def trl_accuracy_verdict(reference: str, completion: str, question: str | None = None) -> bool | None:
    from trl.rewards import accuracy_reward

    (score,) = accuracy_reward([[{"role": "assistant", "content": completion}]], [reference])
    return None if score is None else score > 0


def plain_math_verify_wrapped_verdict(reference: str, completion: str, question: str | None = None) -> bool | None:
    """Plain math-verify with a bare reference put in `$...$`, so it parses (the fairer baseline on references
    written without delimiters, as most of the answer-forms corpus is)."""
    wrapped = reference if "$" in reference or "\\boxed" in reference else f"${reference}$"
    return plain_math_verify_verdict(wrapped, completion)


def row_verdicts(rows: list[dict], verdict: Callable[..., bool | None]) -> list[bool | None]:
    """`verdict` on each row; `math` also gets the row's question (the other verifiers take none)."""
    if verdict is math_reward_verdict:
        return [verdict(row["reference"], row["completion"], row.get("question")) for row in rows]
    return [verdict(row["reference"], row["completion"]) for row in rows]


VERIFIERS: dict[str, Callable[[str, str], bool | None]] = {
    "math (trl_ext)": math_reward_verdict,
    "plain math-verify (open-r1)": plain_math_verify_verdict,
    "trl accuracy_reward": trl_accuracy_verdict,
}


def math_verify_own_verdict(case: dict) -> bool:
    """The case as Math-Verify's own test runs it (its options), to check the imported data."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    if case["harness"] == "parse_defaults":
        return bool(verify(parse(case["gold"]), parse(case["pred"])))
    options = case["options"]
    targets = [
        LatexExtractionConfig(boxed_match_priority=0) if kind == "latex" else ExprExtractionConfig()
        for kind in options["match_types"]
    ]
    return bool(
        verify(
            parse(case["gold"], targets),
            parse(case["pred"], targets),
            float_rounding=options["precision"],
            strict=options["strict"],
            allow_set_relation_comp=options["allow_set_relation_comp"],
        )
    )


# ------------------------------------------------------------------------------------------ scoring


def suite_agreement(cases: list[dict], verdict: Callable[[str, str], bool | None]) -> dict:
    """Agreement of `verdict(gold, pred)` (accepted = True) with the expected verdicts, all and applicable."""
    agree = {"all": 0, "reward_options": 0, "marked": 0}
    total = dict.fromkeys(agree, 0)
    disagreements = []
    for case in cases:
        same = (verdict(case["gold"], case["pred"]) is True) == bool(case["expected"])
        subsets = ["all"]
        if applicable(case):
            subsets.append("reward_options")
            if case["marked"]:
                subsets.append("marked")
        for subset in subsets:
            total[subset] += 1
            agree[subset] += same
        if not same:
            disagreements.append(case["id"])
    return {
        **{f"agree_{subset}": agree[subset] for subset in agree},
        **{f"cases_{subset}": total[subset] for subset in total},
        **{f"agreement_{subset}": agree[subset] / total[subset] for subset in agree},
        "disagreements": disagreements,
    }


def format_scores(rows: list[dict], verdicts: list[bool | None], plain: list[bool | None]) -> dict:
    """Recall, false-positive rate, and the wrong completions accepted that plain math-verify rejects."""
    right = [verdict is True for row, verdict in zip(rows, verdicts) if row["right"]]
    wrong = [verdict is True for row, verdict in zip(rows, verdicts) if not row["right"]]
    beyond_plain = [
        {"reference": row["reference"], "completion": row["completion"]}
        for row, verdict, baseline in zip(rows, verdicts, plain)
        if not row["right"] and verdict is True and baseline is not True
    ]
    missed = [
        {"reference": row["reference"], "completion": row["completion"], "category": row["category"]}
        for row, verdict in zip(rows, verdicts)
        if row["right"] and verdict is not True
    ]
    return {
        "right": len(right),
        "wrong": len(wrong),
        "recall": sum(right) / len(right),
        "false_positive_rate": sum(wrong) / len(wrong),
        "false_positives": sum(wrong),
        "cannot_judge": sum(verdict is None for verdict in verdicts),
        "wrong_accepted_beyond_plain_math_verify": beyond_plain,
        "right_rejected": missed,
    }


def answer_forms_scores(rows: list[dict], verdicts: list[bool | None]) -> dict:
    """Recall and false positives over the answer-forms rows, in all and by class, and the misses."""

    def scores(selected: list[int]) -> dict:
        right = [verdicts[i] is True for i in selected if rows[i]["right"]]
        wrong = [verdicts[i] is True for i in selected if not rows[i]["right"]]
        recall = sum(right) / len(right)
        return {"right": len(right), "wrong": len(wrong), "recall": recall, "false_positives": sum(wrong)}

    classes = sorted({row["category"] for row in rows})
    parts = {}
    # The rows written before the rules for their forms, and those written after them and never used to change
    # one: recall on forms the rules were not written from.
    for part in ("before_rules", "after_rules"):
        selected = [i for i, row in enumerate(rows) if row.get(part)]
        parts[part] = scores(selected) if selected else None
        parts[f"{part}_by_class"] = {
            name: scores([i for i in selected if rows[i]["category"] == name])
            for name in sorted({rows[i]["category"] for i in selected})
        }
    return {
        "all": scores(list(range(len(rows)))),
        "by_class": {name: scores([i for i, row in enumerate(rows) if row["category"] == name]) for name in classes},
        **parts,
        "right_rejected": [
            {"class": row["category"], "reference": row["reference"], "completion": row["completion"]}
            for row, verdict in zip(rows, verdicts)
            if row["right"] and verdict is not True
        ],
        "wrong_accepted": [
            {"class": row["category"], "reference": row["reference"], "completion": row["completion"]}
            for row, verdict in zip(rows, verdicts)
            if not row["right"] and verdict is True
        ],
    }


def answer_forms_report(format_table: Callable) -> dict:
    """The answer-forms corpus through every verifier, printed as one table by class."""
    rows = load_answer_forms()
    verifiers = {**VERIFIERS, "plain math-verify, reference in $…$": plain_math_verify_wrapped_verdict}
    results = {name: answer_forms_scores(rows, row_verdicts(rows, verdict)) for name, verdict in verifiers.items()}
    ours = results["math (trl_ext)"]
    print(
        f"\nanswer forms: {len(rows)} completions for {len({(r['reference'], r['question']) for r in rows})} "
        f"references ({ours['all']['right']} right, {ours['all']['wrong']} wrong); recall / wrong accepted:\n"
    )
    print(format_table(
        ["class", "right", "wrong", *verifiers],
        [[name, ours["by_class"][name]["right"], ours["by_class"][name]["wrong"],
          *(f"{results[v]['by_class'][name]['recall']:.1%} / {results[v]['by_class'][name]['false_positives']}"
            for v in verifiers)] for name in ours["by_class"]]
        + [[part, ours[key]["right"], ours[key]["wrong"],
            *(f"{results[v][key]['recall']:.1%} / {results[v][key]['false_positives']}" for v in verifiers)]
           for part, key in (("all", "all"), ("written before the rules", "before_rules"),
                             ("written after the rules", "after_rules")) if ours[key]],
    ))  # fmt: skip
    for miss in ours["right_rejected"]:
        print(f"  `math` rejects [{miss['class']}] {miss['reference']!r}  <-  {miss['completion'][-80:]!r}")
    for accepted in ours["wrong_accepted"]:
        print(
            f"  `math` accepts a wrong [{accepted['class']}] {accepted['reference']!r}  <-  "
            f"{accepted['completion'][-80:]!r}"
        )
    for name, scores in results.items():  # the completions themselves only where `math` misses
        if name != "math (trl_ext)":
            scores["right_rejected"] = len(scores["right_rejected"])
            scores["wrong_accepted"] = len(scores["wrong_accepted"])
    return {"completions": len(rows), **results}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--math-verify-sdist", metavar="TARBALL", default=None,
        help="a downloaded math_verify-X.Y.Z.tar.gz to read the cases from (default: download the installed version's)",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # math-verify logs every unparsable answer and disabled timeout

    import _common  # noqa: F401  (offline environment)
    from _common import format_table, machine_info, write_json

    sdist = Path(args.math_verify_sdist) if args.math_verify_sdist else math_verify_sdist()
    imported = import_math_verify_cases(sdist)
    cases = load_cases(sdist)
    own = sum(math_verify_own_verdict(case) == bool(case["expected"]) for case in cases)
    rows = load_answer_formats()
    results = {"math_verify_suite": {}, "answer_formats": {}}
    verdicts = {}
    for name, verdict in VERIFIERS.items():
        results["math_verify_suite"][name] = suite_agreement(cases, verdict)
        verdicts[name] = [verdict(row["reference"], row["completion"]) for row in rows]
    for name in VERIFIERS:
        results["answer_formats"][name] = format_scores(rows, verdicts[name], verdicts["plain math-verify (open-r1)"])
    categories = sorted({row["category"] for row in rows})
    per_category = {
        category: {
            name: format_scores(
                [row for row in rows if row["category"] == category],
                [v for row, v in zip(rows, verdicts[name]) if row["category"] == category],
                [v for row, v in zip(rows, verdicts["plain math-verify (open-r1)"]) if row["category"] == category],
            )
            for name in VERIFIERS
        }
        for category in categories
    }

    suite = results["math_verify_suite"]
    print(
        f"Math-Verify's suite ({sdist.name}): {len(cases)} cases; math-verify itself, each case with its own "
        "options: "
        f"{own}/{len(cases)}\n"
    )
    subsets = {"all": "all cases", "reward_options": "a reward's options", "marked": "... and a marked answer"}
    print(format_table(
        ["verifier", *subsets.values()],
        [[name, *(f"{s[f'agree_{k}']}/{s[f'cases_{k}']} ({s[f'agreement_{k}']:.1%})" for k in subsets)]
         for name, s in suite.items()],
    ))  # fmt: skip
    formats = results["answer_formats"]
    right, wrong = formats["math (trl_ext)"]["right"], formats["math (trl_ext)"]["wrong"]
    print(
        f"\nanswer formats: {len(rows)} completions for {len({r['reference'] for r in rows})} references "
        f"({right} right, {wrong} wrong)\n"
    )
    print(format_table(
        ["verifier", "recall", "false-positive rate", "wrong accepted that plain math-verify rejects",
         "cannot judge (reference unparsed)"],
        [[name, f"{s['recall']:.1%}", f"{s['false_positive_rate']:.1%} ({s['false_positives']})",
          len(s["wrong_accepted_beyond_plain_math_verify"]), s["cannot_judge"]] for name, s in formats.items()],
    ))  # fmt: skip
    print("\nrecall by category (math / plain math-verify / accuracy_reward):")
    print(format_table(
        ["category", *VERIFIERS],
        [[category, *(f"{per_category[category][name]['recall']:.0%}" for name in VERIFIERS)]
         for category in categories],
    ))  # fmt: skip
    ours = formats["math (trl_ext)"]
    if ours["right_rejected"]:
        print("\n`math` rejects these right completions:")
        for miss in ours["right_rejected"]:
            print(f"  [{miss['category']}] {miss['reference']!r}  <-  {miss['completion']!r}")
    if suite["math (trl_ext)"]["disagreements"]:
        print("\n`math` disagrees with Math-Verify's suite on:", ", ".join(suite["math (trl_ext)"]["disagreements"]))

    forms = answer_forms_report(format_table)

    summary = {
        "benchmark": "math_corpus",
        "math_verify_cases": len(cases),
        "math_verify_cases_from": {"sdist": imported["source"], "sha256": imported["sha256"]},
        "math_verify_itself_agrees": own,
        "answer_format_completions": len(rows),
        **results,
        "recall_by_category": {c: {n: per_category[c][n]["recall"] for n in VERIFIERS} for c in categories},
        "answer_forms": forms,
        "machine": machine_info(),
    }
    write_json(args.out, summary)
    return summary


if __name__ == "__main__":
    main()
