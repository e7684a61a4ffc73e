"""Supervised warm start: teach a tiny model a task's answer format (or a tool-call format) before RL."""

from __future__ import annotations

import random
import time
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


def warm_start(
    model: torch.nn.Module,
    tokenizer,
    prompts: Sequence[str],
    answers: Sequence[str],
    steps: int,
    learning_rate: float,
    batch_size: int = 8,
    seed: int = 0,
    weight_decay: float = 0.01,
    log_every: int = 0,
) -> torch.nn.Module:
    """Train `model` for `steps` AdamW steps on `supervised_batches(prompts, answers)`; returns it (trained in place).

    Enough for a tiny model to learn an answer or tool-call format in seconds, so that its samples mix right and
    wrong answers and RL has something to learn from. With `log_every`, prints the loss every that many steps.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    batches = supervised_batches(tokenizer, prompts, answers, batch_size=batch_size, seed=seed)
    start = time.time()
    model.train()
    for step in range(1, steps + 1):
        input_ids, attention_mask, labels = next(batches)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if log_every and (step % log_every == 0 or step == steps):
            print(f"step {step}/{steps}  loss {loss.item():.3f}  ({time.time() - start:.0f}s)", flush=True)
    return model
