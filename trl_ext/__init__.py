"""trl-ext: DAPO with dynamic sampling, GSPO and verifiable rewards for Hugging Face TRL."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0.dev0"

# The trainers import torch and TRL (seconds, hundreds of MB). Reward worker processes import only
# `trl_ext.rewards` and must not pay for them, so the trainers load on first access.
_LAZY = {name: "trl_ext.trainers" for name in ("DAPOConfig", "DAPOTrainer", "GSPOConfig", "GSPOTrainer")}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trl_ext' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)


if TYPE_CHECKING:
    from .trainers import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer
