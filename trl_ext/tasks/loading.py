"""Prompt datasets from a Hub name, a local path, or a built-in task, in the shape TRL's GRPO trainers expect.

The result has a `prompt` column (plain text, or chat messages when a system prompt or `conversational` is
asked for) and, when the source has answers, a `solution` column that the registry's verifiers read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict, load_dataset, load_from_disk

from .arithmetic import make_arithmetic_dataset
from .code_functions import make_code_dataset

BUILTIN_PREFIX = "builtin:"

# Built-in tasks: name -> builder of a DatasetDict with `train` and `test` splits.
BUILTIN_TASKS = {"arithmetic": make_arithmetic_dataset, "code-functions": make_code_dataset}

# Built-in models ship as package data, next to this package.
ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
BUILTIN_MODELS = {"tiny-arithmetic": ASSETS_DIR / "tiny-arithmetic", "tiny-code": ASSETS_DIR / "tiny-code"}
# The script that builds each one (warm start included).
BUILTIN_MODEL_SCRIPTS = {
    "tiny-arithmetic": "scripts/make_default_checkpoint.py",
    "tiny-code": "scripts/make_code_checkpoint.py",
}

_FILE_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


def _builtin_name(name: str, available: Mapping[str, Any], kind: str) -> str:
    key = name[len(BUILTIN_PREFIX) :]
    if key not in available:
        raise ValueError(f"Unknown built-in {kind} {name!r}; available: {[BUILTIN_PREFIX + k for k in available]}.")
    return key


def resolve_model_path(name_or_path: str) -> str:
    """A model name for `from_pretrained`: `builtin:<name>` becomes the shipped checkpoint's directory."""
    if not name_or_path.startswith(BUILTIN_PREFIX):
        return name_or_path
    directory = BUILTIN_MODELS[_builtin_name(name_or_path, BUILTIN_MODELS, "model")]
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(
            f"The built-in model {name_or_path!r} is missing from {directory}; rebuild it with "
            f"`python {BUILTIN_MODEL_SCRIPTS[name_or_path[len(BUILTIN_PREFIX) :]]}`."
        )
    return str(directory)


def load_raw_dataset(name_or_path: str, config: str | None = None) -> DatasetDict:
    """All splits of a dataset given as `builtin:<task>`, a local file or folder, or a Hub name.

    Local files (`.json`, `.jsonl`, `.parquet`, `.csv`, `.arrow`) load as a single `train` split; a folder saved
    with `save_to_disk` loads as saved; any other folder goes to `datasets.load_dataset` (a folder of data files
    or a dataset script). Anything else is looked up on the Hub.
    """
    if name_or_path.startswith(BUILTIN_PREFIX):
        return BUILTIN_TASKS[_builtin_name(name_or_path, BUILTIN_TASKS, "task")]()
    path = Path(name_or_path).expanduser()
    if path.is_file():
        if path.suffix not in _FILE_FORMATS:
            raise ValueError(f"Cannot load {path}: use one of {sorted(_FILE_FORMATS)} (or a save_to_disk folder).")
        return load_dataset(_FILE_FORMATS[path.suffix], data_files={"train": str(path)})
    if path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        loaded = load_from_disk(str(path))
        return loaded if isinstance(loaded, DatasetDict) else DatasetDict(train=loaded)
    loaded = load_dataset(str(path) if path.is_dir() else name_or_path, name=config)
    return loaded if isinstance(loaded, DatasetDict) else DatasetDict(train=loaded)


def _column_value(row: Mapping[str, Any], column: str) -> Any:
    """`row[column]`, where a dotted column such as `reward_model.ground_truth` reads a nested field."""
    value: Any = row
    for part in column.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(column)
        value = value[part]
    return value


def fill_template(template: str, row: Mapping[str, Any]) -> str:
    """`template` with each `{column}` replaced by the row's value; other braces (`\\boxed{}`) are left alone."""
    return re.sub(
        r"\{([\w.]+)\}",
        lambda m: str(_column_value(row, m.group(1))) if _has(row, m.group(1)) else m.group(0),
        template,
    )


def _has(row: Mapping[str, Any], column: str) -> bool:
    try:
        _column_value(row, column)
    except KeyError:
        return False
    return True


def prepare_prompts(
    dataset: Dataset,
    prompt_column: str = "prompt",
    solution_column: str | None = "solution",
    prompt_template: str | None = None,
    system_prompt: str | None = None,
    conversational: bool = False,
) -> Dataset:
    """Give `dataset` the `prompt` (and `solution`) columns TRL and the registry rewards read.

    - `prompt_template` (e.g. `"{question}\\nPut the final answer in \\boxed{}."`) builds the prompt text from the
      row's columns; without it the prompt is `prompt_column` as is.
    - `system_prompt` or `conversational=True` turns a text prompt into chat messages (a system message, if
      given, then the user message), which the trainer renders with the model's chat template.
    - `solution_column` (dotted for nested fields, e.g. `reward_model.ground_truth`) is copied to `solution`;
      `None` keeps the dataset without answers (rewards that need none).
    Other columns are kept: TRL passes them to the reward functions.
    """
    columns = dataset.column_names
    if prompt_template is None and prompt_column not in columns:
        raise ValueError(
            f"The dataset has no prompt column {prompt_column!r} (columns: {columns}); set prompt_column, or "
            "prompt_template to build prompts from other columns."
        )
    if solution_column is not None and solution_column.split(".")[0] not in columns:
        raise ValueError(
            f"The dataset has no solution column {solution_column!r} (columns: {columns}); set solution_column to the "
            "column holding the reference answers (dotted for nested fields), or to null if the rewards need none."
        )
    wants_chat = conversational or system_prompt is not None

    def convert(row):
        prompt = fill_template(prompt_template, row) if prompt_template is not None else row[prompt_column]
        if wants_chat and isinstance(prompt, str):
            messages = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
            prompt = messages + [{"role": "user", "content": prompt}]
        elif isinstance(prompt, list) and system_prompt is not None and prompt and prompt[0].get("role") != "system":
            prompt = [{"role": "system", "content": system_prompt}] + prompt
        updated = {"prompt": prompt}
        if solution_column is not None:
            answer = _column_value(row, solution_column)
            updated["solution"] = answer if isinstance(answer, str) else str(answer)
        return updated

    needs_change = (
        prompt_template is not None
        or wants_chat
        or prompt_column != "prompt"
        or solution_column not in (None, "solution")
    )
    if not needs_change:
        return dataset
    # Drop the original `prompt` column when it is replaced by a column of another type (text -> messages).
    remove = ["prompt"] if "prompt" in columns and (wants_chat or prompt_column != "prompt" or prompt_template) else []
    return dataset.map(convert, remove_columns=remove, desc="Preparing prompts")
