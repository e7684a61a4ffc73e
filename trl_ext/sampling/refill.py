"""Prompts for dynamic sampling's extra generation rounds."""

from __future__ import annotations

import torch


class RefillSampler:
    """Draws extra training prompts, sharded across processes like TRL's `RepeatSampler`.

    Every process computes the same global permutation (from the seed, the generation batch and the round), then
    takes its own contiguous slice, so the processes never draw the same prompt within a round. The draw is a pure
    function of `(seed, batch_key, round)`: nothing needs saving in a checkpoint for it.
    """

    def __init__(self, dataset_size: int, seed: int, num_processes: int, process_index: int):
        if dataset_size < 1:
            raise ValueError("Dynamic sampling needs a non-empty training dataset to draw extra prompts from.")
        self.dataset_size = dataset_size
        self.seed = seed
        self.num_processes = num_processes
        self.process_index = process_index

    def indices(self, num_prompts: int, batch_key: int, round_index: int) -> list[int]:
        """Dataset indices of `num_prompts` prompts for this process (repeats only if the dataset is too small).

        `batch_key` identifies the generation batch (the trainer passes one per generation, unique in a run).
        """
        generator = torch.Generator().manual_seed(hash((self.seed, batch_key, round_index)) % (2**63))
        total = num_prompts * self.num_processes
        repeats = -(-total // self.dataset_size)
        permutation = torch.cat([torch.randperm(self.dataset_size, generator=generator) for _ in range(repeats)])
        start = self.process_index * num_prompts
        return permutation[start : start + num_prompts].tolist()
