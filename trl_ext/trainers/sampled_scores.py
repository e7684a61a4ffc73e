"""The sampled tokens' log-probs, recorded while `transformers` generates.

vLLM returns the log-prob of each token it samples; `transformers`' `generate`, as TRL calls it, returns only the
tokens. These are recorded from the model's own forwards during generation: the output layer's logits at each
step, divided by the sampling temperature and normalised as TRL's training forward does (no top-k/top-p
truncation: the log-probs are the policy's, whatever the sampler kept), and the token the next step was fed.
Carried groups use them as their behaviour log-probs instead of a forward of their own.
"""

from __future__ import annotations

import torch

# Largest per-token difference from the training forward at which recorded log-probs are used: the importance ratio
# of a token then moves by at most 0.1%.
AGREEMENT_ATOL = 1e-3


class SampledTokenScores:
    """Context manager recording, for each generation step, the log-prob of the token sampled at that step.

    Args:
        model: the model `generate` runs (a PEFT model is read through its base model).
        temperature: the sampling temperature, as TRL divides the logits by it.
    """

    def __init__(self, model, temperature: float):
        self.model = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.temperature = temperature
        self._steps: list[torch.Tensor] = []  # (B,) log-prob of the token sampled at each finished step
        self._pending: torch.Tensor | None = None  # (B, V) log-probs of the last step, until its token is known
        self._prefills = 0
        self._handles = []

    def __enter__(self) -> SampledTokenScores:
        self._handles = [
            self.model.register_forward_pre_hook(self._on_input, with_kwargs=True),
            self.model.get_output_embeddings().register_forward_hook(self._on_logits),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _on_input(self, module, args, kwargs):
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if input_ids is None:
            return
        if _is_prefill(input_ids, kwargs.get("cache_position")):  # the start of a `generate` call
            self._prefills += 1
            self._pending = None
            return
        if self._pending is not None:
            chosen = input_ids[:, -1:].to(self._pending.device)
            self._steps.append(self._pending.gather(1, chosen).squeeze(1))
            self._pending = None

    def _on_logits(self, module, inputs, output):
        logits = output[:, -1, :].detach().float() / self.temperature
        self._pending = torch.log_softmax(logits, dim=-1)

    def log_probs(self, completion_ids: list[list[int]]) -> list[list[float]] | None:
        """Per row, the log-prob of each completion token; None unless exactly one `generate` call was recorded and
        it produced these completions."""
        if self._prefills != 1 or self._pending is None:
            return None
        steps = len(self._steps) + 1
        if len(completion_ids) != self._pending.size(0) or any(len(ids) > steps for ids in completion_ids):
            return None
        last = torch.tensor(
            [ids[-1] if len(ids) == steps else 0 for ids in completion_ids], device=self._pending.device
        )
        table = torch.stack([*self._steps, self._pending.gather(1, last.unsqueeze(1)).squeeze(1)], dim=1).cpu()
        return [table[row, : len(ids)].tolist() for row, ids in enumerate(completion_ids)]


def _is_prefill(input_ids: torch.Tensor, cache_position: torch.Tensor | None) -> bool:
    """Whether a forward during generation processes the prompt (the first step) rather than one new token."""
    if cache_position is not None and cache_position.numel():
        return int(cache_position.reshape(-1)[0]) == 0
    return input_ids.size(1) > 1


def scores_agree(pairs: list[tuple[torch.Tensor, torch.Tensor]], atol: float = AGREEMENT_ATOL) -> bool:
    """Whether recorded log-probs equal a forward's, token by token, within `atol` (`(recorded, forward)` pairs)."""
    return all(
        recorded.shape == forward.shape and bool(torch.allclose(recorded, forward.float(), rtol=0.0, atol=atol))
        for recorded, forward in pairs
    )
