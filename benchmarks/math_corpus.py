"""Verdict corpus for the `math` reward, side by side with plain math-verify and TRL's `accuracy_reward`.

Two parts:

- Math-Verify's own equivalence cases (gold, prediction, expected verdict, and the options each test runs
  with), read at run time from the `tests/` of the `math-verify` source distribution of the installed version,
  downloaded from PyPI with pip and cached outside the tree (`~/.cache/trl-ext/math-verify-sdist/`; see
  `math_verify_cases.py`). Reported: agreement of each verifier with the expected verdicts, over all cases and
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
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from math_verify_cases import (  # noqa: F401  re-exported: the tests and earlier callers use them from here
    MATH_VERIFY_TEST_FILES,
    REWARD_OPTIONS,
    SDIST_ENV,
    MathVerifyCasesUnavailable,
    applicable,
    cache_dir,
    cases_from_test_source,
    import_math_verify_cases,
    installed_math_verify_version,
    math_verify_sdist,
    states_its_answer,
)

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

CORPUS_DIR = _REPO_ROOT / "tests" / "data" / "math_corpus"
ANSWER_FORMATS = CORPUS_DIR / "answer_formats.json"
ANSWER_FORMS = CORPUS_DIR / "answer_forms.json"


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
