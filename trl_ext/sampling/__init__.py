"""Dynamic sampling: which prompt groups to keep, how many prompts to request, where refill prompts come from."""

from .batch import concat_selected_rows
from .dynamic_sampling import (
    KeepRateEstimator,
    filter_rewards,
    groups_to_keep,
    informative_group_mask,
    prompts_to_request,
    spare_groups_to_fill,
)
from .refill import RefillSampler

__all__ = [
    "KeepRateEstimator",
    "RefillSampler",
    "concat_selected_rows",
    "filter_rewards",
    "groups_to_keep",
    "informative_group_mask",
    "prompts_to_request",
    "spare_groups_to_fill",
]
