"""The `math` reward's former single module: its names, re-exported from the `trl_ext.rewards.math` package, so
`from trl_ext.rewards.math_equivalence import verify_math_answer` keeps working. New code imports from
`trl_ext.rewards.math`."""

from .math import *  # noqa: F403
from .math import __all__  # noqa: F401
