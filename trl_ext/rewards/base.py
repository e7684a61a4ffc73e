"""What every reward shares: TRL's call signature, completion text extraction, dataset column access.

TRL calls a reward function as `func(prompts=..., completions=..., completion_ids=..., **columns)` where
`columns` holds every dataset column (one value per completion) plus `trainer_state`, `log_extra` and
`log_metric`. A completion is a string (plain-text datasets) or a list of chat messages (conversational
datasets). A reward returns one `float | None` per completion; `None` means "cannot judge" and TRL turns it
into NaN, which its reward aggregation ignores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Keys TRL adds to the dataset columns it passes to reward functions; never dataset columns themselves.
TRAINER_KEYS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})


def message_text(message: Mapping[str, Any]) -> str:
    """Text content of one chat message; multimodal content parts contribute their `text` parts, in order."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            part.get("text", "") if isinstance(part, Mapping) else str(part)
            for part in content
            if not isinstance(part, Mapping) or part.get("type", "text") == "text"
        )
    return str(content)


def completion_text(completion: Any) -> str:
    """Text to verify from one completion, plain-text or conversational.

    - `str`: the completion itself;
    - a single message `{"role": ..., "content": ...}`: its content;
    - a list of messages: the content of the last `assistant` message (a multi-turn completion with tool
      results ends with the model's final answer), or of the last message if none has that role.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return message_text(completion)
    if isinstance(completion, Sequence):
        if not completion:
            return ""
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                return message_text(message)
        last = completion[-1]
        return message_text(last) if isinstance(last, Mapping) else str(last)
    if completion is None:
        return ""
    raise TypeError(
        f"A completion must be a string or a list of chat messages, got {type(completion).__name__}."
    )


def dataset_column(
    columns: Mapping[str, Any], column: str, num_completions: int, *, reward: str, argument: str
) -> list:
    """The values of a dataset column for a batch, with an error naming the column and how to fix it.

    `argument` is the reward's argument that chose the column, so the message can say what to change.
    """
    if column not in columns:
        available = sorted(key for key in columns if key not in TRAINER_KEYS)
        raise KeyError(
            f"Reward {reward!r} reads the dataset column {column!r}, but the batch has columns {available}. "
            f"Add a {column!r} column to the dataset or pass {argument}=<column name> to the reward."
        )
    values = list(columns[column])
    if len(values) != num_completions:
        raise ValueError(
            f"Reward {reward!r}: column {column!r} has {len(values)} values for {num_completions} completions."
        )
    return values


SCORINGS = {"binary": (1.0, 0.0), "dapo": (1.0, -1.0)}


def scores_for(scoring: str, *, reward: str) -> tuple[float, float]:
    """(correct, incorrect) scores for a scoring scheme: `binary` is 1/0, `dapo` is DAPO's +1/-1."""
    if scoring not in SCORINGS:
        raise ValueError(f"Reward {reward!r}: scoring must be one of {sorted(SCORINGS)}, got {scoring!r}.")
    return SCORINGS[scoring]


class Reward:
    """Base class of registered rewards: a picklable callable with TRL's reward signature.

    Subclasses implement `score(texts, columns)`, receiving the completions' text (see `completion_text`) and
    the dataset columns; override `__call__` instead only when the raw completions or token ids are needed.
    The registry sets each instance's `__name__` to the registered name, which TRL uses for metric names
    (`rewards/<name>/mean`).
    """

    __name__ = "reward"

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        if completions is None:
            raise TypeError(f"Reward {self.__name__!r} needs `completions`.")
        texts = [completion_text(completion) for completion in completions]
        return self.score(texts, columns)

    def score(self, texts: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        raise NotImplementedError

    def __repr__(self) -> str:
        arguments = ", ".join(
            f"{key}={value!r}"
            for key, value in vars(self).items()
            if key not in ("__name__", "correct_score", "incorrect_score") and not key.startswith("_")
        )
        return f"{type(self).__name__}({arguments})"
