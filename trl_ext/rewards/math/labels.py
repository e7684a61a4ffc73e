"""Answer forms that name their values: labels on a bare list, an equation for the expression it defines, and
choices written as circled or enumerated numbers or as several letters.

- `labels_for_list` (settles): `p = 12, q = 5, r = 2` or `\\text{Anna: } 9, \\text{Ben: } 4` against the bare list
  `12, 5, 2` or `4, 9`. math-verify reads both as sets, so a value swapped between two labels would pass; here
  the labelled values are put in the order of the list and compared position by position. A labelled
  reference gives the order itself; a labelled answer is put in the order of the question's last sentence that
  names its quantities, or keeps its own order for letters it chose (`p`, `q`, `r`); where neither tells, it
  is rejected. Values of one unknown (`x_1 = 2, x_2 = 3`, `p = 5, p = 7`) are a set, left to math-verify.
- `equation_for_expression`: `S_{\\min} = 2n + 1` for `2n + 1` (a name on the left), `ab = 10` for
  `\\frac{10}{a}` (an equation that defines the expression: solved for its one letter the reference lacks,
  when it is of degree one in it), and two equations that differ by a constant factor (`3x - y - 5 = 0` for
  `y = 3x - 5`).
- `enumerated_choices`: `①④` or `(1)(4)` for `1, 4`, and several letters (`A, C` for `AC`) when the question
  lists options: the same set of choices, in any order.
"""

from __future__ import annotations

import re

from .compare import Same
from .extract import FinalAnswer
from .forms import TEXT_MACRO, answer_form, single_letters, top_level_items

__all__ = ["choice_numbers", "labelled_items"]


# -- labels on a bare list: `p = 12, q = 5, r = 2` or `\text{Anna: } 9, \text{Ben: } 4` for `12, 5, 2` / `4, 9`

# `\text{Anna: } 9`: the label and its colon inside the text macro.
_TEXT_LABEL = re.compile(r"^\\(?:text|textbf|textit|mathrm|mbox)\s*\{\s*([^{}:=]*?)\s*[:=]\s*\}\s*(.+)$", re.DOTALL)
# `\text{ and length: } 10`: "and" opening a text macro joins two items.
_TEXT_AND = re.compile(r"(\\(?:text|textbf|textit|mathrm|mbox)\s*\{)\s*and\s+(?=[^\s}])")
_RELATION_SIGN = re.compile(r"=|<|>|\\(?:le|ge|leq|geq|leqslant|geqslant|lt|gt|ne|neq|in)(?![A-Za-z])")
_LETTER_LABEL = re.compile(r"[A-Za-z](?:_\{?[A-Za-z0-9,]+\}?)?")
_LONG_FORMS = {  # how a question names what `\min` and `\max` label
    "min": "min(?:imum|imal)?|least|smallest|lowest",
    "max": "max(?:imum|imal)?|greatest|largest|highest",
}


def _top_level_split(text: str, separator: str) -> list[str] | None:
    """`text` split on its one top-level `separator` (outside brackets); None unless there is exactly one."""
    depth, found = 0, []
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            found.append(index)
    if len(found) != 1:
        return None
    return [text[: found[0]].strip(), text[found[0] + 1 :].strip()]


def _label_words(label: str) -> tuple[str, ...]:
    """The words of a label that name a quantity (`v_{\\text{car}}` -> (`car`,), `f_{\\max}` -> (`max`,),
    `\\text{ y-intercept}` -> (`y-intercept`,)); one-letter symbols are left out."""
    plain = TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", label).replace("\\", " ")
    return tuple(word.lower() for word in re.findall(r"[A-Za-z][A-Za-z-]*[A-Za-z]", plain))


def _labelled_item(item: str) -> tuple[str, str] | None:
    """`(label, value)` of one labelled item (`p = 12`, `\\text{Anna: } 9`, `\\text{red} = 15`, `Slope: 3`)."""
    text_label = _TEXT_LABEL.match(item)
    if text_label:
        label, value = text_label.group(1), text_label.group(2)
    else:
        parts = _top_level_split(item, "=") or _top_level_split(item, ":")
        if parts is None:
            return None
        label, value = parts
    value = value.strip(" .")
    if not label.strip() or not re.search(r"\d", value) or _RELATION_SIGN.search(value):
        return None
    return label.strip(), value


def labelled_items(text: str) -> list[tuple[str, str]] | None:
    """The `(label, value)` items of an answer in which every item is labelled, in order (`p = 12, q = 5` ->
    `[("p", "12"), ("q", "5")]`; `\\text{width: } 6 \\text{ and length: } 10` too); None otherwise."""
    text = re.sub(r"\\left|\\right|\\q?quad(?![A-Za-z])", " ", text)
    text = _TEXT_AND.sub(r", \1", text).replace(";", ",")
    text = re.sub(r"\\(?:text|mbox)\s*\{\s*and\s*\}", ",", text)
    items = [_labelled_item(item) for item in top_level_items(text) if item.strip()]
    if len(items) < 2 or any(item is None for item in items):
        return None
    return items


def _bare_items(text: str) -> list[str] | None:
    """The items of a bare list (`12, 5, 2`, `(6, 10)`): two or more, none with a relation or a word."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")") and len(top_level_items(text[1:-1])) > 1:
        text = text[1:-1]
    items = top_level_items(text)
    if len(items) < 2 or any(not item or _RELATION_SIGN.search(item) or ":" in item for item in items):
        return None
    if any(r"\text" in item or re.search(r"[A-Za-z]{3,}", re.sub(r"\\[A-Za-z]+", " ", item)) for item in items):
        return None  # a word: `12 \text{ red}` or `twelve` (TeX commands such as `\frac` are no words)
    return items


def _question_position(words: tuple[str, ...], question: str) -> int | None:
    """Where a label's name is first mentioned in the question (`min` also as "minimum"), or None."""
    found = []
    for word in words:
        pattern = _LONG_FORMS.get(word, re.escape(word) + "(?:s|es)?")
        match = re.search(rf"(?<![A-Za-z])(?:{pattern})(?![A-Za-z])", question, re.IGNORECASE)
        if match:
            found.append(match.start())
    return min(found) if found else None


def _ordered_values(items: list[tuple[str, str]], question: str | None) -> list[str] | None:
    """The labelled values in the order of the list they answer; None where the order cannot be told. Letters
    the answer chose keep the answer's order; named quantities take the order of the question's last sentence
    that names them all."""
    labels = [label for label, _ in items]
    if all(_LETTER_LABEL.fullmatch(label) for label in labels):
        return [value for _, value in items]
    words = [_label_words(label) for label in labels]
    if not question or any(not word for word in words):
        return None
    # The last sentence that names them all is the one that asks for them ("Find its width and length."): an
    # earlier one may name them in another order ("Its length is 4 more than its width.").
    for sentence in reversed(re.split(r"(?<=[.?!])\s+", question)):
        positions = [_question_position(word, sentence) for word in words]
        if all(position is not None for position in positions):
            if len(set(positions)) < len(positions):
                return None
            return [value for _, (_, value) in sorted(zip(positions, items))]
    return None


def _one_unknown(labels: list[str]) -> bool:
    """Labels that repeat, or one letter with indices (`x_1`, `x_2`): values of one unknown, in no order."""
    letters = [label for label in labels if _LETTER_LABEL.fullmatch(label)]
    return len(set(labels)) < len(labels) or (len(letters) == len(labels) and len({lb[0] for lb in letters}) == 1)


def _compact(text: str) -> str:
    return re.sub(r"\s+|\\left|\\right", "", text)


def _same_value(gold: str, answer: str, same: Same) -> bool:
    return _compact(gold) == _compact(answer) or same(gold, answer)


@answer_form("labels_for_list", settles=True)
def _labels_for_list(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """A labelled list against a bare list (either side the reference): the labelled values in the list's
    order (see `_ordered_values`), each equal to the value in its place. Settles: math-verify compares two
    lists as sets, so without this `p = 12, q = 2, r = 5` would pass for `12, 5, 2`."""
    gold_items, items = labelled_items(gold), labelled_items(answer)
    if (gold_items is None) == (items is None):
        return None
    labelled, bare = (gold_items, _bare_items(answer)) if gold_items else (items, _bare_items(gold))
    labels = [label for label, _ in labelled]
    if (
        bare is None
        or _one_unknown(labels)
        or not all(_LETTER_LABEL.fullmatch(lb) or _label_words(lb) for lb in labels)
    ):
        return None  # several values of one unknown (a set), or labels such as `S(4)` that name no quantity
    # A labelled reference gives the order itself; a labelled answer's order is checked (`_ordered_values`).
    ordered = [value for _, value in gold_items] if gold_items else _ordered_values(items, final.question)
    if ordered is None:
        return False
    if len(ordered) != len(bare):
        return False
    pairs = zip(bare, ordered) if items else zip(ordered, bare)
    return all(_same_value(gold_value, value, same) for gold_value, value in pairs)


# -- an equation for the expression it defines: `ab = 10` for `\frac{10}{a}`, `S_{\min} = 2n + 1` for `2n + 1`

_NAME = re.compile(
    r"(?:[A-Za-z](?:_\{[^{}]*\}|_[A-Za-z0-9])?(?:\^\{?-1\}?)?(?:\([^()=]*\))?|\\(?:text|mathrm)\{[A-Za-z ]+\})\s*"
)


def _named_expression(text: str) -> str | None:
    """The right side of `NAME = expression` (`S_{\\min} = 2n + 1`, `f^{-1}(x) = ...`, `V(r, h) = ...`), when the
    name's letter is not a symbol of the expression; else None."""
    parts = _top_level_split(text, "=")
    if parts is None or not _NAME.fullmatch(parts[0]) or _RELATION_SIGN.search(parts[1]):
        return None
    name, expression = parts
    letter = re.match(r"\\(?:text|mathrm)\{|[A-Za-z]", name)
    if letter.group(0).isalpha() and letter.group(0) in single_letters(expression):
        return None
    return expression


def _sympy_equation(text: str, same: Same):
    """The sympy `Eq` math-verify reads from an equation, or None."""
    import sympy

    if _top_level_split(text, "=") is None:
        return None
    parsed = same.parsed(text)
    equation = parsed[0] if parsed else None
    return equation if isinstance(equation, sympy.Equality) else None


def _solved_for_one_letter(equation, expression):
    """The equation solved for its one symbol the expression lacks, when it is of degree one in it; else None."""
    import sympy

    if not (isinstance(equation.lhs, sympy.Expr) and isinstance(equation.rhs, sympy.Expr)):
        return None
    extra = equation.free_symbols - expression.free_symbols
    if len(extra) != 1 or not expression.free_symbols <= equation.free_symbols:
        return None
    (symbol,) = extra
    try:
        polynomial = sympy.Poly(equation.lhs - equation.rhs, symbol)
    except sympy.PolynomialError:
        return None
    if polynomial.degree() != 1:
        return None
    return -polynomial.coeff_monomial(1) / polynomial.coeff_monomial(symbol)


def _is_zero(value) -> bool:
    import sympy

    try:
        return sympy.simplify(value) == 0
    except Exception:  # noqa: BLE001 - what sympy cannot simplify is not shown equal
        return False


def _same_equation(gold_equation, equation) -> bool:
    """Two equations whose sides' differences differ by a nonzero constant factor (`3x - y - 5 = 0`, `y = 3x - 5`)."""
    import sympy

    if not all(isinstance(side, sympy.Expr) for eq in (gold_equation, equation) for side in (eq.lhs, eq.rhs)):
        return False
    gold_difference, difference = gold_equation.lhs - gold_equation.rhs, equation.lhs - equation.rhs
    if difference == 0 or gold_difference == 0:
        return False
    try:
        ratio = sympy.simplify(gold_difference / difference)
    except Exception:  # noqa: BLE001 - what sympy cannot simplify is not shown equal
        return False
    return bool(ratio.is_number and ratio != 0 and ratio.is_finite)


@answer_form("equation_for_expression")
def _equation_for_expression(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """A name on the left (`S_{\\min} = 2n + 1` for `2n + 1`, either side the reference); an equation that defines
    the reference expression (solved for its one letter the expression lacks, of degree one in it); two
    equations equal up to a constant factor."""
    import sympy

    gold_named, named = _named_expression(gold), _named_expression(answer)
    if named is not None and "=" not in gold and same(gold, named):
        return True
    if gold_named is not None and "=" not in answer and same(gold_named, answer):
        return True
    gold_equation, equation = _sympy_equation(gold, same), _sympy_equation(answer, same)
    if gold_equation is not None and equation is not None:
        return _same_equation(gold_equation, equation)
    if equation is None or "=" in gold:
        return False
    parsed = same.parsed(gold)
    expression = parsed[0] if parsed else None
    if not isinstance(expression, sympy.Expr) or not expression.free_symbols:
        return False
    solution = _solved_for_one_letter(equation, expression)
    return solution is not None and _is_zero(solution - expression)


# -- choices written as circled or enumerated numbers (`①④`, `(1)(4)`) or as several letters (`A, C` for `AC`)

_CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩⑪⑫⑬⑭⑮⑯⑰⑱⑲⑳"
_CHOICE_WORDS = re.compile(r"(?i)\b(?:statements?|options?|choices?|only|and|numbers?)\b")


def _plain_choices(text: str) -> str:
    plain = TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text)
    return _CHOICE_WORDS.sub(" ", plain.replace("$", " ")).strip(" .")


def choice_numbers(text: str) -> tuple[frozenset[int], bool] | None:
    """`(numbers, circled)` of an answer made of choice numbers: circled (`①④`, `①, ④`), in parentheses
    (`(1)(4)`, `(1), (4)`), or bare (`1, 4`); `circled` says whether it was written as choices (circled or in
    parentheses) rather than as bare numbers. None for anything else."""
    plain = _plain_choices(text)
    if re.fullmatch(rf"[{_CIRCLED}](?:[\s,、]*[{_CIRCLED}])*", plain):
        return frozenset(_CIRCLED.index(char) + 1 for char in plain if char in _CIRCLED), True
    if re.fullmatch(r"\(\s*\d{1,2}\s*\)(?:[\s,]*\(\s*\d{1,2}\s*\))*", plain):
        return frozenset(int(number) for number in re.findall(r"\d+", plain)), True
    if re.fullmatch(r"\d{1,2}(?:\s*,\s*\d{1,2})*", plain):
        numbers = [int(number) for number in re.findall(r"\d+", plain)]
        return (frozenset(numbers), False) if len(set(numbers)) == len(numbers) else None
    return None


def _choice_letters(text: str, letters: str) -> frozenset[str] | None:
    """The option letters of an answer made only of them (`AC`, `A, C`, `(A)(C)`, `\\textbf{(B)}, \\textbf{(D)}`)."""
    plain = re.sub(r"\\textbf|\\text|[{}()\s,]", "", _plain_choices(text))
    if not plain or not re.fullmatch(rf"[{letters}]+", plain) or len(set(plain)) < len(plain):
        return None
    return frozenset(plain)


@answer_form("enumerated_choices")
def _enumerated_choices(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """The same set of choices: numbers, where one side at least writes them as choices (circled or in
    parentheses); letters, where the question lists the options and one side at least has two."""
    gold_numbers, numbers = choice_numbers(gold), choice_numbers(answer)
    if gold_numbers and numbers and (gold_numbers[1] or numbers[1]):
        return gold_numbers[0] == numbers[0]
    letters = "".join(letter for letter, _ in final.choices)
    if not letters:
        return False
    gold_letters, answer_letters = _choice_letters(gold, letters), _choice_letters(answer, letters)
    if gold_letters is None or answer_letters is None or max(len(gold_letters), len(answer_letters)) < 2:
        return False
    return gold_letters == answer_letters
