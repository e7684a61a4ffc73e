"""What a "row" of a rollout is, and how a dynamic-sampling batch is assembled from rows of several rounds.

A row is one completion with everything that belongs to it: TRL's `_generate` output for it (prompt and
completion token ids, tool mask, parsed completion, sampling log-probs, images, tool images, and each extra field a
`rollout_func` returned), the dataset row and the prompt it was generated from (with its images and environment
observation), its rewards, the extra log columns reward functions wrote for it, and the environment instance it
was rolled out in. Every rollout kind (text, tools, environments, vision, `rollout_func`) is a set of such columns:
selecting or concatenating rows treats every column alike, so a kept row's fields always stay with its completion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .carry import CarriedGroup

# TRL 1.16's `GRPOTrainer._generate` output, in order.
GENERATION_FIELDS = (
    "prompt_ids",
    "completion_ids",
    "tool_mask",
    "completions",
    "logprobs",
    "extra_fields",
    "images",
    "tool_images",
)
EXTRA_FIELD = "extra_fields."  # column prefix of a `rollout_func`'s extra per-row fields
LOG_COLUMN = "log."  # column prefix of the extra log columns reward functions wrote (`log_extra`)
# Column of the sampled tokens' log-probs under the generating policy, recorded while `transformers` generated.
POLICY_LOGPROBS = "policy_logprobs"
# Columns that never travel with a carried group: an environment instance is reused by later rounds, and a carried
# group keeps its rewards, so it needs no environment.
NOT_CARRIED = ("environments",)


class RowFieldError(ValueError):
    """A rollout field that does not hold one value per row, so it cannot be selected with the kept rows."""


@dataclass
class Rows:
    """Rows of a rollout as named columns, one value per row; a column that is `None` is absent for this kind."""

    columns: dict[str, list | None]

    def __len__(self) -> int:
        return len(self.columns["completion_ids"])

    def select(self, rows: list[int]) -> Rows:
        """The rows at `rows`, in that order, every column alike."""
        return Rows(
            {name: None if values is None else [values[row] for row in rows] for name, values in self.columns.items()}
        )

    def without(self, names: tuple[str, ...]) -> Rows:
        return Rows({name: values for name, values in self.columns.items() if name not in names})

    @staticmethod
    def concat(parts: list[Rows]) -> Rows:
        """Rows of `parts` one after the other; a column absent from some parts is `None` on their rows."""
        names = list(dict.fromkeys(name for part in parts for name in part.columns))
        columns = {}
        for name in names:
            if all(part.columns.get(name) is None for part in parts):
                columns[name] = None
                continue
            columns[name] = [value for part in parts for value in (part.columns.get(name) or [None] * len(part))]
        return Rows(columns)

    def generation(self) -> tuple:
        """TRL's `_generate` output for these rows."""
        extra = {
            name[len(EXTRA_FIELD) :]: values for name, values in self.columns.items() if name.startswith(EXTRA_FIELD)
        }
        fields = {name: self.columns.get(name) for name in GENERATION_FIELDS}
        fields["extra_fields"] = extra
        fields["tool_images"] = fields["tool_images"] or []  # TRL's value when no tool ran
        return tuple(fields[name] for name in GENERATION_FIELDS)

    def extra_logs(self) -> dict[str, list]:
        return {name[len(LOG_COLUMN) :]: values for name, values in self.columns.items() if name.startswith(LOG_COLUMN)}


def extra_per_row_fields(extra_fields: dict[str, Any], num_rows: int) -> dict[str, list]:
    """A `rollout_func`'s extra fields, checked to hold one value per row (TRL merges them into the reward inputs)."""
    for name, values in extra_fields.items():
        if not isinstance(values, list) or len(values) != num_rows:
            got = f"a list of {len(values)}" if isinstance(values, list) else type(values).__name__
            raise RowFieldError(
                f"Dynamic sampling keeps and drops the rows of a rollout one by one, so every extra field a "
                f"`rollout_func` returns must be a list with one value per completion; field {name!r} is {got} for "
                f"{num_rows} completions. Return it per completion (repeat a shared value), or set "
                "`dynamic_sampling=False` in DAPOConfig."
            )
    return extra_fields


def rollout_rows(
    generation: tuple,
    *,
    inputs: list[dict[str, Any]],
    prompts: list,
    rewards: torch.Tensor,
    extra_logs: dict[str, list],
    environments: list | None,
) -> Rows:
    """The rows of one generation round: TRL's `_generate` output with what belongs to each row."""
    fields = dict(zip(GENERATION_FIELDS, generation, strict=True))
    num_rows = len(fields["completion_ids"])
    columns: dict[str, list | None] = {}
    for name, values in fields.items():
        if name == "extra_fields":
            for extra, per_row in extra_per_row_fields(values, num_rows).items():
                columns[EXTRA_FIELD + extra] = per_row
        else:  # tool images are an empty list when no tool ran: absent
            columns[name] = list(values) if values else None
    columns["inputs"] = inputs
    columns["prompts"] = prompts
    columns["rewards"] = list(rewards)
    columns["environments"] = environments
    for name, values in extra_logs.items():
        columns[LOG_COLUMN + name] = values
    return Rows(columns)


@dataclass
class GeneratedRound:
    """A round as generated, before the filter: slots of `G` rows, each process's laid out one after the other."""

    rows: Rows  # this process's slots
    rewards_per_func: torch.Tensor  # (every process's slots * G, F), in process order
    indices: list[list[int]]  # per process, the prompt index of each of its slots
    stopped_rows: Rows | None = None  # this process's stopped pilots, padded to G rows each (fillers)
    stopped: list[int] | None = None  # per process, prompts drawn but stopped after their pilot
    joint: list[list[int]] = field(default_factory=list)  # slots (over every process) trained as one group


@dataclass
class Round:
    """What one generation round contributes to the batch: its rows for the groups this process may use."""

    rows: Rows
    kept: int  # informative groups kept (they come first)
    spare: int  # uninformative groups held after them, in case the rounds run out


def group_rows(groups: torch.Tensor, group_size: int) -> torch.Tensor:
    """Row indices of the completions of `groups`, whose completions are stored contiguously."""
    return (groups.unsqueeze(1) * group_size + torch.arange(group_size)).flatten()


def completion_lengths(generation: tuple) -> list[int]:
    """Model-generated tokens per completion, as TRL counts them (tool results excluded)."""
    completion_ids, tool_mask = generation[1], generation[2]
    if tool_mask is not None:
        return [int(sum(mask)) for mask in tool_mask]
    return [len(ids) for ids in completion_ids]


def carried_payload(rows: Rows) -> dict[str, list | None]:
    """What a carried group keeps of its rows (everything but its environments), as plain containers."""
    return rows.without(NOT_CARRIED).columns


def carried_round(carried: list[CarriedGroup]) -> Round:
    """The carried groups as one more round, all of whose groups are kept."""
    rows = Rows.concat([Rows(group.payload["rows"]) for group in carried])
    return Round(rows=rows, kept=len(carried), spare=0)


def assemble(rounds: list[Round], fillers: list[torch.Tensor], group_size: int) -> tuple[Rows, int]:
    """The kept groups of every round, then the filler groups (their rows come last), and the number of kept rows."""
    kept = [held.rows.select(list(range(held.kept * group_size))) for held in rounds]
    filled = [
        held.rows.select(group_rows(filler + held.kept, group_size).tolist())
        for held, filler in zip(rounds, fillers, strict=True)
    ]
    rows = Rows.concat(kept + filled)
    return rows, sum(len(part) for part in kept)


def sampled_log_probs(columns: dict[str, list | None], row: int, column: str = "logprobs") -> torch.Tensor | None:
    """The sampled tokens' log-probs of `row` in `column`: by default those the generation backend returned (a
    `rollout_func`, vLLM); `POLICY_LOGPROBS` for those recorded while `transformers` generated. None where there
    are none, or not one finite value per completion token."""
    values = (columns.get(column) or [None] * (row + 1))[row]
    if values is None or len(values) != len(columns["completion_ids"][row]) or any(v is None for v in values):
        return None
    logps = torch.tensor(values, dtype=torch.float32)
    return logps if bool(torch.isfinite(logps).all()) else None


# A PIL image in a carried row, as `torch.load(..., weights_only=True)` can read it back.
_IMAGE_KEY = "__pil_image__"


def images_as_tensors(value):
    """`value` with every PIL image (in nested lists, tuples and dicts) replaced by its pixels as a uint8 tensor."""
    from PIL import Image

    if isinstance(value, Image.Image):
        pixels = torch.frombuffer(bytearray(value.tobytes()), dtype=torch.uint8)
        return {_IMAGE_KEY: pixels, "mode": value.mode, "size": list(value.size)}
    if isinstance(value, dict):
        return {key: images_as_tensors(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(images_as_tensors(item) for item in value)
    return value


def images_from_tensors(value):
    """The inverse of `images_as_tensors`."""
    from PIL import Image

    if isinstance(value, dict):
        if _IMAGE_KEY in value:
            return Image.frombytes(value["mode"], tuple(value["size"]), value[_IMAGE_KEY].numpy().tobytes())
        return {key: images_from_tensors(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(images_from_tensors(item) for item in value)
    return value
