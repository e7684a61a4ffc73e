"""GMPO (TRL's experimental `GMPOTrainer`) with dynamic sampling and the adaptive mode, through the same sampler and
bridge as `DAPOTrainer` and `GSPOTrainer`.

TRL's `GMPOTrainer` (arXiv 2507.20673, the geometric mean of the token ratios) changes only `_compute_loss`, which it
writes in full; the bridge's own `_compute_loss` wraps whatever comes next in the method order and calls it, so
placing `DynamicSamplingTrainer` before `GMPOTrainer` composes the two without copying either. Off by default:
`GMPOConfig(dynamic_sampling=False)` trains exactly as TRL's GMPO.

    from trl_ext.trainers.gmpo import GMPOConfig, GMPOTrainer   # instead of trl.experimental.gmpo
    GMPOConfig(output_dir="out", dynamic_sampling=True, dynamic_sampling_mode="adaptive")
"""

from __future__ import annotations

from dataclasses import dataclass

from trl.experimental.gmpo import GMPOConfig as TRLGMPOConfig
from trl.experimental.gmpo import GMPOTrainer as TRLGMPOTrainer

from .dynamic_sampling_trainer import DynamicSamplingTrainer
from .sampling_arguments import DynamicSamplingArguments, documents_dynamic_sampling


@documents_dynamic_sampling
@dataclass
class GMPOConfig(DynamicSamplingArguments, TRLGMPOConfig):
    """
    TRL's experimental `GMPOConfig` with the `dynamic_sampling*` fields of `DAPOConfig` (dynamic sampling off by
    default).

    Parameters:
    """


class GMPOTrainer(DynamicSamplingTrainer, TRLGMPOTrainer):
    """TRL's experimental `GMPOTrainer`, able to sample dynamically (or adaptively) as `DAPOTrainer` does; the same
    constructor. `args` must be this module's `GMPOConfig`."""

    _tag_names = ["trl", "gmpo", "trl-ext"]

    def __init__(self, model, reward_funcs, args=None, **kwargs):
        if args is not None and not isinstance(args, GMPOConfig):
            raise TypeError(
                f"trl_ext's GMPOTrainer needs trl_ext.trainers.gmpo.GMPOConfig, got {type(args).__name__}: it holds "
                "the dynamic_sampling fields (same arguments as TRL's GMPOConfig)."
            )
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path
            args = GMPOConfig(f"{name.split('/')[-1]}-GMPO")
        super().__init__(model, reward_funcs, args=args, **kwargs)
