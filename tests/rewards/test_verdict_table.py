"""Gold / prediction table: the verdict of every verifier on tricky equivalences and near misses.

`True`: scored correct (above 0); `False`: scored wrong (at most 0); `None`: cannot judge.
"""

from __future__ import annotations

import json

import pytest

from trl_ext.rewards import call_reward, get_reward
from trl_ext.rewards.math import verify_math_answer

# (reference, completion, verdict) for `math`.
MATH_TABLE = [
    # fractions, decimals, shorthand TeX
    (r"\frac{1}{2}", r"So the answer is \boxed{0.5}.", True),
    ("0.5", r"\boxed{\frac12}", True),
    (r"\frac{1}{2}", r"\boxed{\frac 12}", True),
    (r"\dfrac{3}{4}", r"\boxed{\tfrac34}", True),
    (r"-\frac{1}{2}", r"\boxed{-0.5}", True),
    (r"\frac{\sqrt{3}}{3}", r"\boxed{\frac{1}{\sqrt{3}}}", True),
    (r"2\sqrt{3}", r"\boxed{\sqrt{12}}", True),
    (r"\frac{1}{3}", r"\boxed{0.33}", False),
    (r"\sqrt{2}", r"\boxed{1.41}", False),
    (r"\pi", r"\boxed{3.14}", False),
    # sets and tuples
    (r"\{1,2\}", r"\boxed{\{2,1\}}", True),
    (r"\{1,2\}", r"\boxed{\left\{ 1, 2 \right\}}", True),
    (r"\{-2,2\}", r"\boxed{x=\pm 2}", True),
    ("2, 3", r"\boxed{2} and \boxed{3}", True),
    (r"\{1,2\}", r"\boxed{\{1,2,3\}}", False),
    ("(1,2)", r"\boxed{(2,1)}", False),
    # expressions
    ("x(x+2)", r"\boxed{x^2+2x}", True),
    ("x^2+2x", r"\boxed{x(x+2)}", True),
    ("x^2 - 4", r"\boxed{(x-2)(x+2)}", True),
    ("x^2+2x", r"\boxed{x^2+2x+1}", False),
    # intervals and inequalities
    ("(0,1]", r"\boxed{\left( 0, 1 \right]}", True),
    (r"(-\infty, 3)", r"\boxed{(-\infty,3)}", True),
    (r"[2,\infty)", r"\boxed{x \geq 2}", True),
    (r"1 \le x \le 3", r"\boxed{[1,3]}", True),
    ("(0,1]", r"\boxed{[0,1]}", False),
    ("[1,3]", r"\boxed{[1,3)}", False),
    (r"-\infty", r"\boxed{\infty}", False),
    # units, percent, degrees, money, digit groups
    ("5", r"\boxed{5\text{ cm}}", True),
    ("18", r"\boxed{18 \text{ cm}^2}", True),
    (r"50\%", r"\boxed{0.5}", True),
    ("50", r"\boxed{50\%}", True),
    (r"30^\circ", r"\boxed{30}", True),
    (r"\$10.50", r"\boxed{10.5}", True),
    ("1000", r"\boxed{1\,000}", True),
    ("100000", r"\boxed{100,000}", True),
    ("1500", r"\boxed{1.5 \times 10^{3}}", True),
    ("5", r"\boxed{50}", False),
    ("5", r"\boxed{-5}", False),
    # where the answer is
    ("6", r"\boxed{6.}", True),
    (r"\emptyset", r"\boxed{\varnothing}", True),
    ("5", r"\fbox{5}", True),
    ("3", r"\boxed{3}\boxed{}", True),
    ("5", r"\boxed{x=5}", True),
    ("1/2", "1/2", True),
    ("7", "So the final answer is $7$.", True),
    ("3", "Work...\nAnswer: 3", True),
    ("12", r"Answer: $\boxed{12}$.", True),
    (r"\frac{\pi}{2}", "Answer: π/2", True),
    (r"\sqrt{2}", "Answer: √2", True),
    ("2", r"2 is tempting but \boxed{3}", False),
    ("2", r"\boxed{1} \boxed{2} \boxed{3}", False),
    ("5", "I think the result is 5", False),
    ("5", "", False),
    (r"\text{Monday}", r"\boxed{\text{Tuesday}}", False),
    # integers (compared without the LaTeX parser)
    ("-12", "Answer: -12", True),
    ("7", r"\boxed{07}", True),
    ("100", "Answer: 99", False),
    # references that are worked solutions
    (r"We add them, so the total is $\boxed{42}$.", r"\boxed{42}", True),
    ("48/2 = <<48/2=24>>24 clips in May.\n#### 72", r"\boxed{72}", True),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", True),
    # MATH's thousands separator `,\!`
    (r"10,\!000", r"\boxed{10000}", True),
    (r"10,\!000", r"\boxed{10,000}", True),
    (r"10,\!000", r"\boxed{1000}", False),
    (r"\boxed{11,\! 111,\! 111,\! 100}", r"\boxed{11111111100}", True),
    (r"11,\! 111,\! 111,\! 100", r"\boxed{11111111000}", False),
    ("1000", r"\boxed{1 000}", True),
    # vectors and matrices with spaced row breaks
    (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", True),
    (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\boxed{\begin{pmatrix}2\\1\end{pmatrix}}", False),
    (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\boxed{12}", False),
    (r"\begin{pmatrix} 2 & 0 \\ 0 & 3 \end{pmatrix}", r"\boxed{\begin{bmatrix}2&0\\0&3\end{bmatrix}}", True),
    (r"\begin{pmatrix} 2 & 0 \\ 0 & 3 \end{pmatrix}", r"\boxed{\begin{pmatrix}3&0\\0&2\end{pmatrix}}", False),
    # references with several boxes: every box of the last run is part of the answer
    (r"\(\boxed{1}\) and \(\boxed{-2}\)", r"\boxed{-2, 1}", True),
    (r"\(\boxed{1}\) and \(\boxed{-2}\)", r"$\boxed{1}$ or $\boxed{-2}$", True),
    (r"\(\boxed{1}\) and \(\boxed{-2}\)", r"\boxed{-2}", False),
    (r"\(\boxed{1}\) and \(\boxed{-2}\)", r"\boxed{1}", False),
    ("$1$ and $2$ and $3$", r"\boxed{1,2,3}", True),
    # sympy cannot evaluate them (division by zero), but the text is the same: math-verify's string comparison
    ("12:00", r"\boxed{12:00}", True),
    (r"10:00 \text{ a.m.}", r"\boxed{10:00 \text{ a.m.}}", True),
    ("12:00", r"\boxed{1:00}", False),
    ("12:00", r"\boxed{12}", False),
    # math-verify's default normalisation: malformed operators, leading decimal point
    ("1024", r"\boxed{2^(10)}", True),
    ("2", r"\boxed{2^(10)}", False),
    (r"10^{-10}", r"\boxed{10^(-10)}", True),
    (r"10^{-10}", r"\boxed{10^(10)}", False),
    ("0.4", r"\boxed{.4}", True),
    # TeX shorthand with command or letter arguments, which math-verify misreads on its own
    (r"\frac{\pi}{2}", r"\boxed{\frac\pi2}", True),
    (r"\sqrt[3]{8}", r"\boxed{\sqrt[3]8}", True),
    # an "answer:" phrase after the last box is prose, not a new answer
    ("5", r"\boxed{5}. Let me double check the answer: substituting back works.", True),
    ("6", r"\boxed{5}. Let me double check the answer: substituting back works.", False),
    ("34", r"\boxed{12} ... Answer: 34", True),
    ("10455", r"So $\boxed{255}$ in interest. Final Answer: The final answer is $10,455$. I hope it is correct.", True),
    ("255", r"So $\boxed{255}$ in interest. Final Answer: The final answer is $10,455$. I hope it is correct.", False),
    # "the answer is $x$" without a box; a later box still wins
    ("42", "Adding them up, the final answer is $42$. I hope it is correct.", True),
    ("43", "Adding them up, the final answer is $42$. I hope it is correct.", False),
    ("3", r"The answer is $3$, or so I thought. \boxed{4}", False),
    # an answer that is only math, or carries a unit or percent word
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"$$\begin{pmatrix}1&2\\3&4\end{pmatrix}$$", True),
    (r"28\%", "28 percent", True),
    ("1/3", r"$\frac{1}{3} \text{meters}$", True),
    (r"\text{Even}", "$Even$", True),
    (r"\text{Even}", "$Odd$", False),
    # an inequality for a reference that can only be an interval; `(1, 2)` may be a point, so not for it
    (r"(3, \infty)", r"\boxed{x > 3}", True),
    (r"(3, \infty)", r"\boxed{x \geq 3}", False),
    ("(1,2)", r"\boxed{1 < x < 2}", False),
    # unusable references: cannot judge
    ("", r"\boxed{5}", None),
    (r"\$", r"\boxed{5}", None),
]

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}

TAGS = ["reasoning", "answer"]

# (reward, kwargs, completion, reference, verdict) for the other verifiers.
OTHER_TABLE = [
    ("dapo_answer", {}, "Reasoning...\nAnswer: 34", "34", True),
    ("dapo_answer", {}, "Answer: $34$", "34", True),
    ("dapo_answer", {}, "Answer: 1,000", "1000", True),
    ("dapo_answer", {}, "Answer: x = 5", "5", True),
    ("dapo_answer", {}, "Answer: 34 degrees", "34", True),
    ("dapo_answer", {}, "Answer: 0.5", r"\frac{1}{2}", False),  # string match only, as the reference does
    ("dapo_answer", {}, r"\boxed{34}", "34", False),
    ("dapo_answer", {}, "Answer: 35", "34", False),
    ("dapo_answer", {}, "Answer: 34\n" + "and more words " * 30, "34", False),  # outside the last 300 chars
    ("dapo_answer", {}, "Answer: 34", None, None),
    ("boxed", {}, r"so \boxed{\dfrac{1}{2}}", r"\frac{1}{2}", True),
    ("boxed", {}, r"\boxed{ 12 }", "12", True),
    ("boxed", {}, r"\boxed{12.0}", "12", True),
    ("boxed", {}, r"\boxed{\left(1, 2\right)}", r"The point is $\boxed{(1,2)}$", True),
    ("boxed", {}, "12", "12", False),
    ("boxed", {}, r"\boxed{13}", "12", False),
    ("gsm8k", {}, "She has 48 + 24 = 72 clips.\n#### 72", "48/2 = <<48/2=24>>24\n#### 72", True),
    ("gsm8k", {}, "The total is $1,234.", "#### 1234", True),
    ("gsm8k", {}, "#### 72.0", "72", True),
    ("gsm8k", {}, "#### 71", "#### 72", False),
    ("gsm8k", {}, "I get 72, minus 2 is 70", "#### 72", False),
    ("gsm8k", {"strict": True}, "The answer is 72", "#### 72", False),
    ("gsm8k", {}, "#### 72", "no number here", None),
    ("multiple_choice", {}, "The answer is (B).", "B", True),
    ("multiple_choice", {}, "Answer: C", 2, True),
    ("multiple_choice", {}, r"\boxed{\text{D}}", "(D)", True),
    ("multiple_choice", {}, "Answer: A or C", "A", False),
    ("multiple_choice", {}, "Answer: B", "C", False),
    ("multiple_choice", {}, "Answer: B", "Paris", None),
    ("exact_match", {}, "<answer>The Eiffel Tower</answer>", "eiffel tower", True),
    ("exact_match", {}, "Answer: Paris.", ["Paris, France", "paris"], True),
    ("exact_match", {}, "Answer: Lyon", "Paris", False),
    ("exact_match", {"normalize": False, "extract": "none"}, "paris", "Paris", False),
    ("numeric", {"rel_tol": 1e-5}, "Answer: 3.14159", "3.14159265", True),
    ("numeric", {}, "The mass is 2.5e3 kg", "2500", True),
    ("numeric", {"rel_tol": 1e-5}, "Answer: 1/3", 0.333333, True),
    ("numeric", {}, r"Answer: \frac{3}{4}", "0.75", True),
    ("numeric", {}, "Answer: 3.2", "3.14159", False),
    ("numeric", {}, "Answer: 0.1", "0.10001", False),
    ("numeric", {}, "Answer: 12", "twelve", None),
    ("think_format", {}, "<think>2 + 2 is 4</think>The answer is 4", None, True),
    ("think_format", {}, "The answer is 4", None, False),
    ("think_format", {}, "<think>a</think><think>b</think> 4", None, False),
    ("think_format", {}, "<think>reasoning</think>", None, False),
    ("think_format", {"prefilled": True}, "reasoning</think> 4", None, True),
    ("think_format", {"answer_tag": "answer"}, "<think>r</think>\n<answer>4</answer>", None, True),
    ("think_format", {"answer_tag": "answer"}, "<think>r</think>\n4", None, False),
    ("regex_format", {"pattern": r"<reasoning>.+</reasoning>\s*<answer>.+</answer>"},
     "<reasoning>r</reasoning>\n<answer>4</answer>", None, True),  # fmt: skip
    ("regex_format", {"required_tags": TAGS}, "<answer>4</answer><reasoning>r</reasoning>", None, False),
    ("regex_format", {"required_tags": TAGS}, "<reasoning>r</reasoning> <answer>4</answer>", None, True),
    ("json_valid", {}, 'Here it is:\n```json\n{"a": 1}\n```', None, True),
    ("json_valid", {}, '{"a": 1,}', None, False),
    ("json_valid", {}, "42", None, False),
    ("json_valid", {}, '{"a": NaN}', None, False),
    ("json_schema", {"schema": SCHEMA}, '{"name": "Ada", "age": 36}', None, True),
    ("json_schema", {"schema": SCHEMA}, '{"name": "Ada", "age": "36"}', None, False),
    ("json_schema", {"schema": SCHEMA}, '{"name": "Ada"}', None, False),
    ("json_schema", {"schema": SCHEMA}, "not json", None, False),
]


def verdict(score):
    return None if score is None else score > 0


def test_the_table_is_large_enough():
    assert len(MATH_TABLE) + len(OTHER_TABLE) >= 60
    assert {verdict for *_, verdict in MATH_TABLE} == {True, False, None}


@pytest.mark.parametrize(("reference", "completion", "expected"), MATH_TABLE)
def test_math_verdicts(reference, completion, expected):
    assert verify_math_answer(reference, completion, parsing_timeout=5, verify_timeout=5) is expected


def test_math_reward_through_the_pool_gives_the_same_verdicts():
    """The whole math table as one batch through the registered (pooled, async) reward, both scorings."""
    references = [reference for reference, _, _ in MATH_TABLE]
    completions = [completion for _, completion, _ in MATH_TABLE]
    expected = [verdict for *_, verdict in MATH_TABLE]
    binary = call_reward(get_reward("math"), completions=completions, solution=references)
    assert [verdict(score) for score in binary] == expected
    assert set(binary) == {1.0, 0.0, None}
    dapo = call_reward(get_reward("math", scoring="dapo"), completions=completions, solution=references)
    assert [None if score is None else score for score in dapo] == [
        None if v is None else (1.0 if v else -1.0) for v in expected
    ]


@pytest.mark.parametrize(
    ("name", "kwargs", "completion", "reference", "expected"),
    OTHER_TABLE,
    ids=[f"{row[0]}-{index}" for index, row in enumerate(OTHER_TABLE)],
)
def test_other_verdicts(name, kwargs, completion, reference, expected):
    reward = get_reward(name, **kwargs)
    score = reward(prompts=["p"], completions=[completion], completion_ids=[[0]], solution=[reference])
    assert len(score) == 1
    assert verdict(score[0]) is expected


@pytest.mark.parametrize(
    ("name", "right", "reference"),
    [
        ("boxed", r"\boxed{7}", "7"),
        ("gsm8k", "#### 7", "7"),
        ("multiple_choice", "Answer: (B)", "B"),
        ("exact_match", "Answer: seven", "Seven"),
        ("numeric", "Answer: 7.0", "7"),
        ("math", r"\boxed{\frac{14}{2}}", "7"),
        ("dapo_answer", "Answer: 7", "7"),
    ],
)
def test_scoring_dapo_is_plus_minus_one_and_binary_is_one_zero(name, right, reference):
    for scoring, expected in (("dapo", [1.0, -1.0]), ("binary", [1.0, 0.0])):
        reward = get_reward(name, scoring=scoring, asynchronous=False)
        assert reward(completions=[right, "nothing"], solution=[reference, reference]) == expected


def test_json_schema_from_a_column_and_from_a_file(tmp_path):
    reward = get_reward("json_schema", schema_column="schema")
    schemas = [json.dumps(SCHEMA), json.dumps({"type": "array"}), json.dumps({"type": "bogus"}), None]
    completions = ['{"name": "Ada", "age": 1}', "{}", "{}", "{}"]
    assert reward(completions=completions, schema=schemas) == [1.0, 0.0, None, None]
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    assert get_reward("json_schema", schema=str(path))(completions=completions[:2]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="does not exist"):
        get_reward("json_schema", schema=str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="exactly one"):
        get_reward("json_schema")
