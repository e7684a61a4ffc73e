"""Which trainer and config TRL's GRPO tests run against.

The upstream test module (`upstream/test_grpo_trainer.py`) is executed once per variant, each time as its own
module, and its names `GRPOTrainer` and `GRPOConfig` are bound to the variant's classes:

- `trl`: TRL's own `GRPOTrainer`/`GRPOConfig`, the baseline (what TRL passes on the installed versions);
- `dapo_off`: `DAPOTrainer` with a `DAPOConfig` whose additions default to off (`dynamic_sampling=False`,
  `soft_overlong_punishment=False`): it must pass everything the baseline passes;
- `dapo`: `DAPOTrainer` with `DAPOConfig`'s own defaults (both additions on): the differences are listed, each
  with its reason, in `expectations.py`.

Test arguments override these defaults as usual (e.g. a test setting `loss_type` keeps it). On a machine without
a bf16-capable device, every variant's config also defaults to `bf16=False` (fp32): `GRPOConfig` defaults to bf16
mixed precision, which `TrainingArguments` refuses there.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from transformers.utils import is_torch_bf16_gpu_available
from trl import GRPOConfig, GRPOTrainer

from trl_ext import DAPOConfig, DAPOTrainer

UPSTREAM_FILE = Path(__file__).parent / "upstream" / "test_grpo_trainer.py"


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

# Module name of each loaded copy of the upstream tests -> its variant, read by the copy's import shim.
_VARIANT_OF_MODULE: dict[str, str] = {}


def config_and_trainer_for(module_name: str) -> tuple[type, type]:
    """The `(GRPOConfig, GRPOTrainer)` pair the upstream copy named `module_name` is to test."""
    return VARIANTS[_VARIANT_OF_MODULE[module_name]]


def variant_module_name(variant: str) -> str:
    return f"{__package__}.upstream.test_grpo_trainer__{variant}"


def load_upstream_suite(variant: str) -> dict[str, type]:
    """Execute the upstream tests for `variant`; returns their test classes, to be placed in a collected module."""
    module_name = variant_module_name(variant)
    if module_name not in sys.modules:
        _VARIANT_OF_MODULE[module_name] = variant
        spec = importlib.util.spec_from_file_location(module_name, UPSTREAM_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    module = sys.modules[module_name]
    return {name: value for name, value in vars(module).items() if name.startswith("Test") and isinstance(value, type)}
