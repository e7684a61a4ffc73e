"""Rule-based verifiable rewards, by name: `get_reward("math")`, `build_reward_funcs(["math", "think_format"])`.

`list_rewards()` lists the registered names with a one-line description each. Importing this package
registers every built-in reward.
"""

from . import answers, code, dapo, format, math, shaping, structured, tool_call  # noqa: F401  (registration)
from .base import Reward, completion_text, dataset_column, message_text
from .length import SoftOverlongPunishment, soft_overlong_penalty
from .pool import Outcome, TimeoutPool, run_with_timeout_pool, shared_pool
from .registry import (
    AsyncReward,
    build_reward_funcs,
    call_reward,
    check_reward_columns,
    get_reward,
    list_rewards,
    parse_reward_spec,
    register_reward,
    reward_entry,
)

__all__ = [
    "AsyncReward",
    "Outcome",
    "Reward",
    "SoftOverlongPunishment",
    "TimeoutPool",
    "build_reward_funcs",
    "call_reward",
    "check_reward_columns",
    "completion_text",
    "dataset_column",
    "get_reward",
    "list_rewards",
    "message_text",
    "parse_reward_spec",
    "register_reward",
    "reward_entry",
    "run_with_timeout_pool",
    "shared_pool",
    "soft_overlong_penalty",
]
