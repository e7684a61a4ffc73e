"""Pure helpers behind the verifiers: answer extraction, normalisation, number parsing, shaping penalties."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trl_ext.rewards import get_reward, soft_overlong_penalty
from trl_ext.rewards.answers import normalize_text, parse_number
from trl_ext.rewards.dapo import normalize_dapo_answer
from trl_ext.rewards.extraction import answer_line, auto_answer, gsm8k_answer, last_boxed, last_number
from trl_ext.rewards.math import extract_math_answer, normalize_math_answer
from trl_ext.rewards.shaping import repetition_penalty


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"first \boxed{1} then \boxed{\{2, 3\}}", r"\{2, 3\}"),
        (r"\fbox{7}", "7"),
        (r"\boxed 5$ done", "5"),
        (r"\boxed{3}\boxed{}", "3"),
        (r"\boxed{unclosed", None),
        ("no box", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_answer_markers():
    assert answer_line("Answer: 3\nmore\n**Answer:** 4.") == "4."
    assert answer_line("the answer is: x+1") == "x+1"
    assert answer_line("no marker") is None
    assert gsm8k_answer("work\n#### 1,234") == "1,234"
    assert last_number("from 3 to -1,234.5 and 7/8") == "7/8"
    assert last_number("none") is None
    # The marker that comes last wins; a box inside the answer line is the precise span.
    assert auto_answer(r"\boxed{1} ... Answer: 2") == "2"
    assert auto_answer(r"Answer: 2 ... \boxed{1}") == "1"
    assert auto_answer(r"Answer: $\boxed{12}$.") == "12"
    assert auto_answer("<answer> 9 </answer>") == "9"


@pytest.mark.parametrize(
    ("answer", "normalized"),
    [
        (r"\frac12", r"\frac{1}{2}"),
        (r"\dfrac 1 2", r"\frac{1}{2}"),
        (r"\tfrac{a}b", r"\frac{a}{b}"),
        (r"\frac\pi2", r"\frac{\pi}{2}"),
        (r"\sqrt2+\sqrt[3]8", r"\sqrt{2}+\sqrt[3]{8}"),
        (r"\frac{\sqrt3}{2}", r"\frac{\sqrt{3}}{2}"),
        (r"1\,000\,000", "1000000"),
        (r"\$5.", "5"),
        ("$x^2$", "x^2"),
        (r"\varnothing", r"\emptyset"),
        ("√2", r"\sqrt{2}"),
        ("π", r"\pi"),
    ],
)
def test_normalize_math_answer(answer, normalized):
    assert normalize_math_answer(answer) == normalized


def test_bare_answers_are_taken_whole_but_prose_is_not():
    assert extract_math_answer("  1/2 ") == "1/2"
    assert extract_math_answer("$x^2+\\frac{1}{2}$") == "$x^2+\\frac{1}{2}$"
    assert extract_math_answer("I think the result is 5") is None
    assert extract_math_answer("5\n6") is None


@pytest.mark.parametrize(
    ("answer", "normalized"),
    [
        ("34", "34"),
        ("$34$", "34"),
        ("x = 5", "5"),
        ("1,000", "1000"),
        (r"\text{(B)}", "(B)"),
        (r"\frac12", r"\frac{1}{2}"),
        (r"\sqrt3", r"\sqrt{3}"),
        ("34 degrees", "34"),
        (r"30^\circ", "30"),
        (r"\boxed{7}", "7"),
        ("5 \\text{ cm}", "5"),
    ],
)
def test_normalize_dapo_answer(answer, normalized):
    assert normalize_dapo_answer(answer) == normalized


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,234", Fraction(1234)),
        ("-0.5", Fraction(-1, 2)),
        ("1e-3", Fraction(1, 1000)),
        ("3/4", Fraction(3, 4)),
        (r"\frac{3}{4}", Fraction(3, 4)),
        (r"\$5", Fraction(5)),
        ("50%", Fraction(50)),
        ("−2", Fraction(-2)),
        ("1/0", None),
        ("twelve", None),
    ],
)
def test_parse_number(text, value):
    assert parse_number(text) == value


def test_normalize_text():
    assert normalize_text("  The Eiffel   Tower! ") == "eiffel tower"
    assert normalize_text(r"$\text{Paris}$") == "paris"
    assert normalize_text("The Cat", case_sensitive=True) == "The Cat"


def test_repetition_penalty_values():
    assert repetition_penalty("a b c d".split(), 2, -1.0) == 0.0
    assert repetition_penalty("a b a b a b".split(), 2, -1.0) == pytest.approx(-0.6)  # 2 distinct of 5
    assert repetition_penalty(["a"], 3, -1.0) == 0.0
    with pytest.raises(ValueError, match="max_penalty"):
        repetition_penalty([], 3, 0.5)


@given(st.lists(st.integers(0, 5), max_size=60), st.integers(1, 5), st.floats(-5, 0))
def test_repetition_penalty_is_bounded(units, ngram_size, max_penalty):
    penalty = repetition_penalty(units, ngram_size, max_penalty)
    assert max_penalty <= penalty <= 0.0
    if len(set(zip(*(units[i:] for i in range(ngram_size))))) == max(0, len(units) - ngram_size + 1):
        assert penalty == 0.0


def test_repetition_reward_on_words_and_tokens():
    words = get_reward("repetition", ngram_size=2)
    assert words(completions=["a b a b a b", "A B c d"]) == [pytest.approx(-0.6), 0.0]
    tokens = get_reward("repetition", ngram_size=2, unit="tokens", max_penalty=-0.5)
    assert tokens(completions=["x", "y"], completion_ids=[[1, 2, 1, 2, 1, 2], [1, 2, 3]]) == [pytest.approx(-0.3), 0.0]
    with pytest.raises(ValueError, match="unit"):
        get_reward("repetition", unit="chars")


def test_soft_overlong_is_the_trainer_function():
    reward = get_reward("soft_overlong", max_length=20, buffer_length=5)
    lengths = [0, 15, 16, 18, 20, 25]
    assert reward(completions=["x"] * 6, completion_ids=[[0] * n for n in lengths]) == [
        soft_overlong_penalty(n, 20, 5) for n in lengths
    ]
    assert reward(completions=["x"] * 3, completion_ids=[[0] * 15, [0] * 20, [0] * 21]) == [0.0, -1.0, -1.0]


def test_box_extraction_is_linear_on_adversarial_text():
    import time

    text = r"\boxed{ x" * 5000 + r"\boxed{7}"
    start = time.monotonic()
    assert last_boxed(text) == "7"
    assert time.monotonic() - start < 1.0  # a rescan per unclosed box would take minutes


def test_default_workers_share_the_node_between_distributed_processes(monkeypatch):
    import os

    from trl_ext.rewards.pool import default_num_workers

    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert default_num_workers() == cores
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cores * 2))
    assert default_num_workers() == 1
