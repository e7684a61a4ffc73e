"""`MathReward`, the registered `math` reward: final answers extracted in the trainer process, each distinct
(reference, final answer) pair of a batch verified once in the verification process pool with a hard per-item
timeout (math-verify's own timeouts use `signal.alarm`, which only works in the main thread), verdicts cached
across calls, and an optional second opinion on rejected answers (`trl_ext.rewards.math_fallback`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..base import Reward, completion_text, dataset_column, scores_for
from ..math_fallback import ask_fallback, resolve_fallback
from ..pool import TimeoutPool, shared_pool
from ..registry import register_reward
from .extract import FinalAnswer, extract_final_answer, question_text
from .verify import MAX_CHUNK, TIMED_OUT, MathVerifier, VerdictCache, chunks_by_reference, distinct_items

__all__ = ["MathReward"]


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
        fallback: off by default. A second opinion for the completions the rules reject: a callable
            `(question, reference, answer) -> bool | None`, or its `"module:attribute"` path (e.g.
            `trl_ext.rewards.math_fallback:CausalLMJudge`); `True` turns a rejection into an accept, anything
            else keeps it. The rules alone decide accepts. See `trl_ext.rewards.math_fallback`.
        fallback_kwargs: arguments for a fallback given as a class path (e.g. `{"model": "path/to/model"}`).

    Returns None for a reference that cannot be parsed. Each distinct (reference, final answer) pair of a
    batch is verified once and its verdict shared by every completion that gave that answer. When the prompts
    are passed (TRL passes them), a question that lists options lets an option's text answer its letter.
    """

    def __init__(
        self,
        reference_column: str = "solution",
        scoring: Literal["binary", "dapo"] = "binary",
        timeout: float = 10.0,
        on_timeout: Literal["fail", "skip"] = "fail",
        num_workers: int | None = None,
        cache_size: int = 4096,
        fallback: str | Callable | None = None,
        fallback_kwargs: Mapping[str, Any] | None = None,
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
        self.fallback = fallback
        self.fallback_kwargs = dict(fallback_kwargs or {})
        self._fallback = resolve_fallback(fallback, self.fallback_kwargs)  # fails here, before training
        self._second_opinions = VerdictCache(cache_size)

    def _fallback_callable(self) -> Callable | None:
        if self._fallback is None and self.fallback is not None:  # a copy rebuilds it (a model does not pickle)
            self._fallback = resolve_fallback(self.fallback, self.fallback_kwargs)
        return self._fallback

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

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        # The prompts too: a question that lists options lets an option's text answer its letter.
        if completions is None:
            raise TypeError(f"Reward {self.__name__!r} needs `completions`.")
        texts = [completion_text(completion) for completion in completions]
        questions = [question_text(prompt) for prompt in prompts] if prompts is not None else None
        return self.score(texts, columns, questions=questions)

    def score(
        self, texts: list[str], columns: Mapping[str, Any], questions: list[str | None] | None = None
    ) -> list[float | None]:
        references = dataset_column(
            columns, self.reference_column, len(texts), reward=self.__name__, argument="reference_column"
        )
        questions = questions if questions is not None else [None] * len(texts)
        keys, positions, rewards = [], [], [None] * len(texts)
        for index, (text, reference, question) in enumerate(zip(texts, references, questions)):
            if reference is None or not str(reference).strip():
                continue  # no reference: cannot judge
            keys.append((str(reference), extract_final_answer(text, question)))
            positions.append(index)
        distinct, index_of = distinct_items(keys)
        verdicts = self._cache.get_or_compute(
            distinct, self._verify_distinct, keep=lambda verdict: verdict != TIMED_OUT  # a timeout may pass next time
        )
        row_verdicts = [verdicts[number] for number in index_of]
        if self.fallback is not None:
            row_verdicts = self._with_second_opinions(row_verdicts, keys, [texts[index] for index in positions],
                                                      [questions[index] for index in positions])  # fmt: skip
        failure = self.incorrect_score if self.on_timeout == "fail" else None
        for index, verdict in zip(positions, row_verdicts):
            if verdict == TIMED_OUT:
                rewards[index] = failure
            elif verdict is not None:
                rewards[index] = self.correct_score if verdict else self.incorrect_score
        return rewards

    def _with_second_opinions(
        self, verdicts: list, keys: list[tuple[str, FinalAnswer]], texts: list[str], questions: list[str | None]
    ) -> list:
        """`verdicts` with the rejections the fallback accepts turned into accepts (rows in the same order).

        The fallback sees each distinct (question, reference, answer) once: the answer is the final answer the
        rules extracted, or the completion's last 2,000 characters when they found none."""
        items = [
            (question, reference, answer.text if answer.text is not None else text[-2000:])
            for (reference, answer), text, question in zip(keys, texts, questions)
        ]
        rejected = [row for row, verdict in enumerate(verdicts) if verdict is False]
        distinct, index_of = distinct_items([items[row] for row in rejected])
        opinions = self._second_opinions.get_or_compute(
            distinct, lambda pending: ask_fallback(self._fallback_callable(), pending)
        )
        verdicts = list(verdicts)
        for row, number in zip(rejected, index_of):
            if opinions[number] is True:
                verdicts[row] = True
        return verdicts

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
        state["_second_opinions"] = None
        if isinstance(self.fallback, str):
            state["_fallback"] = None  # rebuilt from its path when first needed (a model is not sent along)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache = VerdictCache(self.cache_size)
        self._second_opinions = VerdictCache(self.cache_size)

    def __repr__(self) -> str:
        return (
            f"MathReward(reference_column={self.reference_column!r}, scoring={self.scoring!r}, "
            f"timeout={self.timeout}, on_timeout={self.on_timeout!r}, num_workers={self.num_workers}, "
            f"cache_size={self.cache_size}"
            + (f", fallback={self.fallback!r}, fallback_kwargs={self.fallback_kwargs!r}" if self.fallback else "")
            + ")"
        )
