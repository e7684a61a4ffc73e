"""The objective each trainer optimises equals its paper's, in value and in gradient.

The reference objectives below are written straight from the formulas in ALGORITHMS.md, on plain tensors of
per-token log-probabilities. Each test builds a real trainer on the tiny model, feeds its real `_compute_loss` a
fixed batch (π_old chosen so that the token ratios are exactly the ones listed here), and compares the loss and
its gradient with respect to every model parameter against the reference applied to the same model's
log-probabilities. Nothing in TRL's or trl_ext's math is patched.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import partial

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from trl_ext.trainers import DAPOConfig, DAPOTrainer
from trl_ext.trainers.gspo import GSPOConfig, GSPOTrainer

from conftest import make_prompt_dataset

MAX_COMPLETION_LENGTH = 16
KL_BETA = 0.04


# --------------------------------------------------------------------------------------------------------------
# Reference objectives, from the formulas. All return the loss -J; logps/old/ref: (B, T); mask: (B, T);
# advantages: (B,) for sequence-level, (B, T) for per-token advantages.
# --------------------------------------------------------------------------------------------------------------
def clipped_surrogate(ratio, advantages, eps_low, eps_high):
    """min(r·A, clip(r, 1-ε_low, 1+ε_high)·A)."""
    return torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages)


def k3_kl(logps, ref_logps):
    """π_ref/π_θ - log(π_ref/π_θ) - 1 per token."""
    return torch.exp(ref_logps - logps) - (ref_logps - logps) - 1


def per_token_advantages(advantages, like):
    return advantages.unsqueeze(-1).expand_as(like) if advantages.dim() == 1 else advantages


def kl_penalty(logps, ref_logps, ratio, ratio_weighted):
    """k3 per token; `ratio_weighted`: times the importance ratio (DeepSeek-V3.2's unbiased reverse-KL gradient)."""
    kl = k3_kl(logps, ref_logps)
    return kl * ratio if ratio_weighted else kl


def grpo_token_terms(logps, old, advantages, eps_low, eps_high, beta=0.0, ref_logps=None, kl_ratio_weighted=False):
    ratio = torch.exp(logps - old)
    terms = clipped_surrogate(ratio, per_token_advantages(advantages, logps), eps_low, eps_high)
    if beta:
        terms = terms - beta * kl_penalty(logps, ref_logps, ratio, kl_ratio_weighted)
    return terms


def reference_grpo(
    logps, old, mask, advantages, eps_low, eps_high, beta=0.0, ref_logps=None, kl_ratio_weighted=False
):
    """GRPO: token terms averaged over each completion's tokens, then over completions."""
    terms = grpo_token_terms(logps, old, advantages, eps_low, eps_high, beta, ref_logps, kl_ratio_weighted)
    per_completion = (terms * mask).sum(-1) / mask.sum(-1)
    return -per_completion.mean()


def reference_dr_grpo(logps, old, mask, advantages, eps_low, eps_high, max_completion_length):
    """Dr. GRPO: token terms summed, divided by a constant, G × the maximum completion length."""
    terms = grpo_token_terms(logps, old, advantages, eps_low, eps_high)
    return -(terms * mask).sum() / (logps.size(0) * max_completion_length)


def reference_dapo(logps, old, mask, advantages, eps_low=0.2, eps_high=0.28):
    """DAPO: clip-higher token terms summed over the batch, divided by its total token count."""
    terms = grpo_token_terms(logps, old, advantages, eps_low, eps_high)
    return -(terms * mask).sum() / mask.sum()


def reference_sequence_ratio(logps, old, mask):
    """s_i = exp(1/|o_i| · Σ_t log r_{i,t})."""
    return torch.exp(((logps - old) * mask).sum(-1) / mask.sum(-1))


def reference_gspo(logps, old, mask, advantages, eps_low=3e-4, eps_high=4e-4):
    """GSPO: 1/G · Σ_i min(s_i·A_i, clip(s_i)·A_i)."""
    s = reference_sequence_ratio(logps, old, mask)
    return -clipped_surrogate(s, advantages, eps_low, eps_high).mean()


def reference_gspo_token(
    logps, old, mask, advantages, eps_low=3e-4, eps_high=4e-4, beta=0.0, ref_logps=None, kl_ratio_weighted=False
):
    """GSPO-token: s_{i,t} = sg[s_i] · π_θ(o_t)/sg[π_θ(o_t)], per-token advantages, per-completion average."""
    s = reference_sequence_ratio(logps, old, mask).detach()
    ratio = s.unsqueeze(-1) * torch.exp(logps) / torch.exp(logps).detach()
    terms = clipped_surrogate(ratio, per_token_advantages(advantages, logps), eps_low, eps_high)
    if beta:
        terms = terms - beta * kl_penalty(logps, ref_logps, ratio, kl_ratio_weighted)
    return -((terms * mask).sum(-1) / mask.sum(-1)).mean()


# --------------------------------------------------------------------------------------------------------------
# The reference formulas on the worked example of ALGORITHMS.md, without any model
# --------------------------------------------------------------------------------------------------------------
def test_worked_example_reference_values():
    logps = torch.log(torch.tensor([[2.0, 0.4]], dtype=torch.float64))
    old, mask, advantages = torch.zeros_like(logps), torch.ones_like(logps), torch.ones(1, dtype=torch.float64)
    grpo = -reference_grpo(logps, old, mask, advantages, 0.2, 0.2)
    gspo = -reference_gspo(logps, old, mask, advantages, 0.2, 0.2)
    # the min keeps 0.4 for the second token, not the clipped 0.8: (1.2 + 0.4) / 2
    assert grpo.item() == pytest.approx(0.8, abs=1e-12)
    assert gspo.item() == pytest.approx(math.sqrt(0.8), abs=1e-12)
    assert gspo.item() == pytest.approx(0.894, abs=5e-4)


# --------------------------------------------------------------------------------------------------------------
# Trainers on the tiny model and fixed batches
# --------------------------------------------------------------------------------------------------------------
def constant_reward(completions, **kwargs):
    return [0.0] * len(completions)


TRAINERS = {
    "grpo": (GRPOTrainer, GRPOConfig, dict(loss_type="grpo", epsilon=0.2)),
    "grpo_kl": (
        GRPOTrainer,
        GRPOConfig,
        dict(loss_type="grpo", epsilon=0.2, beta=KL_BETA, use_bias_correction_kl=False),
    ),
    "grpo_kl_ratio_weighted": (GRPOTrainer, GRPOConfig, dict(loss_type="grpo", epsilon=0.2, beta=KL_BETA)),
    # Dr. GRPO's other half, no division by the group std, is in the advantages (scale_rewards="none"), not the loss.
    "dr_grpo": (GRPOTrainer, GRPOConfig, dict(loss_type="dr_grpo", epsilon=0.2, scale_rewards="none")),
    "trl_dapo": (GRPOTrainer, GRPOConfig, dict(loss_type="dapo", epsilon=0.2, epsilon_high=0.28)),
    "dapo_trainer": (DAPOTrainer, DAPOConfig, dict()),
    "gspo": (GSPOTrainer, GSPOConfig, dict()),
    "gspo_token": (GSPOTrainer, GSPOConfig, dict(importance_sampling_level="sequence_token")),
    "gspo_token_kl": (
        GSPOTrainer,
        GSPOConfig,
        dict(importance_sampling_level="sequence_token", beta=KL_BETA, use_bias_correction_kl=False),
    ),
    "gspo_token_kl_ratio_weighted": (
        GSPOTrainer,
        GSPOConfig,
        dict(importance_sampling_level="sequence_token", beta=KL_BETA),
    ),
    "gspo_wide_clip": (GSPOTrainer, GSPOConfig, dict(epsilon=0.2, epsilon_high=0.2)),
}


@pytest.fixture(scope="module")
def trainers(tiny_model_dir, tmp_path_factory):
    """Builds each trainer of TRAINERS once per module, in train mode, as the training loop leaves it."""
    built = {}

    def get(name: str):
        if name not in built:
            trainer_cls, config_cls, overrides = TRAINERS[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # gspo_wide_clip's epsilon warning is tested in test_gspo.py
                config = config_cls(
                    output_dir=str(tmp_path_factory.mktemp(name)),
                    per_device_train_batch_size=4,
                    num_generations=2,
                    max_completion_length=MAX_COMPLETION_LENGTH,
                    report_to="none",
                    bf16=False,
                    use_cpu=True,
                    save_strategy="no",
                    **overrides,
                )
            trainer = trainer_cls(
                model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                reward_funcs=constant_reward,
                args=config,
                train_dataset=make_prompt_dataset(8),
                processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
            )
            trainer.model.train()
            # Set by Trainer's training loop for each accumulation window; one micro-batch per update here.
            trainer.current_gradient_accumulation_steps = 1
            built[name] = trainer
        return built[name]

    return get


@dataclass
class FixedBatch:
    """What `_compute_loss` receives, built so that π_θ/π_old per token equals `exp(log_ratio)` exactly."""

    inputs: dict
    mask: torch.Tensor  # (B, T)
    old_logps: torch.Tensor  # (B, T)
    ref_logps: torch.Tensor  # (B, T)


def policy_logps(model, inputs) -> torch.Tensor:
    """log π_θ of the completion tokens from the model's logits: (B, T), differentiable."""
    prompt_length = inputs["prompt_ids"].size(1)
    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, prompt_length - 1 : -1]
    return logits.log_softmax(-1).gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)


def make_batch(model, token_log_ratios: list[list[float]], advantages, seed: int = 0) -> FixedBatch:
    """A right-padded batch whose completion i has len(token_log_ratios[i]) tokens with those log-ratios."""
    lengths = [len(row) for row in token_log_ratios]
    batch_size, width = len(lengths), max(lengths)
    generator = torch.Generator().manual_seed(seed)
    vocab_size = model.config.vocab_size
    # Token 0 is <pad>; draw real tokens from the rest of the vocabulary.
    prompt_ids = torch.randint(3, vocab_size, (batch_size, 4), generator=generator)
    completion_ids = torch.randint(3, vocab_size, (batch_size, width), generator=generator)
    mask = (torch.arange(width).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    completion_ids = completion_ids.masked_fill(mask == 0, model.config.pad_token_id)
    log_ratio = torch.tensor([row + [0.0] * (width - len(row)) for row in token_log_ratios])
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": mask,
        "advantages": torch.as_tensor(advantages, dtype=torch.float32),
        "num_items_in_batch": mask.sum(),
    }
    with torch.no_grad():
        logps = policy_logps(model, inputs)
    old_logps = logps - log_ratio
    # A reference policy a fixed, varied distance from π_θ, for the KL penalty.
    ref_logps = logps + 0.3 * torch.sin(torch.arange(batch_size * width, dtype=torch.float32)).view_as(logps)
    inputs["old_per_token_logps"] = old_logps
    inputs["ref_per_token_logps"] = ref_logps
    return FixedBatch(inputs=inputs, mask=mask.float(), old_logps=old_logps, ref_logps=ref_logps)


def log_ratios_from(ratios: list[list[float]]) -> list[list[float]]:
    return [[math.log(r) for r in row] for row in ratios]


# Token-level batch for ε = 0.2 (GRPO) and 0.2/0.28 (DAPO): per completion, ratios clipped high (1.5, 1.3),
# clipped by GRPO's 1.2 but not DAPO's 1.28 (1.25), clipped low (0.6, 0.75), on the far side of the clip where
# the min keeps the unclipped term (0.7 with A > 0, 1.4 with A < 0), and inside the range. Lengths 6, 3, 5, 2.
TOKEN_BATCH = dict(
    token_log_ratios=log_ratios_from(
        [
            [1.5, 1.25, 0.7, 1.1, 0.95, 1.0],
            [0.6, 1.4, 0.9],
            [1.05, 1.3, 0.5, 1.19, 1.0],
            [0.75, 1.02],
        ]
    ),
    advantages=[1.0, -0.5, 0.8, -1.3],
)


def sequence_log_ratios(means: list[float], deviations: list[list[float]]) -> list[list[float]]:
    """Token log-ratios whose per-completion mean is `means[i]` (the deviations of each row sum to zero)."""
    for row in deviations:
        assert abs(sum(row)) < 1e-12
    return [[mean + deviation for deviation in row] for mean, row in zip(means, deviations)]


# Sequence-level batch for ε = 3e-4/4e-4: token ratios far from 1 (±0.4 in log space) but sequence ratios
# s_i = e^1.5e-3 (clipped high, A > 0), e^-1.2e-3 (clipped low, A < 0), e^-2e-3 (below the range with A > 0:
# the min keeps it, not clipped) and e^1e-4 (inside). Lengths 5, 2, 4, 3.
SEQUENCE_BATCH = dict(
    token_log_ratios=sequence_log_ratios(
        [1.5e-3, -1.2e-3, -2e-3, 1e-4],
        [[0.3, -0.2, 0.1, -0.25, 0.05], [0.4, -0.4], [-0.1, 0.3, -0.15, -0.05], [0.2, -0.3, 0.1]],
    ),
    advantages=[1.0, -0.7, 0.4, -1.1],
)

# Per-token advantages for GSPO-token on SEQUENCE_BATCH, of both signs within a completion (0 on padding).
PER_TOKEN_ADVANTAGES = [
    [1.0, 0.5, -0.3, 1.2, 0.8],
    [-0.7, 0.2, 0.0, 0.0, 0.0],
    [0.4, -0.6, 0.9, 0.1, 0.0],
    [-1.1, 0.3, -0.2, 0.0, 0.0],
]

REFERENCES = {
    "grpo": partial(reference_grpo, eps_low=0.2, eps_high=0.2),
    "dr_grpo": partial(
        reference_dr_grpo, eps_low=0.2, eps_high=0.2, max_completion_length=MAX_COMPLETION_LENGTH
    ),
    "trl_dapo": reference_dapo,
    "dapo_trainer": reference_dapo,
    "gspo": reference_gspo,
    "gspo_token": reference_gspo_token,
}


def trainer_loss_and_grads(trainer, batch: FixedBatch):
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    loss = trainer._compute_loss(trainer.model, batch.inputs)
    return loss.detach(), torch.autograd.grad(loss, params)


def reference_loss_and_grads(trainer, batch: FixedBatch, reference):
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    logps = policy_logps(trainer.model, batch.inputs)
    loss = reference(logps, batch.old_logps, batch.mask, batch.inputs["advantages"])
    return loss.detach(), torch.autograd.grad(loss, params)


def assert_same_gradients(actual, expected):
    actual, expected = torch.cat([g.flatten() for g in actual]), torch.cat([g.flatten() for g in expected])
    assert expected.abs().max() > 1e-4, "the batch must produce a gradient for the comparison to mean anything"
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-6 * expected.abs().max().item())


@pytest.mark.parametrize("batch_spec", [TOKEN_BATCH, SEQUENCE_BATCH], ids=["token_batch", "sequence_batch"])
@pytest.mark.parametrize("name", list(REFERENCES))
def test_trainer_loss_and_gradient_equal_reference(trainers, name, batch_spec):
    trainer = trainers(name)
    batch = make_batch(trainer.model, **batch_spec)
    loss, grads = trainer_loss_and_grads(trainer, batch)
    expected_loss, expected_grads = reference_loss_and_grads(trainer, batch, REFERENCES[name])
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-5, abs=1e-7)
    assert_same_gradients(grads, expected_grads)


def test_gspo_token_with_per_token_advantages_equals_reference(trainers):
    trainer = trainers("gspo_token")
    batch = make_batch(trainer.model, SEQUENCE_BATCH["token_log_ratios"], PER_TOKEN_ADVANTAGES)
    loss, grads = trainer_loss_and_grads(trainer, batch)
    expected_loss, expected_grads = reference_loss_and_grads(trainer, batch, reference_gspo_token)
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-5, abs=1e-7)
    assert_same_gradients(grads, expected_grads)
    # A per-token advantage changes the objective: the same batch with each completion's mean advantage differs.
    mean_advantages = (batch.inputs["advantages"] * batch.mask).sum(-1) / batch.mask.sum(-1)
    averaged = make_batch(trainer.model, SEQUENCE_BATCH["token_log_ratios"], mean_advantages)
    _, averaged_grads = trainer_loss_and_grads(trainer, averaged)
    flat, averaged_flat = torch.cat([g.flatten() for g in grads]), torch.cat([g.flatten() for g in averaged_grads])
    assert not torch.allclose(flat, averaged_flat)


@pytest.mark.parametrize(
    "name, reference",
    [
        ("grpo_kl", partial(reference_grpo, eps_low=0.2, eps_high=0.2, beta=KL_BETA)),
        (
            "grpo_kl_ratio_weighted",
            partial(reference_grpo, eps_low=0.2, eps_high=0.2, beta=KL_BETA, kl_ratio_weighted=True),
        ),
        ("gspo_token_kl", partial(reference_gspo_token, beta=KL_BETA)),
        ("gspo_token_kl_ratio_weighted", partial(reference_gspo_token, beta=KL_BETA, kl_ratio_weighted=True)),
    ],
)
def test_kl_penalty_equals_reference(trainers, name, reference):
    # GRPO's k3 penalty, and TRL's default variant weighted by the importance ratio (use_bias_correction_kl).
    # GSPO-token re-bases π_old, never π_θ's log-probs, so the KL term still sees the true log π_θ.
    trainer = trainers(name)
    batch = make_batch(trainer.model, **SEQUENCE_BATCH)
    loss, grads = trainer_loss_and_grads(trainer, batch)
    expected_loss, expected_grads = reference_loss_and_grads(
        trainer, batch, partial(reference, ref_logps=batch.ref_logps)
    )
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-5, abs=1e-7)
    assert_same_gradients(grads, expected_grads)


@pytest.mark.parametrize("batch_spec", [TOKEN_BATCH, SEQUENCE_BATCH], ids=["token_batch", "sequence_batch"])
def test_gspo_token_with_sequence_advantage_has_gspo_gradient(trainers, batch_spec):
    gspo, gspo_token = trainers("gspo"), trainers("gspo_token")
    # Both models load the same weights, so the same batch gives the same π_θ.
    loss, grads = trainer_loss_and_grads(gspo, make_batch(gspo.model, **batch_spec))
    token_loss, token_grads = trainer_loss_and_grads(gspo_token, make_batch(gspo_token.model, **batch_spec))
    # Equal in exact arithmetic; float32 sums in another order differ by a few ulps (as in the test above).
    assert token_loss.item() == pytest.approx(loss.item(), rel=1e-5, abs=1e-7)
    assert_same_gradients(token_grads, grads)


# --------------------------------------------------------------------------------------------------------------
# Worked example and the DAPO / GRPO difference, through the trainers
# --------------------------------------------------------------------------------------------------------------
WORKED_EXAMPLE = dict(token_log_ratios=log_ratios_from([[2.0, 0.4]]), advantages=[1.0])


def test_worked_example_through_trainers(trainers):
    grpo, gspo = trainers("grpo"), trainers("gspo_wide_clip")
    grpo_loss, _ = trainer_loss_and_grads(grpo, make_batch(grpo.model, **WORKED_EXAMPLE))
    gspo_loss, _ = trainer_loss_and_grads(gspo, make_batch(gspo.model, **WORKED_EXAMPLE))
    assert -grpo_loss.item() == pytest.approx(0.8, abs=1e-5)
    assert -gspo_loss.item() == pytest.approx(math.sqrt(0.8), abs=1e-5)


@pytest.mark.parametrize("dapo_name", ["trl_dapo", "dapo_trainer"])
def test_dapo_and_grpo_differ_by_length_weighting(trainers, dapo_name):
    # On-policy (all ratios 1), so the difference comes from the aggregation alone:
    # J_GRPO = mean_i A_i, J_DAPO = Σ_i |o_i| A_i / Σ_i |o_i|.
    lengths, advantages = [1, 4, 2, 3], [1.0, -1.0, 0.5, -0.25]
    spec = dict(token_log_ratios=[[0.0] * n for n in lengths], advantages=advantages)
    grpo, dapo = trainers("grpo"), trainers(dapo_name)
    grpo_loss, _ = trainer_loss_and_grads(grpo, make_batch(grpo.model, **spec))
    dapo_loss, _ = trainer_loss_and_grads(dapo, make_batch(dapo.model, **spec))
    expected_gap = -(sum(n * a for n, a in zip(lengths, advantages)) / sum(lengths)) + sum(advantages) / len(lengths)
    assert expected_gap == pytest.approx(0.3375)
    assert (dapo_loss - grpo_loss).item() == pytest.approx(expected_gap, abs=1e-6)

    # With equal lengths the two aggregations coincide.
    equal = dict(token_log_ratios=[[0.0] * 3 for _ in lengths], advantages=advantages)
    grpo_equal, _ = trainer_loss_and_grads(grpo, make_batch(grpo.model, **equal))
    dapo_equal, _ = trainer_loss_and_grads(dapo, make_batch(dapo.model, **equal))
    assert dapo_equal.item() == pytest.approx(grpo_equal.item(), abs=1e-6)


# --------------------------------------------------------------------------------------------------------------
# GSPO metrics on the fixed batch
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gspo", "gspo_token"])
def test_gspo_metrics_on_fixed_batch(trainers, name):
    trainer = trainers(name)
    batch = make_batch(trainer.model, **SEQUENCE_BATCH)
    trainer._compute_loss(trainer.model, batch.inputs)
    metrics = {key: values[-1] for key, values in trainer._metrics["train"].items() if key.startswith("gspo/")}
    s = [math.exp(m) for m in (1.5e-3, -1.2e-3, -2e-3, 1e-4)]
    assert metrics["gspo/seq_ratio/mean"] == pytest.approx(sum(s) / 4, abs=1e-6)
    assert metrics["gspo/seq_ratio/min"] == pytest.approx(min(s), abs=1e-6)
    assert metrics["gspo/seq_ratio/max"] == pytest.approx(max(s), abs=1e-6)
    # one of four clipped below (s < 1 - 3e-4 with A < 0), one above (s > 1 + 4e-4 with A > 0)
    assert metrics["gspo/clip_ratio/low"] == pytest.approx(0.25)
    assert metrics["gspo/clip_ratio/high"] == pytest.approx(0.25)


def test_gspo_metrics_leave_out_completions_without_tokens(trainers):
    trainer = trainers("gspo")
    batch = make_batch(trainer.model, **SEQUENCE_BATCH)
    # As with mask_truncated_completions: the second completion (clipped low) no longer counts.
    batch.inputs["completion_mask"] = batch.inputs["completion_mask"].clone()
    batch.inputs["completion_mask"][1] = 0
    trainer._compute_loss(trainer.model, batch.inputs)
    metrics = trainer._metrics["train"]
    s = [math.exp(m) for m in (1.5e-3, -2e-3, 1e-4)]
    assert metrics["gspo/seq_ratio/mean"][-1] == pytest.approx(sum(s) / 3, abs=1e-6)
    assert metrics["gspo/seq_ratio/min"][-1] == pytest.approx(min(s), abs=1e-6)
    assert metrics["gspo/clip_ratio/low"][-1] == 0.0
    assert metrics["gspo/clip_ratio/high"][-1] == pytest.approx(1 / 3)


# --------------------------------------------------------------------------------------------------------------
# Variable group sizes: an extended group of the adaptive mode trains as one group of m·G completions
# --------------------------------------------------------------------------------------------------------------
def variable_group_advantages(rewards, groups, histories):
    """A_i = R_i − (H_q + Σ_{j∈q, j≠i} R_j) / (C_q + |q| − 1) for each group q (a list of rows, of any size) with
    history (H_q, C_q): the adaptive mode's baseline, written per group."""
    advantages = torch.zeros(len(rewards))
    for rows, (history_sum, history_count) in zip(groups, histories):
        total = sum(rewards[row] for row in rows)
        for row in rows:
            advantages[row] = rewards[row] - (history_sum + total - rewards[row]) / (history_count + len(rows) - 1)
    return advantages


@pytest.mark.parametrize("name", ["dapo_trainer", "gspo"])
def test_variable_group_sizes_objective_equals_its_formula(trainers, name):
    """Slots of G = 2 as the batch lays them out: slots 0 and 1 are one prompt's group of 4 (a group and its
    extension), slot 2 another prompt's group of 2. The advantages the sampler writes (`joint_histories`, then the
    slot-wise baseline) equal the per-group formula, and the trainer's loss and gradient on them equal the
    objective over groups of sizes 4 and 2: DAPO's 1/Σ_q Σ_{i∈q} |o_i| · Σ_q Σ_{i∈q} Σ_t min(r A, clip(r) A), GSPO's
    mean over the completions of every group."""
    from trl_ext.sampling.adaptive import history_baseline_advantages, joint_histories

    rewards = [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    groups, histories = [[0, 1, 2, 3], [4, 5]], [(0.5, 1.0), (2.0, 3.0)]
    sums, counts = joint_histories(
        torch.tensor(rewards), 2, torch.tensor([0.5, 0.5, 2.0]), torch.tensor([1.0, 1.0, 3.0]), joint=[[0, 1]]
    )
    sampled = history_baseline_advantages(torch.tensor(rewards), 2, sums, counts)
    expected = variable_group_advantages(rewards, groups, histories)
    torch.testing.assert_close(sampled, expected)
    assert (expected[:4] != 0).all()  # the all-wrong first slot trains through its extension's success

    trainer = trainers(name)
    ratios = [[1.5, 1.25, 0.7], [0.6, 1.4], [1.05, 1.3, 0.5, 1.19], [0.75], [1.1, 0.95], [1.2, 0.8, 1.0]]
    if name == "gspo":  # sequence ratios near 1, inside and outside GSPO's clip range
        ratios = [[math.exp(shift)] * len(row) for shift, row in zip([2e-3, -1e-3, 1e-4, -2e-3, 5e-4, 3e-4], ratios)]
    batch = make_batch(trainer.model, log_ratios_from(ratios), sampled.tolist())
    loss, grads = trainer_loss_and_grads(trainer, batch)
    logps = policy_logps(trainer.model, batch.inputs)
    if name == "gspo":
        s = reference_sequence_ratio(logps, batch.old_logps, batch.mask)
        per_group = [clipped_surrogate(s[rows], expected[rows], 3e-4, 4e-4) for rows in groups]
        objective = torch.cat(per_group).sum() / sum(len(rows) for rows in groups)
    else:
        terms = grpo_token_terms(logps, batch.old_logps, expected, 0.2, 0.28) * batch.mask
        objective = sum(terms[rows].sum() for rows in groups) / sum(batch.mask[rows].sum() for rows in groups)
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    expected_grads = torch.autograd.grad(-objective, params)
    assert loss.item() == pytest.approx(-objective.item(), rel=1e-5, abs=1e-7)
    assert_same_gradients(grads, expected_grads)
