"""Which trainer and config TRL's GRPO tests run against, and where those tests come from.

TRL's `tests/test_grpo_trainer.py` is read from a TRL source checkout given by path (`--trl-source PATH`, or the
environment variable `TRL_EXT_TRL_SOURCE`, or a checkout at `tests/trl_suite/trl-source/`, which git ignores); it
is never part of this repository. The file is executed once per variant, each time as its own module, and its names
`GRPOTrainer` and `GRPOConfig` are then bound to the variant's classes (the tests read them when they run):

- `trl`: TRL's own `GRPOTrainer`/`GRPOConfig`, the baseline (what TRL passes on the installed versions);
- `dapo_off`: `DAPOTrainer` with a `DAPOConfig` whose additions default to off (`dynamic_sampling=False`,
  `soft_overlong_punishment=False`): it must pass everything the baseline passes;
- `dapo`: `DAPOTrainer` with `DAPOConfig`'s own defaults (both additions on): the differences are listed, each
  with its reason, in `expectations.py`.

The file's `from .testing_utils import ...` resolves to `testing_shim.py` (TRL's helpers, written for this machine).
Test arguments override these defaults as usual (e.g. a test setting `loss_type` keeps it). On a machine without
a bf16-capable device, every variant's config also defaults to `bf16=False` (fp32): `GRPOConfig` defaults to bf16
mixed precision, which `TrainingArguments` refuses there.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from transformers.utils import is_torch_bf16_gpu_available
from trl import GRPOConfig, GRPOTrainer

from trl_ext import DAPOConfig, DAPOTrainer

from . import testing_shim

SOURCE_ENV = "TRL_EXT_TRL_SOURCE"
DEFAULT_SOURCE = Path(__file__).parent / "trl-source"
TEST_FILE = Path("tests") / "test_grpo_trainer.py"


@dataclass
class DAPOConfigWithoutAdditions(DAPOConfig):
    """`DAPOConfig` with dynamic sampling and the soft overlong punishment off by default."""

    dynamic_sampling: bool = False
    soft_overlong_punishment: bool = False


BF16_DEVICE_PRESENT = is_torch_bf16_gpu_available()


# Where bf16 mixed precision cannot run, the same configs in fp32. Named module-level classes, since checkpoints
# pickle the config.
@dataclass
class GRPOConfigFP32(GRPOConfig):
    bf16: bool | None = False


@dataclass
class DAPOConfigWithoutAdditionsFP32(DAPOConfigWithoutAdditions):
    bf16: bool | None = False


@dataclass
class DAPOConfigFP32(DAPOConfig):
    bf16: bool | None = False


VARIANTS: dict[str, tuple[type, type]] = {
    "trl": (GRPOConfig if BF16_DEVICE_PRESENT else GRPOConfigFP32, GRPOTrainer),
    "dapo_off": (DAPOConfigWithoutAdditions if BF16_DEVICE_PRESENT else DAPOConfigWithoutAdditionsFP32, DAPOTrainer),
    "dapo": (DAPOConfig if BF16_DEVICE_PRESENT else DAPOConfigFP32, DAPOTrainer),
}

# Set by conftest.py before the variant modules are imported.
trl_source: Path | None = None


def find_trl_source(option: str | None) -> Path | None:
    """The TRL checkout to take the tests from: the option, else the environment variable, else the default folder.

    Returns None when none is given and the default folder does not exist. A path that is given but holds no
    `tests/test_grpo_trainer.py` is an error naming it.
    """
    given = option or os.environ.get(SOURCE_ENV)
    if not given:
        return DEFAULT_SOURCE if (DEFAULT_SOURCE / TEST_FILE).is_file() else None
    source = Path(given).expanduser().resolve()
    if not (source / TEST_FILE).is_file():
        raise FileNotFoundError(
            f"{source / TEST_FILE} does not exist: --trl-source / {SOURCE_ENV} must name a TRL source checkout "
            "(git clone https://github.com/huggingface/trl)."
        )
    return source


_PACKAGE = f"{__package__}.trl_tests"


def _register_test_package() -> None:
    """A package for the loaded copies whose `testing_utils` is our shim, so the file's relative import finds it."""
    if _PACKAGE not in sys.modules:
        package = types.ModuleType(_PACKAGE)
        package.__path__ = []
        sys.modules[_PACKAGE] = package
        sys.modules[f"{_PACKAGE}.testing_utils"] = testing_shim


def load_upstream_suite(variant: str) -> dict[str, type]:
    """Execute TRL's GRPO tests for `variant`; returns their test classes, to be placed in a collected module."""
    if trl_source is None:
        raise RuntimeError(f"No TRL source checkout: pass --trl-source PATH or set {SOURCE_ENV}.")
    module_name = f"{_PACKAGE}.test_grpo_trainer__{variant}"
    if module_name not in sys.modules:
        _register_test_package()
        spec = importlib.util.spec_from_file_location(module_name, trl_source / TEST_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        module.GRPOConfig, module.GRPOTrainer = VARIANTS[variant]
    module = sys.modules[module_name]
    return {name: value for name, value in vars(module).items() if name.startswith("Test") and isinstance(value, type)}
