"""`math`: mathematical equivalence of the final answer with the reference, by `math-verify`.

`math-verify` parses LaTeX and plain answers into sympy and compares them (fractions and decimals, sets in
any order, intervals, expanded and factored forms, percent, units). Its own parts are used as they are: the
default normalisation of `LatexExtractionConfig` (units, malformed operators such as `2^(10)` or `\\frac12`,
leading decimal points), its rule for a run of several boxes, and `verify`'s string comparison when sympy
fails on a pair. What it misses on real data, and what this package adds, one module each:

- `extract`: finding the answer: the last non-empty `\\boxed{}` or `\\fbox{}`, or `Answer: ...` line, whichever
  comes last (an "answer:" in prose after the box is not an answer); "the final answer is $x$"; math-verify's
  search for an anchored answer; or a completion that is nothing but the answer (`1/2`, `$x^2+2x$`); and what
  the question says (listed options, the direction of an ordering, a requested rounding);
- `normalize`: TeX shorthand with command or letter arguments (`\\frac\\pi2`, `\\tfrac{a}b`, `\\sqrt[3]8`),
  which math-verify misreads; MATH's spacing (`10,\\!000` and `1\\,000` are numbers; a row break `\\\\` stays
  one), `\\varnothing`, Unicode math (`π`, `√2`, `≤`), and a trailing period or comma inside the box;
- `compare`: the calls into math-verify (parse, anchored search, `verify` pair by pair);
- `forms` and `structures`: the answer forms, one registered rule each (`@answer_form`). Right answers in
  another form than the reference's, once math-verify has rejected them (`same_by_forms`): column vectors for
  tuples, set-builder sets for intervals, ordered chains for orders, a function with another variable name,
  degrees for radians, the precision rule (an exact or finer number for a rounded reference), text that
  differs in markup, an option's text for its letter. And answers math-verify misreads, settled by their form
  before it compares (`settle_by_forms`): an integer family with another parameter name, two different units;
- `labels` and `sets`: more answer forms, registered the same way: labelled values against a bare list (in the
  order the question names them), an equation for the expression it defines, circled or enumerated choices;
  conditions in words for intervals and unions (`1 < t \\le 3 \\text{ or } 5 \\le t < 7`), plus-minus families;
- `verify`: the verdict on one pair (an inequality answered for a reference that can only be an interval,
  `x \\geq 2` for `[2, \\infty)`; one box per answer), the pool job and the verdict cache;
- `reward`: `MathReward`, the registered `math` reward.

`verify_math_answer` is the pure function (`extract_final_answer` then `verify_final_answer`); `MathReward`
runs the second in the verification process pool with a hard per-item timeout (math-verify's own timeouts
use `signal.alarm`, which only works in the main thread), once per distinct (reference, final answer).
"""

from .extract import (
    FinalAnswer,
    extract_final_answer,
    extract_math_answer,
    question_text,
    reference_answer,
    requested_decimals,
)
from .forms import ANSWER_FORMS, AnswerForm, answer_form, same_by_forms, settle_by_forms
from .normalize import normalize_math_answer, normalize_math_answer_text
from .reward import MathReward
from .structures import declares_integers, units_differ
from .verify import (
    MAX_CHUNK,
    TIMED_OUT,
    MathVerifier,
    VerdictCache,
    chunks_by_reference,
    distinct_items,
    verify_final_answer,
    verify_math_answer,
)

__all__ = [
    "ANSWER_FORMS",
    "MAX_CHUNK",
    "TIMED_OUT",
    "AnswerForm",
    "FinalAnswer",
    "MathReward",
    "MathVerifier",
    "VerdictCache",
    "answer_form",
    "chunks_by_reference",
    "declares_integers",
    "distinct_items",
    "extract_final_answer",
    "extract_math_answer",
    "normalize_math_answer",
    "normalize_math_answer_text",
    "question_text",
    "reference_answer",
    "requested_decimals",
    "same_by_forms",
    "settle_by_forms",
    "units_differ",
    "verify_final_answer",
    "verify_math_answer",
]
