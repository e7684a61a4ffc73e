"""How well a judge does as `math`'s fallback: its verdicts on the answers the rules reject, and its cost.

The rows: the answer-forms corpus (`tests/data/math_corpus/answer_forms.json`) and the prose answers
(`prose_answers.json`: a sentence as the reference, a name or a sentence as the answer, which no rule judges).
`math` judges every completion first; the ones it rejects are what the reward asks a fallback about, as the
reward asks it: each distinct `(question, reference, answer)` once, the answer being the final answer the rules
found or the completion's last 2,000 characters. Reported, by corpus and in all:

- `asked`: the distinct rejected answers (right ones the rules miss, and wrong ones they rightly reject);
- the judge's recall on the right ones (rejections it turns into accepts) and the wrong ones it accepts;
- `math` alone and `math` with the fallback: recall and wrong answers accepted over every row;
- seconds per judged answer (wall clock of the judge's calls / answers asked), with the machine's load.

The judge is any fallback (`--judge module:attribute`, a class instantiated with `--judge-kwargs`), e.g. the
shipped `CausalLMJudge` on a local model. `--tiny` uses `CausalLMJudge` on the tiny random model of
`trl_ext.tiny`: that checks the plumbing, its verdicts mean nothing.

    python benchmarks/math_fallback_accuracy.py --judge trl_ext.rewards.math_fallback:CausalLMJudge \\
        --judge-kwargs '{"model": "/models/Qwen2.5-0.5B-Instruct", "device": "cuda", "dtype": "bfloat16"}' \\
        --out benchmarks/results/math_fallback_accuracy.json
    python benchmarks/math_fallback_accuracy.py --tiny
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import format_table, machine_info, write_json

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "math_corpus"
CORPORA = {"answer forms": CORPUS_DIR / "answer_forms.json", "prose answers": CORPUS_DIR / "prose_answers.json"}


def load_rows(path: Path) -> list[dict]:
    """`{question, reference, completion, right}` rows of a corpus file (`references` with `right` / `wrong`)."""
    rows = []
    for entry in json.loads(path.read_text())["references"]:
        for key in ("right", "wrong"):
            for completion in entry[key]:
                rows.append(
                    {
                        "question": entry.get("question"),
                        "reference": entry["reference"],
                        "completion": completion,
                        "right": key == "right",
                    }
                )
    return rows


def fallback_item(row: dict) -> tuple[str | None, str, str]:
    """What the reward asks a fallback about a rejected completion (`MathReward._with_second_opinions`)."""
    from trl_ext.rewards.math import extract_final_answer

    answer = extract_final_answer(row["completion"], row["question"])
    return row["question"], row["reference"], answer.text if answer.text is not None else row["completion"][-2000:]


def rule_verdicts(rows: list[dict]) -> list[bool | None]:
    from trl_ext.rewards.math import verify_math_answer

    return [
        verify_math_answer(row["reference"], row["completion"], question=row["question"], parsing_timeout=5,
                           verify_timeout=5)
        for row in rows
    ]  # fmt: skip


def judge_rejected(rows: list[dict], verdicts: list[bool | None], judge: Callable) -> tuple[dict, float, int]:
    """The judge's verdict on each distinct rejected item, the seconds it took, and how many it was asked."""
    from trl_ext.rewards.math_fallback import ask_fallback

    items = list(dict.fromkeys(fallback_item(row) for row, verdict in zip(rows, verdicts) if verdict is False))
    start = time.perf_counter()
    opinions = ask_fallback(judge, items)
    return dict(zip(items, opinions)), time.perf_counter() - start, len(items)


def scores(rows: list[dict], verdicts: list[bool | None], opinions: dict) -> dict:
    """Counts for rows whose rules' verdicts are `verdicts` and whose rejected items got `opinions`."""
    rejected = [(row, opinions[fallback_item(row)]) for row, verdict in zip(rows, verdicts) if verdict is False]
    right, wrong = [row for row in rows if row["right"]], [row for row in rows if not row["right"]]
    rules_right = sum(verdict is True for row, verdict in zip(rows, verdicts) if row["right"])
    rules_wrong = sum(verdict is True for row, verdict in zip(rows, verdicts) if not row["right"])
    judged_right = [opinion is True for row, opinion in rejected if row["right"]]
    judged_wrong = [opinion is True for row, opinion in rejected if not row["right"]]
    return {
        "right": len(right),
        "wrong": len(wrong),
        "rejected_right": len(judged_right),
        "rejected_wrong": len(judged_wrong),
        "judge_recall_on_rejected_right": sum(judged_right) / len(judged_right) if judged_right else None,
        "judge_accepts_wrong": sum(judged_wrong),
        "math_recall": rules_right / len(right),
        "math_wrong_accepted": rules_wrong,
        "with_fallback_recall": (rules_right + sum(judged_right)) / len(right),
        "with_fallback_wrong_accepted": rules_wrong + sum(judged_wrong),
    }


def run(judge: Callable, corpora: dict[str, Path] = CORPORA) -> dict:
    """Every corpus through the rules, then its rejected answers through `judge`; counts by corpus and in all."""
    results, all_rows, all_verdicts, opinions = {}, [], [], {}
    seconds, asked = 0.0, 0
    for name, path in corpora.items():
        rows = load_rows(path)
        verdicts = rule_verdicts(rows)
        found, spent, count = judge_rejected(rows, verdicts, judge)
        opinions.update(found)
        seconds, asked = seconds + spent, asked + count
        results[name] = {"asked": count, **scores(rows, verdicts, found)}
        all_rows += rows
        all_verdicts += verdicts
    results["all"] = {"asked": asked, **scores(all_rows, all_verdicts, opinions)}
    results["seconds_per_judged_answer"] = seconds / asked if asked else None
    return results


def tiny_judge() -> Callable:
    """`CausalLMJudge` on the tiny random model, saved to a temporary directory (plumbing only)."""
    from trl_ext.rewards.math_fallback import CausalLMJudge
    from trl_ext.tiny import save_tiny_model

    directory = tempfile.mkdtemp(prefix="trl-ext-tiny-judge-")
    save_tiny_model(directory)
    return CausalLMJudge(directory, device="cpu", batch_size=8)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judge", default=None, help="the fallback, as 'module:attribute' (a class is instantiated)")
    parser.add_argument("--judge-kwargs", default="{}", help="JSON arguments for a judge class")
    parser.add_argument("--tiny", action="store_true", help="CausalLMJudge on the tiny random model (plumbing)")
    parser.add_argument("--out", default=None, help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    if bool(args.judge) == args.tiny:
        parser.error("give one of --judge MODULE:ATTRIBUTE or --tiny")
    logging.disable(logging.WARNING)
    from trl_ext.rewards.math_fallback import resolve_fallback

    judge = tiny_judge() if args.tiny else resolve_fallback(args.judge, json.loads(args.judge_kwargs))
    results = run(judge)
    print(f"judge: {'tiny random CausalLMJudge (plumbing only)' if args.tiny else args.judge}\n")
    print(format_table(
        ["corpus", "asked", "judge recall on rejected right", "judge accepts wrong", "math recall / wrong",
         "with fallback recall / wrong"],
        [[name, r["asked"], "n/a" if r["judge_recall_on_rejected_right"] is None
          else f"{r['judge_recall_on_rejected_right']:.1%} of {r['rejected_right']}",
          f"{r['judge_accepts_wrong']} of {r['rejected_wrong']}",
          f"{r['math_recall']:.1%} / {r['math_wrong_accepted']}",
          f"{r['with_fallback_recall']:.1%} / {r['with_fallback_wrong_accepted']}"]
         for name, r in results.items() if isinstance(r, dict)],
    ))  # fmt: skip
    if results["seconds_per_judged_answer"] is not None:
        print(f"\n{results['seconds_per_judged_answer']:.3f} s per judged answer")
    summary = {
        "benchmark": "math_fallback_accuracy",
        "judge": "tiny random CausalLMJudge (plumbing only)" if args.tiny else args.judge,
        "judge_kwargs": json.loads(args.judge_kwargs),
        **results,
        "machine": machine_info(),
    }
    write_json(args.out, summary)
    return summary


if __name__ == "__main__":
    main()
