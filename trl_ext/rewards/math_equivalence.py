"""`math`: mathematical equivalence of the final answer with the reference, by `math-verify`.

`math-verify` parses LaTeX and plain answers into sympy and compares them (fractions and decimals, sets in
any order, intervals, expanded and factored forms, percent, units). Its own parts are used as they are: the
default normalisation of `LatexExtractionConfig` (units, malformed operators such as `2^(10)` or `\\frac12`,
leading decimal points), its rule for a run of several boxes, and `verify`'s string comparison when sympy
fails on a pair. What it misses on real data, and what this module adds:

- finding the answer: the last non-empty `\\boxed{}` or `\\fbox{}`, or `Answer: ...` line, whichever comes
  last (an "answer:" in prose after the box is not an answer); "the final answer is $x$"; math-verify's
  search for an anchored answer; or a completion that is nothing but the answer (`1/2`, `$x^2+2x$`);
- TeX shorthand with command or letter arguments (`\\frac\\pi2`, `\\tfrac{a}b`, `\\sqrt[3]8`), which
  math-verify misreads;
- MATH's spacing (`10,\\!000` and `1\\,000` are numbers; a row break `\\\\` stays one), `\\varnothing`,
  Unicode math (`π`, `√2`, `≤`), and a trailing period or comma inside the box (`\\boxed{6.}`);
- an inequality answered for a reference that can only be an interval (`x \\geq 2` for `[2, \\infty)`);
- right answers in another form than the reference's, once math-verify has rejected them (`same_by_forms`):
  column vectors for tuples, set-builder sets for intervals, ordered chains for orders, a function or an
  integer family with another variable or parameter name, degrees for radians, the precision rule (an exact
  or finer number for a rounded reference), text that differs in markup, an option's text for its letter.

`verify_math_answer` is the pure function (`extract_final_answer` then `verify_final_answer`); `MathReward`
runs the second in the verification process pool with a hard per-item timeout (math-verify's own timeouts
use `signal.alarm`, which only works in the main thread), once per distinct (reference, final answer).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .base import Reward, completion_text, dataset_column, scores_for
from .extraction import (
    answer_phrase,
    auto_answer,
    boxed_spans,
    gsm8k_answer,
    last_boxed,
    listed_choices,
    reads_as_prose,
    strip_math_delimiters,
)
from .math_fallback import ask_fallback, resolve_fallback
from .pool import TimeoutPool, shared_pool
from .registry import register_reward

__all__ = [
    "FinalAnswer",
    "MathReward",
    "MathVerifier",
    "VerdictCache",
    "chunks_by_reference",
    "distinct_items",
    "extract_final_answer",
    "extract_math_answer",
    "normalize_math_answer",
    "same_by_forms",
    "verify_final_answer",
    "verify_math_answer",
]

_UNICODE = {
    "−": "-", "–": "-", "×": r"\times ", "÷": r"\div ", "·": r"\cdot ", "π": r"\pi ", "∞": r"\infty ",
    "≤": r"\le ", "≥": r"\ge ", "≠": r"\ne ", "°": r"^\circ", "∪": r"\cup ", "∩": r"\cap ",
    "∅": r"\emptyset ",
    "½": r"\frac{1}{2}", "¼": r"\frac{1}{4}", "¾": r"\frac{3}{4}",
}


def _tex_argument(text: str, start: int) -> tuple[str, int] | None:
    """One TeX macro argument at `text[start:]` (spaces skipped): a `{...}` group, a `\\command`, or one
    character. Returns the argument without braces and the index after it."""
    index = start
    while index < len(text) and text[index] == " ":
        index += 1
    if index >= len(text):
        return None
    if text[index] == "{":
        depth = 0
        for end in range(index, len(text)):
            if text[end] == "{":
                depth += 1
            elif text[end] == "}":
                depth -= 1
                if depth == 0:
                    return text[index + 1 : end], end + 1
        return None
    if text[index] == "\\":
        command = re.match(r"\\[A-Za-z]+|\\.", text[index:])
        return command.group(0), index + len(command.group(0))
    return text[index], index + 1


def _brace_shorthand(text: str) -> str:
    """`\\frac12` / `\\frac 1 2` / `\\dfrac{1}2` -> `\\frac{1}{2}` and `\\sqrt2` -> `\\sqrt{2}`, as TeX reads them."""
    out, index = [], 0
    pattern = re.compile(r"\\[dt]?frac(?![A-Za-z])|\\sqrt(?![A-Za-z])")
    while True:
        match = pattern.search(text, index)
        if match is None:
            out.append(text[index:])
            return "".join(out)
        out.append(text[index : match.start()])
        is_frac = "frac" in match.group(0)
        position = match.end()
        root = ""
        if not is_frac:
            optional = re.match(r"\s*\[([^\]]*)\]", text[position:])  # \sqrt[3]{x}
            if optional:
                root = f"[{optional.group(1)}]"
                position += optional.end()
        arguments = []
        for _ in range(2 if is_frac else 1):
            argument = _tex_argument(text, position)
            if argument is None:
                break
            arguments.append(_brace_shorthand(argument[0]))
            position = argument[1]
        expected = 2 if is_frac else 1
        if len(arguments) < expected:  # malformed: leave it for math-verify to reject
            out.append(text[match.start() : position])
        else:
            name = r"\frac" if is_frac else r"\sqrt" + root
            out.append(name + "".join(f"{{{argument}}}" for argument in arguments))
        index = position


def normalize_math_answer(answer: str) -> str:
    """Rewrite an answer string into the TeX math-verify parses best (see the module docstring)."""
    answer = strip_math_delimiters(answer)
    for char, replacement in _UNICODE.items():
        answer = answer.replace(char, replacement)
    answer = re.sub(r"√\s*(\d+|[A-Za-z]|\([^()]*\))", lambda m: r"\sqrt{" + m.group(1).strip("()") + "}", answer)
    answer = answer.replace("√", r"\sqrt")
    answer = answer.replace(r"\$", "").replace(r"\varnothing", r"\emptyset").replace(r"\O ", r"\emptyset ")
    # Digit groups separated by a thin space (1\,000 or 1\!000): one number, as in the printed form.
    answer = re.sub(r"(?<=\d)(?:\\[,!;:]|\\ |~)\s*(?=\d{3}(?!\d))", "", answer)
    # Other TeX spacing: `\,` `\;` `\:` `\ ` `~` are spaces, `\!` is none (so MATH's `10,\!000` stays one
    # number). The lookbehind keeps a row break `\\` followed by a space (`1 \\ 2` in a pmatrix) intact.
    answer = re.sub(r"(?<!\\)\\!\s*", "", answer)
    answer = re.sub(r"(?<!\\)(?:\\[,;:]|\\ )|~", " ", answer)
    answer = _brace_shorthand(answer)
    answer = answer.strip()
    if re.fullmatch(r"-?\d{1,3}(?: \d{3})+(?:\.\d+)?", answer):  # `1 000`: digit groups, not a product
        answer = answer.replace(" ", "")
    # `1.5e3`, as programs print numbers, is `1.5 \times 10^{3}` (math-verify reads `e` as Euler's number).
    answer = re.sub(r"^(-?\d+(?:\.\d+)?)[eE]([+-]?\d+)$", r"\1 \\times 10^{\2}", answer)
    answer = re.sub(r"(?:\\text\{\s*\.?\s*\}|[.,;:])+$", "", answer).strip()
    return answer


@dataclass(frozen=True)
class FinalAnswer:
    """What `verify_final_answer` needs from a completion; two completions with equal `FinalAnswer`s get the
    same verdict against any reference, so a batch verifies each distinct one once.

    text: the marked answer (last box, `Answer:` line, `<answer>` tag, or a completion that is only the
        answer), or None when there is none.
    boxes: the completion from its first box on, when it has more than one: a reference with several answers
        may be answered one box each (`\\boxed{2} and \\boxed{3}` for `2, 3`); the worker reads the last run
        of boxes from it by math-verify's rule.
    unmarked: the whole completion when `text` is None, for math-verify's search of an anchored answer
        ("the final answer is $x$"); else None.
    choices: the options the question lists, `(letter, text)` in order (`listed_choices`), so an option's
        text answers its letter and the reverse; empty when it lists none or is not known.
    descending: the question asks for an order from greatest to least, so a chain `r > p > q` (not
        `q < p < r`) answers the order `r, p, q`.
    decimals: the number of decimals the question asks the answer to be rounded to ("to the nearest
        hundredth": 2), so a rounded answer to an exact reference can be right; None when it asks for none.
    """

    text: str | None
    boxes: str | None = None
    unmarked: str | None = None
    choices: tuple[tuple[str, str], ...] = ()
    descending: bool = False
    decimals: int | None = None


_DESCENDING = re.compile(
    r"(?i)\b(?:greatest|largest|biggest|highest)\s+to\s+(?:the\s+)?(?:least|smallest|lowest)\b"
    r"|\b(?:decreasing|descending)\b"
)


def extract_final_answer(completion: str, question: str | None = None) -> FinalAnswer:
    """The `FinalAnswer` of a completion (and what its `question`, when given, says about the answer): string
    work only, cheap enough to run in the trainer process."""
    text = extract_math_answer(completion)
    spans = boxed_spans(completion)
    return FinalAnswer(
        text=text,
        boxes=completion[spans[0][0] :] if len(spans) > 1 else None,
        unmarked=completion if text is None else None,
        choices=listed_choices(question),
        descending=bool(question and _DESCENDING.search(question)),
        decimals=requested_decimals(question),
    )


_PLACES = {"whole number": 0, "integer": 0, "tenth": 1, "hundredth": 2, "thousandth": 3, "ten-thousandth": 4}
_NEAREST = re.compile(r"(?i)nearest\s+(whole number|integer|ten-thousandth|tenth|hundredth|thousandth)")
_DECIMAL_PLACES = re.compile(r"(?i)\b(\d|one|two|three|four)\s+decimal\s+places?\b")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4}


def requested_decimals(question: str | None) -> int | None:
    """How many decimals a question asks the answer to be rounded to: "to the nearest hundredth" -> 2,
    "to 3 decimal places" -> 3; None when it asks for no rounding (or for two different ones)."""
    if not question:
        return None
    found = {_PLACES[match.group(1).lower()] for match in _NEAREST.finditer(question)}
    for match in _DECIMAL_PLACES.finditer(question):
        word = match.group(1).lower()
        found.add(int(word) if word.isdigit() else _NUMBER_WORDS[word])
    return found.pop() if len(found) == 1 else None


def extract_math_answer(text: str) -> str | None:
    """The final answer of a completion (see the module docstring), or None when none is found here.

    None does not mean "wrong": `verify_math_answer` then lets math-verify look for an anchored answer.
    """
    answer = auto_answer(text)
    if answer is None:
        answer = answer_phrase(text)  # "the final answer is $x$", the form math-verify's anchors look for
    if answer is not None:
        return answer
    stripped = text.strip()
    # A completion that is only the answer: one math span (`$$\begin{pmatrix}...\end{pmatrix}$$`), or one
    # short line without prose (`1/2`, `28 percent`, `\frac{1}{3} \text{meters}`). Longer text without a
    # marked answer is not guessed at: its last number is often not the answer, and rewarding it would teach
    # the model to end with a random number.
    if _ONLY_MATH.fullmatch(stripped) and len(stripped) <= 1000:
        return stripped
    if stripped and "\n" not in stripped and len(stripped) <= 64 and not _reads_as_prose_beyond_units(stripped):
        return stripped
    return None


_ONLY_MATH = re.compile(r"(?:\$\$[^$]+\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\])\s*\.?", re.DOTALL)


def _reads_as_prose_beyond_units(text: str) -> bool:
    """Prose once a trailing unit (math-verify's own unit list) or a percent word is taken off."""
    from latex2sympy2_extended.math_normalization import units_regex

    text = re.sub(r"\s*\b(?:percent|percentage|pct)\b", "", text)
    return reads_as_prose(units_regex.sub(r"\1", text))


def reference_answer(reference: str) -> str:
    """The answer part of a reference: its last run of boxes (math-verify's rule: `\\boxed{1}` and
    `\\boxed{-2}` is the answer `1,-2`), else the text after `####`, else the whole text."""
    if "{" in reference and boxed_spans(reference):
        from latex2sympy2_extended.math_normalization import extract_boxed_content

        braced = re.search(r"\\(?:boxed|fbox)\s*\{", reference)
        if braced:
            run = extract_boxed_content(reference, mode="last")
            if run.strip():
                return run.strip()
    boxed = last_boxed(reference)
    if boxed is not None:
        return boxed
    marked = gsm8k_answer(reference)
    return marked if marked is not None else reference


def _extraction_config(anchored_only: bool = False) -> list:
    """math-verify's own extraction settings, with its default normalisation (units, malformed operators such
    as `2^(10)` and `\\frac12`, nits); `anchored_only` searches free text for an anchored answer only."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    if anchored_only:
        return [
            LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False),
            ExprExtractionConfig(try_extract_without_anchor=False),
        ]
    return [LatexExtractionConfig(), ExprExtractionConfig()]


_INLINE_MATH = re.compile(r"\$[^$]*\$")


@functools.lru_cache(maxsize=4096)
def _parse_answer(answer: str, parsing_timeout: int | None) -> tuple:
    from math_verify import parse

    normalized = normalize_math_answer(answer)
    if not normalized:
        return ()
    # Wrapped in `$` even when it still holds some (`1$ and $2` once its outer delimiters are gone, `$5$ per
    # day`, a box that opens math mid-way): math-verify reads each of these right only so. A sentence (`The
    # largest $n$ is 34.` on an `Answer:` line) is left as text, for math-verify to find the math in it.
    sentence = re.search(r"(?<!\\)\$", normalized) and reads_as_prose(_INLINE_MATH.sub(" ", normalized))
    text = normalized if sentence else f"${normalized}$"
    try:
        return tuple(
            parse(
                text,
                extraction_config=_extraction_config(),
                parsing_timeout=parsing_timeout,
                raise_on_error=True,  # so a timeout surfaces (as math-verify's BaseException) instead of []
            )
        )
    except Exception:  # noqa: BLE001 - any parse error means "not parsable"
        return ()


def _parse_anchored(text: str, parsing_timeout: int | None) -> list:
    """math-verify's own search for an anchored answer ("the final answer is $x$") in free text."""
    from math_verify import parse

    try:
        return parse(
            text,
            extraction_config=_extraction_config(anchored_only=True),
            parsing_timeout=parsing_timeout,
            raise_on_error=True,
        )
    except Exception:  # noqa: BLE001
        return []


def verify_math_answer(
    reference: str,
    completion: str,
    *,
    question: str | None = None,
    parsing_timeout: int | None = None,
    verify_timeout: int | None = None,
) -> bool | None:
    """Whether `completion`'s final answer is mathematically equivalent to `reference`.

    Returns None when the reference cannot be parsed ("cannot judge"), False when the completion has no
    answer or a different one. `question`, when given, lets an option's text answer its letter (and the
    reverse) when it lists options, and says which way an ordering runs. `parsing_timeout` / `verify_timeout`
    are math-verify's own limits (whole seconds, `signal.alarm`, so main thread only); past one it raises
    `TimeoutError`. None disables them, for callers that bound time themselves.
    """
    return verify_final_answer(
        reference,
        extract_final_answer(completion, question),
        parsing_timeout=parsing_timeout,
        verify_timeout=verify_timeout,
    )


def verify_final_answer(
    reference: str, answer: FinalAnswer, *, parsing_timeout: int | None = None, verify_timeout: int | None = None
) -> bool | None:
    """`verify_math_answer` on an already extracted `FinalAnswer` (what the pool workers run)."""
    from math_verify.errors import TimeoutException

    try:
        return _verify(reference, answer, parsing_timeout, verify_timeout)
    except TimeoutException:
        raise TimeoutError(f"math-verify timed out on reference {reference[:80]!r}") from None


def _equivalent(gold: list, predicted: list, verify_timeout: int | None, *, allow_set_relation_comp: bool) -> bool:
    """math-verify's `verify`, pair by pair: a pair sympy cannot compare (`12:00` divides by zero) is no match,
    and the next pair (the string forms) is still compared, as `verify` does with `raise_on_error=False`; a
    timeout is raised rather than read as "no match"."""
    from math_verify import verify

    for gold_item in gold:
        for predicted_item in predicted:
            try:
                if verify(
                    gold_item,
                    predicted_item,
                    timeout_seconds=verify_timeout,
                    allow_set_relation_comp=allow_set_relation_comp,
                    raise_on_error=True,
                ):
                    return True
            except Exception:  # noqa: BLE001, S112 - a comparison sympy cannot do is not a match
                continue
    return False


_INTEGER = re.compile(r"-?\d+")
# A reference that can only be an interval (a bracket, an infinite end, a union): an inequality answers it.
# `(1, 2)` is left out: in MATH it is as often a point as an open interval.
_UNAMBIGUOUS_INTERVAL = re.compile(r"\[|\]|\\infty|∞|\\cup")


def _verify(reference: str, answer: FinalAnswer, parsing_timeout: int | None, verify_timeout: int | None) -> bool | None:
    gold_answer = reference_answer(reference)
    if answer.text is not None:
        # Integer against integer (DAPO-Math, AIME, GSM8K): equal as integers or not; skip the LaTeX parser,
        # which costs ~15 ms an answer.
        gold_text, answer_text = normalize_math_answer(gold_answer), normalize_math_answer(answer.text)
        if _INTEGER.fullmatch(gold_text) and _INTEGER.fullmatch(answer_text):
            return int(gold_text) == int(answer_text)
    gold = list(_parse_answer(gold_answer, parsing_timeout))
    if not gold:
        return None
    predicted = list(_parse_answer(answer.text, parsing_timeout)) if answer.text is not None else []
    if not predicted and answer.unmarked is not None:
        predicted = _parse_anchored(normalize_math_answer_text(answer.unmarked), parsing_timeout)
    forms = functools.partial(
        same_by_forms, gold_answer, answer, parsing_timeout=parsing_timeout, verify_timeout=verify_timeout
    )
    if answer.text is not None and (declares_integers(gold_answer) or declares_integers(answer.text)):
        same = _Same(parsing_timeout, verify_timeout)
        gold_text, answer_text = normalize_math_answer(gold_answer), normalize_math_answer(answer.text)
        return _integer_families(gold_text, answer_text, answer, same)
    if answer.text is not None and units_differ(gold_answer, answer.text):
        return False  # math-verify drops units, so `9 \text{ feet}` would equal `9 \text{ inches}`
    if not predicted:
        return forms()
    # math-verify compares an inequality with an interval reference only when told to.
    interval = bool(_UNAMBIGUOUS_INTERVAL.search(gold_answer))
    if _equivalent(gold, predicted, verify_timeout, allow_set_relation_comp=interval):
        return True
    # A reference with several answers may be answered one box each: `\boxed{2} and \boxed{3}` for `2, 3`.
    if answer.boxes is not None and _has_several_elements(gold[0]):
        from latex2sympy2_extended.math_normalization import extract_boxed_content

        run = extract_boxed_content(answer.boxes, mode="last")
        joined = list(_parse_answer(run, parsing_timeout)) if "," in run else []
        if joined and _equivalent(gold, joined, verify_timeout, allow_set_relation_comp=False):
            return True
    return forms()


def _has_several_elements(value: Any) -> bool:
    import sympy

    return isinstance(value, (sympy.FiniteSet, sympy.Tuple, tuple, list, set)) and len(value) > 1


# ---------------------------------------------------------------------------------------------- answer forms
# Right answers in a form math-verify does not compare with the reference's form. A rule runs only once
# math-verify has said "different", recognises its form by a regular expression before parsing anything, and
# rewrites the two answers into forms math-verify compares; it accepts only when math-verify then finds them
# equal, so no rule widens what "equal" means, except `_precision`, the one stated rule about rounding.


@dataclass(frozen=True)
class _Same:
    """math-verify's equivalence of two answer strings, with the caller's time limits."""

    parsing_timeout: int | None
    verify_timeout: int | None

    def parsed(self, text: str) -> list:
        return list(_parse_answer(text, self.parsing_timeout))

    def __call__(self, gold: str, answer: str, *, relations: bool = False) -> bool:
        gold_parsed, answer_parsed = self.parsed(gold), self.parsed(answer)
        return bool(gold_parsed and answer_parsed) and _equivalent(
            gold_parsed, answer_parsed, self.verify_timeout, allow_set_relation_comp=relations
        )


_TEXT_MACRO = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")


def _letters(text: str) -> set[str]:
    """The one-letter symbols of a TeX expression (`x`, `k` in `2k\\pi + x`), outside commands and `\\text{}`."""
    return set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", _TEXT_MACRO.sub(" ", text))) - {"e", "i"}


def _rename(text: str, old: str, new: str) -> str:
    """`text` with the one-letter symbol `old` written `new` (commands such as `\\to` keep their letters)."""
    return re.sub(rf"(?<![\\A-Za-z]){old}(?![A-Za-z])", lambda _: new, text)


def _top_level_items(text: str) -> list[str]:
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


def _vector_forms(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
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


def _set_builder(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
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


def _same_items(gold_items: list[str], answer_items: list[str], same: _Same) -> bool:
    compact = lambda item: re.sub(r"\s+|\\left|\\right", "", item)  # noqa: E731
    return len(gold_items) == len(answer_items) and all(
        compact(g) == compact(a) or same(g, a) for g, a in zip(gold_items, answer_items)
    )


def _ordered_chain(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
    """The chain must list the reference's items in its order, with the relation the question asks for: `<`
    unless it asks for greatest to least (then `>`)."""
    wanted = "descending" if final.descending else "ascending"
    answer_chain, gold_chain = _chain(answer), _chain(gold)
    if answer_chain and gold_chain is None and "," in gold:
        items, direction = answer_chain
        return direction == wanted and _same_items(_top_level_items(gold), items, same)
    if gold_chain and answer_chain is None and "," in answer:
        items, direction = gold_chain
        return direction == wanted and _same_items(items, _top_level_items(answer), same)
    return False


# -- the same function with another variable name: `f(t) = 3t - 2` for `f(x) = 3x - 2`

_FUNCTION_DEFINITION = re.compile(r"([A-Za-z])\s*\(\s*([A-Za-z])\s*\)\s*=(?!=)\s*(.+)", re.DOTALL)


def _function_forms(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
    gold_definition = _FUNCTION_DEFINITION.fullmatch(gold.strip())
    answer_definition = _FUNCTION_DEFINITION.fullmatch(answer.strip())
    if gold_definition and answer_definition:
        if gold_definition.group(1) != answer_definition.group(1):
            return False  # the question names the function; another name is another function
        gold_variable, gold_body = gold_definition.group(2), gold_definition.group(3)
        variable, body = answer_definition.group(2), answer_definition.group(3)
    elif answer_definition:  # `f(t) = 3t - 2` for `3x - 2`: the reference's one variable is the argument
        variable, body = answer_definition.group(2), answer_definition.group(3)
        symbols = _letters(gold)
        if len(symbols) > 1:
            return False
        gold_variable, gold_body = next(iter(symbols), variable), gold
    elif gold_definition:  # `3t - 2` for `f(x) = 3x - 2`
        gold_variable, gold_body = gold_definition.group(2), gold_definition.group(3)
        symbols = _letters(answer)
        if len(symbols) != 1:
            return False
        variable, body = symbols.pop(), answer
    else:
        return False
    if variable != gold_variable and gold_variable in _letters(body):
        return False  # renaming would capture a symbol of the answer's own
    return same(gold_body, _rename(body, variable, gold_variable))


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
    plain = _TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text)
    declarations = list(_INTEGER_DECLARATION.finditer(plain))
    if not declarations:
        return text, set()
    parameters = {next(group for group in match.groupdict().values() if group) for match in declarations}
    return _CONNECTORS.sub("", plain[: declarations[0].start()]).strip(), parameters


def declares_integers(text: str) -> bool:
    """Whether an answer declares an integer parameter (`k \\in \\mathbb{Z}`, `where k is an integer`)."""
    return bool(_INTEGER_DECLARATION.search(_TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text)))


def _integer_families(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
    """Equal as sets over the integers: the expressions once the declarations are cut off, or with the
    parameter renamed, shifted by a small integer or negated (each a bijection of the integers). Needs a
    parameter declared an integer in the reference or the answer. This decides alone where either side
    declares one: math-verify reads `x = 2k\\pi, k \\in \\mathbb{Z}` as a list ending in the number 2."""
    gold_expression, gold_parameters = _family(gold)
    expression, parameters = _family(answer)
    declared = gold_parameters | parameters
    if not declared:
        return False
    if same(gold_expression, expression):
        return True
    gold_letters, letters = _letters(gold_expression), _letters(expression)
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
        if same(gold_expression, _rename(expression, parameter, renamed if shift else gold_parameter)):
            return True
    return False


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


# -- degrees for radians (`45^\circ` for `\frac{\pi}{4}`) and the reverse

_DEGREE_MARK = re.compile(r"\s*(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\degree|\\text\{\s*degrees?\s*\})\s*$")


def _in_radians(text: str) -> str | None:
    """Each item of an answer in degrees written in radians (`30^\\circ, 150^\\circ` ->
    `(30)\\cdot\\frac{\\pi}{180}, ...`); None unless every item carries a degree mark."""
    items = _top_level_items(text)
    converted = []
    for item in items:
        mark = _DEGREE_MARK.search(item)
        if mark is None:
            return None
        converted.append(rf"({item[: mark.start()]})\cdot\frac{{\pi}}{{180}}")
    return ", ".join(converted)


def _angles(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
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


def _precision(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
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


# -- text answers that differ in markup only: `\text{parabola and line}` for `parabola, line`

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def _text_items(text: str) -> tuple[str, ...] | None:
    """The words of an answer made of words (`\\text{parabola and line}` -> (`parabola`, `line`)), item by item in
    order; None when it holds numbers or mathematics."""
    plain = _TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text).replace("$", " ")
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


def _text_answers(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
    gold_items = _text_items(gold)
    return gold_items is not None and gold_items == _text_items(answer)


# -- an option's text for its letter and the reverse, when the question lists the options

_OPTION = re.compile(r"^\s*\(?\s*([A-J])\s*(?:\)|\.|:)?\s*(?=\s|$)(.*)$", re.DOTALL)


def _option(text: str, letters: str) -> tuple[str, str] | None:
    """`(letter, rest)` when `text` opens with an option letter (`B`, `(B)`, `\\text{(B) } 12`, `B. 12`)."""
    plain = _TEXT_MACRO.sub(lambda match: f" {match.group(1)} ", text).replace("$", " ").strip(" *")
    match = _OPTION.match(plain)
    if match is None or match.group(1) not in letters:
        return None
    return match.group(1), match.group(2).strip(" .")


def _same_choice(gold: str, answer: str, same: _Same) -> bool:
    compact = lambda text: re.sub(r"\s+", "", _TEXT_MACRO.sub(r"\1", text)).lower()  # noqa: E731
    if compact(gold) == compact(answer):
        return True
    gold_items = _text_items(gold)
    if gold_items is not None:
        return gold_items == _text_items(answer)
    return same(gold, answer)


def _choices(gold: str, answer: str, final: FinalAnswer, same: _Same) -> bool:
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


_FORM_RULES = (
    _vector_forms, _set_builder, _ordered_chain, _function_forms, _angles, _precision, _text_answers, _choices,
)  # fmt: skip


def same_by_forms(
    gold_answer: str, answer: FinalAnswer, *, parsing_timeout: int | None = None, verify_timeout: int | None = None
) -> bool:
    """Whether one of the answer-form rules finds `answer` equal to the reference answer `gold_answer`."""
    if answer.text is None:
        return False
    gold, text = normalize_math_answer(gold_answer), normalize_math_answer(answer.text)
    same = _Same(parsing_timeout, verify_timeout)
    return any(rule(gold, text, answer, same) for rule in _FORM_RULES)


def normalize_math_answer_text(text: str) -> str:
    """Whole-completion clean-up before math-verify's own anchored search: shorthand TeX and Unicode only."""
    for char, replacement in _UNICODE.items():
        text = text.replace(char, replacement)
    return _brace_shorthand(text.replace(r"\fbox", r"\boxed"))


TIMED_OUT = "timeout"  # what a `MathVerifier` returns when math-verify's own time limit fired
MAX_CHUNK = 8  # answers to one reference sent to a worker as one task


@dataclass(frozen=True)
class MathVerifier:
    """Picklable job the pool runs: `(reference, completion or FinalAnswer) -> bool | None`, with math-verify's
    own timeouts.

    In a pool worker the function runs in the worker's main thread, so math-verify's `signal.alarm` limits
    work there and stop most slow items cheaply; the pool's hard timeout (which kills the worker) is the
    backstop for the ones a signal cannot interrupt.
    """

    parsing_timeout: int | None = None
    verify_timeout: int | None = None

    def __call__(
        self, item: tuple[str, str | FinalAnswer | tuple[FinalAnswer, ...]]
    ) -> bool | None | str | list[bool | None | str]:
        """One verdict for `(reference, completion or FinalAnswer)`; a list of verdicts, in order, for
        `(reference, (FinalAnswer, ...))`: several answers to one reference, so it is parsed once."""
        logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # its timeout warnings; we report timeouts
        reference, answer = item
        if isinstance(answer, tuple):
            return [self._one(reference, each) for each in answer]
        return self._one(reference, extract_final_answer(answer) if isinstance(answer, str) else answer)

    def _one(self, reference: str, answer: FinalAnswer) -> bool | None | str:
        try:
            return verify_final_answer(
                reference, answer, parsing_timeout=self.parsing_timeout, verify_timeout=self.verify_timeout
            )
        except TimeoutError:
            return TIMED_OUT


def distinct_items(keys: list[Hashable]) -> tuple[list[Hashable], list[int]]:
    """`keys` without repeats, in first-seen order, and for each key the index of its distinct item.

    Shapes: `keys` (n,) -> distinct (d,), `index` (n,) with `distinct[index[i]] == keys[i]`, d <= n. In RL a
    group holds G completions of one prompt and their final answers repeat, so d is often a few per group.
    """
    position: dict[Hashable, int] = {}
    index = [position.setdefault(key, len(position)) for key in keys]
    return list(position), index


def chunks_by_reference(references: list[str], max_size: int) -> list[list[int]]:
    """Indices of `references` grouped by equal reference (first-seen order), at most `max_size` a chunk.

    Shapes: `references` (d,) -> chunks whose concatenation is a permutation of `range(d)`. One chunk is one
    pool task: the reference is parsed once for all its answers, and a worker takes one message per chunk
    instead of one per answer.
    """
    groups: dict[str, list[int]] = {}
    for index, reference in enumerate(references):
        groups.setdefault(reference, []).append(index)
    return [
        members[start : start + max_size] for members in groups.values() for start in range(0, len(members), max_size)
    ]


class VerdictCache:
    """A bounded least-recently-used map `(reference, FinalAnswer) -> verdict`, safe across threads.

    Across training steps the same prompts come back (epochs, and dynamic sampling's refills) with answers
    the policy has given before; only finished verdicts are kept, never timeouts or crashes.
    """

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._verdicts: OrderedDict[Hashable, bool | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[bool, bool | None]:
        """`(found, verdict)`."""
        with self._lock:
            if key not in self._verdicts:
                return False, None
            self._verdicts.move_to_end(key)
            return True, self._verdicts[key]

    def put(self, key: Hashable, verdict: bool | None) -> None:
        if self.max_size <= 0:
            return
        with self._lock:
            self._verdicts[key] = verdict
            self._verdicts.move_to_end(key)
            while len(self._verdicts) > self.max_size:
                self._verdicts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._verdicts)


def question_text(prompt: Any) -> str | None:
    """The question of a prompt: the prompt itself, or the last user message of a conversational one."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        users = [message for message in prompt if isinstance(message, Mapping) and message.get("role") == "user"]
        return completion_text(users[-1:] or list(prompt)) or None
    return None


@register_reward("math", aliases=("math_verify", "accuracy"), pooled=True)
class MathReward(Reward):
    """Math equivalence of the final answer (boxed, `Answer:` or bare) with the reference, by math-verify.

    Args:
        reference_column: dataset column holding the reference: a bare answer (`\\frac{1}{2}`), a worked
            solution ending in `\\boxed{}`, or a GSM8K answer ending in `#### n`.
        scoring: "binary" (1 correct / 0 wrong) or "dapo" (+1 / -1).
        timeout: hard wall-clock limit per completion, in seconds; the worker is killed past it.
        on_timeout: "fail" scores a timed-out (or crashed) verification as wrong; "skip" returns None.
        num_workers: size of a private pool for this reward; None uses the process-wide shared pool
            (`TRL_EXT_REWARD_WORKERS` workers, default one per core).
        cache_size: verdicts kept across calls, per (reference, final answer); 0 turns the cache off.
        fallback: off by default. A second opinion for the completions the rules reject: a callable
            `(question, reference, answer) -> bool | None`, or its `"module:attribute"` path (e.g.
            `trl_ext.rewards.math_fallback:CausalLMJudge`); `True` turns a rejection into an accept, anything
            else keeps it. The rules alone decide accepts. See `trl_ext.rewards.math_fallback`.
        fallback_kwargs: arguments for a fallback given as a class path (e.g. `{"model": "path/to/model"}`).

    Returns None for a reference that cannot be parsed. Each distinct (reference, final answer) pair of a
    batch is verified once and its verdict shared by every completion that gave that answer. When the prompts
    are passed (TRL passes them), a question that lists options lets an option's text answer its letter.
    """

    def __init__(
        self,
        reference_column: str = "solution",
        scoring: Literal["binary", "dapo"] = "binary",
        timeout: float = 10.0,
        on_timeout: Literal["fail", "skip"] = "fail",
        num_workers: int | None = None,
        cache_size: int = 4096,
        fallback: str | Callable | None = None,
        fallback_kwargs: Mapping[str, Any] | None = None,
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="math")
        if timeout <= 0:
            raise ValueError(f"Reward 'math': timeout must be > 0 seconds, got {timeout}.")
        if on_timeout not in ("fail", "skip"):
            raise ValueError(f"Reward 'math': on_timeout must be 'fail' or 'skip', got {on_timeout!r}.")
        self.reference_column = reference_column
        self.scoring = scoring
        self.timeout = timeout
        self.on_timeout = on_timeout
        if cache_size < 0:
            raise ValueError(f"Reward 'math': cache_size must be >= 0 (0 turns the cache off), got {cache_size}.")
        self.num_workers = num_workers
        self.cache_size = cache_size
        self._pool: TimeoutPool | None = None
        self._cache = VerdictCache(cache_size)
        self.fallback = fallback
        self.fallback_kwargs = dict(fallback_kwargs or {})
        self._fallback = resolve_fallback(fallback, self.fallback_kwargs)  # fails here, before training
        self._second_opinions = VerdictCache(cache_size)

    def _fallback_callable(self) -> Callable | None:
        if self._fallback is None and self.fallback is not None:  # a copy rebuilds it (a model does not pickle)
            self._fallback = resolve_fallback(self.fallback, self.fallback_kwargs)
        return self._fallback

    def _verifier(self) -> MathVerifier:
        # math-verify's signal timeouts sit below the hard limit, so they fire first on most slow items and
        # spare the pool a worker restart; they are whole seconds and cover three steps (two parses, verify).
        inner = max(1, int(self.timeout // 3))
        return MathVerifier(parsing_timeout=inner, verify_timeout=inner)

    def pool(self) -> TimeoutPool:
        if self.num_workers is None:
            return shared_pool()
        if self._pool is None:
            self._pool = TimeoutPool(self.num_workers)
        return self._pool

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        # The prompts too: a question that lists options lets an option's text answer its letter.
        if completions is None:
            raise TypeError(f"Reward {self.__name__!r} needs `completions`.")
        texts = [completion_text(completion) for completion in completions]
        questions = [question_text(prompt) for prompt in prompts] if prompts is not None else None
        return self.score(texts, columns, questions=questions)

    def score(
        self, texts: list[str], columns: Mapping[str, Any], questions: list[str | None] | None = None
    ) -> list[float | None]:
        references = dataset_column(
            columns, self.reference_column, len(texts), reward=self.__name__, argument="reference_column"
        )
        questions = questions if questions is not None else [None] * len(texts)
        keys, positions, rewards = [], [], [None] * len(texts)
        for index, (text, reference, question) in enumerate(zip(texts, references, questions)):
            if reference is None or not str(reference).strip():
                continue  # no reference: cannot judge
            keys.append((str(reference), extract_final_answer(text, question)))
            positions.append(index)
        distinct, index_of = distinct_items(keys)
        verdicts: list[bool | None | str] = [None] * len(distinct)
        pending = []
        for number, key in enumerate(distinct):
            found, verdict = self._cache.get(key)
            if found:
                verdicts[number] = verdict
            else:
                pending.append(number)
        for number, value in zip(pending, self._verify_distinct([distinct[number] for number in pending])):
            verdicts[number] = value
            if value != TIMED_OUT:
                self._cache.put(distinct[number], value)
        row_verdicts = [verdicts[number] for number in index_of]
        if self.fallback is not None:
            row_verdicts = self._with_second_opinions(row_verdicts, keys, [texts[index] for index in positions],
                                                      [questions[index] for index in positions])  # fmt: skip
        failure = self.incorrect_score if self.on_timeout == "fail" else None
        for index, verdict in zip(positions, row_verdicts):
            if verdict == TIMED_OUT:
                rewards[index] = failure
            elif verdict is not None:
                rewards[index] = self.correct_score if verdict else self.incorrect_score
        return rewards

    def _with_second_opinions(
        self, verdicts: list, keys: list[tuple[str, FinalAnswer]], texts: list[str], questions: list[str | None]
    ) -> list:
        """`verdicts` with the rejections the fallback accepts turned into accepts (rows in the same order).

        The fallback sees each distinct (question, reference, answer) once: the answer is the final answer the
        rules extracted, or the completion's last 2,000 characters when they found none."""
        items = [
            (question, reference, answer.text if answer.text is not None else text[-2000:])
            for (reference, answer), text, question in zip(keys, texts, questions)
        ]
        rejected = [row for row, verdict in enumerate(verdicts) if verdict is False]
        distinct, index_of = distinct_items([items[row] for row in rejected])
        opinions: list[bool | None] = [None] * len(distinct)
        pending = []
        for number, item in enumerate(distinct):
            found, opinion = self._second_opinions.get(item)
            if found:
                opinions[number] = opinion
            else:
                pending.append(number)
        for number, opinion in zip(pending, ask_fallback(self._fallback_callable(), [distinct[n] for n in pending])):
            opinions[number] = opinion
            self._second_opinions.put(distinct[number], opinion)
        verdicts = list(verdicts)
        for row, number in zip(rejected, index_of):
            if opinions[number] is True:
                verdicts[row] = True
        return verdicts

    def _verify_distinct(self, keys: list[tuple[str, FinalAnswer]]) -> list[bool | None | str]:
        """Verdicts (or `TIMED_OUT`) of distinct (reference, answer) pairs, in order, through the pool.

        Answers to one reference travel as one task (up to `MAX_CHUNK`, fewer when that spreads a small batch
        over the workers). A task gets the per-completion hard limit; if it is killed or crashes as a whole,
        its answers are verified again one per task, each with its own limit, so one hung answer costs its
        neighbours time (at most one more limit), never their verdict.
        """
        if not keys:
            return []
        pool, verifier = self.pool(), self._verifier()
        size = max(1, min(MAX_CHUNK, -(-len(keys) // pool.num_workers)))
        chunks = chunks_by_reference([reference for reference, _ in keys], size)
        tasks = [(keys[chunk[0]][0], tuple(keys[index][1] for index in chunk)) for chunk in chunks]
        values: list[bool | None | str] = [TIMED_OUT] * len(keys)
        retry = []
        for chunk, outcome in zip(chunks, pool.map(verifier, tasks, self.timeout)):
            if outcome.ok:
                for index, value in zip(chunk, outcome.value):
                    values[index] = value
            elif len(chunk) > 1:
                retry += chunk
        for index, outcome in zip(retry, pool.map(verifier, [keys[index] for index in retry], self.timeout)):
            values[index] = outcome.value if outcome.ok else TIMED_OUT
        return values

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_pool"] = None  # processes do not travel; a copy starts its own pool when first called
        state["_cache"] = None  # nor do verdicts (a lock cannot be pickled); a copy starts an empty cache
        state["_second_opinions"] = None
        if isinstance(self.fallback, str):
            state["_fallback"] = None  # rebuilt from its path when first needed (a model is not sent along)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache = VerdictCache(self.cache_size)
        self._second_opinions = VerdictCache(self.cache_size)

    def __repr__(self) -> str:
        return (
            f"MathReward(reference_column={self.reference_column!r}, scoring={self.scoring!r}, "
            f"timeout={self.timeout}, on_timeout={self.on_timeout!r}, num_workers={self.num_workers}, "
            f"cache_size={self.cache_size}"
            + (f", fallback={self.fallback!r}, fallback_kwargs={self.fallback_kwargs!r}" if self.fallback else "")
            + ")"
        )
