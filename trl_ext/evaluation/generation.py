"""Sampling `n` completions per prompt with a transformers model, in batches, with a progress bar.

Prompts are tokenized the way TRL's `GRPOTrainer` tokenizes them (plain text as is, conversations through the
chat template with the generation prompt), so an evaluation sees the model exactly as training does.
Completions come back in TRL's reward-function format: strings for plain-text prompts, one assistant message
for conversational ones, together with their token ids (cut after the first end-of-sequence token).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm
from trl.data_utils import is_conversational


@dataclass
class SampledCompletions:
    """`completions[j]` and `completion_ids[j]` hold the `n` samples of prompt `j`, in TRL's reward format."""

    completions: list[list[Any]]
    completion_ids: list[list[list[int]]]


def eos_token_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a completion: the tokenizer's EOS plus the model's generation-config EOS ids."""
    ids = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (tokenizer.eos_token_id, configured):
        if value is None:
            continue
        ids.update(value if isinstance(value, (list, tuple)) else [value])
    if not ids:
        raise ValueError("The tokenizer has no eos_token and the model's generation_config no eos_token_id; set one.")
    return sorted(ids)


def is_bnb_quantized(model) -> bool:
    """Whether `model` (or the base of a PEFT model) holds bitsandbytes 4-bit or 8-bit weights.

    Such a model is sampled in training mode, as TRL's own generation samples it: on CPU, bitsandbytes repacks
    4-bit weights for an inference kernel the first time a layer runs in eval mode, and that kernel has no
    backward, so the gradients of every later training step would stop at the quantized layers. (TRL disables
    dropout in the policy, so training mode samples the same distribution.)
    """
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False))


def tokenize_prompts(tokenizer, prompts: Sequence[Any]) -> list[list[int]]:
    """Token ids of each prompt, as TRL's GRPOTrainer builds them before generation."""
    if is_conversational({"prompt": prompts[0]}):
        return tokenizer.apply_chat_template(
            list(prompts), add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
    return tokenizer(text=list(prompts))["input_ids"]


def truncate_after_eos(ids: Sequence[int], eos_ids: Sequence[int]) -> list[int]:
    """The tokens up to and including the first end-of-sequence token, as TRL's completion mask keeps them.

    `generate` pads a finished sequence only after its EOS, so this also drops the padding.
    """
    for position, token in enumerate(ids):
        if token in eos_ids:
            return list(ids[: position + 1])
    return list(ids)


def sample_completions(
    model,
    tokenizer,
    prompts: Sequence[Any],
    num_samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 64,
    accelerator=None,
    progress: bool = True,
    description: str = "Sampling",
) -> SampledCompletions:
    """`num_samples` completions for each prompt; `temperature=0` decodes greedily.

    `batch_size` counts sequences per `generate` call (prompts times samples). With `accelerator` (a model being
    trained), the model is unwrapped for generation as TRL does it, gathering ZeRO-3 or FSDP parameters; every
    process must then call this with the same number of prompts.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be at least 1, got {num_samples}.")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}.")
    if len(prompts) == 0:
        return SampledCompletions([], [])
    conversational = is_conversational({"prompt": prompts[0]})
    prompt_ids = tokenize_prompts(tokenizer, prompts)
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    # Each (prompt, sample) pair is one row; rows of one prompt are adjacent, so batches stay simple slices.
    rows = [index for index in range(len(prompts)) for _ in range(num_samples)]
    sampled_ids: list[list[int]] = []
    show = progress and (accelerator is None or accelerator.is_main_process)
    generation_kwargs = dict(
        max_new_tokens=max_new_tokens,
        do_sample=temperature > 0,
        pad_token_id=pad_id,
        eos_token_id=eos_ids,
    )
    if temperature > 0:
        generation_kwargs.update(temperature=temperature, top_p=top_p, top_k=0)

    if accelerator is not None:
        from trl.distributed import DistributedBackend
        from trl.models import unwrap_model_for_generation

        context = unwrap_model_for_generation(model, accelerator)
        full_params = DistributedBackend(accelerator).summon_full_params(model, recurse=False)
    else:
        context, full_params = nullcontext(model), nullcontext()

    with context as generator, torch.no_grad(), full_params:
        was_training = generator.training
        # Eval mode (no dropout), except for bitsandbytes models: see `is_bnb_quantized`.
        generator.train(is_bnb_quantized(generator))
        device = next(generator.parameters()).device
        try:
            for start in tqdm(range(0, len(rows), batch_size), desc=description, disable=not show, leave=False):
                batch = [prompt_ids[index] for index in rows[start : start + batch_size]]
                inputs = tokenizer.pad({"input_ids": batch}, padding_side="left", return_tensors="pt").to(device)
                output = generator.generate(**inputs, **generation_kwargs)
                new_tokens = output[:, inputs["input_ids"].shape[1] :].tolist()
                sampled_ids.extend(truncate_after_eos(ids, eos_ids) for ids in new_tokens)
        finally:
            generator.train(was_training)

    completions, completion_ids = [], []
    for index in range(len(prompts)):
        ids = sampled_ids[index * num_samples : (index + 1) * num_samples]
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
        completions.append([[{"role": "assistant", "content": text}] for text in texts] if conversational else texts)
        completion_ids.append(ids)
    return SampledCompletions(completions, completion_ids)
