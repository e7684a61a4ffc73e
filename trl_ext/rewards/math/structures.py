"""Settling answer forms: answers math-verify reads wrongly, so a rule here gives the verdict alone, before
math-verify compares (see `forms.py`). Registered in this order, the first verdict final:

- a union of integer families written with `\\pm`, "or" or a congruence (`n \\equiv 1 \\pmod{4}`), member by
  member;
- an integer family with a declared parameter (math-verify reads `x = 2k\\pi, k \\in \\mathbb{Z}` as a list
  ending in the number 2);
- a list of labelled values (it reads `12 \\text{ red}, 9 \\text{ blue}` as `12`): every label with its value;
- a quantified or conditional statement (it reads `\\forall n > 1, 2^n > n^2` as `2`): quantifier, conditions
  and claim, each side of a relation by math-verify;
- values with two different units (it drops units, so `9 \\text{ feet}` would equal `9 \\text{ inches}`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .compare import Same
from .extract import FinalAnswer
from .forms import TEXT_MACRO, accepted_by_forms, answer_form, rename_letter, single_letters, top_level_items
from .normalize import normalize_math_answer

__all__ = ["Statement", "declares_integers", "labelled_values", "statement", "units_differ"]


# -- an integer-indexed family with another parameter name: `x = 2m\pi` for `x = 2k\pi` (k an integer)

_INTEGERS = r"(?:\\mathbb\s*\{?Z\}?|\\mathbf\s*\{?Z\}?|\\Z(?![A-Za-z])|ℤ)"
_INTEGER_DECLARATION = re.compile(
    rf"(?P<a>[A-Za-z])\s*\\in\s*{_INTEGERS}"
    r"|(?P<b>[A-Za-z])\s+(?:is|are)\s+(?:an?\s+)?(?:any\s+|arbitrary\s+)?integers?\b"
    r"|\b(?:for|where|with)\s+(?:some\s+|any\s+|all\s+|every\s+|an?\s+)?(?:arbitrary\s+)?integers?\s+"
    r"\$?(?P<c>[A-Za-z])\b"
)
_CONNECTORS = re.compile(r"(?:\s|,|;|\(|:|\\quad|\\qquad|\\text\{\s*\}|\b(?:where|for|with|and|all|some|any)\b)+$")
_FAMILY_SHIFTS = ("+1", "-1", "+2", "-2")


def _family(text: str) -> tuple[str, set[str]]:
    """`(expression, integer parameters)`: `x = 2k\\pi, k \\in \\mathbb{Z}` -> (`x = 2k\\pi`, {`k`}); the
    declaration and everything after it are cut off."""
    plain = TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text)
    declarations = list(_INTEGER_DECLARATION.finditer(plain))
    if not declarations:
        return text, set()
    parameters = {next(group for group in match.groupdict().values() if group) for match in declarations}
    return _CONNECTORS.sub("", plain[: declarations[0].start()]).strip(), parameters


def declares_integers(text: str) -> bool:
    """Whether an answer declares an integer parameter (`k \\in \\mathbb{Z}`, `where k is an integer`)."""
    return bool(_INTEGER_DECLARATION.search(TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text)))


_CONGRUENCE = re.compile(
    r"^\s*([A-Za-z])\s*\\equiv\s*(.+?)\s*(?:\\pmod\s*\{?\s*(\d+)\s*\}?|\(\s*\\(?:bmod|mod|text\{mod\})\s*(\d+)\s*\))\s*$"
)
_MEMBER_SPLIT = re.compile(r"\s*(?:\\text\{\s*or\s*\}|\\lor(?![A-Za-z])|(?<![A-Za-z])or(?![A-Za-z]))\s*")
_PLUS_MINUS = re.compile(r"\\pm(?![A-Za-z])|±")


def _as_family(text: str) -> str:
    """A congruence as the family it names: `n \\equiv 1 \\pmod{4}` -> `n = 4t + (1), t \\in \\mathbb{Z}`."""
    congruence = _CONGRUENCE.match(text)
    if congruence is None:
        return text
    variable, residue, modulus = congruence.group(1), congruence.group(2), congruence.group(3) or congruence.group(4)
    parameter = next(letter for letter in "tsujm" if letter != variable)
    return rf"{variable} = {modulus}{parameter} + ({residue}), {parameter} \in \mathbb{{Z}}"


def _members(text: str) -> list[str] | None:
    """The families a union of integer families lists, each with the declarations: `x = 2k\\pi \\pm \\frac{\\pi}{3},
    k \\in \\mathbb{Z}` -> [`x = 2k\\pi + \\frac{\\pi}{3}, k \\in \\mathbb{Z}`, `x = 2k\\pi - ...`]; None where a
    member holds more than one `\\pm`."""
    expression, parameters = _family(text)
    declaration = ", ".join(rf"{parameter} \in \mathbb{{Z}}" for parameter in sorted(parameters))
    members = []
    for member in _MEMBER_SPLIT.split(expression):
        signs = _PLUS_MINUS.findall(member)
        if len(signs) > 1:
            return None
        for version in [_PLUS_MINUS.sub(sign, member) for sign in "+-"] if signs else [member]:
            members.append(f"{version.strip().rstrip(',')}, {declaration}" if declaration else version)
    return members


@answer_form("integer_family_members", settles=True)
def _integer_family_members(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """A family with `\\pm`, a union of families joined by "or", or a congruence (`n \\equiv 1 \\pmod{4}`),
    against families: written out member by member, each member of one side equal (as `integer_family` compares
    two families) to a member of the other, and as many on each side. A union written with other members
    (`k\\pi` as `2k\\pi` or `2k\\pi + \\pi`) is not recognised, so it is rejected."""
    gold_family, family = _as_family(gold), _as_family(answer)
    congruence = (gold_family, family) != (gold, answer)
    gold, answer = gold_family, family
    if not (declares_integers(gold) or declares_integers(answer)):
        return None
    if not any(_PLUS_MINUS.search(text) or _MEMBER_SPLIT.search(text) for text in (gold, answer)):
        return _integer_families(gold, answer, final, same) if congruence else None
    gold_members, members = _members(gold), _members(answer)
    if gold_members is None or members is None or len(gold_members) != len(members):
        return False
    unmatched = list(members)
    for gold_member in gold_members:
        match = next((member for member in unmatched if _integer_families(gold_member, member, final, same)), None)
        if match is None:
            return False
        unmatched.remove(match)
    return True


@answer_form("integer_family", settles=True)
def _integer_families(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """Equal as sets over the integers: the expressions once the declarations are cut off, or with the
    parameter renamed, shifted by a small integer or negated (each a bijection of the integers). Needs a
    parameter declared an integer in the reference or the answer. This decides alone where either side
    declares one: math-verify reads `x = 2k\\pi, k \\in \\mathbb{Z}` as a list ending in the number 2."""
    if not (declares_integers(gold) or declares_integers(answer)):
        return None
    gold_expression, gold_parameters = _family(gold)
    expression, parameters = _family(answer)
    declared = gold_parameters | parameters
    if not declared:
        return False
    if same(gold_expression, expression):
        return True
    gold_letters, letters = single_letters(gold_expression), single_letters(expression)
    gold_only, answer_only = gold_letters - letters, letters - gold_letters
    if len(gold_only) == 1 and len(answer_only) == 1:
        (gold_parameter,), (parameter,) = gold_only, answer_only
    elif not gold_only and not answer_only and len(declared) == 1:
        gold_parameter = parameter = next(iter(declared))
    else:
        return False
    if not {gold_parameter, parameter} & declared or gold_parameter not in gold_letters:
        return False
    for shift in ("", *_FAMILY_SHIFTS, "-"):
        renamed = f"({gold_parameter}{shift})" if shift != "-" else f"(-{gold_parameter})"
        if same(gold_expression, rename_letter(expression, parameter, renamed if shift else gold_parameter)):
            return True
    return False


# -- a list of labelled values: `12 \text{ red}, 9 \text{ blue}, 1 \text{ green}`, which math-verify reads as `12`

_LABEL_MACRO = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mbox)\s*\{([^{}]*)\}")
_MARK = "\x00"  # before a word written in `\text{}`: a label at any length (`\text{ m}`)
# A label word: one written in `\text{}`, or a plain word of three letters or more that is no TeX command.
_LABEL_WORD = re.compile(rf"(?:{_MARK}[A-Za-z]+|(?<![\\A-Za-z])[A-Za-z]{{3,}}(?![A-Za-z]))(?:\s*\^\s*\{{?\d\}}?)?")
_FUNCTION_NAMES = {
    "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan", "log", "exp",
    "lim", "max", "min", "mod", "gcd", "lcm", "det", "arg", "sqrt",
}  # fmt: skip
_RELATION = re.compile(
    r"\s*(\\(?:leqslant|geqslant|leq|geq|le|ge|neq|ne|lt|gt|notin|in|subseteq|subset|equiv|mid)(?![A-Za-z])"
    r"|<=|>=|!=|<|>|=)\s*"
)


def _label_key(label: str) -> str:
    """A label as compared: case, articles and plurals dropped, a unit by its canonical name
    (`\\text{ Red Marbles}` -> `red marble`, `centimetres` -> `cm`)."""
    words = []
    label = re.sub(r"\s*\^\s*\{?(\d)\}?", r"^\1", label.replace(_MARK, " "))
    for word in label.lower().split():
        if word in ("a", "an", "the"):
            continue
        name, caret, power = word.partition("^")  # `ft^2`
        single = name[:-1] if len(name) > 3 and name.endswith("s") and not name.endswith("ss") else name
        words.append((_UNIT_ALIASES.get(name) or _UNIT_ALIASES.get(single) or single) + caret + power)
    return " ".join(words)


def labelled_values(text: str) -> list[tuple[str | None, str]] | None:
    """The `(label, value)` items of an answer, in order: `12 \\text{ red}, 9 \\text{ blue}` -> `[("red", "12"),
    ("blue", "9")]`; a label before its value (`\\text{red: } 12`) too, and items joined by "and". An item
    without a label has the label None. None when an item is not one value with at most one label: no value
    (`\\text{parabola}`), a relation (`x = 3`, `n > 1`), or words between values."""
    marked = _LABEL_MACRO.sub(
        lambda match: " " + re.sub(r"[A-Za-z]+", lambda word: _MARK + word.group(0), match.group(1)) + " ", text
    )
    marked = re.sub(rf"(?:{_MARK}|(?<![\\A-Za-z]))and(?![A-Za-z])", ",", marked).replace(";", ",")
    items = []
    for item in top_level_items(marked):
        words = [word for word in _LABEL_WORD.finditer(item) if word.group(0).strip(_MARK) not in _FUNCTION_NAMES]
        if not words:
            label, value = None, item
        else:
            start, end = words[0].start(), words[-1].end()
            before, label, after = item[:start], item[start:end], item[end:]
            if _LABEL_WORD.sub("", label).strip() or (before.strip() and after.strip(" .")):
                return None  # something between the label's words, or values on both sides of it
            value = before if before.strip() else re.sub(r"^\s*[:=]", "", after)
            label = _label_key(label)
        value = value.strip(" .")
        if not value and label is None:
            continue  # an empty item: `a, and b`
        if not re.search(r"\d", value) or _MARK in value or _RELATION.search(value):
            return None
        items.append((label, value))
    return items or None


def _is_labelled_list(items: list[tuple[str | None, str]] | None) -> bool:
    return items is not None and len(items) > 1 and any(label is not None for label, _ in items)


@answer_form("labelled_values", settles=True)
def _labelled_values(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """Every labelled value compared: the same labels, each with an equal value, in any order. A list of
    labelled values against a single value, or another number of values, is wrong. Against as many values
    without labels only the other answer forms can accept (`\\frac{\\pi}{6}, \\frac{5\\pi}{6}` for
    `30 \\text{ degrees}, 150 \\text{ degrees}`), never math-verify's reading of the list as its first value."""
    gold_items, items = labelled_values(gold), labelled_values(answer)
    if not (_is_labelled_list(gold_items) or _is_labelled_list(items)):
        return None
    if gold_items is None or items is None or len(gold_items) != len(items):
        return False
    if not (_is_labelled_list(gold_items) and _is_labelled_list(items)):
        return accepted_by_forms(gold, answer, final, same)
    unmatched = list(items)
    for gold_label, gold_value in gold_items:
        match = next(
            (item for item in unmatched if item[0] == gold_label and _same_piece(gold_value, item[1], same)), None
        )
        if match is None:
            return False
        unmatched.remove(match)
    return True


def _compact(text: str) -> str:
    return re.sub(r"\s+|\\left|\\right", "", text)


def _same_piece(gold: str, answer: str, same: Same) -> bool:
    return _compact(gold) == _compact(answer) or same(gold, answer)


# -- a statement: `\forall n > 1, 2^n > n^2`, which math-verify reads as its first number, `2`


class Statement(NamedTuple):
    """A claim with its quantifier and conditions: `\\forall n > 1, 2^n > n^2` -> (`forall`, (`n > 1`,),
    `2^n > n^2`)."""

    quantifier: str
    conditions: tuple[str, ...]
    claim: str


_FOR_ALL = r"\\forall(?![A-Za-z])|(?i:for\s+(?:all|every|each|any))(?![A-Za-z])"
_EXISTS = r"\\exists(?![A-Za-z])|(?i:there\s+(?:exists?|is|are)|for\s+some)(?![A-Za-z])"
_CONDITIONAL = r"(?i:for|when(?:ever)?|if)(?![A-Za-z])"  # `for n > 1`, `if n > 1`: for all such n
_QUANTIFIER_FIRST = re.compile(rf"^\s*(?:(?P<exists>{_EXISTS})|(?P<forall>{_FOR_ALL}|{_CONDITIONAL}))\s*")
# A condition after the claim: `2^n > n^2 \text{ for all } n > 1`, `..., \forall n > 1`, `... if n > 1`.
_CONDITION_AFTER = re.compile(rf"(?:,\s*|\s+)(?:(?P<exists>{_EXISTS})|(?P<forall>{_FOR_ALL}|{_CONDITIONAL}))\s*")
_IMPLIES = re.compile(r"\\(?:Rightarrow|implies|Longrightarrow)(?![A-Za-z])")
_RELATION_NAMES = {
    r"\le": "<=", r"\leq": "<=", r"\leqslant": "<=", r"\ge": ">=", r"\geq": ">=", r"\geqslant": ">=", r"\lt": "<",
    r"\gt": ">", r"\ne": "!=", r"\neq": "!=",
}  # fmt: skip
_MIRRORED = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}


def _first_separator(text: str) -> int | None:
    """The index of the first `,` or `:` outside brackets (where a quantifier's condition ends)."""
    depth = 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in ",:" and depth == 0:
            return index
    return None


def _conditions(text: str) -> tuple[str, ...] | None:
    """The conditions joined by commas or "and"; None unless each is a relation or names variables (`n`,
    `x, y`): "for the first case" is prose, not a condition."""
    joined = re.sub(r"(?<![\\A-Za-z])and(?![A-Za-z])|\\(?:land|wedge)(?![A-Za-z])", ",", text)
    conditions = tuple(item for item in top_level_items(joined) if item)
    if not conditions or not all(_RELATION.search(item) or re.fullmatch(r"[A-Za-z]", item) for item in conditions):
        return None
    return conditions


def statement(text: str) -> Statement | None:
    """The statement an answer makes, when it is quantified or conditional: a quantifier first (`\\forall`,
    "for all", "for every", `\\exists`, "there exists") and its condition up to the first comma or colon, or
    the condition after the claim ("for all", "for", "if", "when"), or a condition that implies the claim
    (`n > 4 \\Rightarrow 2^n > n^2`). The claim holds a relation. None for anything else: an equation or
    inequality alone (`x = 3`, which answers `3`) is left to math-verify."""
    plain = " ".join(TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text).split())
    if re.search(r"\\begin\{|&", plain):
        return None  # a matrix or cases: its `if`s and rows are no quantified statement
    # `\forall n > 1 \quad 2^n > n^2`, `\exists x \text{ such that } x^2 = 2`: separators, as a comma is
    plain = re.sub(r"\s*(?:\\q?quad(?![A-Za-z])|(?<![A-Za-z])such that(?![A-Za-z]))\s*", ", ", plain)
    quantifier, conditions, claim = None, (), plain
    first = _QUANTIFIER_FIRST.match(plain)
    if first:
        rest = plain[first.end() :]
        separator = _first_separator(rest)
        if separator is None:
            return None
        quantifier = "forall" if first.group("forall") else "exists"
        conditions = _conditions(rest[:separator])
        claim = re.sub(r"^\s*(?i:then)\s+", "", rest[separator + 1 :]).strip()  # `if n > 4, then ...`
    else:
        for after in _CONDITION_AFTER.finditer(plain):
            found = _conditions(plain[after.end() :])
            if found is not None and _RELATION.search(plain[: after.start()]):
                quantifier = "forall" if after.group("forall") else "exists"
                conditions, claim = found, plain[: after.start()].strip(" ,")
                break
    implication = _IMPLIES.split(claim, maxsplit=1)
    if conditions is not None and len(implication) == 2:  # `n > 4 \Rightarrow 2^n > n^2`
        premises = _conditions(implication[0])
        quantifier, claim = quantifier or "forall", implication[1].strip()
        conditions = conditions + premises if premises is not None else None
    if quantifier is None or not conditions or not _RELATION.search(claim):
        return None
    return Statement(quantifier, conditions, claim)


def _same_relation(gold: str, answer: str, same: Same) -> bool:
    """Two relations (`2^n > n^2`, `n \\in \\mathbb{N}`) with the same relation signs, in the same order or
    mirrored (`n^2 < 2^n`), and sides equal by math-verify; a condition without one (`n`) compares as text."""
    if _compact(gold) == _compact(answer):
        return True
    gold_parts, parts = _RELATION.split(gold), _RELATION.split(answer)
    gold_relations = [_RELATION_NAMES.get(sign, sign) for sign in gold_parts[1::2]]
    relations = [_RELATION_NAMES.get(sign, sign) for sign in parts[1::2]]
    gold_sides, sides = gold_parts[::2], parts[::2]
    if not gold_relations or len(gold_sides) != len(sides):
        return False
    orders = [sides] if relations == gold_relations else []
    if [_MIRRORED.get(sign) for sign in reversed(relations)] == gold_relations:
        orders.append(sides[::-1])  # `n^2 < 2^n` for `2^n > n^2`, `b = a` for `a = b`
    return any(
        all(_same_piece(gold_side, side, same) for gold_side, side in zip(gold_sides, order)) for order in orders
    )


@answer_form("statement", settles=True)
def _statements(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """A statement compared in full: the same quantifier, the same claim (each side equal by math-verify, the
    same relation), the same conditions in any order. A statement against anything else is wrong."""
    gold_statement, answer_statement = statement(gold), statement(answer)
    if gold_statement is None and answer_statement is None:
        return None
    if gold_statement is None or answer_statement is None or gold_statement.quantifier != answer_statement.quantifier:
        return False
    if not _same_relation(gold_statement.claim, answer_statement.claim, same):
        return False
    unmatched = list(answer_statement.conditions)
    for condition in gold_statement.conditions:
        match = next((other for other in unmatched if _same_relation(condition, other, same)), None)
        if match is None:
            return False
        unmatched.remove(match)
    return not unmatched


# -- two different units: `9 \text{ feet}` is not `9 \text{ inches}` (math-verify drops both units)

_UNIT_NAMES = {
    "mm": ("millimeter", "millimetre"), "cm": ("centimeter", "centimetre"), "m": ("meter", "metre"),
    "km": ("kilometer", "kilometre"), "in": ("inch", "inche"), "ft": ("foot", "feet"), "yd": ("yard",),
    "mi": ("mile",), "mg": ("milligram",), "g": ("gram",), "kg": ("kilogram",), "lb": ("pound", "lbs"),
    "oz": ("ounce",), "ml": ("milliliter", "millilitre", "mL"), "l": ("liter", "litre", "L"), "s": ("second", "sec"),
    "min": ("minute",), "h": ("hour", "hr", "hrs"), "day": (), "week": (), "month": (), "year": ("yr",),
    "dollar": ("$",), "cent": (), "euro": (), "degree": ("deg",),
}  # fmt: skip
_UNIT_ALIASES = {alias.lower(): name for name, aliases in _UNIT_NAMES.items() for alias in (name, *aliases)}
_UNIT_SUFFIX = re.compile(r"((?:\\(?:text|mathrm|mbox)\s*\{[^{}]*\}\s*(?:\^\s*\{?\d\}?)?\s*)+)$")


def _unit(text: str) -> str | None:
    """The canonical unit an answer ends with (`12\\,\\text{cm}` -> `cm`, `48 \\text{ square feet}` and
    `48 \\text{ ft}^2` -> `ft^2`, `60 \\text{ km per hour}` -> `km/h`); None when it ends with none, or with
    words this table does not know (`7\\text{th place}`)."""
    match = _UNIT_SUFFIX.search(normalize_math_answer(text))
    if match is None or not match.string[: match.start()].strip():
        return None
    words = re.sub(r"\\(?:text|mathrm|mbox)\s*\{([^{}]*)\}", r" \1 ", match.group(1))
    words = re.sub(r"\s*\^\s*\{?(\d)\}?", r"^\1", words).lower().replace(" per ", "/").replace("/", " / ")
    words = re.sub(r"\bsquare\s+(\w+)", r"\1^2", re.sub(r"\bcubic\s+(\w+)", r"\1^3", words))
    parts = []
    for token in words.split():
        if token == "/":
            parts.append("/")
            continue
        name, _, power = token.partition("^")
        name = _UNIT_ALIASES.get(name) or _UNIT_ALIASES.get(name.removesuffix("s"))
        if name is None:
            return None
        parts.append(name + (f"^{power}" if power else ""))
    return "".join(parts) or None


def units_differ(gold: str, answer: str) -> bool:
    """Whether the reference and the answer both end with a unit this module knows, and not the same one."""
    if "\\" not in gold or "\\" not in answer:  # a unit is written `\\text{...}`: most answers have none
        return False
    gold_unit, unit = _unit(gold), _unit(answer)
    return gold_unit is not None and unit is not None and gold_unit != unit


@answer_form("units", settles=True)
def _units(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """Another unit is another answer: math-verify drops units, so `9 \\text{ feet}` would equal `9 \\text{ inches}`."""
    return False if units_differ(gold, answer) else None
