"""A second opinion for the answers `math`'s rules reject: `math:fallback=<callable>`, off by default.

The rules stay authoritative for accepts: a fallback is asked only about completions they scored as wrong
(never about ones they accepted, could not judge, or timed out on), and its `True` turns that wrong into right;
anything else (`False`, `None`, an error) keeps the rules' verdict. The idea is TinyV's: a small model catches
the right answers a rule-based verifier misses, at the cost of one model call per rejected distinct answer.

A fallback is any callable `fallback(question, reference, answer) -> bool | None`, or a `"module:attribute"`
path to one (what a recipe's YAML or a `math:fallback=...` spec can name). A path to a class is instantiated
with `fallback_kwargs`. A callable with a `judge_many(items)` method gets the whole batch's items at once.

`CausalLMJudge` is the shipped one: a local causal LM through transformers asked whether the answer is
equivalent to the reference, scored by comparing the log-likelihoods of "Yes" and "No" (two forwards of the
prompt, no sampling, so the same inputs give the same verdict).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["CausalLMJudge", "JUDGE_PROMPT", "resolve_fallback"]

logger = logging.getLogger(__name__)

Fallback = Callable[[str | None, str, str], "bool | None"]


def resolve_fallback(fallback: str | Callable | None, kwargs: Mapping[str, Any] | None = None) -> Callable | None:
    """The fallback callable named by `fallback`: a callable as is, a `"module:attribute"` (or
    `"module.attribute"`) path imported, a class instantiated with `kwargs`. Raises `ValueError` naming the
    argument and the fix when it cannot be found or called."""
    kwargs = dict(kwargs or {})
    if fallback is None:
        if kwargs:
            raise ValueError("Reward 'math': fallback_kwargs were given without a fallback; set fallback=<callable>.")
        return None
    target = _import_path(fallback) if isinstance(fallback, str) else fallback
    if isinstance(target, type):
        target = target(**kwargs)
    elif kwargs:
        raise ValueError(
            f"Reward 'math': fallback_kwargs apply to a class (it is instantiated with them); {fallback!r} is "
            "not one. Pass a configured callable instead."
        )
    if not callable(target):
        raise ValueError(
            f"Reward 'math': fallback {fallback!r} is not callable; it must take (question, reference, answer)."
        )
    return target


def _import_path(path: str) -> Any:
    module_name, colon, attribute = path.partition(":")
    if not colon:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(
            f"Reward 'math': fallback {path!r} is not an import path; write it as 'package.module:function'."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"Reward 'math': cannot import the fallback's module {module_name!r} ({error}).") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"Reward 'math': module {module_name!r} has no {attribute!r} for the fallback.") from None


def ask_fallback(fallback: Callable, items: Sequence[tuple[str | None, str, str]]) -> list[bool | None]:
    """The fallback's verdicts on `(question, reference, answer)` items, in order; failing closed: an error
    (or a verdict that is not a bool or None) is None for the item(s) concerned, with a warning."""
    if not items:
        return []
    many = getattr(fallback, "judge_many", None)
    if callable(many):
        try:
            verdicts = list(many(list(items)))
            if len(verdicts) != len(items):
                raise ValueError(f"judge_many returned {len(verdicts)} verdicts for {len(items)} items")
            return [_checked(verdict, item) for verdict, item in zip(verdicts, items)]
        except Exception as error:  # noqa: BLE001 - a failing second opinion changes nothing
            logger.warning("math fallback failed on a batch of %d answers (%s); they stay rejected.", len(items), error)
            return [None] * len(items)
    verdicts = []
    for item in items:
        try:
            verdicts.append(_checked(fallback(*item), item))
        except Exception as error:  # noqa: BLE001
            logger.warning(
                "math fallback failed on reference %r, answer %r (%s); it stays rejected. Fix the fallback or "
                "remove it.", item[1][:80], item[2][:80], error,
            )  # fmt: skip
            verdicts.append(None)
    return verdicts


def _checked(verdict: Any, item: tuple[str | None, str, str]) -> bool | None:
    if verdict is None or isinstance(verdict, bool):
        return verdict
    logger.warning(
        "math fallback returned %r (not True, False or None) for reference %r; the answer stays rejected.",
        verdict, item[1][:80],
    )  # fmt: skip
    return None


JUDGE_PROMPT = (
    "Decide whether a student's final answer to a math problem is mathematically equivalent to the reference "
    "answer. Different forms of the same value, set or expression count as equivalent; a different value does "
    "not.\n\nProblem: {question}\nReference answer: {reference}\nStudent answer: {answer}\n\n"
    "Is the student answer equivalent to the reference answer? Answer Yes or No."
)


class CausalLMJudge:
    """A local causal LM as `math`'s fallback: "is `answer` equivalent to `reference`?", answered by comparing
    the model's log-likelihood of "Yes" and of "No" after the prompt (`JUDGE_PROMPT`, through the tokenizer's
    chat template when it has one).

    Args:
        model: a local model directory (or a name the Hub cache holds), loaded with transformers'
            `AutoModelForCausalLM` and `AutoTokenizer`.
        device: where the model runs ("cpu", "cuda", "cuda:1"); None picks CUDA when available.
        dtype: the model's torch dtype ("bfloat16", "float32", ...); None lets transformers choose.
        margin: "Yes" must beat "No" by this much log-likelihood to accept (0: the likelier wins).
        batch_size: prompts per forward pass.
        max_prompt_tokens: longer prompts keep their last tokens (the question is cut first, then the answer).

    Cost: two sequences of about prompt length (~100 tokens plus the question) per rejected distinct answer,
    one forward each, no generation.
    """

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        margin: float = 0.0,
        batch_size: int = 8,
        max_prompt_tokens: int = 1024,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if batch_size < 1 or max_prompt_tokens < 16:
            raise ValueError(
                f"CausalLMJudge: batch_size must be >= 1 and max_prompt_tokens >= 16, got {batch_size} and "
                f"{max_prompt_tokens}."
            )
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        options = {"dtype": getattr(torch, dtype)} if dtype else {}
        self.model = AutoModelForCausalLM.from_pretrained(model, **options).to(self.device).eval()
        self.margin = margin
        self.batch_size = batch_size
        self.max_prompt_tokens = max_prompt_tokens

    def prompt(self, question: str | None, reference: str, answer: str) -> str:
        text = JUDGE_PROMPT.format(
            question=(question or "(not given)")[-2000:], reference=reference[-500:], answer=answer[-500:]
        )
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return text + "\nAnswer:"

    def __call__(self, question: str | None, reference: str, answer: str) -> bool | None:
        return self.judge_many([(question, reference, answer)])[0]

    def judge_many(self, items: Sequence[tuple[str | None, str, str]]) -> list[bool | None]:
        """Verdicts for `(question, reference, answer)` items, `batch_size` prompts (x2 continuations) a forward."""
        margins = []
        for start in range(0, len(items), self.batch_size):
            margins += self.yes_margins([self.prompt(*item) for item in items[start : start + self.batch_size]])
        return [margin > self.margin for margin in margins]

    def yes_margins(self, prompts: list[str]) -> list[float]:
        """log p("Yes" | prompt) - log p("No" | prompt) for each prompt."""
        import torch

        sequences, spans = [], []
        for prompt in prompts:
            prompt_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"][-self.max_prompt_tokens :]
            for word in ("Yes", "No"):
                continuation = self.tokenizer(" " + word if not prompt.endswith((" ", "\n")) else word,
                                              add_special_tokens=False)["input_ids"]  # fmt: skip
                sequences.append(prompt_ids + continuation)
                spans.append((len(prompt_ids), len(prompt_ids) + len(continuation)))
        width = max(len(sequence) for sequence in sequences)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        # Left padding, so every continuation ends at the last position.
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], device=self.device)
        attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=self.device)
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)  # real tokens count from 0 after the padding
        # Every continuation ends at the last position: only the last `keep` positions' logits are needed
        # (a full-vocabulary log-softmax over the whole prompt would cost more than the forward itself).
        keep = max(end - start for start, end in spans) + 1
        with torch.no_grad():
            logits = self.model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=keep
            ).logits.float()
        log_probs = torch.log_softmax(logits[:, :-1], dim=-1)  # position width - keep + j predicts token j + 1 of those
        scores = []
        for row, (start, end) in enumerate(spans):
            length = end - start
            targets = input_ids[row, width - length :]
            steps = torch.arange(keep - 1 - length, keep - 1, device=self.device)
            scores.append(log_probs[row, steps, targets].sum().item())
        return [scores[index] - scores[index + 1] for index in range(0, len(scores), 2)]

    def __repr__(self) -> str:
        return f"CausalLMJudge(model={self.model.name_or_path!r}, device={self.device!r}, margin={self.margin})"
