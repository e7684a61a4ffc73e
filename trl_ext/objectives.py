"""Pure tensor functions for sequence-level importance sampling (GSPO and GSPO-token, arXiv 2507.18071).

No trainer state here: each function takes tensors and returns tensors, so it can be tested on hand-made values.

Shapes used throughout: `B` completions, `T` completion positions (right-padded). `mask` is `(B, T)`, 1 on the
completion tokens that count in the loss and 0 elsewhere (padding, masked tool output, truncated completions);
it may be an integer or a floating tensor.
"""

from __future__ import annotations

import torch


def sequence_log_ratio(
    per_token_logps: torch.Tensor, old_per_token_logps: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Log of GSPO's length-normalised sequence ratio, `log s_i = 1/|o_i| · Σ_t (log π_θ(o_t) - log π_old(o_t))`.

    Args:
        per_token_logps: `(B, T)` log-probabilities of the completion tokens under the current policy π_θ.
        old_per_token_logps: `(B, T)` log-probabilities under the policy that generated them, π_old.
        mask: `(B, T)` tokens that count.

    Returns:
        `(B,)` log s_i, differentiable through `per_token_logps`. A completion with no counted token gets 0
        (ratio 1), the value TRL uses for it too.
    """
    mask = mask.to(per_token_logps.dtype)
    summed = ((per_token_logps - old_per_token_logps) * mask).sum(-1)
    return summed / mask.sum(-1).clamp(min=1.0)


def gspo_token_old_logps(
    per_token_logps: torch.Tensor, old_per_token_logps: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """The "old" log-probabilities that turn a token-level ratio into GSPO-token's ratio.

    GSPO-token's ratio is `s_{i,t} = sg[s_i] · π_θ(o_t) / sg[π_θ(o_t)]`. A token-level trainer computes
    `exp(log π_θ(o_t) - old_t)`; with `old_t = sg[log π_θ(o_t)] - sg[log s_i]` (what this returns) that is
    `exp(sg[log s_i] + log π_θ(o_t) - sg[log π_θ(o_t)]) = s_{i,t}`, in value and in gradient, because `old_t`
    carries no gradient. Re-basing the old log-probs, rather than the current ones, leaves `per_token_logps`
    untouched for everything else that reads it (the KL penalty, entropy, CISPO-style terms).

    Args:
        per_token_logps: `(B, T)` log π_θ of the completion tokens (only its value is used).
        old_per_token_logps: `(B, T)` log π_old of the same tokens.
        mask: `(B, T)` tokens that count.

    Returns:
        `(B, T)` tensor without gradient.
    """
    current = per_token_logps.detach()
    return current - sequence_log_ratio(current, old_per_token_logps.detach(), mask).unsqueeze(-1)


def sequence_clip_fractions(
    sequence_ratio: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    epsilon_low: float,
    epsilon_high: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """How much of each completion has its GSPO objective clipped, below and above.

    The clipped term wins the `min` (and the gradient vanishes) when `s_i < 1 - ε_low` with a negative advantage,
    or `s_i > 1 + ε_high` with a positive one. With a sequence-level advantage each returned value is 0 or 1, so
    their mean over completions is the fraction of sequences clipped; with GSPO-token's per-token advantages it
    is the fraction of the completion's tokens clipped.

    Args:
        sequence_ratio: `(B,)` s_i.
        advantages: `(B,)` sequence-level or `(B, T)` per-token advantages.
        mask: `(B, T)` tokens that count.
        epsilon_low: lower clip range ε_low.
        epsilon_high: upper clip range ε_high.

    Returns:
        `(low, high)`, each `(B,)`; NaN for a completion with no counted token, so `nanmean` leaves it out.
    """
    mask = mask.to(sequence_ratio.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    ratio = sequence_ratio.unsqueeze(-1)
    clipped_low = ((ratio < 1 - epsilon_low) & (advantages < 0)).to(mask.dtype)
    clipped_high = ((ratio > 1 + epsilon_high) & (advantages > 0)).to(mask.dtype)
    num_tokens = mask.sum(-1)
    # 0/0 gives NaN on purpose for completions with no counted token
    low = (clipped_low * mask).sum(-1) / num_tokens
    high = (clipped_high * mask).sum(-1) / num_tokens
    return low, high
