"""Answer forms: right answers written in another form than the reference's, and answers math-verify misreads.

Each form is one rule, registered beside its definition with `@answer_form(name)`; adding a form is one
function here (or in `structures.py`, `labels.py`, `sets.py`) and its tests. Two kinds:

- a rule (the default) runs only once math-verify has said "different": it recognises its form by a regular
  expression before parsing anything and rewrites the two answers into forms math-verify compares; it accepts
  only when math-verify then finds them equal, so no rule widens what "equal" means, except `_precision`, the
  one stated rule about rounding, and `_percentages`, which applies it to a percentage. Here: column vectors for
  tuples, set-builder sets for intervals, ordered chains for orders, a function with another variable name,
  degrees for radians, the precision rule, percentages, text that differs in markup, an option's text for its
  letter.
- a settling rule (`settles=True`, in `structures.py`, `labels.py`, `sets.py`) runs before math-verify compares
  and gives the verdict alone for the answers in its form, which math-verify reads wrongly (an integer family
  as a list ending in a number, two units as none, a list of labelled values as its first value, a statement as
  its first number, labelled values against a bare list as two sets, conditions joined by "and" as a list).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from .compare import Same
from .extract import FinalAnswer
from .normalize import normalize_math_answer

__all__ = ["ANSWER_FORMS", "AnswerForm", "answer_form", "same_by_forms", "settle_by_forms"]

FormRule = Callable[[str, str, FinalAnswer, Same], "bool | None"]


@dataclass(frozen=True)
class AnswerForm:
    """A registered answer-form rule: its name, the function, and whether it settles the verdict alone."""

    name: str
    rule: FormRule
    settles: bool


ANSWER_FORMS: dict[str, AnswerForm] = {}


def answer_form(name: str, *, settles: bool = False) -> Callable[[FormRule], FormRule]:
    """Register the decorated function as the answer-form rule `name`. Rules run in registration order.

    A rule is called `rule(gold, answer, final, same)`: the reference's answer and the completion's, both
    normalised (`normalize_math_answer`), the completion's `FinalAnswer` (with what the question says), and
    `same(a, b, relations=False)`, math-verify's equivalence of two strings under the caller's time limits.

    Args:
        name: the rule's name, unique among the answer forms.
        settles: False: the rule runs only after math-verify has found the answers different, and returns True
            to accept (anything else keeps the rejection). True: the rule runs before math-verify compares and
            returns the verdict, True or False, for the answers in its form, None for answers in no form of its
            own; the first verdict given is final.
    """

    def register(rule: FormRule) -> FormRule:
        if name in ANSWER_FORMS:
            raise ValueError(f"Answer form {name!r} is already registered; give the new rule another name.")
        ANSWER_FORMS[name] = AnswerForm(name=name, rule=rule, settles=settles)
        return rule

    return register


def settle_by_forms(
    gold_answer: str, answer: FinalAnswer, *, parsing_timeout: int | None = None, verify_timeout: int | None = None
) -> bool | None:
    """The verdict of the first settling rule whose form `answer` or the reference answer `gold_answer` is in;
    None when no settling rule applies (math-verify then compares them)."""
    if answer.text is None:
        return None
    gold, text = normalize_math_answer(gold_answer), normalize_math_answer(answer.text)
    same = Same(parsing_timeout, verify_timeout)
    for form in ANSWER_FORMS.values():
        if form.settles:
            verdict = form.rule(gold, text, answer, same)
            if verdict is not None:
                return verdict
    return None


def same_by_forms(
    gold_answer: str, answer: FinalAnswer, *, parsing_timeout: int | None = None, verify_timeout: int | None = None
) -> bool:
    """Whether one of the answer-form rules finds `answer` equal to the reference answer `gold_answer`."""
    if answer.text is None:
        return False
    gold, text = normalize_math_answer(gold_answer), normalize_math_answer(answer.text)
    return accepted_by_forms(gold, text, answer, Same(parsing_timeout, verify_timeout))


def accepted_by_forms(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """`same_by_forms` on answers already normalised: whether a rule that accepts (not a settling one) finds
    them equal. A settling rule may end with it for pairs it cannot compare item by item."""
    return any(form.rule(gold, answer, final, same) for form in ANSWER_FORMS.values() if not form.settles)


# ---------------------------------------------------------------------------------------------- shared readers

TEXT_MACRO = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")


def single_letters(text: str) -> set[str]:
    """The one-letter symbols of a TeX expression (`x`, `k` in `2k\\pi + x`), outside commands and `\\text{}`."""
    return set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", TEXT_MACRO.sub(" ", text))) - {"e", "i"}


def rename_letter(text: str, old: str, new: str) -> str:
    """`text` with the one-letter symbol `old` written `new` (commands such as `\\to` keep their letters)."""
    return re.sub(rf"(?<![\\A-Za-z]){old}(?![A-Za-z])", lambda _: new, text)


def top_level_items(text: str) -> list[str]:
    """`text` split on its commas outside brackets: `(1, 2), 3` -> [`(1, 2)`, `3`]."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index].strip())
            start = index + 1
    items.append(text[start:].strip())
    return items


# -- a column vector or `\langle a, b \rangle` for the tuple `(a, b)`, and the reverse

_LABEL = re.compile(
    r"^\s*(?:\\(?:mathbf|vec|overrightarrow|boldsymbol)\s*\{[A-Za-z]\}|[A-Za-z](?:_\{?\w+\}?)?)\s*=(?!=)\s*"
)
_COLUMN_VECTOR = re.compile(r"\\begin\{([pb]matrix)\}(.*?)\\end\{\1\}", re.DOTALL)
_ANGLE_VECTOR = re.compile(r"\\langle(.*?)\\rangle", re.DOTALL)


def _as_tuple(text: str) -> str | None:
    """`\\begin{pmatrix}1\\\\2\\end{pmatrix}` or `\\langle 1, 2\\rangle` (labelled or not) -> `(1, 2)`; else None."""
    text = _LABEL.sub("", text.strip().replace(r"\left", "").replace(r"\right", ""), count=1).strip()
    column = _COLUMN_VECTOR.fullmatch(text)
    if column and "&" not in column.group(2):
        rows = [row.strip() for row in column.group(2).split("\\\\") if row.strip()]
        return "(" + ", ".join(rows) + ")" if len(rows) >= 2 else None
    angle = _ANGLE_VECTOR.fullmatch(text)
    return f"({angle.group(1).strip()})" if angle and "," in angle.group(1) else None


@answer_form("vector")
def _vector_forms(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    gold_tuple, answer_tuple = _as_tuple(gold), _as_tuple(answer)
    if gold_tuple is None and answer_tuple is None:
        return False
    return same(gold_tuple or gold, answer_tuple or answer)


# -- set-builder notation `\{x \mid -1 < x \le 4\}` for the interval `(-1, 4]`, and the reverse

_SET_BUILDER = re.compile(
    r"\\\{\s*([A-Za-z])\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*)?(?:\\mid|\\vert|\||:)\s*(.+?)\s*\\\}", re.DOTALL
)
_INEQUALITY = re.compile(r"<|>|\\le|\\ge|\\lt|\\gt|\\in")


def _set_condition(text: str) -> str | None:
    """The condition of a set-builder set of reals given by inequalities (`-1 < x \\le 4`), else None. An
    equation (`x^2 = 4`) is left alone: its set is not an interval."""
    match = _SET_BUILDER.fullmatch(text.strip())
    if match is None or not _INEQUALITY.search(match.group(2)) or re.search(r"(?<![<>\\])=", match.group(2)):
        return None
    return match.group(2)


@answer_form("set_builder")
def _set_builder(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    gold_condition, answer_condition = _set_condition(gold), _set_condition(answer)
    if gold_condition is None and answer_condition is None:
        return False
    # A set written with a condition is a set of reals, so `(1, 2)` beside it is an interval, not a point.
    return same(gold_condition or gold, answer_condition or answer, relations=True)


# -- an ordered chain `q < p < r` for the order `q, p, r`

_ORDER_RELATION = re.compile(r"\s*(<|>|\\lt(?![a-z])|\\gt(?![a-z]))\s*")


def _chain(text: str) -> tuple[list[str], str] | None:
    """`(items, direction)` of a chain of strict inequalities in one direction (`a < b < c` -> ascending)."""
    parts = _ORDER_RELATION.split(text)
    items, relations = parts[::2], parts[1::2]
    # Three items at least, not all numbers: `x < 3` is an inequality, and `1 < 2 < 3` answers no ordering.
    if len(items) < 3 or any(not item.strip() for item in items):
        return None
    if all(re.fullmatch(r"\s*-?[\d.]+\s*", item) for item in items):
        return None
    directions = {"ascending" if relation in ("<", r"\lt") else "descending" for relation in relations}
    return ([item.strip() for item in items], directions.pop()) if len(directions) == 1 else None


def _same_items(gold_items: list[str], answer_items: list[str], same: Same) -> bool:
    compact = lambda item: re.sub(r"\s+|\\left|\\right", "", item)  # noqa: E731
    return len(gold_items) == len(answer_items) and all(
        compact(g) == compact(a) or same(g, a) for g, a in zip(gold_items, answer_items)
    )


@answer_form("ordered_chain")
def _ordered_chain(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """The chain must list the reference's items in its order, with the relation the question asks for: `<`
    unless it asks for greatest to least (then `>`)."""
    wanted = "descending" if final.descending else "ascending"
    answer_chain, gold_chain = _chain(answer), _chain(gold)
    if answer_chain and gold_chain is None and "," in gold:
        items, direction = answer_chain
        return direction == wanted and _same_items(top_level_items(gold), items, same)
    if gold_chain and answer_chain is None and "," in answer:
        items, direction = gold_chain
        return direction == wanted and _same_items(items, top_level_items(answer), same)
    return False


# -- the same function with another variable name: `f(t) = 3t - 2` for `f(x) = 3x - 2`

_FUNCTION_DEFINITION = re.compile(r"([A-Za-z])\s*\(\s*([A-Za-z])\s*\)\s*=(?!=)\s*(.+)", re.DOTALL)


@answer_form("function")
def _function_forms(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    gold_definition = _FUNCTION_DEFINITION.fullmatch(gold.strip())
    answer_definition = _FUNCTION_DEFINITION.fullmatch(answer.strip())
    if gold_definition and answer_definition:
        if gold_definition.group(1) != answer_definition.group(1):
            return False  # the question names the function; another name is another function
        gold_variable, gold_body = gold_definition.group(2), gold_definition.group(3)
        variable, body = answer_definition.group(2), answer_definition.group(3)
    elif answer_definition:  # `f(t) = 3t - 2` for `3x - 2`: the reference's one variable is the argument
        variable, body = answer_definition.group(2), answer_definition.group(3)
        symbols = single_letters(gold)
        if len(symbols) > 1:
            return False
        gold_variable, gold_body = next(iter(symbols), variable), gold
    elif gold_definition:  # `3t - 2` for `f(x) = 3x - 2`
        gold_variable, gold_body = gold_definition.group(2), gold_definition.group(3)
        symbols = single_letters(answer)
        if len(symbols) != 1:
            return False
        variable, body = symbols.pop(), answer
    else:
        return False
    if variable != gold_variable and gold_variable in single_letters(body):
        return False  # renaming would capture a symbol of the answer's own
    return same(gold_body, rename_letter(body, variable, gold_variable))


# -- degrees for radians (`45^\circ` for `\frac{\pi}{4}`) and the reverse

_DEGREE_MARK = re.compile(r"\s*(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\degree|\\text\{\s*degrees?\s*\})\s*$")


def _in_radians(text: str) -> str | None:
    """Each item of an answer in degrees written in radians (`30^\\circ, 150^\\circ` ->
    `(30)\\cdot\\frac{\\pi}{180}, ...`); None unless every item carries a degree mark."""
    items = top_level_items(text)
    converted = []
    for item in items:
        mark = _DEGREE_MARK.search(item)
        if mark is None:
            return None
        converted.append(rf"({item[: mark.start()]})\cdot\frac{{\pi}}{{180}}")
    return ", ".join(converted)


@answer_form("angles")
def _angles(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """An angle in degrees is the angle in radians times pi/180: the degree mark says the answer is an angle."""
    if r"\pi" in gold and r"\pi" not in answer:
        converted = _in_radians(answer)
        return converted is not None and _in_radians(gold) is None and same(gold, converted)
    if r"\pi" in answer and r"\pi" not in gold:
        converted = _in_radians(gold)
        return converted is not None and _in_radians(answer) is None and same(converted, answer)
    return False


# -- the precision rule: an exact number for a rounded reference, and a rounded number for an exact one

_DECIMAL = re.compile(r"(-?\d*\.(\d+))(?:\s*(?:\\times|\\cdot)\s*10\^\{?(-?\d+)\}?)?")
_SUFFIX = re.compile(r"\s*(\\%|%|\^\s*\{?\\circ\}?|(?:\\(?:text|mbox|mathrm)\s*\{[^{}]*\}\s*)+)$")


def _number_and_suffix(text: str) -> tuple[str, str]:
    """`2.46\\%` -> (`2.46`, `%`); `4.29 \\text{ cm}` -> (`4.29`, `cm`); `\\frac{5}{13}` -> (`\\frac{5}{13}`, ``)."""
    text = text.strip().replace(r"\left", "").replace(r"\right", "")
    match = _SUFFIX.search(text)
    if match is None:
        return text, ""
    suffix = re.sub(r"\\(?:text|mbox|mathrm)\s*\{([^{}]*)\}|[\s\\{}^]", r"\1", match.group(1)).replace("%", "%")
    return text[: match.start()].strip(), re.sub(r"\s+", "", suffix)


def _rounding_unit(text: str) -> float | None:
    """Half the last decimal place of a decimal written in `text` (`0.385` -> 0.0005, `1.2 \\times 10^{5}` ->
    5000), or None when `text` is not one decimal number."""
    match = _DECIMAL.fullmatch(text)
    if match is None:
        return None
    exponent = int(match.group(3) or 0)
    return 0.5 * 10.0 ** (exponent - len(match.group(2)))


def _significant_digits(text: str) -> int:
    match = _DECIMAL.fullmatch(text)
    digits = (match.group(1) if match else text).lstrip("-").replace(".", "").lstrip("0")
    return len(digits)


def _real_value(parsed: list) -> float | None:
    import sympy

    value = parsed[0] if parsed else None
    if not isinstance(value, sympy.Expr) or not value.is_number:
        return None
    try:
        number = complex(value.evalf(30))
    except (TypeError, ValueError):
        return None
    return number.real if number.imag == 0 and math.isfinite(number.real) else None


@answer_form("precision")
def _precision(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """The precision rule. A decimal reference with two or more significant digits (`0.385`, `2.5\\%`,
    `1.2 \\times 10^5`) is taken as rounded: an answer equals it when it rounds to it at the reference's own
    number of decimals (significant digits in scientific notation), and is exact (`\\frac{5}{13}`,
    `4\\frac{2}{7}`) or at least as precise (`2.46\\%` for `2.5\\%`; never `0.38` for `0.385`). A
    one-digit decimal (`0.4`) is as likely exact as rounded, so it is not. The reverse, a decimal for an
    exact reference (`0.385` for `\\frac{5}{13}`), is right only when the question asks for that rounding
    (`final.decimals`), with that many decimals. Percent and units must agree."""
    gold_number, gold_suffix = _number_and_suffix(gold)
    number, suffix = _number_and_suffix(answer)
    if suffix and suffix != gold_suffix or (gold_suffix == "%") != (suffix == "%"):
        return False
    gold_unit, unit = _rounding_unit(gold_number), _rounding_unit(number)
    if gold_unit is not None and _significant_digits(gold_number) < 2:
        return False
    if gold_unit is None:  # an exact reference: only the rounding the question asks for, to the digit
        written = re.fullmatch(r"-?\d+(?:\.(\d+))?", number)
        if final.decimals is None or written is None or len(written.group(1) or "") != final.decimals:
            return False
        unit = 0.5 * 10.0**-final.decimals
    gold_value, value = _real_value(same.parsed(gold_number)), _real_value(same.parsed(number))
    if gold_value is None or value is None:
        return False
    if gold_unit is not None:  # the reference is rounded
        if unit is not None and unit > gold_unit * (1 + 1e-9):
            return False  # the answer is coarser than the reference
        if unit is None and re.fullmatch(r"-?\d+", number):
            return False  # an integer for a decimal reference is coarser too (equal ones math-verify accepts)
        return abs(value - gold_value) <= gold_unit * (1 + 1e-9)
    return abs(value - gold_value) <= unit * (1 + 1e-9)


# -- a percentage for a number and the reverse: `14.29\%` for `\frac{1}{7}`, `\frac{2}{3}` for `66.67\%`

_APPROXIMATELY = re.compile(r"^\s*(?:\\approx|≈)\s*")
_PERCENT = ("%", "percent")
_PERCENT_DIGITS = 4  # a percentage with this many significant digits is a fraction rounded, not a guess


def _percent_as_decimal(number: str) -> str | None:
    """A decimal written in percent as a fraction of one, digit for digit: `66.67` -> `0.6667`, `25` -> `0.25`."""
    from decimal import Decimal

    if not re.fullmatch(r"-?\d+(?:\.\d+)?", number):
        return None
    return format(Decimal(number).scaleb(-2), "f")


@answer_form("percent")
def _percentages(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """A percentage compared as the fraction of one it writes, under the precision rule: `\\frac{2}{3}` for the
    rounded `66.67\\%` (as for `0.6667`); for an exact reference, a percentage rounded as the question asks
    ("to the nearest tenth of a percent": `33.3\\%` for `\\frac{1}{3}`) or, asked nothing, one with four
    significant digits or more (`14.29\\%` for `\\frac{1}{7}`, never `14.28\\%` or `14.3\\%`): a fraction whose
    decimals do not end can only be given as a percentage rounded."""
    from dataclasses import replace

    gold_number, gold_suffix = _number_and_suffix(gold)
    number, suffix = _number_and_suffix(_APPROXIMATELY.sub("", answer))
    gold_percent, percent = gold_suffix in _PERCENT, suffix in _PERCENT
    if gold_percent == percent or (gold_suffix and not gold_percent) or (suffix and not percent):
        return False
    if gold_percent:
        decimal = _percent_as_decimal(gold_number)
        return decimal is not None and _precision(decimal, number, final, same)
    decimal = _percent_as_decimal(number)
    if decimal is None:
        return False
    if final.decimals is not None:
        decimals = final.decimals + 2
    elif _significant_digits(number) >= _PERCENT_DIGITS:
        decimals = len(decimal.partition(".")[2])
    else:
        decimals = None
    return _precision(gold, decimal, replace(final, decimals=decimals), same)


# -- text answers that differ in markup only: `\text{parabola and line}` for `parabola, line`

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def _text_items(text: str) -> tuple[str, ...] | None:
    """The words of an answer made of words (`\\text{parabola and line}` -> (`parabola`, `line`)), item by item in
    order; None when it holds numbers or mathematics."""
    plain = TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text).replace("$", " ")
    if re.search(r"[\d\\^_=+*/<>(){}\[\]]", plain):
        return None
    items = []
    for item in re.split(r",|;|&|\band\b", plain.lower()):
        item = " ".join(_ARTICLES.sub(" ", item).replace(".", " ").split())
        if item:
            items.append(item)
    if not items or any(not re.search(r"[a-z]{2}", item) for item in items):
        return None
    return tuple(items)


@answer_form("text")
def _text_answers(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    gold_items = _text_items(gold)
    return gold_items is not None and gold_items == _text_items(answer)


# -- an option's text for its letter and the reverse, when the question lists the options

_OPTION = re.compile(r"^\s*\(?\s*([A-J])\s*(?:\)|\.|:)?\s*(?=\s|$)(.*)$", re.DOTALL)


def _option(text: str, letters: str) -> tuple[str, str] | None:
    """`(letter, rest)` when `text` opens with an option letter (`B`, `(B)`, `\\text{(B) } 12`, `B. 12`)."""
    plain = TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text).replace("$", " ").strip(" *")
    match = _OPTION.match(plain)
    if match is None or match.group(1) not in letters:
        return None
    return match.group(1), match.group(2).strip(" .")


def _same_choice(gold: str, answer: str, same: Same) -> bool:
    compact = lambda text: re.sub(r"\s+", "", TEXT_MACRO.sub(r"\1", text)).lower()  # noqa: E731
    if compact(gold) == compact(answer):
        return True
    gold_items = _text_items(gold)
    if gold_items is not None:
        return gold_items == _text_items(answer)
    return same(gold, answer)


@answer_form("choices")
def _choices(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    if not final.choices:
        return False
    texts = dict(final.choices)
    letters = "".join(texts)
    gold_option, answer_option = _option(gold, letters), _option(answer, letters)
    if gold_option and gold_option[1]:
        gold_option = None  # a reference that opens with a letter and goes on is not a letter
    if gold_option and answer_option:  # `(B) 12` for `B`: the letter, and its text if given, must agree
        letter, rest = answer_option
        return letter == gold_option[0] and (not rest or _same_choice(texts[letter], rest, same))
    if gold_option:  # the option's text for its letter: the answer must match that option and no other
        matching = [letter for letter, text in final.choices if _same_choice(text, answer, same)]
        return matching == [gold_option[0]]
    if answer_option and not answer_option[1]:  # a letter for the option's text
        return _same_choice(gold, texts[answer_option[0]], same)
    return False
