"""Deprecated: the sandbox moved to `trl_ext.sandbox`. This alias will be removed in the next release."""

from __future__ import annotations

import warnings

from ..sandbox import core as _core
from ..sandbox.core import *  # noqa: F403
from ..sandbox.core import __all__ as _moved

warnings.warn(
    "trl_ext.rewards.sandbox is deprecated and will be removed in the next release; import from "
    "trl_ext.sandbox instead (e.g. `from trl_ext.sandbox import Sandbox, SandboxLimits`).",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = list(_moved)


def __getattr__(name: str):
    # Everything else the old module defined (RUN_ID_VARIABLE, helpers) still resolves, from its new home.
    return getattr(_core, name)
