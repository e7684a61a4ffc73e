"""Answer forms of sets of numbers: a condition in words for an interval or a union, and plus-minus families.

- `set_in_words` (settles): `1 < t \\le 3 \\text{ or } 5 \\le t < 7` for `(1, 3] \\cup [5, 7)`, `b \\le 0 \\text{ or }
  b = 2` for `(-\\infty, 0] \\cup \\{2\\}`, `x > -1 \\text{ and } x < 4` for `(-1, 4)`. Each side is turned into the
  set of reals it describes (relations on one letter joined by "or" and "and", `t \\in S`, intervals, unions,
  finite sets, set-builder sets) and the two sets compared. Settles where a side joins relations with "or" or
  "and": math-verify reads `x = -3 \\text{ and } x = 3` as the set `\\{-3, 3\\}`.
- `inequality_for_interval`: a single relation or chain (`-1 < x < 4`, `k > 0`) for an interval written with
  parentheses only, which math-verify takes for a point (`(-1, 4)`), and the reverse.
- `plus_minus`: `(\\pm 1, \\pm 2)` for the four pairs, `x = 2 \\pm \\sqrt{3}` for both roots, `\\pm(3, 4)` for
  `(3, 4), (-3, -4)`: each `\\pm` written out with both signs, and the two lists compared as sets.
"""

from __future__ import annotations

import itertools
import re

from .compare import Same
from .extract import FinalAnswer
from .forms import answer_form, top_level_items

__all__ = ["real_set", "set_in_words"]

_CONNECTIVE = re.compile(
    r"\s*(?:\\(?:text|textrm|mathrm|mbox)\s*\{\s*(or|and)\s*\}|\\(lor|vee|land|wedge)(?![A-Za-z])|(?<![A-Za-z])(or|and)"
    r"(?![A-Za-z]))\s*"
)
_RELATION = re.compile(r"\s*(\\(?:leqslant|geqslant|leq|geq|le|ge|lt|gt|neq|ne)(?![A-Za-z])|<=|>=|!=|≠|<|>|=)\s*")
_RELATION_NAMES = {
    r"\le": "<=", r"\leq": "<=", r"\leqslant": "<=", r"\ge": ">=", r"\geq": ">=", r"\geqslant": ">=", r"\lt": "<",
    r"\gt": ">", r"\ne": "!=", r"\neq": "!=", "≠": "!=",
}  # fmt: skip
_MEMBERSHIP = re.compile(r"^\s*([A-Za-z])\s*\\in\s*(.+)$", re.DOTALL)
_SET_BUILDER = re.compile(
    r"^\s*\\\{\s*([A-Za-z])\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*)?(?:\\mid|\\vert|\||:)\s*(.+?)\s*\\\}\s*$", re.DOTALL
)
_OR, _AND = "or", "and"


def _connected(text: str) -> list[tuple[str, str]]:
    """`text` split on its connectives: `[("", atom), ("or", atom), ("and", atom), ...]`."""
    pieces, start, joiner = [], 0, ""
    for match in _CONNECTIVE.finditer(text):
        word = next(group for group in match.groups() if group)
        pieces.append((joiner, text[start : match.start()]))
        joiner, start = (_OR if word in ("or", "lor", "vee") else _AND), match.end()
    pieces.append((joiner, text[start:]))
    return pieces


def _real_number(text: str, same: Same):
    """A real number or an infinity math-verify reads from `text`, or None."""
    import sympy

    parsed = same.parsed(text)
    value = parsed[0] if parsed else None
    if not isinstance(value, sympy.Expr) or not value.is_number:
        return None
    if value in (sympy.oo, -sympy.oo) or value.is_real:
        return value
    return None


def _relation_set(left, sign: str, right):
    """The set of the variable's values for which `left sign right` holds (one side is the variable)."""
    import sympy

    if isinstance(left, str):  # the variable
        bound, sign = right, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(sign, sign)
    else:
        bound = left
    # `bound sign x`: x > bound for `<`, and so on.
    if sign == "<":
        return sympy.Interval.open(bound, sympy.oo)
    if sign == "<=":
        return sympy.Interval(bound, sympy.oo)
    if sign == ">":
        return sympy.Interval.open(-sympy.oo, bound)
    if sign == ">=":
        return sympy.Interval(-sympy.oo, bound)
    if sign == "=":
        return sympy.FiniteSet(bound)
    return sympy.Complement(sympy.Reals, sympy.FiniteSet(bound))  # `!=`


def _atom_set(atom: str, same: Same) -> tuple[object, str] | None:
    """`(set, variable)` of one relation or chain on one letter (`1 < t \\le 3`, `b = 2`) or of `t \\in S`."""
    import sympy

    membership = _MEMBERSHIP.match(atom)
    if membership:
        value = real_set(membership.group(2), same)
        return (value, membership.group(1)) if value is not None else None
    parts = _RELATION.split(atom.strip())
    sides, signs = parts[::2], [_RELATION_NAMES.get(sign, sign) for sign in parts[1::2]]
    letters = [side for side in sides if re.fullmatch(r"[A-Za-z]", side.strip())]
    if not signs or len(letters) != 1 or len(signs) > 2:
        return None
    variable = letters[0].strip()
    values = [variable if side.strip() == variable else _real_number(side, same) for side in sides]
    if any(value is None for value in values):
        return None
    result = sympy.Reals
    for index, sign in enumerate(signs):
        left, right = values[index], values[index + 1]
        if isinstance(left, str) == isinstance(right, str):
            return None  # `1 < 2 < x`: a relation between numbers is no condition on the letter
        result = sympy.Intersection(result, _relation_set(left, sign, right))
    return result, variable


def _is_point(value) -> bool:
    import sympy

    return isinstance(value, sympy.FiniteSet)


def set_in_words(text: str, same: Same) -> tuple[object, bool] | None:
    """`(set, joined)`: the set of reals a condition on one letter describes (relations or chains joined by
    "or" and "and", "and" binding closer; `t \\in S`), and whether it joins several; None for anything else.
    "and" between two values (`x = -3 \\text{ and } x = 3`) lists them, as "or" does: no number is both."""
    import sympy

    plain = text.replace(r"\left", "").replace(r"\right", "")
    items = top_level_items(plain)
    if len(items) > 1 and all(re.match(r"\s*[A-Za-z]\s*=(?!=)", item) for item in items):
        plain = r" \text{ or } ".join(items)  # `p = -1, p = 2`: a list of values, as with "or"
    pieces = _connected(plain)
    variables, union, current = set(), [], None
    for joiner, atom in pieces:
        found = _atom_set(atom, same) if atom.strip() else None
        if found is None:
            return None
        atom_set, variable = found
        variables.add(variable)
        if joiner == _AND and not (_is_point(current) and _is_point(atom_set)):
            current = sympy.Intersection(current, atom_set)
        else:
            if current is not None:
                union.append(current)
            current = atom_set
    union.append(current)
    if len(variables) != 1:
        return None
    return sympy.Union(*union), len(pieces) > 1


_BARE_PAIR = re.compile(r"\(\s*[^,()\[\]]+,[^,()\[\]]+\)")


def real_set(text: str, same: Same, *, interval_context: bool = False):
    """The set of reals `text` writes as an interval, a union, a finite set or a set-builder set (its condition
    in words); `(a, b)` is an open interval only in an interval context. None for anything else."""
    import sympy

    builder = _SET_BUILDER.match(text)
    if builder:
        found = set_in_words(builder.group(2), same)
        return found[0] if found else None
    if _RELATION.search(text):
        return None  # a relation is a condition, read by `set_in_words` or not at all
    stripped = text.strip()
    if not interval_context and _BARE_PAIR.fullmatch(stripped) and "infty" not in stripped:
        return None  # `(a, b)` may be a point: math-verify reads it as an interval, this does not
    parsed = same.parsed(text)
    value = parsed[0] if parsed else None
    if isinstance(value, sympy.Set):
        return value
    if (
        interval_context
        and isinstance(value, sympy.Tuple)
        and len(value) == 2
        and stripped.startswith("(")
        and stripped.endswith(")")
    ):
        low, high = value
        if all(end.is_number and (end.is_real or end in (sympy.oo, -sympy.oo)) for end in (low, high)) and low < high:
            return sympy.Interval.open(low, high)
    return None


def _same_set(first, second) -> bool:
    import sympy

    try:
        return sympy.Union(first, second) == sympy.Intersection(first, second) or (
            sympy.Complement(first, second) == sympy.EmptySet and sympy.Complement(second, first) == sympy.EmptySet
        )
    except Exception:  # noqa: BLE001 - sets sympy cannot compare are not shown equal
        return False


def _compared_sets(gold: str, answer: str, same: Same, *, joined: bool) -> bool | None:
    """Whether the two sides describe the same set, where one is a condition in words (joined by "or"/"and"
    when `joined`, a single relation or chain otherwise) and the other a set or a condition; None when not."""
    gold_words, words = _words_or_none(gold, same), _words_or_none(answer, same)
    if gold_words is None and words is None:
        return None
    if not any(found and found[1] == joined for found in (gold_words, words)):
        return None
    # `(a, b)` beside a condition stays a pair: were it read as an interval, `a < x < b` would score every
    # point answer `(a, b)` with `a < b`, a form a policy would learn to write.
    gold_set = gold_words[0] if gold_words else real_set(gold, same)
    answer_set = words[0] if words else real_set(answer, same)
    if gold_set is None or answer_set is None:
        return None
    return _same_set(gold_set, answer_set)


def _words_or_none(text: str, same: Same) -> tuple[object, bool] | None:
    if not _RELATION.search(text) and not _MEMBERSHIP.match(text):
        return None
    return set_in_words(text, same)


@answer_form("set_in_words", settles=True)
def _set_in_words(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool | None:
    """Relations joined by "or" / "and" against a set, or against another such condition: the same set of
    reals. Settles, so `x = -3 \\text{ and } x = 3` (no number) is not the set `\\{-3, 3\\}`."""
    if not (_CONNECTIVE.search(gold) or _CONNECTIVE.search(answer)):
        return None
    return _compared_sets(gold, answer, same, joined=True)


@answer_form("inequality_for_interval")
def _inequality_for_interval(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """A single relation or chain on one letter for an interval or set (either side the reference); `(a, b)`
    beside it is a pair, never read as the open interval (it may be a point)."""
    return _compared_sets(gold, answer, same, joined=False) is True


# -- plus-minus families: `(\pm 1, \pm 2)` for `(1, 2), (1, -2), (-1, 2), (-1, -2)`

_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])|±|∓")
_ITEM_LABEL = re.compile(r"^\s*[A-Za-z](?:_\{?[\d,\s]+\}?)?\s*=(?!=)\s*")
_MAX_SIGNED = 4  # at most 2^4 sign choices in one item


def _signed_versions(item: str) -> list[str] | None:
    """`item` with each `\\pm` written `+` and `-` (independently; a `\\mp` takes the sign opposite to the one
    `\\pm` of its item); a sign before a bracketed tuple goes to each component (`-(3, 4)` -> `(-(3), -(4))`)."""
    signs = _PLUS_MINUS.findall(item)
    if not signs:
        return [item]
    minus_plus = [sign for sign in signs if sign in (r"\mp", "∓")]
    if len(signs) > _MAX_SIGNED or (minus_plus and len(signs) != 2 * len(minus_plus)):
        return None
    independent = len(signs) - len(minus_plus)
    versions = []
    for choice in itertools.product("+-", repeat=independent):
        chosen = iter(choice)
        last = []

        def sign_for(match, chosen=chosen, last=last):
            if match.group(0) in (r"\mp", "∓"):
                return "-" if last and last[-1] == "+" else "+"
            last.append(next(chosen))
            return last[-1]

        versions.append(_distribute_sign(_PLUS_MINUS.sub(sign_for, item)))
    return versions


def _distribute_sign(item: str) -> str:
    match = re.fullmatch(r"\s*([+-])\s*\((.*)\)\s*", item, re.DOTALL)
    if match is None or "," not in match.group(2):
        return item.strip().lstrip("+").strip()
    if match.group(1) == "+":
        return f"({match.group(2)})"
    return "(" + ", ".join(f"-({part})" for part in top_level_items(match.group(2))) + ")"


def _expanded(text: str) -> list[str] | None:
    """The values of a list with each `\\pm` written out: items split on commas and "or", a label `x =` or
    `x_{1,2} =` dropped (the same letter on every item)."""
    plain = _CONNECTIVE.sub(", ", text.replace(r"\left", "").replace(r"\right", ""))
    items = [item for item in top_level_items(plain) if item]
    labels = {match.group(0).strip(" =")[0] for item in items if (match := _ITEM_LABEL.match(item))}
    if len(labels) > 1:
        return None
    values = []
    for item in items:
        versions = _signed_versions(_ITEM_LABEL.sub("", item, count=1))
        if versions is None or "=" in "".join(versions):
            return None
        values.extend(versions)
    return values


def _same_values(gold_values: list[str], values: list[str], same: Same) -> bool:
    """The two lists as sets: every value of each equal to one of the other (repeats count once)."""

    def covered(first: list[str], second: list[str]) -> bool:
        return all(any(same(one, other) for other in second) for one in first)

    return covered(gold_values, values) and covered(values, gold_values)


def _distinct_count(values: list[str], same: Same) -> int:
    distinct = []
    for value in values:
        if not any(same(value, other) for other in distinct):
            distinct.append(value)
    return len(distinct)


@answer_form("plus_minus")
def _plus_minus(gold: str, answer: str, final: FinalAnswer, same: Same) -> bool:
    """Both sides written out with each `\\pm` as both signs, then compared as sets of values or tuples, with as
    many distinct values on each side."""
    if not (_PLUS_MINUS.search(gold) or _PLUS_MINUS.search(answer)):
        return False
    gold_values, values = _expanded(gold), _expanded(answer)
    if not gold_values or not values:
        return False
    if _distinct_count(gold_values, same) != _distinct_count(values, same):
        return False
    return _same_values(gold_values, values, same)
