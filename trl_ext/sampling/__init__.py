"""Dynamic sampling, trainer-free: the sampler that runs the rounds (`DynamicSampler`), and the decisions it takes:
which prompt groups to keep, how many prompts to request, where refill prompts come from, which surplus groups to
carry over, which prompts to skip, and when to stop over-sampling; and the adaptive mode's pass-rate beliefs and
history baseline (`adaptive`), its pilot, which stops a decided prompt after its first completions (`pilot`), and its
extensions, which give an all-equal group more completions and train them as one group (`extension`). The run's
processes as the sampler sees them are in `processes`. Nothing here imports TRL."""

from .adaptive import (
    AdaptiveSettings,
    PassRateBeliefs,
    history_baseline_advantages,
    informative_against_history,
    informative_probability,
    joint_histories,
)
from .backoff import BackoffController, SamplingMode
from .carry import (
    CarriedGroup,
    CarryBuffer,
    first_round_plan,
    first_round_plans,
    staleness_stats,
    surplus_informative_groups,
)
from .dynamic_sampling import (
    KeepRateEstimator,
    filter_reward_mask,
    filter_rewards,
    groups_to_keep,
    informative_group_mask,
    prompts_for_processes,
    prompts_to_request,
    spare_groups_to_fill,
)
from .prompt_history import Outcome, PromptHistory, group_outcomes
from .refill import (
    RefillSampler,
    StreamRefillSampler,
    draw_unskipped,
    prompt_index,
    prompt_key,
)
from .sampler import (
    BatchReport,
    DynamicSampler,
    RoundSource,
    SampledBatch,
    SamplerSettings,
)

__all__ = [
    "AdaptiveSettings",
    "PassRateBeliefs",
    "history_baseline_advantages",
    "informative_against_history",
    "informative_probability",
    "joint_histories",
    "BackoffController",
    "BatchReport",
    "CarriedGroup",
    "CarryBuffer",
    "DynamicSampler",
    "KeepRateEstimator",
    "Outcome",
    "PromptHistory",
    "RefillSampler",
    "RoundSource",
    "SampledBatch",
    "SamplerSettings",
    "SamplingMode",
    "StreamRefillSampler",
    "draw_unskipped",
    "filter_reward_mask",
    "filter_rewards",
    "first_round_plan",
    "first_round_plans",
    "group_outcomes",
    "groups_to_keep",
    "informative_group_mask",
    "prompt_index",
    "prompt_key",
    "prompts_for_processes",
    "prompts_to_request",
    "spare_groups_to_fill",
    "staleness_stats",
    "surplus_informative_groups",
]
