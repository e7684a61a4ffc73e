"""Deprecated: the test harness moved to `trl_ext.sandbox.harness`. This alias will be removed in the next
release."""

from __future__ import annotations

import warnings

from ..sandbox import harness as _harness
from ..sandbox.harness import encode_value, main  # noqa: F401

warnings.warn(
    "trl_ext.rewards.code_harness is deprecated and will be removed in the next release; import from "
    "trl_ext.sandbox.harness instead.",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_harness, name)
