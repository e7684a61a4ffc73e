"""What our trainers check and resolve before TRL builds anything: reward names from the registry, and whether the
rewards and TRL can read the dataset. Errors name the column or field and the fix, before training starts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..rewards.registry import check_reward_columns, first_rows, get_reward, parse_reward_spec, reward_entry


def resolve_reward_names(reward_funcs: Any) -> Any:
    """`reward_funcs` with every string that names a registered reward (`"math"`, `"code"`, or a spec such as
    `"math:fallback=..."`) replaced by that reward, as `get_reward` builds it. Any other string stays for TRL,
    which reads it as a reward model on the Hub."""
    if reward_funcs is None:
        return None
    items = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
    resolved = [_registered(item) if isinstance(item, str) else item for item in items]
    return resolved if isinstance(reward_funcs, list) else resolved[0]


def _registered(text: str) -> Callable | str:
    name, kwargs, _ = parse_reward_spec(text)
    try:
        reward_entry(name)
    except KeyError:
        return text
    return get_reward(name, **kwargs)


def check_dataset(reward_funcs: Sequence[Any], dataset: Any) -> None:
    """Raise before training when the dataset has no `prompt` column (TRL generates from it), or a reward cannot
    read it (`check_reward_columns`). Datasets without column names (some streams) are checked when read."""
    column_names = getattr(dataset, "column_names", None)
    if not column_names:
        return
    if "prompt" not in column_names:
        raise ValueError(
            f"The training dataset has no 'prompt' column (columns: {sorted(column_names)}). GRPO-style trainers "
            "generate completions from it: rename the column holding the question, e.g. "
            "`dataset = dataset.rename_column('question', 'prompt')`."
        )
    check_reward_columns(
        [func for func in reward_funcs if not isinstance(func, str)], column_names, first_rows(dataset)
    )
