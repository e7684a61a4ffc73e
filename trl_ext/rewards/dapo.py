"""`dapo_answer`: DAPO's rule-based reward, scored the way the DAPO reference evaluation scores it.

DAPO (arXiv 2503.14476) trains on DAPO-Math-17K, whose prompts ask for the final answer on its own line
after "Answer:" and whose references are integers. The reference evaluation (verl's `math_dapo` scorer, which
follows the Minerva normalisation of Lewkowycz et al., 2022) takes the last `Answer: ...` match within the
last 300 characters of the completion, normalises prediction and reference with the same string rules, and
compares the strings: +1 if equal, -1 otherwise. No symbolic equivalence: `0.5` and `\\frac{1}{2}` differ.
Use `math` for equivalence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from .base import Reward, dataset_column, scores_for
from .registry import register_reward

__all__ = ["DapoAnswerReward", "dapo_answer_is_correct", "normalize_dapo_answer"]

DAPO_ANSWER_PATTERN = r"(?i)Answer\s*:\s*([^\n]+)"
# Only the end of a completion is searched: the reference does so (the longest MATH-500 answer is shorter).
DAPO_TAIL_CHARS = 300

# Minerva's answer normalisation, in the reference's order: literal replacements, then literal removals.
_REPLACEMENTS = (
    ("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), ("\\ ", ""), (" ", ""), ("mbox", "text"),
    (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"),
)
_REMOVALS = (
    "square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", "\\ldots", "sue",
    "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds", "meters", "meals",
    "edges", "students", "childrentickets", "multiples", "\\text{s}", "\\text{.}", "\\text{\ns}",
    "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}", "\\mathrm{th}", "^\\circ", "^{\\circ}", "\\;",
    ",\\!", "{,}", '"', "\\dots",
)


def normalize_dapo_answer(answer: str) -> str:
    """Minerva / DAPO-reference normalisation of a final answer string (pure string rules)."""
    answer = answer.split("=")[-1]  # "x = 5" -> " 5"
    for old, new in _REPLACEMENTS:
        answer = answer.replace(old, new)
    for text in _REMOVALS:
        answer = answer.replace(text, "")
    # Keep only the first $...$ math span, if any.
    answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", r"$\3$", answer)
    # Unwrap text-like macros (first closing brace, as the reference does) and the box (last brace).
    for macro in ("text", "textbf", "overline"):
        answer = re.sub(rf"(\\{macro}\{{)(.*?)(\}})", r"\2", answer)
    answer = re.sub(r"(\\boxed\{)(.*)(\})", r"\2", answer)
    # Shorthand TeX: \frac12 -> \frac{1}{2}, \sqrt2 -> \sqrt{2}.
    answer = re.sub(r"(frac)([^{])(.)", r"frac{\2}{\3}", answer)
    answer = re.sub(r"(sqrt)([^{])", r"sqrt{\2}", answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():  # 1,000 -> 1000
        answer = answer.replace(",", "")
    return answer.strip()


def dapo_answer_is_correct(completion: str, reference: str, answer_pattern: str = DAPO_ANSWER_PATTERN) -> bool:
    """Whether the completion's last `Answer:` line, normalised, equals the normalised reference."""
    matches = re.findall(answer_pattern, completion[-DAPO_TAIL_CHARS:])
    if not matches:
        return False
    return normalize_dapo_answer(matches[-1]) == normalize_dapo_answer(reference)


@register_reward("dapo_answer", aliases=("dapo",))
class DapoAnswerReward(Reward):
    """DAPO's `Answer: ...` line, Minerva-normalised string match with the reference (+1 / -1 by default).

    Args:
        reference_column: dataset column with the reference answer (DAPO-Math-17K: `solution`, an integer).
        scoring: "dapo" (+1 / -1, the paper's) or "binary" (1 / 0).
        answer_pattern: regex whose first group is the answer; the last match in the completion's last 300
            characters counts.

    Returns None where the reference is missing.
    """

    def __init__(
        self,
        reference_column: str = "solution",
        scoring: Literal["binary", "dapo"] = "dapo",
        answer_pattern: str = DAPO_ANSWER_PATTERN,
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="dapo_answer")
        try:
            if re.compile(answer_pattern).groups < 1:
                raise ValueError("it has no capturing group for the answer")
        except (re.error, ValueError) as error:
            raise ValueError(f"Reward 'dapo_answer': invalid answer_pattern {answer_pattern!r}: {error}.") from None
        self.reference_column = reference_column
        self.scoring = scoring
        self.answer_pattern = answer_pattern

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        references = dataset_column(
            columns, self.reference_column, len(texts), reward=self.__name__, argument="reference_column"
        )
        return [
            None
            if reference is None or not str(reference).strip()
            else self.correct_score
            if dapo_answer_is_correct(text, str(reference), self.answer_pattern)
            else self.incorrect_score
            for text, reference in zip(texts, references)
        ]
