"""Answer strings rewritten into the TeX math-verify parses best: TeX shorthand with command or letter arguments
(`\\frac\\pi2`, `\\tfrac{a}b`, `\\sqrt[3]8`), MATH's spacing (`10,\\!000` and `1\\,000` are numbers; a row break
`\\\\` stays one), `\\varnothing`, Unicode math (`π`, `√2`, `≤`), and a trailing period or comma inside the box."""

from __future__ import annotations

import re

from ..extraction import strip_math_delimiters

__all__ = ["normalize_math_answer", "normalize_math_answer_text"]

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


def normalize_math_answer_text(text: str) -> str:
    """Whole-completion clean-up before math-verify's own anchored search: shorthand TeX and Unicode only."""
    for char, replacement in _UNICODE.items():
        text = text.replace(char, replacement)
    return _brace_shorthand(text.replace(r"\fbox", r"\boxed"))
