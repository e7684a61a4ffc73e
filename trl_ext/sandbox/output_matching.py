"""Whether a program's stdout matches the expected output (`outputs_match`), by one of `OUTPUT_MATCHES`."""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["DEFAULT_ABS_TOL", "DEFAULT_REL_TOL", "OUTPUT_MATCHES", "outputs_match"]

OUTPUT_MATCHES = ("exact", "stripped", "lines", "tokens", "numbers", "apps")
DEFAULT_REL_TOL = 1e-6
DEFAULT_ABS_TOL = 1e-6


def outputs_match(
    actual: str,
    expected: str,
    mode: str = "lines",
    rel_tol: float | None = None,
    abs_tol: float | None = None,
) -> bool:
    """Whether a program's stdout matches the expected output.

    `exact`: identical; `stripped`: identical after stripping both ends; `lines`: same lines after stripping
    both ends and trailing spaces of each line (`\\r\\n` = `\\n`); `tokens`: same whitespace-separated tokens;
    `numbers`: same tokens, where two tokens that both read as numbers may differ by `rel_tol` (relative) or
    `abs_tol` (absolute), default 1e-6 each, when the expected token is not an integer: an expected integer
    (`1000000007`) is matched only by the same number (`1000000007`, `1000000007.0`), never by a near one;
    `apps`: the APPS/TACO rule: `lines`, else `tokens`, else `numbers`.
    """
    if mode == "exact":
        return actual == expected
    if mode == "stripped":
        return actual.strip() == expected.strip()
    if mode == "lines":
        return [line.rstrip() for line in actual.strip().splitlines()] == [
            line.rstrip() for line in expected.strip().splitlines()
        ]
    if mode == "tokens":
        return actual.split() == expected.split()
    if mode == "numbers":
        return _tokens_match_numerically(actual.split(), expected.split(), rel_tol, abs_tol)
    if mode == "apps":
        return any(outputs_match(actual, expected, each, rel_tol, abs_tol) for each in ("lines", "tokens", "numbers"))
    raise ValueError(f"output_match must be one of {OUTPUT_MATCHES}, got {mode!r}.")


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _exact_number(token: str) -> Fraction | None:
    """The exact value of a decimal token (`2`, `2.0`, `-1e3`), or None."""
    try:
        return Fraction(token) if _number(token) is not None else None
    except (ValueError, ZeroDivisionError):
        return None


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _tokens_match_numerically(
    actual: list[str], expected: list[str], rel_tol: float | None, abs_tol: float | None
) -> bool:
    if len(actual) != len(expected):
        return False
    rel = DEFAULT_REL_TOL if rel_tol is None else rel_tol
    absolute = DEFAULT_ABS_TOL if abs_tol is None else abs_tol
    for got, want in zip(actual, expected):
        if got == want:
            continue
        if _INTEGER.fullmatch(want):
            if _exact_number(got) != int(want):
                return False
            continue
        got_number, want_number = _number(got), _number(want)
        if got_number is None or want_number is None:
            return False
        if not math.isclose(got_number, want_number, rel_tol=rel, abs_tol=absolute):
            return False
    return True
