"""`math` compares a list of labelled values and a statement in full, not by their first number.

math-verify reads `12 \\text{ red}, 9 \\text{ blue}, 1 \\text{ green}` as `12` and `\\forall n > 1, 2^n > n^2` as
`2`, so any answer that starts the same way was accepted. Each test lists right forms that must be accepted and
near-miss wrong twins that must be rejected.
"""

from __future__ import annotations

import logging

import pytest

from trl_ext.rewards import get_reward
from trl_ext.rewards.math import verify_math_answer
from trl_ext.rewards.math.structures import labelled_values, statement


@pytest.fixture(autouse=True)
def quiet_math_verify():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def verdict(reference: str, answer: str) -> bool | None:
    return verify_math_answer(reference, rf"So the answer is $\boxed{{{answer}}}$.")


def check(reference: str, right: list[str], wrong: list[str]) -> None:
    accepted = {answer: verdict(reference, answer) for answer in right + wrong}
    assert [answer for answer in right if accepted[answer] is not True] == [], "right forms rejected"
    assert [answer for answer in wrong if accepted[answer] is True] == [], "wrong twins accepted"


# ---------------------------------------------------------------------------------------------- labelled values

COLOURS = r"12 \text{ red}, 9 \text{ blue}, 1 \text{ green}"


def test_every_labelled_value_is_compared():
    right = [
        COLOURS,
        r"12\text{ red}, 9\text{ blue}, 1\text{ green}",
        r"12 \text{red}, 9 \text{blue}, 1 \text{green}",
        r"\text{12 red}, \text{9 blue}, \text{1 green}",
        r"12 red, 9 blue, 1 green",
        r"12 \text{ red}, 9 \text{ blue}, \text{and } 1 \text{ green}",
    ]
    wrong = [
        r"12 \text{ red}, 7 \text{ blue}, 3 \text{ green}",  # only the first value is right
        r"12 \text{ red}, 9 \text{ blue}, 2 \text{ green}",
        r"13 \text{ red}, 9 \text{ blue}, 1 \text{ green}",
        r"12 \text{ red}, 1 \text{ blue}, 9 \text{ green}",
    ]
    check(COLOURS, right, wrong)


def test_labels_may_come_in_another_order_only_with_their_values():
    right = [r"9 \text{ blue}, 12 \text{ red}, 1 \text{ green}", r"1 \text{ green}, 9 \text{ blue}, 12 \text{ red}"]
    wrong = [r"9 \text{ red}, 12 \text{ blue}, 1 \text{ green}", r"12 \text{ blue}, 9 \text{ red}, 1 \text{ green}"]
    check(COLOURS, right, wrong)


def test_a_missing_or_extra_labelled_value_is_wrong():
    wrong = [
        r"12 \text{ red}, 9 \text{ blue}",
        r"12 \text{ red}",
        r"12",
        r"12 \text{ red}, 9 \text{ blue}, 1 \text{ green}, 4 \text{ white}",
        r"12 \text{ red}, 9, 1 \text{ green}",
        r"12, 9, 1",
    ]
    check(COLOURS, [], wrong)
    check(r"12", [r"12 \text{ red}"], [r"12 \text{ red}, 9 \text{ blue}"])
    check(r"12 \text{ red}", [r"12"], [r"12 \text{ red}, 9 \text{ blue}"])


def test_values_without_labels_answer_a_labelled_list_only_by_another_form():
    # math-verify reads the labelled list as `12`, and `12, 12` as the set {12}: equal, but wrong.
    check(r"12 \text{ red}, 9 \text{ blue}", [], [r"12, 12", r"12, 9"])
    degrees = r"30 \text{ degrees}, 150 \text{ degrees}"
    check(degrees, [r"\frac{\pi}{6}, \frac{5\pi}{6}"], [r"\frac{\pi}{6}, \frac{2\pi}{3}"])


def test_labels_before_their_values_and_lists_joined_by_and():
    check(
        r"\text{red: } 12, \text{blue: } 9",
        [r"\text{blue: } 9, \text{red: } 12", r"12 \text{ red}, 9 \text{ blue}"],
        [r"\text{red: } 12, \text{blue: } 7", r"\text{red: } 9, \text{blue: } 12"],
    )
    check(
        r"1 \text{ hour and } 30 \text{ minutes}",
        [r"1 \text{ hour}, 30 \text{ minutes}"],
        [r"1 \text{ hour and } 45 \text{ minutes}", r"1 \text{ hour}"],
    )


def test_a_list_of_quantities_in_one_unit_compares_every_quantity():
    check(
        r"12 \text{ cm}, 9 \text{ cm}",
        [r"9 \text{ cm}, 12 \text{ cm}", r"12 \text{ centimeters}, 9 \text{ centimeters}"],
        [r"12 \text{ cm}, 7 \text{ cm}", r"12 \text{ cm}", r"12 \text{ cm}, 9 \text{ m}"],
    )


def test_single_values_and_letter_labels_are_unchanged():
    check(r"12 \text{ cm}", [r"12", r"12\,\text{cm}"], [r"13"])
    check(r"3, -1", [r"m = 3, n = -1", r"(m, n) = (3, -1)"], [r"m = 3, n = 1"])
    check(r"x = 12, y = 9", [r"y = 9, x = 12"], [r"x = 9, y = 12", r"x = 12, y = 7"])
    check(r"\frac{1}{2} \text{ and } \frac{3}{4}", [r"\frac{3}{4}, \frac{1}{2}"], [r"\frac{1}{2}, \frac{1}{4}"])


def test_labelled_values_reads_labels_and_values():
    assert labelled_values(COLOURS) == [("red", "12"), ("blue", "9"), ("green", "1")]
    assert labelled_values(r"\text{red: } 12, \text{and blue: } 9") == [("red", "12"), ("blue", "9")]
    assert labelled_values(r"12 \text{ red marbles}, 9") == [("red marble", "12"), (None, "9")]
    assert labelled_values(r"12 \text{ cm}, 9 \text{ centimetres}") == [("cm", "12"), ("cm", "9")]
    # Not a labelled value: no value, a relation, or words between values.
    assert labelled_values(r"\text{parabola}, \text{line}") is None
    assert labelled_values(r"\text{for all } n > 1, 2^n > n^2") is None
    assert labelled_values(r"1, 2") == [(None, "1"), (None, "2")]


# ---------------------------------------------------------------------------------------------- statements

FOR_ALL = r"\forall n > 1, 2^n > n^2"


def test_a_statement_is_compared_in_full():
    right = [
        FOR_ALL,
        r"\forall n>1, 2^{n} > n^{2}",
        r"\text{for all } n > 1, 2^n > n^2",
        r"for all n > 1, 2^n > n^2",
        r"\text{For every } n > 1,\ 2^n > n^2",
        r"2^n > n^2 \text{ for all } n > 1",
        r"2^n > n^2, \forall n > 1",
        r"\forall n > 1: 2^n > n^2",
        r"\forall n > 1 \quad 2^n > n^2",
    ]
    wrong = [
        r"\forall n > 1, 2^n > n",  # the right side
        r"\forall n > 1, 3^n > n^2",  # the left side
        r"\forall n > 1, 2^n < n^2",  # the relation
        r"\forall n > 1, 2^n \ge n^2",
        r"\forall n > 2, 2^n > n^2",  # the condition
        r"\forall n \ge 1, 2^n > n^2",
        r"\forall n > 1, 2^n > n^2, n < 5",
        r"\exists n > 1, 2^n > n^2",  # the quantifier
        r"2^n > n^2",  # no condition
        r"2",  # math-verify's reading of the statement
    ]
    for reference in (FOR_ALL, r"\text{for all } n > 1, 2^n > n^2", r"for all n > 1, 2^n > n^2"):
        check(reference, right, wrong)


def test_a_side_may_be_rewritten_as_math_verify_proves_it():
    check(
        FOR_ALL,
        [r"\forall n > 1, 2^n > n \cdot n", r"\forall n > 1, n^2 < 2^n", r"\forall n > 1, 2^{n} > n^{2}"],
        [r"\forall n > 1, 2^n > 2n", r"\forall n > 1, n^2 > 2^n"],
    )
    wrong = [
        r"\forall x \in \mathbb{R}, x^3 \ge 0",
        r"\forall x \in \mathbb{R}, x^2 \le 0",
        r"\forall x \in \mathbb{R}, x^2 \ge 1",
        r"\forall x \in \mathbb{Q}, x^2 \ge 0",
    ]
    check(r"\forall x \in \mathbb{R}, x^2 \ge 0", [r"\forall x \in \mathbb{R}, x \cdot x \geq 0"], wrong)
    check(r"\forall x, f(x) = x^2", [r"\forall x, x^2 = f(x)"], [r"\forall x, x^3 = f(x)", r"\forall x, f(x) = 2x"])


def test_conditions_after_the_claim_and_implications():
    check(
        r"n! > 2^n \text{ for all } n \ge 4",
        [r"\forall n \geq 4, n! > 2^n", r"n! > 2^{n} \text{ for } n \ge 4", r"\text{for } n \ge 4, n! > 2^n"],
        [r"n! > 2^n \text{ for all } n \ge 5", r"n! > 3^n \text{ for all } n \ge 4", r"n! < 2^n \text{ for } n \ge 4"],
    )
    implication = r"\forall n \in \mathbb{N}, n > 4 \Rightarrow 2^n > n^2"
    wrong = [
        r"\forall n > 1, 2^n > n",
        r"\forall n \in \mathbb{N}, n > 3 \Rightarrow 2^n > n^2",
        r"\forall n \in \mathbb{N}, n > 4 \Rightarrow 2^n > n",
    ]
    check(implication, [r"\forall n \in \mathbb{N}, n > 4 \implies 2^n > n^2"], wrong)
    if_then = r"\text{if } n > 4, \text{ then } 2^n > n^2"
    check(if_then, [r"\text{if } n > 4, 2^n > n^2"], [r"\text{if } n > 4, 2^n > n", r"\text{if } n > 3, 2^n > n^2"])


def test_an_existence_statement():
    check(
        r"\exists x \in \mathbb{R}, x^2 = 2",
        [r"\text{there exists } x \in \mathbb{R} \text{ such that } x^2 = 2"],
        [r"\exists x \in \mathbb{R}, x^2 = 3", r"\forall x \in \mathbb{R}, x^2 = 2", r"x^2 = 2"],
    )


def test_statement_reads_quantifier_conditions_and_claim():
    assert statement(FOR_ALL) == ("forall", ("n > 1",), "2^n > n^2")
    assert statement(r"2^n > n^2 \text{ for all } n \geq 5") == ("forall", (r"n \geq 5",), "2^n > n^2")
    assert statement(r"\exists x \in \mathbb{R}, x^2 = 2") == ("exists", (r"x \in \mathbb{R}",), "x^2 = 2")
    assert statement(r"\forall n, n > 4 \Rightarrow 2^n > n^2") == ("forall", ("n", "n > 4"), "2^n > n^2")
    # An equation or inequality alone is left to math-verify (`x = 3` answers `3`), and so is prose.
    assert statement(r"2^n > n^2") is None and statement(r"x = 3") is None
    assert statement(r"\text{for all real numbers}") is None


# ---------------------------------------------------------------------------------------------- the reward


def test_the_reward_scores_the_wrong_values_and_the_changed_statement_as_wrong():
    reward = get_reward("math", num_workers=1, asynchronous=False)
    wrong_values, changed_claim = r"12 \text{ red}, 7 \text{ blue}, 3 \text{ green}", r"\forall n > 1, 2^n > n"
    answers = [wrong_values, COLOURS, changed_claim, r"\forall n>1, 2^{n} > n^{2}"]
    completions = [rf"So $\boxed{{{answer}}}$." for answer in answers]
    solution = [COLOURS, COLOURS, FOR_ALL, FOR_ALL]
    try:
        assert reward(completions=completions, solution=solution) == [0.0, 1.0, 0.0, 1.0]
    finally:
        reward.pool().close()
