"""The calls into math-verify: parsing an answer string (after `normalize_math_answer`), its search for an
anchored answer in free text, and `verify` pair by pair. Its own parts are used as they are: the default
normalisation of `LatexExtractionConfig` (units, malformed operators such as `2^(10)` or `\\frac12`, leading
decimal points), and `verify`'s string comparison when sympy fails on a pair."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..extraction import reads_as_prose
from .normalize import normalize_math_answer

__all__ = ["Same", "equivalent", "parse_anchored", "parse_answer"]


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
def parse_answer(answer: str, parsing_timeout: int | None) -> tuple:
    """math-verify's parse of an answer string once normalised; `()` when it does not parse. Cached: a batch
    compares many answers with one reference, and the form rules parse the same pieces again."""
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


def parse_anchored(text: str, parsing_timeout: int | None) -> list:
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


def equivalent(gold: list, predicted: list, verify_timeout: int | None, *, allow_set_relation_comp: bool) -> bool:
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


@dataclass(frozen=True)
class Same:
    """math-verify's equivalence of two answer strings, with the caller's time limits."""

    parsing_timeout: int | None
    verify_timeout: int | None

    def parsed(self, text: str) -> list:
        return list(parse_answer(text, self.parsing_timeout))

    def __call__(self, gold: str, answer: str, *, relations: bool = False) -> bool:
        gold_parsed, answer_parsed = self.parsed(gold), self.parsed(answer)
        return bool(gold_parsed and answer_parsed) and equivalent(
            gold_parsed, answer_parsed, self.verify_timeout, allow_set_relation_comp=relations
        )
