"""The helpers TRL's GRPO tests import from TRL's own `tests/testing_utils.py`, written for this machine.

Each `require_*` decorator skips a test when its dependency or hardware is missing here. Skip reasons start with
"GPU:", "vLLM:" or "package:" so RESULTS.md can count skips by cause.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class TrlTestCase:
    """Gives each test method `self.tmp_dir`, a fresh temporary directory (TRL's tests write checkpoints there)."""

    @pytest.fixture(autouse=True)
    def set_tmp_dir(self, tmp_path):
        self.tmp_dir = str(tmp_path)


def is_ampere_or_newer(device_index: int = 0) -> bool:
    if not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability(device_index)
    return major >= 8


_has_accelerator = torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())

require_torch_accelerator = pytest.mark.skipif(not _has_accelerator, reason="GPU: needs a CUDA or XPU device")
# Liger's kernels are Triton kernels: they need a GPU even where the package installs.
require_liger_kernel = pytest.mark.skipif(
    not (_installed("liger_kernel") and _has_accelerator), reason="GPU: Liger kernels need liger-kernel and a GPU"
)
require_kernels = pytest.mark.skipif(
    not (_installed("kernels") and _has_accelerator), reason="GPU: Hub kernels need `kernels` and a GPU"
)
require_bitsandbytes = pytest.mark.skipif(
    not (_installed("bitsandbytes") and _has_accelerator), reason="GPU: 4/8-bit quantisation tests need a GPU"
)
require_vllm = pytest.mark.skipif(not _installed("vllm"), reason="vLLM: vllm is not installed")
require_peft = pytest.mark.skipif(not _installed("peft"), reason="package: peft is not installed")
require_jmespath = pytest.mark.skipif(not _installed("jmespath"), reason="package: jmespath is not installed")
require_vision = pytest.mark.skipif(not _installed("PIL"), reason="package: Pillow is not installed")
