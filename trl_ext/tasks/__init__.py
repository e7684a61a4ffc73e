"""Datasets for training and evaluation: built-in verifiable tasks and loading from the Hub or local files."""

from .arithmetic import arithmetic_problems, format_problem, make_arithmetic_dataset
from .code_functions import code_problems, make_code_dataset
from .loading import (
    BUILTIN_MODELS,
    BUILTIN_PREFIX,
    BUILTIN_TASKS,
    fill_template,
    load_raw_dataset,
    prepare_prompts,
    resolve_model_path,
)
from .warm_start import supervised_batches, warm_start

__all__ = [
    "BUILTIN_MODELS",
    "BUILTIN_PREFIX",
    "BUILTIN_TASKS",
    "arithmetic_problems",
    "code_problems",
    "fill_template",
    "format_problem",
    "load_raw_dataset",
    "make_arithmetic_dataset",
    "make_code_dataset",
    "prepare_prompts",
    "resolve_model_path",
    "supervised_batches",
    "warm_start",
]
