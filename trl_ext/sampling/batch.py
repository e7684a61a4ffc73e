"""Assemble one training batch from the rows kept in several generation rounds."""

from __future__ import annotations

from typing import Any

import torch

# Prompt tensors are left-padded by TRL (the prompt ends where the completion starts); every other
# per-token tensor is aligned on the completion and right-padded.
_LEFT_PADDED = frozenset({"prompt_ids", "prompt_mask"})
# Per-token padding values that must not be 0: the tool mask is padded with 1 by TRL.
_PAD_VALUES = {"tool_mask": 1}
# Scalars describing a whole round; the trainer recomputes them for the assembled batch.
_BATCH_SCALARS = frozenset({"num_items_in_batch"})


def _pad_to_width(tensor: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    missing = width - tensor.size(1)
    if missing == 0:
        return tensor
    padding = tensor.new_full((tensor.size(0), missing, *tensor.shape[2:]), value)
    return torch.cat([padding, tensor] if left else [tensor, padding], dim=1)


def concat_selected_rows(
    rounds: list[dict[str, Any]], rows: list[torch.Tensor], pad_token_id: int
) -> dict[str, torch.Tensor]:
    """Concatenate the selected rows of several `_generate_and_score_completions` outputs.

    Args:
        rounds: the outputs of the generation rounds, one dict per round, every tensor with the round's rows on
            dimension 0.
        rows: for each round, a `(k,)` long tensor of the rows to keep.
        pad_token_id: padding for `prompt_ids` and `completion_ids` when rounds have different widths.

    Returns:
        One dict with the same keys (batch scalars left out), rows in round order; tensors of different widths
        are padded to the widest, on the left for prompt tensors and on the right otherwise.
    """
    keys = [key for key in rounds[0] if key not in _BATCH_SCALARS]
    merged = {}
    for key in keys:
        values = [output[key] for output in rounds]
        if not all(isinstance(value, torch.Tensor) for value in values):
            raise NotImplementedError(
                f"Dynamic sampling cannot merge the generation output '{key}' (multimodal or custom rollout data). "
                "Set `dynamic_sampling=False` in DAPOConfig for this model or rollout function."
            )
        picked = [value[index.to(value.device)] for value, index in zip(values, rows, strict=True)]
        if picked[0].dim() >= 2:
            width = max(value.size(1) for value in picked)
            pad_value = pad_token_id if key.endswith("_ids") else _PAD_VALUES.get(key, 0)
            picked = [_pad_to_width(value, width, pad_value, left=key in _LEFT_PADDED) for value in picked]
        merged[key] = torch.cat(picked, dim=0)
    return merged
