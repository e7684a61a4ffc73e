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
- an inequality answered for a reference that can only be an interval (`x \\geq 2` for `[2, \\infty)`).

`verify_math_answer` is the pure function (`extract_final_answer` then `verify_final_answer`); `MathReward`
runs the second in the verification process pool with a hard per-item timeout (math-verify's own timeouts
use `signal.alarm`, which only works in the main thread), once per distinct (reference, final answer).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .base import Reward, dataset_column, scores_for
from .extraction import (
    answer_phrase,
    auto_answer,
    boxed_spans,
    gsm8k_answer,
    last_boxed,
    reads_as_prose,
    strip_math_delimiters,
)
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
    """

    text: str | None
    boxes: str | None = None
    unmarked: str | None = None


def extract_final_answer(completion: str) -> FinalAnswer:
    """The `FinalAnswer` of a completion: string work only, cheap enough to run in the trainer process."""
    text = extract_math_answer(completion)
    spans = boxed_spans(completion)
    return FinalAnswer(
        text=text,
        boxes=completion[spans[0][0] :] if len(spans) > 1 else None,
        unmarked=completion if text is None else None,
    )


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
    reference: str, completion: str, *, parsing_timeout: int | None = None, verify_timeout: int | None = None
) -> bool | None:
    """Whether `completion`'s final answer is mathematically equivalent to `reference`.

    Returns None when the reference cannot be parsed ("cannot judge"), False when the completion has no
    answer or a different one. `parsing_timeout` / `verify_timeout` are math-verify's own limits (whole
    seconds, `signal.alarm`, so main thread only); past one it raises `TimeoutError`. None disables them, for
    callers that bound time themselves.
    """
    return verify_final_answer(
        reference, extract_final_answer(completion), parsing_timeout=parsing_timeout, verify_timeout=verify_timeout
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
    if not predicted:
        return False
    # math-verify compares an inequality with an interval reference only when told to.
    interval = bool(_UNAMBIGUOUS_INTERVAL.search(gold_answer))
    if _equivalent(gold, predicted, verify_timeout, allow_set_relation_comp=interval):
        return True
    # A reference with several answers may be answered one box each: `\boxed{2} and \boxed{3}` for `2, 3`.
    if answer.boxes is not None and _has_several_elements(gold[0]):
        from latex2sympy2_extended.math_normalization import extract_boxed_content

        run = extract_boxed_content(answer.boxes, mode="last")
        joined = list(_parse_answer(run, parsing_timeout)) if "," in run else []
        return bool(joined) and _equivalent(gold, joined, verify_timeout, allow_set_relation_comp=False)
    return False


def _has_several_elements(value: Any) -> bool:
    import sympy

    return isinstance(value, (sympy.FiniteSet, sympy.Tuple, tuple, list, set)) and len(value) > 1


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

    Returns None for a reference that cannot be parsed. Each distinct (reference, final answer) pair of a
    batch is verified once and its verdict shared by every completion that gave that answer.
    """

    def __init__(
        self,
        reference_column: str = "solution",
        scoring: Literal["binary", "dapo"] = "binary",
        timeout: float = 10.0,
        on_timeout: Literal["fail", "skip"] = "fail",
        num_workers: int | None = None,
        cache_size: int = 4096,
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

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        references = dataset_column(
            columns, self.reference_column, len(texts), reward=self.__name__, argument="reference_column"
        )
        keys, positions, rewards = [], [], [None] * len(texts)
        for index, (text, reference) in enumerate(zip(texts, references)):
            if reference is None or not str(reference).strip():
                continue  # no reference: cannot judge
            keys.append((str(reference), extract_final_answer(text)))
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
        failure = self.incorrect_score if self.on_timeout == "fail" else None
        for index, number in zip(positions, index_of):
            verdict = verdicts[number]
            if verdict == TIMED_OUT:
                rewards[index] = failure
            elif verdict is not None:
                rewards[index] = self.correct_score if verdict else self.incorrect_score
        return rewards

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
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache = VerdictCache(self.cache_size)

    def __repr__(self) -> str:
        return (
            f"MathReward(reference_column={self.reference_column!r}, scoring={self.scoring!r}, "
            f"timeout={self.timeout}, on_timeout={self.on_timeout!r}, num_workers={self.num_workers}, "
            f"cache_size={self.cache_size})"
        )
