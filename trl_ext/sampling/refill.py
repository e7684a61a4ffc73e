"""Prompts for dynamic sampling's extra generation rounds."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import torch


def prompt_key(prompt) -> int:
    """A stable 64-bit key of a prompt (a string, or conversational messages), to recognise it in the dataset."""
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def prompt_index(prompts: Iterable) -> dict[int, int]:
    """Prompt key -> the first dataset index holding that prompt."""
    index: dict[int, int] = {}
    for position, prompt in enumerate(prompts):
        index.setdefault(prompt_key(prompt), position)
    return index


class RefillSampler:
    """Draws extra training prompts for one generation batch, sharded across processes like TRL's `RepeatSampler`.

    Within a generation batch the draws come from one global order of the dataset that leaves out the batch's own
    prompts: every round takes the next prompts of that order, so no prompt is drawn twice in the batch and none
    that the batch already holds, and the processes never draw the same prompt (each takes its own contiguous
    slice of the round's draw). With `shuffle=True` the order is a permutation seeded by `(seed, batch_key)`; with
    `shuffle=False` (TRL's `shuffle_dataset=False`, e.g. a curriculum) it is dataset order, starting after the
    batch's last prompt. Only when the order is used up (a dataset too small) does a new pass start, and prompts
    repeat. Everything is a pure function of `(seed, batch_key, batch prompts)`: nothing needs saving for resume.
    """

    def __init__(self, dataset_size: int, seed: int, num_processes: int, process_index: int, shuffle: bool = True):
        if dataset_size < 1:
            raise ValueError("Dynamic sampling needs a non-empty training dataset to draw extra prompts from.")
        self.dataset_size = dataset_size
        self.seed = seed
        self.num_processes = num_processes
        self.process_index = process_index
        self.shuffle = shuffle
        self._last_order: tuple[tuple, list[int]] | None = None  # rounds of one batch reuse its order

    def order(self, batch_key: int, batch_indices: Sequence[int], passes: int) -> list[int]:
        """The global draw order for a generation batch, at least `passes` passes over the dataset long."""
        held = set(batch_indices)
        order: list[int] = []
        for repeat in range(passes):
            if self.shuffle:
                generator = torch.Generator().manual_seed(hash((self.seed, batch_key, repeat)) % (2**63))
                one_pass = torch.randperm(self.dataset_size, generator=generator).tolist()
            else:
                start = (max(batch_indices) + 1) % self.dataset_size if batch_indices else 0
                one_pass = [(start + offset) % self.dataset_size for offset in range(self.dataset_size)]
            order.extend(one_pass if repeat else [index for index in one_pass if index not in held])
        return order

    def take(self, batch_key: int, batch_indices: Sequence[int], start: int, count: int) -> list[int]:
        """Positions `start` to `start + count` of the batch's global draw order (over all processes)."""
        key = (batch_key, tuple(batch_indices))
        passes, order = 1, None
        if self._last_order is not None and self._last_order[0][:2] == key:
            passes, order = self._last_order[0][2], self._last_order[1]
        while order is None or len(order) < start + count:
            if order is not None:
                passes += -(-(start + count - len(order)) // self.dataset_size)
            order = self.order(batch_key, batch_indices, passes)
        self._last_order = ((*key, passes), order)
        return order[start : start + count]

    def draw(self, batch_key: int, batch_indices: Sequence[int], drawn: int, num_prompts: int) -> list[int]:
        """Dataset indices of this process's `num_prompts` prompts for the next round.

        Args:
            batch_key: identifies the generation batch (unique in a run, the same after resuming).
            batch_indices: dataset indices of the prompts the batch already holds, on every process.
            drawn: prompts already drawn for this batch's earlier rounds, over all processes.
            num_prompts: prompts this round needs on each process.
        """
        return self.take(batch_key, batch_indices, drawn + self.process_index * num_prompts, num_prompts)


def draw_unskipped(take, should_skip, start: int, count: int, patience: int) -> tuple[list[int], int, int]:
    """The next `count` prompts of a draw order that a skip policy lets through.

    Args:
        take: `take(start, n)` -> the next `n` prompt indices of the order from position `start`.
        should_skip: `should_skip(indices)` -> one bool per index.
        start: position of the first candidate in the order.
        count: prompts wanted.
        patience: most candidates to skip; past it, candidates are taken whatever the policy says, so a policy
            that would skip everything cannot stall the draw.

    Returns:
        The chosen indices, the position after the last candidate considered, and how many were skipped.
    """
    chosen: list[int] = []
    skipped = 0
    while len(chosen) < count:
        candidates = take(start, count - len(chosen))
        start += len(candidates)
        flags = should_skip(candidates) if skipped < patience else [False] * len(candidates)
        for index, skip in zip(candidates, flags, strict=True):
            if skip and skipped < patience:
                skipped += 1
            else:
                chosen.append(index)
    return chosen, start, skipped


class StreamRefillSampler:
    """Draws extra training prompts from a streamed dataset (`datasets.IterableDataset`), which cannot be indexed.

    One stream, read in the same order on every process, is the global draw order: a generation batch's rounds take
    its next rows, each process its own contiguous slice of a round's draw, as with `RefillSampler`. A prompt is
    identified by its `prompt_key`; a row whose prompt the batch already holds (or drew) is passed over, so no prompt
    repeats within a batch. Rows drawn are consumed: later batches go on from the stream's position, which
    `state_dict` saves so that a resumed run draws what the interrupted one would have. When the stream ends a new
    pass starts (reshuffled by its epoch); only a stream too small to fill a batch with distinct prompts repeats one.

    The refill stream is shuffled with `seed + 1`, not the training dataloader's seed, so that refills do not draw
    the very prompts the dataloader is about to yield.
    """

    def __init__(self, dataset, seed: int, shuffle: bool = True):
        self.dataset = dataset
        self.seed = seed
        self.shuffle = shuffle
        self.passes = 0  # completed passes over the stream
        self.position = 0  # rows consumed from the current pass
        self._iterator = None
        self._batch: tuple[int, list[int]] | None = None  # (batch key, prompt keys drawn for it, in order)
        self._rows: dict[int, dict] = {}  # prompt key -> row, for the current batch's draws

    def _next_row(self) -> dict | None:
        """The stream's next row, or None when the current pass ends (the next call starts a new one)."""
        if self._iterator is None:
            stream = self.dataset
            if self.shuffle:
                stream = stream.shuffle(seed=self.seed + 1)
                stream.set_epoch(self.passes)
            self._iterator = iter(stream.skip(self.position) if self.position else stream)
        try:
            row = next(self._iterator)
        except StopIteration:
            if self.position == 0:
                raise ValueError("Dynamic sampling draws refill prompts from the training stream, which is empty.")
            self._iterator, self.passes, self.position = None, self.passes + 1, 0
            return None
        self.position += 1
        return row

    def take(self, batch_key: int, batch_indices: Sequence[int], start: int, count: int) -> list[int]:
        """Prompt keys at positions `start` to `start + count` of the batch's draw (over all processes)."""
        if self._batch is None or self._batch[0] != batch_key:
            self._batch, self._rows = (batch_key, []), {}
        drawn = self._batch[1]
        excluded = set(batch_indices) | set(drawn)
        passes_without_a_new_prompt = 0
        while len(drawn) < start + count:
            row = self._next_row()
            if row is None:
                passes_without_a_new_prompt += 1
                if passes_without_a_new_prompt > 1:  # every prompt is in the batch already: repeat one
                    excluded = set()
                continue
            key = prompt_key(row.get("prompt"))
            if key in excluded:
                continue
            excluded.add(key)
            drawn.append(key)
            self._rows[key] = dict(row)
            passes_without_a_new_prompt = 0
        return drawn[start : start + count]

    def row(self, key: int) -> dict:
        """The row of a prompt key drawn for the current batch."""
        return self._rows[key]

    def state_dict(self) -> dict[str, int]:
        return {"passes": self.passes, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.passes, self.position, self._iterator = int(state["passes"]), int(state["position"]), None
