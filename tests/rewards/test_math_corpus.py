"""The `math` reward against test data written by others: Math-Verify's own equivalence cases, and
references in the answer formats of MATH, NuminaMath, GSM8K and DAPO-Math with right and wrong completions
(`tests/data/math_corpus/`, provenance in its README). `benchmarks/math_corpus.py` reports the same figures
side by side with plain math-verify and TRL's `accuracy_reward`."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import math_corpus

SUITE_TARGET = 0.98  # agreement with Math-Verify's cases that run with a reward's options and mark their answer


@pytest.fixture(autouse=True)
def quiet_math_verify():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_the_imported_suite_keeps_its_provenance():
    data = json.loads(math_corpus.MATH_VERIFY_CASES.read_text())
    assert data["source"] == "https://github.com/huggingface/Math-Verify" and len(data["commit"]) == 40
    assert "Apache-2.0" in data["licence"]
    assert len(data["cases"]) == 269 and {case["expected"] for case in data["cases"]} == {0, 1}
    readme = (math_corpus.CORPUS_DIR / "README.md").read_text()
    assert data["commit"] in readme and "Apache" in readme


def test_agreement_with_math_verify_suite_meets_the_target():
    cases = math_corpus.load_cases()
    result = math_corpus.suite_agreement(cases, math_corpus.math_reward_verdict)
    assert result["cases_marked"] >= 220  # the subset is most of the suite, not a hand-picked few
    assert result["agreement_marked"] >= SUITE_TARGET, result["disagreements"]
    assert result["agreement_all"] >= 0.88, result["disagreements"]


def test_answer_formats_no_wrong_answer_accepted_beyond_plain_math_verify():
    rows = math_corpus.load_answer_formats()
    assert len(rows) >= 250 and {row["source"] for row in rows} == {"MATH", "NuminaMath", "GSM8K", "DAPO-Math"}
    ours = [math_corpus.math_reward_verdict(row["reference"], row["completion"]) for row in rows]
    plain = [math_corpus.plain_math_verify_verdict(row["reference"], row["completion"]) for row in rows]
    scores = math_corpus.format_scores(rows, ours, plain)
    assert scores["wrong_accepted_beyond_plain_math_verify"] == []
    assert scores["false_positives"] == 0
    assert scores["recall"] >= 0.98, scores["right_rejected"]
