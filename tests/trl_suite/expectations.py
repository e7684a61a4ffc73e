"""What TRL's GRPO tests are expected to do here, per variant, with the reason for every departure from a pass.

Test ids are `Class::test_name[params]`, matched by patterns in which only `*` is a wildcard (brackets are
literal). Variants: see `substitution.py`.
"""

from __future__ import annotations

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
INTENDED_DAPO: dict[str, str] = {}

# Failures that need a trainer change (issue 10), in the variant(s) named.
PENDING: dict[tuple[str, ...], dict[str, str]] = {}

# The CI subset: one or two tests per configuration family, run for both DAPO variants.
CI_SUBSET: tuple[str, ...] = ()
CI_VARIANTS = ("dapo_off", "dapo")


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
    return variant in CI_VARIANTS and any(_matches(pattern, test_id) for pattern in CI_SUBSET)
