"""Finding the final answer of a completion and of a reference, and what a question says about the answer.

The answer is the last non-empty `\\boxed{}` or `\\fbox{}`, or `Answer: ...` line, whichever comes last (an
"answer:" in prose after the box is not an answer); "the final answer is $x$"; or a completion that is nothing
but the answer (`1/2`, `$x^2+2x$`). Failing these, `verify.py` lets math-verify search the whole completion for an
anchored answer. From the question: the options it lists, the direction of an ordering, a requested rounding.
String work only, cheap enough to run in the trainer process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base import completion_text
from ..extraction import (
    answer_phrase,
    auto_answer,
    boxed_spans,
    gsm8k_answer,
    last_boxed,
    listed_choices,
    reads_as_prose,
)

__all__ = [
    "FinalAnswer",
    "extract_final_answer",
    "extract_math_answer",
    "question_text",
    "reference_answer",
    "requested_decimals",
]


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
    question: the question's text, where it names quantities in an order (`labels_for_list`: "the minimum and
        the maximum" puts `\\max = 8, \\min = 2` in the order of `2, 8`); kept only for an answer with `=` or `:`
        in it (else None), so answers to questions that differ in other words stay one verification.
    """

    text: str | None
    boxes: str | None = None
    unmarked: str | None = None
    choices: tuple[tuple[str, str], ...] = ()
    descending: bool = False
    decimals: int | None = None
    question: str | None = None


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
        question=question if question and text is not None and re.search(r"[=:]", text) else None,
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


def question_text(prompt: Any) -> str | None:
    """The question of a prompt: the prompt itself, or the last user message of a conversational one."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        users = [message for message in prompt if isinstance(message, Mapping) and message.get("role") == "user"]
        return completion_text(users[-1:] or list(prompt)) or None
    return None
