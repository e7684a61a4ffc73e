"""Supervised warm start: the batches that teach a tiny model a task's answer format before RL."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch


def supervised_batches(
    tokenizer, prompts: Sequence[str], solutions: Sequence[str], batch_size: int, seed: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches of `prompt + solution + EOS`, right-padded, with the loss on the solution and EOS.

    Yields `(input_ids, attention_mask, labels)`, each `(batch_size, longest sequence in the batch)`; `labels` is
    -100 on the prompt and the padding.
    """
    examples = [
        (tokenizer(prompt)["input_ids"], tokenizer(solution)["input_ids"] + [tokenizer.eos_token_id])
        for prompt, solution in zip(prompts, solutions, strict=True)
    ]
    rng = random.Random(seed)
    while True:
        batch = rng.sample(examples, batch_size)
        length = max(len(prompt) + len(answer) for prompt, answer in batch)
        input_ids = torch.full((batch_size, length), tokenizer.pad_token_id)
        attention_mask = torch.zeros((batch_size, length), dtype=torch.long)
        labels = torch.full((batch_size, length), -100)
        for row, (prompt, answer) in enumerate(batch):
            sequence = prompt + answer
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention_mask[row, : len(sequence)] = 1
            labels[row, len(prompt) : len(sequence)] = torch.tensor(answer)
        yield input_ids, attention_mask, labels
