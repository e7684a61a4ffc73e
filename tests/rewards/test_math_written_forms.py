"""`math` on right answers written in words, with labels or as families, and on their near-miss twins.

One test a rule of `trl_ext/rewards/math/labels.py`, `sets.py`, the family members in `structures.py` and the
percentages in `forms.py`: the right forms accepted and the twins one step from right rejected (a value swapped
between labels, a flipped endpoint, "and" for "or", a missing family member or sign, a percentage one rounding
step off, a choice too many). The corpus targets are in `test_math_answer_forms.py`.
"""

from __future__ import annotations

from test_math_answer_forms import check, quiet_math_verify  # noqa: F401  (an autouse fixture)

from trl_ext.rewards.math.compare import Same
from trl_ext.rewards.math.labels import choice_numbers, labelled_items
from trl_ext.rewards.math.sets import real_set, set_in_words

# ---------------------------------------------------------------------------------------------- labels on a list


def test_letters_on_a_bare_list_keep_the_lists_order():
    check(r"8, -1, 3", [r"u = 8, v = -1, w = 3", r"u=8;\ v=-1;\ w=3"], [r"u = 8, v = 3, w = -1", r"u = 8, v = -1"])
    # Fractions and roots in the list: TeX commands are no words.
    check(r"\frac{1}{2}, \sqrt{3}", [r"u = \frac{1}{2}, v = \sqrt{3}"], [r"u = \sqrt{3}, v = \frac{1}{2}"])
    # A labelled reference gives the order itself; a bare answer must follow it.
    check(r"m = 5, n = -2", [r"5, -2", r"(5, -2)"], [r"-2, 5", r"5, 2"])


def test_named_quantities_take_the_order_of_the_question():
    question = "The tank holds 40 litres more than the barrel. How much do the barrel and the tank hold?"
    check(r"20, 60", [r"\text{barrel: } 20, \text{ tank: } 60", r"\text{tank} = 60,\ \text{barrel} = 20"],
          [r"\text{barrel: } 60, \text{ tank: } 20", r"\text{tank} = 20,\ \text{barrel} = 60",
           r"\text{barrel: } 20, \text{ tank: } 50"], question=question)  # fmt: skip
    question = r"Find the least and the greatest value of $g$ on $[1, 4]$."
    check(r"-3, 5", [r"g_{\min} = -3, g_{\max} = 5", r"\max = 5, \min = -3"], [r"g_{\min} = 5, g_{\max} = -3"],
          question=question)  # fmt: skip


def test_named_quantities_without_a_question_or_its_names_are_rejected():
    # math-verify alone compares both as sets and accepts the swap.
    check(r"20, 60", [], [r"\text{tank: } 20, \text{ barrel: } 60", r"\text{barrel: } 20, \text{ tank: } 60"])
    check(r"20, 60", [], [r"\text{tank: } 20, \text{ barrel: } 60"], question="Find both amounts.")


def test_values_of_one_unknown_are_a_set():
    check(r"2, 3", [r"x_1 = 3, x_2 = 2", r"x = 2, x = 3"], [r"x_1 = 3, x_2 = 4"])


def test_labelled_items_reads_each_layout():
    assert labelled_items(r"p = 12, q = 5") == [("p", "12"), ("q", "5")]
    assert labelled_items(r"\text{width: } 6 \text{ and length: } 10") == [("width", "6"), ("length", "10")]
    assert labelled_items(r"a = 4 \text{ and } b = -7") == [("a", "4"), ("b", "-7")]
    assert labelled_items(r"x > 1, y = 2") is None and labelled_items(r"12, 5") is None


# ---------------------------------------------------------------------------------------------- sets in words


def test_relations_joined_by_or_are_the_union():
    check(r"(-2, 0] \cup [3, 6)", [r"-2 < s \le 0 \text{ or } 3 \le s < 6", r"s \in (-2, 0] \cup [3, 6)"],
          [r"-2 \le s \le 0 \text{ or } 3 \le s < 6", r"-2 < s \le 0 \text{ and } 3 \le s < 6",
           r"-2 < s \le 0 \text{ or } 3 < s < 6"])  # fmt: skip
    check(r"(-\infty, 1] \cup \{4\}", [r"c \leqslant 1 \text{ or } c = 4"], [r"c < 1 \text{ or } c = 4", r"c \le 1"])
    # Written in words on the reference's side too.
    check(r"y < 0 \text{ or } y > 2", [r"(-\infty, 0) \cup (2, +\infty)", r"y > 2 \text{ or } y < 0"],
          [r"(-\infty, 0] \cup (2, \infty)", r"(0, 2)"])  # fmt: skip


def test_relations_joined_by_and_are_the_intersection_and_values_a_list():
    check(r"[1, 6)", [r"r \ge 1 \text{ and } r < 6"], [r"r \ge 1 \text{ or } r < 6", r"r > 1 \text{ and } r < 6"])
    # "and" between values lists them: no number is both 2 and 5.
    check(r"\{2, 5\}", [r"z = 2 \text{ and } z = 5", r"z = 5 \text{ or } z = 2"], [r"z = 2 \text{ and } z = 4"])


def test_a_single_relation_for_an_interval_in_parentheses():
    # `(-1, 5)` may be a point: a chain is not read against it, else a policy would answer every point `(a, b)` with
    # `a < x < b`. A set written as such (`\{w \mid -1 < w < 5\}`) is; so is a pair with an infinite end.
    check(r"(-1, 5)", [r"\{w \mid -1 < w < 5\}"], [r"-1 < w < 5", r"-1 \le w < 5", r"w > -1 \text{ and } w < 5"])
    check(r"(0, \infty)", [r"q > 0"], [r"q \ge 0", r"q < 0"])


def test_set_readers():
    same = Same(None, None)
    union, joined = set_in_words(r"1 < t \le 3 \text{ or } t = 5", same)
    assert joined and str(union) == "Union({5}, Interval.Lopen(1, 3))"
    assert set_in_words(r"x = 1 \text{ or } y = 2", same) is None  # two letters: no set of one
    assert str(real_set(r"(1, 2)", same, interval_context=True)) == "Interval.open(1, 2)"
    assert real_set(r"x < 1", same) is None


# ---------------------------------------------------------------------------------------------- integer families


def test_an_integer_family_with_plus_minus_or_in_members():
    reference = r"x = \pm\frac{\pi}{6} + 2k\pi, k \in \mathbb{Z}"
    check(reference, [r"x = 2m\pi \pm \frac{\pi}{6}, m \in \mathbb{Z}",
                      r"x = \frac{\pi}{6} + 2m\pi \text{ or } x = -\frac{\pi}{6} + 2m\pi, m \in \mathbb{Z}"],
          [r"x = \frac{\pi}{6} + 2m\pi, m \in \mathbb{Z}", r"x = m\pi \pm \frac{\pi}{6}, m \in \mathbb{Z}",
           r"x = 2m\pi \pm \frac{\pi}{3}, m \in \mathbb{Z}"])  # fmt: skip


def test_a_congruence_is_the_family_it_names():
    check(r"n = 5k + 2, k \in \mathbb{Z}", [r"n \equiv 2 \pmod{5}", r"n \equiv -3 \pmod 5"],
          [r"n \equiv 3 \pmod{5}", r"n \equiv 2 \pmod{10}"])  # fmt: skip


# ---------------------------------------------------------------------------------------------- equations


def test_an_equation_that_defines_the_expression():
    check(r"\frac{12}{u}", [r"uv = 12", r"v = \frac{12}{u}"], [r"uv = 6", r"u + v = 12", r"v = \frac{u}{12}"])
    check(r"x^2 - 4x + 1", [r"y + 3 = (x - 2)^2", r"y = (x-2)^2 - 3"], [r"y - 3 = (x - 2)^2", r"y + 3 = (x + 2)^2"])
    # Of degree two in the letter it defines: not solved, not accepted.
    check(r"\sqrt{x}", [], [r"y^2 = x"])


def test_a_name_on_the_left():
    check(r"3n - 1", [r"T_{\max} = 3n - 1", r"b_n = -1 + 3n"], [r"T_{\max} = 3n + 1", r"b_n = 3n"])
    check(r"b_n = 2^{n} + 1", [r"2^n + 1"], [r"2^n - 1"])
    # A name on the left of the reference too, with another name on the answer's.
    check(r"S_{\min} = 4k", [r"4k"], [r"4k + 1"])


def test_two_equations_equal_up_to_a_factor():
    check(r"y = 2x + 7", [r"2x - y + 7 = 0", r"y - 9 = 2(x - 1)"], [r"2x + y + 7 = 0", r"y - 9 = 2(x + 1)"])


# ---------------------------------------------------------------------------------------------- plus-minus


def test_plus_minus_pairs_and_values_written_out():
    check(r"(3, 1), (3, -1), (-3, 1), (-3, -1)", [r"(\pm 3, \pm 1)"], [r"(\pm 3, 1)", r"(\pm 1, \pm 3)"])
    check(
        r"(\pm 3, \pm 1)", [r"(-3, -1), (3, 1), (-3, 1), (3, -1)"], [r"(3, 1), (-3, -1)", r"(3, 1), (3, -1), (-3, 1)"]
    )
    check(r"x = 1 \pm \sqrt{2}", [r"1 - \sqrt{2}, 1 + \sqrt{2}", r"x_{1,2} = 1 \pm \sqrt{2}"],
          [r"1 + \sqrt{2}", r"x = -1 \pm \sqrt{2}"])  # fmt: skip
    check(
        r"(5, 2), (2, 5), (-5, -2), (-2, -5)",
        [r"\pm(5, 2), \pm(2, 5)"],
        [r"\pm(5, 2)", r"(\pm 5, \pm 2), (\pm 2, \pm 5)"],
    )


# ---------------------------------------------------------------------------------------------- percentages


def test_a_percentage_for_a_fraction_and_the_reverse():
    check(r"\frac{2}{7}", [r"28.57\%", r"\approx 28.57\%", r"28.5714\%"], [r"28.58\%", r"28.6\%", r"2.857\%"])
    check(r"83.33\%", [r"\frac{5}{6}", r"0.8333"], [r"0.8334", r"0.83", r"83.33"])
    question = "What percentage of the votes did she get, to the nearest tenth of a percent?"
    check(r"\frac{5}{12}", [r"41.7\%"], [r"41.6\%", r"42\%", r"41.67\%"], question=question)


# ---------------------------------------------------------------------------------------------- choices


def test_circled_and_enumerated_choices():
    check(r"2, 5", [r"②⑤", r"⑤, ②", r"(2)(5)", r"\text{②⑤}"], [r"②", r"②③⑤", r"(2)(3)"])
    check(r"①③", [r"1, 3", r"\text{(1) and (3)}"], [r"1, 2", r"13"])
    assert choice_numbers(r"①④") == (frozenset({1, 4}), True) and choice_numbers(r"1, 4") == (frozenset({1, 4}), False)
    assert choice_numbers(r"x = 1") is None


def test_several_letters_when_the_question_lists_options():
    question = "Which are prime? (A) 2 (B) 4 (C) 5 (D) 9"
    check(r"AC", [r"A, C", r"(A)(C)", r"\text{A and C}"], [r"A", r"ABC", r"A, D"], question=question)
    # Without listed options `AC` may be a segment: no letters are read.
    check(r"AC", [], [r"A, C"])
