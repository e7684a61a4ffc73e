"""Finding the final answer in a completion: pure string functions shared by the verifiers.

Each returns the answer's text, or None when the completion holds no answer of that form.
"""

from __future__ import annotations

import re

__all__ = [
    "answer_line",
    "answer_phrase",
    "auto_answer",
    "gsm8k_answer",
    "last_boxed",
    "last_number",
    "listed_choices",
    "reads_as_prose",
    "strip_math_delimiters",
    "tag_content",
]

_BOXED = re.compile(r"\\(?:boxed|fbox)\b")
_ANSWER_LINE = re.compile(r"(?i)\banswer\s*(?:is\s*)?[:：]\s*([^\n]*)")
_GSM8K = re.compile(r"####\s*([^\n]*)")
# Numbers as people write them: -1,234.5, .5, 1e-3, 3/4 (a fraction reads as one number).
_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?")


def _closing_braces(text: str) -> dict[int, int]:
    """Index of each `{` -> index of its matching `}`, in one pass (escaped `\\{`, `\\}` are content)."""
    closing, stack = {}, []
    for index, char in enumerate(text):
        if char in "{}" and index and text[index - 1] == "\\":
            continue
        if char == "{":
            stack.append(index)
        elif char == "}" and stack:
            closing[stack.pop()] = index
    return closing


def boxed_spans(text: str) -> list[tuple[int, str]]:
    """`(position, content)` of every `\\boxed{...}` / `\\fbox{...}` (and brace-less `\\boxed 5`), in order.

    Linear in the text length, so a completion full of unclosed boxes costs no more than any other.
    """
    spans, closing = [], None
    for match in _BOXED.finditer(text):
        position = match.end()
        while position < len(text) and text[position] == " ":
            position += 1
        if position < len(text) and text[position] == "{":
            if closing is None:
                closing = _closing_braces(text)
            if position in closing:
                spans.append((match.start(), text[position + 1 : closing[position]]))
        elif position > match.end():  # `\boxed 5`: one token up to the next space or `$`
            token = re.match(r"[^\s$]+", text[position:])
            if token:
                spans.append((match.start(), token.group(0)))
    return spans


def last_boxed(text: str) -> str | None:
    """Content of the last non-empty `\\boxed{}` (or `\\fbox{}`), nested braces kept whole."""
    for _, content in reversed(boxed_spans(text)):
        if content.strip():
            return content.strip()
    return None


def answer_line(text: str, pattern: re.Pattern | str | None = None) -> str | None:
    """Rest of the line after the last `Answer:` (case-insensitive; `The answer is: x` too), Markdown stripped."""
    regex = _ANSWER_LINE if pattern is None else re.compile(pattern)
    matches = regex.findall(text)
    if not matches:
        return None
    answer = matches[-1].strip().strip("*").strip()
    return answer or None


def gsm8k_answer(text: str) -> str | None:
    """Text after the last `####` marker (GSM8K's worked answers end with `#### 72`)."""
    matches = _GSM8K.findall(text)
    return matches[-1].strip() or None if matches else None


def tag_content(text: str, tag: str) -> str | None:
    """Content of the last `<tag>...</tag>` block."""
    matches = re.findall(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, flags=re.DOTALL)
    return matches[-1].strip() if matches else None


def strip_math_delimiters(answer: str) -> str:
    """`$x$`, `$$x$$`, `\\(x\\)`, `\\[x\\]` -> `x`; a trailing sentence period goes too."""
    answer = answer.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if answer.startswith(left) and answer.endswith(right) and len(answer) >= len(left) + len(right):
            answer = answer[len(left) : len(answer) - len(right)].strip()
            break
    return answer.rstrip(".").strip()


def auto_answer(text: str) -> str | None:
    """The final answer by the usual conventions, whichever comes last in the text: the last `\\boxed{}`,
    the last `Answer:` line, the last `<answer>` tag; or None. An `Answer:` phrase after the last box counts
    only if what follows it is not prose."""
    candidates = []
    spans = [(position, content) for position, content in boxed_spans(text) if content.strip()]
    if spans:
        candidates.append((spans[-1][0], spans[-1][1].strip()))
    line_matches = list(_ANSWER_LINE.finditer(text))
    for match in reversed(line_matches):
        answer = _answer_in_line(match.group(1).strip().strip("*").strip())
        # After a box, "answer:" in a sentence ("let me check the answer: it works") is prose, not a new answer.
        if answer and not (spans and match.start() > spans[-1][0] and reads_as_prose(answer)):
            candidates.append((match.start(), answer))
            break
    tag_matches = list(re.finditer(r"<answer>(.*?)</answer>", text, flags=re.DOTALL))
    if tag_matches and tag_matches[-1].group(1).strip():
        candidates.append((tag_matches[-1].start(), tag_matches[-1].group(1).strip()))
    if not candidates:
        return None
    # An `Answer: $\boxed{5}$` line contains the box: the box is the more precise span.
    _, answer = max(candidates, key=lambda candidate: candidate[0])
    inner = last_boxed(answer)
    return inner if inner is not None else answer


_ANSWER_IS = re.compile(r"(?i)\banswer\s+is\s*:?\s*")
_LEADING_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)


def _answer_in_line(content: str) -> str:
    """The answer in the text of an `Answer:` line. MATH's few-shot form nests a phrase and a sentence after it
    (`Final Answer: The final answer is $10,455$. I hope it is correct.` -> `10,455`): the math span that
    opens the line is the answer when only punctuation or prose follows it."""
    nested = _ANSWER_IS.search(content)
    if nested:
        content = content[nested.end() :]
    math = _LEADING_MATH.match(content)
    if math:
        rest = content[math.end() :].strip()
        if not rest.strip(".,;:!*\"' ") or reads_as_prose(rest):
            return next(group for group in math.groups() if group is not None).strip()
    return content


_ANSWER_IS_MATH = re.compile(
    r"(?i)\banswer\s+is\s*:?\s*(?:\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\])", re.DOTALL
)


def answer_phrase(text: str) -> str | None:
    """The math span right after the last "answer is" (`Therefore, the final answer is $42$.` -> `42`), or None
    when the last such phrase is not followed by math."""
    matches = list(_ANSWER_IS_MATH.finditer(text))
    if not matches:
        return None
    answer = next(group for group in matches[-1].groups() if group is not None).strip()
    return answer or None


_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}")


def reads_as_prose(text: str) -> bool:
    """Whether `text` holds a word of four or more letters outside TeX commands and `\\text{}`: a sentence, not
    an answer (`x = 5`, `\\frac{\\pi}{2}`, `5 \\text{ cm}` are not prose; `substituting back works` is)."""
    return bool(_PROSE_WORD.search(re.sub(r"\\(?:text|mbox|mathrm)\{[^{}]*\}", " ", text)))


def last_number(text: str) -> str | None:
    """The last number written in `text` (thousands separators, decimals, exponents, `a/b` fractions)."""
    numbers = [match.group(0) for match in _NUMBER.finditer(text) if re.search(r"\d", match.group(0))]
    return numbers[-1].strip() if numbers else None


# An option marker in a question: `(B)`, `\textbf{(B)}`, `\text{(B) }`, or `B.` / `B)` / `B:` opening a line.
_CHOICE_MARKER = re.compile(r"\(([A-J])\)|(?m:^[ \t]*([A-J])[.):](?=\s))")


def listed_choices(question: str | None) -> tuple[tuple[str, str], ...]:
    """The options a multiple-choice question lists, as `(letter, text)` in order: `(A) 2 (B) 3`, the AMC form
    `$\\textbf{(A) }2\\qquad\\textbf{(B) }3$`, or one option a line (`A. 2`). Empty unless the letters run
    A, B, C, ... (at least two): a stray `(C)` in a sentence is not a list of options."""
    if not question:
        return ()
    markers = [
        (match.start(), match.end(), match.group(1) or match.group(2)) for match in _CHOICE_MARKER.finditer(question)
    ]
    # The last run A, B, C...: a question may cite earlier parts; the options close it.
    start = max((index for index, (_, _, letter) in enumerate(markers) if letter == "A"), default=None)
    if start is None:
        return ()
    run = [markers[start]]
    for marker in markers[start + 1 :]:
        if ord(marker[2]) != ord(run[-1][2]) + 1:
            break
        run.append(marker)
    if len(run) < 2:
        return ()
    choices = []
    for number, (_, end, letter) in enumerate(run):
        stop = run[number + 1][0] if number + 1 < len(run) else len(question)
        text = question[end:stop]
        if number + 1 == len(run):  # the last option ends its line or sentence
            text = re.split(r"\n|\.(?:\s|$)|\?", text)[0]
        choices.append((letter, _choice_text(text)))
    return tuple(choices)


def _choice_text(text: str) -> str:
    """An option's text without the markup around it: `}2\\qquad\\textbf{` -> `2`, `\\text{none}$` -> `none`."""
    text = re.sub(r"\\(?:qquad|quad|hspace\{[^{}]*\})", " ", text)
    text = re.sub(r"\\(?:textbf|text|mathrm)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\(?:textbf|text|mathrm)\{\s*$", "", text)  # the next option's opening `\textbf{`
    text = text.strip().lstrip("}").strip()
    while text.endswith("}") and text.count("}") > text.count("{"):
        text = text[:-1].rstrip()
    return text.strip("$ ,;").strip()
