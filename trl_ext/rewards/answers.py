"""Answer verifiers that need no symbolic math: `boxed`, `gsm8k`, `multiple_choice`, `exact_match`, `numeric`.

All read the reference from a dataset column (`solution` by default), score 1 / 0 (`scoring="binary"`)
or +1 / -1 (`scoring="dapo"`), and return None where the reference is missing or unusable.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Literal

from .base import Reward, dataset_column, scores_for
from .extraction import (
    answer_line,
    auto_answer,
    gsm8k_answer,
    last_boxed,
    last_number,
    strip_math_delimiters,
    tag_content,
)
from .registry import register_reward

__all__ = [
    "BoxedReward",
    "ExactMatchReward",
    "Gsm8kReward",
    "MultipleChoiceReward",
    "NumericReward",
    "normalize_boxed_answer",
    "normalize_text",
    "parse_number",
]

ExtractMode = Literal["auto", "boxed", "answer_line", "answer_tag", "none"]
_EXTRACT_MODES = ("auto", "boxed", "answer_line", "answer_tag", "none")


def _extract(text: str, mode: str) -> str | None:
    """The answer part of `text` by `mode`; "auto" tries boxed, `Answer:` and `<answer>` (last one wins)."""
    if mode == "none":
        return text.strip()
    if mode == "boxed":
        return last_boxed(text)
    if mode == "answer_line":
        return answer_line(text)
    if mode == "answer_tag":
        return tag_content(text, "answer")
    return auto_answer(text)


class _ReferenceReward(Reward):
    """Shared plumbing: read the reference column, map `judge(text, reference) -> bool | None` to scores."""

    def __init__(self, reference_column: str, scoring: str):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward=self._registry_name)
        self.reference_column = reference_column
        self.scoring = scoring

    _registry_name = "reward"

    def judge(self, text: str, reference: Any) -> bool | None:
        raise NotImplementedError

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        references = dataset_column(
            columns, self.reference_column, len(texts), reward=self.__name__, argument="reference_column"
        )
        rewards = []
        for text, reference in zip(texts, references):
            verdict = None if _missing(reference) else self.judge(text, reference)
            rewards.append(None if verdict is None else self.correct_score if verdict else self.incorrect_score)
        return rewards


def _missing(reference: Any) -> bool:
    if reference is None:
        return True
    if isinstance(reference, float) and math.isnan(reference):
        return True
    if isinstance(reference, str) and not reference.strip():
        return True
    return isinstance(reference, (list, tuple)) and not reference


def _check_extract(mode: str, reward: str) -> None:
    if mode not in _EXTRACT_MODES:
        raise ValueError(f"Reward {reward!r}: extract must be one of {list(_EXTRACT_MODES)}, got {mode!r}.")


# ---------------------------------------------------------------------------------------------- numbers


def parse_number(text: str) -> Fraction | None:
    """An exact number from `text`: `1,234`, `-0.5`, `1e-3`, `3/4`, `\\frac{3}{4}`, `$5`, `50%` (as 50).

    Exact (a `Fraction`) so `0.1 + 0.2`-style float noise never decides a verdict.
    """
    text = strip_math_delimiters(str(text)).replace("−", "-").replace("\\$", "").replace("$", "")
    text = re.sub(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", text)
    text = re.sub(r"\\(?:%|,|!|;| )|%|\s", "", text).strip(".")
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    fraction = re.fullmatch(r"\(?([-+]?[\d.eE+-]+)\)?/\(?([-+]?[\d.eE+-]+)\)?", text)
    try:
        if fraction:
            denominator = Fraction(Decimal(fraction.group(2)))
            return Fraction(Decimal(fraction.group(1))) / denominator if denominator else None
        return Fraction(Decimal(text))
    except (InvalidOperation, ValueError, ZeroDivisionError):
        return None


def _numbers_equal(a: Fraction, b: Fraction, rel_tol: float, abs_tol: float) -> bool:
    if a == b:
        return True
    return abs(a - b) <= max(Fraction(rel_tol) * max(abs(a), abs(b)), Fraction(abs_tol))


# ---------------------------------------------------------------------------------------------- boxed


def normalize_boxed_answer(answer: str) -> str:
    """Canonical text of a boxed answer for string comparison: spacing, sizing and text macros removed."""
    answer = strip_math_delimiters(answer)
    answer = re.sub(r"\\(?:left|right|displaystyle|textstyle|!|,|;|:)", "", answer)
    answer = re.sub(r"\\[dt]frac", r"\\frac", answer)
    answer = re.sub(r"\\(?:text|textbf|mathrm|mathbf|mbox)\{([^{}]*)\}", r"\1", answer)
    answer = answer.replace("\\$", "").replace("\\%", "%")
    answer = re.sub(r"\s+", "", answer)
    return answer.rstrip(".")


@register_reward("boxed", aliases=("last_boxed",))
class BoxedReward(_ReferenceReward):
    """Last `\\boxed{}` answer equals the reference's (normalised text, or equal numbers).

    Args:
        reference_column: reference answer; if it contains `\\boxed{}` (a worked solution), its last box.
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).

    A completion without a box scores as wrong. Use `math` for symbolic equivalence.
    """

    _registry_name = "boxed"

    def __init__(self, reference_column: str = "solution", scoring: Literal["binary", "dapo"] = "binary"):
        super().__init__(reference_column, scoring)

    def judge(self, text: str, reference: Any) -> bool | None:
        reference = str(reference)
        gold = last_boxed(reference) or reference
        predicted = last_boxed(text)
        if predicted is None:
            return False
        if normalize_boxed_answer(predicted) == normalize_boxed_answer(gold):
            return True
        gold_number, predicted_number = parse_number(gold), parse_number(predicted)
        return gold_number is not None and gold_number == predicted_number


# ---------------------------------------------------------------------------------------------- gsm8k


@register_reward("gsm8k")
class Gsm8kReward(_ReferenceReward):
    """GSM8K: the completion's final number (after `####`, or its marked/last answer) equals the reference's.

    Args:
        reference_column: GSM8K's `answer` column works as is (the worked solution ending `#### 72`), or a
            bare number.
        strict: only accept an answer written after `####` (the GSM8K format); otherwise also a boxed or
            `Answer:` answer, or the last number of the completion.
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).

    Returns None when the reference holds no number.
    """

    _registry_name = "gsm8k"

    def __init__(
        self, reference_column: str = "solution", strict: bool = False, scoring: Literal["binary", "dapo"] = "binary"
    ):
        super().__init__(reference_column, scoring)
        self.strict = strict

    def judge(self, text: str, reference: Any) -> bool | None:
        reference = str(reference)
        gold_text = gsm8k_answer(reference) or last_boxed(reference) or reference
        gold = parse_number(gold_text)
        if gold is None:
            gold = parse_number(last_number(gold_text) or "")
        if gold is None:
            return None
        answer = gsm8k_answer(text)
        if answer is None and not self.strict:
            answer = auto_answer(text) or text
        if answer is None:
            return False
        predicted = parse_number(answer)
        if predicted is None:
            number = last_number(answer)
            predicted = parse_number(number) if number else None
        return predicted is not None and predicted == gold


# ---------------------------------------------------------------------------------------------- multiple choice


@register_reward("multiple_choice", aliases=("mcq", "choice"))
class MultipleChoiceReward(_ReferenceReward):
    """Multiple choice: the completion's chosen letter equals the reference letter.

    Args:
        reference_column: the correct option as a letter (`"B"`, `"(B)"`) or a 0-based index (MMLU's
            `answer`: 1 means B).
        letters: the valid option letters, in order.
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).

    The chosen letter is the one in the last `\\boxed{}`, `Answer:` line or `<answer>` tag, else the last
    stand-alone option letter (`(C)`, `C)`, `C.` or a bare `C`) of the completion. A completion that names
    several letters in its answer (`A or C`) is wrong.
    """

    _registry_name = "multiple_choice"

    def __init__(
        self,
        reference_column: str = "solution",
        letters: str = "ABCDEFGHIJ",
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        super().__init__(reference_column, scoring)
        letters = letters.upper()
        if not letters or len(set(letters)) != len(letters) or not letters.isalpha():
            raise ValueError(f"Reward 'multiple_choice': letters must be distinct letters, got {letters!r}.")
        self.letters = letters

    def _single_letter(self, text: str) -> str | None:
        """The letter `text` consists of, once wrapping like `(B)`, `**B.**` or `\\text{B}` is removed."""
        core = re.sub(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}", r"\1", text).strip(" ()[]*.:$\n\t")
        return core.upper() if len(core) == 1 and core.upper() in self.letters else None

    def _marked_letters(self, text: str) -> list[str]:
        """Letters written as options, in order: `(C)`, `C)`, `C.`, `C:`, or a line holding only the letter."""
        letter = f"[{self.letters}]"
        pattern = rf"\(({letter})\)|(?<![A-Za-z])({letter})[).:](?![A-Za-z0-9])|^\s*({letter})\s*$"
        return [next(group for group in groups if group) for groups in re.findall(pattern, text, flags=re.MULTILINE)]

    def chosen_letter(self, text: str) -> str | None:
        """The option the completion chose, or None if it chose none or several."""
        answer = auto_answer(text)
        if answer is None:
            single = self._single_letter(text)
            if single:
                return single
            marked = self._marked_letters(text)
            return marked[-1] if marked else None
        single = self._single_letter(answer)
        if single:
            return single
        for candidates in (
            self._marked_letters(answer),
            re.findall(rf"(?<![A-Za-z])([{self.letters}])(?![A-Za-z])", answer),
        ):
            if candidates:
                return candidates[0] if len(set(candidates)) == 1 else None
        return None

    def judge(self, text: str, reference: Any) -> bool | None:
        if isinstance(reference, bool):
            return None
        if isinstance(reference, int):
            if not 0 <= reference < len(self.letters):
                return None
            gold = self.letters[reference]
        else:
            found = re.findall(rf"[{self.letters}]", str(reference).upper().strip("() .:"))
            if len(str(reference).strip("() .:")) != 1 or not found:
                return None
            gold = found[0]
        return self.chosen_letter(text) == gold


# ---------------------------------------------------------------------------------------------- exact match


def normalize_text(text: str, *, case_sensitive: bool = False) -> str:
    """SQuAD-style answer normalisation: Unicode NFKC, case folded, punctuation and articles removed,
    whitespace collapsed. Math delimiters and `\\text{}` are unwrapped first."""
    text = unicodedata.normalize("NFKC", strip_math_delimiters(text))
    text = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", text)
    if not case_sensitive:
        text = text.casefold()
        text = re.sub(r"\b(?:a|an|the)\b", " ", text)
    text = "".join(char for char in text if char not in string.punctuation)
    return " ".join(text.split())


@register_reward("exact_match", aliases=("exact", "string_match"))
class ExactMatchReward(_ReferenceReward):
    """Exact or normalised string match of the extracted answer with the reference (or any of a list).

    Args:
        reference_column: reference string, or a list of accepted strings.
        extract: which part of the completion is the answer: "auto" (last boxed / `Answer:` line /
            `<answer>` tag, else the whole completion), "boxed", "answer_line", "answer_tag" or "none"
            (the whole completion).
        normalize: compare after SQuAD-style normalisation (case, punctuation, articles, spacing); False
            compares the stripped strings exactly.
        case_sensitive: with `normalize`, keep case (and articles).
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).
    """

    _registry_name = "exact_match"

    def __init__(
        self,
        reference_column: str = "solution",
        extract: ExtractMode = "auto",
        normalize: bool = True,
        case_sensitive: bool = False,
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        super().__init__(reference_column, scoring)
        _check_extract(extract, "exact_match")
        self.extract = extract
        self.normalize = normalize
        self.case_sensitive = case_sensitive

    def _canonical(self, text: str) -> str:
        return normalize_text(text, case_sensitive=self.case_sensitive) if self.normalize else text.strip()

    def judge(self, text: str, reference: Any) -> bool | None:
        references = list(reference) if isinstance(reference, (list, tuple)) else [reference]
        answer = _extract(text, self.extract)
        if answer is None and self.extract == "auto":
            answer = text
        if answer is None:
            return False
        return self._canonical(answer) in {self._canonical(str(item)) for item in references}


# ---------------------------------------------------------------------------------------------- numeric


@register_reward("numeric", aliases=("number",))
class NumericReward(_ReferenceReward):
    """The extracted answer is a number within tolerance of the reference number.

    Args:
        reference_column: reference number (int, float, or text such as `1,234.5`, `3/4`, `\\frac{3}{4}`).
        rel_tol: relative tolerance, `|a - b| <= rel_tol * max(|a|, |b|)`.
        abs_tol: absolute tolerance (either tolerance suffices).
        extract: as for `exact_match`; with "auto" and no marked answer the completion's last number counts.
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).

    Returns None when the reference is not a number.
    """

    _registry_name = "numeric"

    def __init__(
        self,
        reference_column: str = "solution",
        rel_tol: float = 1e-6,
        abs_tol: float = 1e-9,
        extract: ExtractMode = "auto",
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        super().__init__(reference_column, scoring)
        _check_extract(extract, "numeric")
        if rel_tol < 0 or abs_tol < 0:
            raise ValueError(f"Reward 'numeric': tolerances must be >= 0, got rel_tol={rel_tol}, abs_tol={abs_tol}.")
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol
        self.extract = extract

    def judge(self, text: str, reference: Any) -> bool | None:
        if isinstance(reference, bool):
            return None
        if isinstance(reference, (int, float)):
            if not math.isfinite(reference):
                return None
            gold = Fraction(reference)
        else:
            gold = parse_number(str(reference))
        if gold is None:
            return None
        answer = _extract(text, self.extract)
        if answer is None and self.extract == "auto":
            answer = text
        if answer is None:
            return False
        predicted = parse_number(answer)
        if predicted is None:
            number = last_number(answer)
            predicted = parse_number(number) if number else None
        return predicted is not None and _numbers_equal(predicted, gold, self.rel_tol, self.abs_tol)
