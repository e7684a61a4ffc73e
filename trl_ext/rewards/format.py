"""Format rewards: `think_format` (reasoning in `<think>` tags, then an answer) and `regex_format`.

Both score 1 when the completion has the format and 0 otherwise (`scoring="dapo"` gives +1 / -1). They judge
form only, never correctness, so they pair with an answer verifier at a smaller weight.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .base import Reward, scores_for
from .registry import register_reward

__all__ = ["RegexFormatReward", "ThinkFormatReward", "has_think_format"]

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


def has_think_format(
    text: str, *, think_tag: str = "think", answer_tag: str | None = None, prefilled: bool = False
) -> bool:
    """One `<think>...</think>` block at the start, with non-empty reasoning, then a non-empty answer.

    `prefilled=True` is for chat templates that already open `<think>` in the prompt (Qwen3, DeepSeek-R1):
    the completion then starts inside the block and must not open another. With `answer_tag` the answer
    must be exactly one `<answer>...</answer>` block after the reasoning, with nothing but spaces around it.
    """
    open_tag, close_tag = f"<{think_tag}>", f"</{think_tag}>"
    body = text.lstrip()
    if not prefilled:
        if not body.startswith(open_tag):
            return False
        body = body[len(open_tag) :]
    if open_tag in body or body.count(close_tag) != 1:
        return False
    reasoning, answer = body.split(close_tag)
    if not reasoning.strip() or not answer.strip():
        return False
    if answer_tag is None:
        return True
    match = re.fullmatch(rf"\s*<{re.escape(answer_tag)}>(.*?)</{re.escape(answer_tag)}>\s*", answer, flags=re.DOTALL)
    return bool(match and match.group(1).strip() and f"<{answer_tag}>" not in match.group(1))


@register_reward("think_format", aliases=("format", "reasoning_format"))
class ThinkFormatReward(Reward):
    """`<think>reasoning</think>` then a non-empty answer (optionally in `<answer>` tags): 1, else 0.

    Args:
        think_tag: name of the reasoning tag.
        answer_tag: if set (e.g. "answer"), the answer must be one `<answer>...</answer>` block.
        prefilled: the chat template opens `<think>` in the prompt, so the completion starts inside it.
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).
    """

    def __init__(
        self,
        think_tag: str = "think",
        answer_tag: str | None = None,
        prefilled: bool = False,
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="think_format")
        for name, tag in (("think_tag", think_tag), ("answer_tag", answer_tag)):
            if tag is not None and not re.fullmatch(r"[A-Za-z][\w-]*", tag):
                raise ValueError(f"Reward 'think_format': {name} must be a tag name like 'think', got {tag!r}.")
        self.think_tag = think_tag
        self.answer_tag = answer_tag
        self.prefilled = prefilled
        self.scoring = scoring

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return [
            self.correct_score
            if has_think_format(text, think_tag=self.think_tag, answer_tag=self.answer_tag, prefilled=self.prefilled)
            else self.incorrect_score
            for text in texts
        ]


@register_reward("regex_format", aliases=("regex", "tags_format"))
class RegexFormatReward(Reward):
    """Completion matches a regex and/or contains each required tag pair exactly once, in order: 1, else 0.

    Args:
        pattern: regular expression the completion must match (see `match`), or None.
        flags: regex flags as letters: "s" (dot matches newline), "i", "m", "x".
        match: "fullmatch" (the whole completion, surrounding whitespace ignored) or "search" (anywhere).
        required_tags: tag names, e.g. ["reasoning", "answer"]: each `<tag>...</tag>` appears exactly once
            with non-empty content, in the given order.
        scoring: "binary" (1 / 0) or "dapo" (+1 / -1).

    At least one of `pattern` and `required_tags` is needed; the pattern is compiled at construction.
    """

    def __init__(
        self,
        pattern: str | None = None,
        flags: str = "s",
        match: Literal["fullmatch", "search"] = "fullmatch",
        required_tags: Sequence[str] = (),
        scoring: Literal["binary", "dapo"] = "binary",
    ):
        self.correct_score, self.incorrect_score = scores_for(scoring, reward="regex_format")
        if isinstance(required_tags, str):
            required_tags = [required_tags]
        if pattern is None and not required_tags:
            raise ValueError("Reward 'regex_format': give a `pattern`, `required_tags`, or both.")
        unknown_flags = set(flags) - set(_FLAGS)
        if unknown_flags:
            raise ValueError(f"Reward 'regex_format': unknown flags {sorted(unknown_flags)}; use letters from 'imsx'.")
        if match not in ("fullmatch", "search"):
            raise ValueError(f"Reward 'regex_format': match must be 'fullmatch' or 'search', got {match!r}.")
        for tag in required_tags:
            if not re.fullmatch(r"[A-Za-z][\w-]*", tag):
                raise ValueError(f"Reward 'regex_format': required_tags holds {tag!r}, not a tag name.")
        compiled_flags = 0
        for letter in flags:
            compiled_flags |= _FLAGS[letter]
        if pattern is not None:
            try:
                re.compile(pattern, compiled_flags)
            except re.error as error:
                raise ValueError(f"Reward 'regex_format': invalid pattern {pattern!r}: {error}.") from None
        self.pattern = pattern
        self.flags = flags
        self.match = match
        self.required_tags = list(required_tags)
        self.scoring = scoring
        self._compiled_flags = compiled_flags

    def matches(self, text: str) -> bool:
        if self.pattern is not None:
            regex = re.compile(self.pattern, self._compiled_flags)  # cached by `re`; keeps the object picklable
            found = regex.fullmatch(text.strip()) if self.match == "fullmatch" else regex.search(text)
            if not found:
                return False
        position = 0
        for tag in self.required_tags:
            open_tag, close_tag = f"<{tag}>", f"</{tag}>"
            if text.count(open_tag) != 1 or text.count(close_tag) != 1:
                return False
            start, end = text.find(open_tag), text.find(close_tag)
            if start < position or end < start or not text[start + len(open_tag) : end].strip():
                return False
            position = end + len(close_tag)
        return True

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return [self.correct_score if self.matches(text) else self.incorrect_score for text in texts]
