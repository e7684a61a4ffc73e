"""`benchmarks/math_fallback_accuracy.py`: a judge's verdicts on what `math`'s rules reject, counted as the reward
asks them (each distinct rejected answer once), and the prose answers no rule judges."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from trl_ext.rewards.math import verify_math_answer
from trl_ext.rewards.math_fallback import CausalLMJudge

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import math_fallback_accuracy


@pytest.fixture(autouse=True)
def quiet_math_verify():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def boxed(answer: str) -> str:
    return rf"Working it out... so the answer is $\boxed{{{answer}}}$."


@pytest.fixture
def small_corpus(tmp_path) -> dict[str, Path]:
    references = [
        {
            "reference": "3",
            "right": [boxed("3"), boxed(r"\text{three}"), boxed(r"\text{three}")],
            "wrong": [boxed("4")],
        },
        {"reference": r"\frac{1}{2}", "right": [boxed("0.5")], "wrong": [boxed("0.6")]},
    ]
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"references": references}))
    return {"small": path}


class Recorder:
    def __init__(self, accepts):
        self.accepts, self.asked = accepts, []

    def __call__(self, question, reference, answer):
        self.asked.append((question, reference, answer))
        return self.accepts(answer)


def test_the_judge_is_asked_about_each_distinct_rejected_answer_once(small_corpus):
    judge = Recorder(lambda answer: answer == r"\text{three}")
    results = math_fallback_accuracy.run(judge, small_corpus)
    # Rejected: `three` (twice, asked once), 4 and 0.6; accepted by the rules: 3 and 0.5 (never asked).
    assert sorted(answer for _, _, answer in judge.asked) == ["0.6", "4", r"\text{three}"]
    small = results["small"]
    assert (small["asked"], small["rejected_right"], small["rejected_wrong"]) == (3, 2, 2)
    assert small["judge_recall_on_rejected_right"] == 1.0 and small["judge_accepts_wrong"] == 0
    assert small["math_recall"] == pytest.approx(2 / 4) and small["math_wrong_accepted"] == 0
    assert small["with_fallback_recall"] == 1.0 and small["with_fallback_wrong_accepted"] == 0
    assert results["all"]["asked"] == 3 and results["seconds_per_judged_answer"] >= 0


def test_a_judge_that_says_yes_to_everything_accepts_every_wrong_answer(small_corpus):
    results = math_fallback_accuracy.run(Recorder(lambda answer: True), small_corpus)["small"]
    assert results["judge_accepts_wrong"] == 2 and results["with_fallback_wrong_accepted"] == 2


def test_the_prose_answers_are_left_to_the_judge():
    rows = math_fallback_accuracy.load_rows(math_fallback_accuracy.CORPORA["prose answers"])
    assert len(rows) >= 40 and sum(row["right"] for row in rows) >= 20
    verdicts = [verify_math_answer(row["reference"], row["completion"], question=row["question"]) for row in rows]
    # No rule accepts a wrong prose answer; most right ones are rejected, which is what the fallback is for.
    assert not any(verdict is True for row, verdict in zip(rows, verdicts) if not row["right"])
    assert sum(verdict is True for row, verdict in zip(rows, verdicts) if row["right"]) <= 5


@pytest.mark.slow
def test_the_benchmark_runs_the_shipped_judge_on_the_tiny_model(tiny_model_dir, one_torch_thread):
    judge = CausalLMJudge(tiny_model_dir, device="cpu", batch_size=8)
    corpus = {"prose answers": math_fallback_accuracy.CORPORA["prose answers"]}
    results = math_fallback_accuracy.run(judge, corpus)
    prose = results["prose answers"]
    assert prose["asked"] >= 30 and prose["rejected_right"] + prose["rejected_wrong"] >= prose["asked"]
    assert results["seconds_per_judged_answer"] > 0
