"""What TRL's GRPO tests are expected to do here, per variant, with the reason for every departure from a pass.

Test ids are `Class::test_name[params]`, matched by patterns in which only `*` is a wildcard (brackets are
literal). Variants: see `substitution.py`.
"""

from __future__ import annotations

import os
import re

import pytest

ALL_VARIANTS = ("trl", "dapo_off", "dapo")

# Tests that cannot run on this machine or offline; reasons start with their cause for RESULTS.md.
SKIPS: dict[str, str] = {
    # The trainer builds its own default config, whose bf16 mixed precision TrainingArguments refuses on CPU.
    "TestGRPOTrainer::test_init_minimal": "GPU: the default config trains in bf16, which needs a bf16-capable device",
    "TestGRPOTrainerVLM::*": (
        "Hub-only: needs vision-language checkpoints, their processors and the image datasets, not stood in"
    ),
    "TestGRPOTrainer::test_trust_remote_code": "Hub-only: loads modelling code from a Hub repository",
    "TestGRPOTrainer::test_train[*NemotronH*]": "Hub-only: no tiny NemotronH (hybrid Mamba) stand-in",
}
# Tool and environment tests train 51 steps on prompts of about a thousand tokens (the tool schemas, tokenised
# nearly byte by byte by the stand-in tokenizer) against a 151,936-token vocabulary: minutes each on CPU. They run
# with `--trl-suite=full` when TRL_SUITE_TOOLS=1 is set.
CPU_TIME_SKIPS: dict[str, str] = {
    pattern: "CPU-time: tool-calling training, minutes per test on CPU (set TRL_SUITE_TOOLS=1 to run)"
    for pattern in (
        "TestGRPOTrainer::test_train_with_tools[*]",
        "TestGRPOTrainer::*environment*",
        "TestGRPOTrainer::test_train_with_malformed_tool_calls",
    )
}
if os.environ.get("TRL_SUITE_TOOLS") != "1":
    SKIPS.update(CPU_TIME_SKIPS)

# Tests that fail with TRL's own GRPOTrainer on the installed TRL: the test file is newer or older than the
# installed TRL. Expected to fail in every variant; not strict, since a TRL upgrade may fix them.
UPSTREAM_SKEW: dict[str, str] = {
    "TestGRPORolloutDispatch::test_generate_prefers_rollout_func": (
        "the hand-built trainer lacks `eos_token_ids`, which TRL 1.16's `_generate` reads"
    ),
    "TestGRPORolloutDispatch::test_generate_rollout_func_syncs_vllm_weights_when_needed": (
        "the hand-built trainer lacks `eos_token_ids`, which TRL 1.16's `_generate` reads"
    ),
    "TestGRPOTrainer::test_liger_kernel_with_peft_non_lm_head_target_allowed": (
        "expects an ImportError without liger-kernel at construction; TRL 1.16 constructs"
    ),
    "TestGRPOTrainer::test_liger_kernel_with_peft_modules_to_save_lm_head_allowed": (
        "expects an ImportError without liger-kernel at construction; TRL 1.16 constructs"
    ),
    "TestGRPOTrainer::test_liger_kernel_with_peft_prompt_learning_raises": (
        "expects TRL main's prompt-learning guard, absent from TRL 1.16"
    ),
    "TestGRPOTrainer::test_train_moe_peft_model": (
        "expects no 'ref' adapter with `target_parameters`; TRL 1.16 adds one with peft>=0.20"
    ),
    "TestGRPOTrainer::test_entropy_bonus_flows_gradients": (
        "expects TRL main's differentiable entropies under an entropy bonus, absent from TRL 1.16"
    ),
}

# Intended differences of DAPOConfig's defaults from GRPOConfig's: strict, so a change of behaviour shows.
_PUNISHMENT_APPENDED = (
    "DAPOConfig appends the soft overlong punishment as one more reward function (and processing class), so "
    "reward lists are one longer"
)
INTENDED_DAPO: dict[str, str] = {
    # The built-in punishment is a reward function of its own.
    "TestGRPOTrainer::test_correct_reward_processing_classes_list": _PUNISHMENT_APPENDED,
    "TestGRPOTrainer::test_single_reward_model_with_single_processing_class": _PUNISHMENT_APPENDED,
    "TestGRPOTrainer::test_reward_metric_reflects_reward_weights[sum_then_normalize]": (
        "the logged `reward` includes the soft overlong punishment, so it is not the weighted sum of the test's rewards"
    ),
    # Per-group normalisation would blow the length penalty up to the size of the accuracy reward.
    "TestGRPOTrainer::test_train_normalize_then_sum_aggregation": (
        "normalize_then_sum with the soft overlong punishment is refused at construction"
    ),
    "TestGRPOTrainer::test_reward_metric_reflects_reward_weights[normalize_then_sum]": (
        "normalize_then_sum with the soft overlong punishment is refused at construction"
    ),
}

# Failures that need a trainer change, in the variant(s) named: none left.
PENDING: dict[tuple[str, ...], dict[str, str]] = {}

# The CI subset: one or two tests per configuration family, with the additions off.
CI_SUBSET_DAPO_OFF: tuple[str, ...] = (
    "TestGetHighEntropyMask::*",
    "TestGRPORolloutDispatch::test_generate_rollout_func_raises_when_required_keys_are_missing",
    "TestGRPOTrainer::test_train[trl-internal-testing/tiny-Qwen2ForCausalLM-2.5]",  # defaults
    "TestGRPOTrainer::test_train_dataset_format[conversational_prompt_only]",  # conversational data
    "TestGRPOTrainer::test_train_loss_types[bnpo-False]",  # loss types
    "TestGRPOTrainer::test_train_loss_types[cispo-False]",
    "TestGRPOTrainer::test_train_sequence_importance_sampling",  # importance sampling level
    "TestGRPOTrainer::test_train_beta_non_zero",  # reference model, KL
    "TestGRPOTrainer::test_prepare_input_called_with_correct_data",  # steps_per_generation, num_iterations>1
    "TestGRPOTrainer::test_train_peft_config",  # PEFT
    "TestGRPOTrainer::test_train_multiple_mixed_reward_funcs",  # reward functions and reward models mixed
    "TestGRPOTrainer::test_train_multiple_reward_funcs_with_None_output",  # unscorable rows
    "TestGRPOTrainer::test_train_scale_rewards[batch]",  # advantage scaling
    "TestGRPOTrainer::test_train_normalize_then_sum_aggregation",  # multi-objective aggregation
    "TestGRPOTrainer::test_train_with_mask_truncated_completions",  # overlong filtering
    "TestGRPOTrainer::test_train_with_iterable_dataset",  # IterableDataset
    "TestGRPOTrainer::test_warning_raised_all_rewards_none",
    "TestGRPOTrainer::test_no_reward_source_raises",
    "TestGRPOTrainer::test_correct_reward_processing_classes_list",
)
# With DAPOConfig's defaults: the families whose outcome the latest full run has established.
CI_SUBSET_DAPO: tuple[str, ...] = (
    "TestGetHighEntropyMask::*",
    "TestGRPORolloutDispatch::test_generate_rollout_func_raises_when_required_keys_are_missing",
    "TestGRPOTrainer::test_train[trl-internal-testing/tiny-Qwen2ForCausalLM-2.5]",
    "TestGRPOTrainer::test_train_dataset_format[conversational_prompt_only]",
    "TestGRPOTrainer::test_train_loss_types[bnpo-False]",
    "TestGRPOTrainer::test_train_loss_types[cispo-False]",
    "TestGRPOTrainer::test_train_scale_rewards[batch]",
    "TestGRPOTrainer::test_train_normalize_then_sum_aggregation",
    "TestGRPOTrainer::test_train_with_mask_truncated_completions",
    "TestGRPOTrainer::test_train_with_iterable_dataset",
    "TestGRPOTrainer::test_warning_raised_all_rewards_none",
    "TestGRPOTrainer::test_train_delta_clipping[False]",
)
CI_SUBSETS = {"dapo_off": CI_SUBSET_DAPO_OFF, "dapo": CI_SUBSET_DAPO}


def _matches(pattern: str, test_id: str) -> bool:
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), test_id) is not None


def _matching(table: dict[str, str], test_id: str) -> str | None:
    for pattern, reason in table.items():
        if _matches(pattern, test_id):
            return reason
    return None


def expectation_marks(variant: str, test_id: str) -> list:
    """The pytest marks that state what `test_id` is expected to do in `variant`."""
    if reason := _matching(SKIPS, test_id):
        return [pytest.mark.skip(reason=reason)]
    if reason := _matching(UPSTREAM_SKEW, test_id):
        return [pytest.mark.xfail(reason=f"upstream skew: {reason}", strict=False)]
    if variant == "dapo" and (reason := _matching(INTENDED_DAPO, test_id)):
        return [pytest.mark.xfail(reason=f"intended: {reason}", strict=True)]
    for variants, table in PENDING.items():
        if variant in variants and (reason := _matching(table, test_id)):
            return [pytest.mark.xfail(reason=reason, strict=False)]
    return []


def in_ci_subset(variant: str, test_id: str) -> bool:
    return any(_matches(pattern, test_id) for pattern in CI_SUBSETS.get(variant, ()))
