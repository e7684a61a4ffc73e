"""Rule-based verifiable rewards, by name: `get_reward("math")`, `build_reward_funcs(["math", "think_format"])`.

`list_rewards()` lists the registered names with a one-line description each.
"""

from .base import Reward, completion_text, dataset_column, message_text
from .length import SoftOverlongPunishment, soft_overlong_penalty
from .registry import (
    AsyncReward,
    build_reward_funcs,
    call_reward,
    get_reward,
    list_rewards,
    parse_reward_spec,
    register_reward,
    reward_entry,
)

__all__ = [
    "AsyncReward",
    "Reward",
    "SoftOverlongPunishment",
    "build_reward_funcs",
    "call_reward",
    "completion_text",
    "dataset_column",
    "get_reward",
    "list_rewards",
    "message_text",
    "parse_reward_spec",
    "register_reward",
    "reward_entry",
    "soft_overlong_penalty",
]
