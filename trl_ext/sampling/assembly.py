"""Assembling a dynamic-sampling batch from generation rounds: pure functions over TRL's `_generate` output.

TRL's `GRPOTrainer._generate` returns per-row lists (prompt and completion token ids, tool masks, completions,
sampling log-probs, tool images) plus per-batch fields. A round keeps some of its groups; the batch is the kept
groups of every round (carried groups first when they come as a round of their own), then the filler groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .carry import CarriedGroup


@dataclass
class Round:
    """What one generation round contributes to the batch: its rows for the groups this process may use."""

    inputs: list[dict[str, Any]]
    prompts: list
    generation: tuple  # TRL's `_generate` output, restricted to `rows`
    rewards: torch.Tensor  # (len(rows), F) local rewards of those rows
    kept: int  # informative groups kept (they come first)
    spare: int  # uninformative groups held after them, in case the rounds run out
    extra_logs: dict[str, list] = field(default_factory=dict)


def is_per_row(field_value) -> bool:
    """Whether a field of TRL's `_generate` output holds one value per row (None is absent; `extra_fields` is a dict;
    tool images are an empty list when no tool ran)."""
    return field_value is not None and not isinstance(field_value, dict) and len(field_value) > 0


def group_rows(groups: torch.Tensor, group_size: int) -> torch.Tensor:
    """Row indices of the completions of `groups`, whose completions are stored contiguously."""
    return (groups.unsqueeze(1) * group_size + torch.arange(group_size)).flatten()


def completion_lengths(generation: tuple) -> list[int]:
    """Model-generated tokens per completion, as TRL counts them (tool results excluded)."""
    completion_ids, tool_mask = generation[1], generation[2]
    if tool_mask is not None:
        return [int(sum(mask)) for mask in tool_mask]
    return [len(ids) for ids in completion_ids]


def select_rows(generation: tuple, rows: list[int]) -> tuple:
    """TRL's `_generate` output restricted to `rows`: per-row lists are indexed, absent fields stay absent."""
    prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, tool_images = generation

    def pick(values):
        return None if values is None else [values[row] for row in rows]

    return (
        pick(prompt_ids),
        pick(completion_ids),
        pick(tool_mask),
        pick(completions),
        pick(logprobs),
        extra_fields,
        pick(images),
        pick(tool_images) if tool_images else tool_images,
    )


def carried_round(carried: list[CarriedGroup], device) -> Round:
    """The carried groups as one more round, all of whose groups are kept."""
    payloads = [group.payload for group in carried]
    fields = []
    for position, first in enumerate(payloads[0]["generation"]):
        per_row = is_per_row(first)
        fields.append(
            [value for payload in payloads for value in payload["generation"][position]] if per_row else first
        )
    columns = payloads[0]["extra_logs"].keys()
    return Round(
        inputs=[row for payload in payloads for row in payload["inputs"]],
        prompts=[prompt for payload in payloads for prompt in payload["prompts"]],
        generation=tuple(fields),
        rewards=torch.cat([payload["rewards"] for payload in payloads]).to(device),
        kept=len(carried),
        spare=0,
        extra_logs={
            column: [v for payload in payloads for v in payload["extra_logs"].get(column, [])] for column in columns
        },
    )


def assemble(rounds: list[Round], fillers: list[torch.Tensor], group_size: int):
    """Concatenate the kept groups of every round, then the filler groups (their rows come last).

    Returns TRL's `_generate` output for the batch, its inputs, prompts, `(rows, F)` local rewards and extra log
    columns, and how many rows come before the fillers.
    """
    picks = [(held, row) for held in rounds for row in range(held.kept * group_size)]
    num_kept_rows = len(picks)
    for held, filler in zip(rounds, fillers, strict=True):
        picks += [(held, row) for row in group_rows(filler + held.kept, group_size).tolist()]

    def column(values_of):
        return [values_of(held)[row] for held, row in picks]

    fields = []
    for position, first in enumerate(rounds[0].generation):
        per_row = is_per_row(first)
        fields.append(column(lambda held, position=position: held.generation[position]) if per_row else first)
    rewards = torch.stack([held.rewards[row] for held, row in picks])
    names = {name for held in rounds for name in held.extra_logs}  # a column a round lacks is None there
    extra_logs = {
        name: column(lambda held, name=name: held.extra_logs.get(name, [None] * len(held.inputs))) for name in names
    }
    inputs = column(lambda held: held.inputs)
    prompts = column(lambda held: held.prompts)
    return tuple(fields), inputs, prompts, rewards, extra_logs, num_kept_rows
