"""Configuration for `DAPOTrainer`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from .sampling_arguments import DYNAMIC_SAMPLING_METADATA, DynamicSamplingArguments, documents_dynamic_sampling


@documents_dynamic_sampling
@dataclass
class DAPOConfig(DynamicSamplingArguments, GRPOConfig):
    r"""
    Configuration class for the [`DAPOTrainer`]: a [`~trl.GRPOConfig`] whose defaults are DAPO's
    ([arXiv 2503.14476](https://huggingface.co/papers/2503.14476)), plus the settings of the two techniques TRL
    lacks: dynamic sampling and built-in soft overlong punishment.

    DAPO's four techniques map to these settings: clip-higher (`epsilon=0.2`, `epsilon_high=0.28`), dynamic sampling
    (`dynamic_sampling=True`), token-level policy-gradient loss (`loss_type="dapo"`), overlong reward shaping
    (`soft_overlong_punishment=True`; overlong *filtering* stays TRL's `mask_truncated_completions`, off by default
    because a masked truncated completion would never feel the punishment). The KL term is off (`beta=0.0`) and
    advantages are normalised per group (`scale_rewards="group"`). The dynamic-sampling parameters, shared with
    [`GSPOConfig`], are listed last.

    Parameters:
        > Parameters that control overlong reward shaping

        soft_overlong_punishment (`bool`, *optional*, defaults to `True`):
            Add DAPO's soft overlong punishment to the reward, computed from completion token lengths with
            `L_max = max_completion_length`, and logged as the reward `soft_overlong_punishment`.
        overlong_buffer_length (`int` or `None`, *optional*, defaults to `None`):
            The punishment buffer `L_cache`: completions longer than `max_completion_length - overlong_buffer_length`
            tokens are punished linearly, down to -1 at `max_completion_length`. `None` uses 20% of
            `max_completion_length` (the paper's 4,096 of 20,480).
        overlong_penalty_factor (`float`, *optional*, defaults to `1.0`):
            Weight of the punishment in the summed reward.
    """

    # DAPO's defaults for fields inherited from GRPOConfig
    epsilon_high: float | None = field(
        default=0.28,
        metadata={"help": "Upper-bound epsilon for clipping (clip-higher). DAPO uses 0.28 with a lower bound of 0.2."},
    )

    # Dynamic sampling is DAPO's: on by default (the other dynamic_sampling_* fields come from the mixin)
    dynamic_sampling: bool = field(default=True, metadata=DYNAMIC_SAMPLING_METADATA)

    # Overlong reward shaping
    soft_overlong_punishment: bool = field(
        default=True,
        metadata={"help": "Add DAPO's soft overlong punishment to the reward (L_max = max_completion_length)."},
    )
    overlong_buffer_length: int | None = field(
        default=None,
        metadata={
            "help": "Punishment buffer L_cache in tokens. `None`: 20% of `max_completion_length` (the paper's "
            "4,096 of 20,480)."
        },
    )
    overlong_penalty_factor: float = field(
        default=1.0,
        metadata={"help": "Weight of the soft overlong punishment in the summed reward."},
    )

    def __post_init__(self):
        super().__post_init__()  # GRPOConfig's, then the dynamic-sampling fields' validation
        self._validate_overlong_shaping()

    @property
    def updates_per_generation(self) -> int:
        """Optimiser updates between two generation batches (at least 1): TRL generates every
        `steps_per_generation * num_iterations` micro-steps and updates every `gradient_accumulation_steps`."""
        return self._whole_updates_per_generation()

    def _validate_overlong_shaping(self):
        if not self.soft_overlong_punishment:
            return
        if self.max_completion_length is None:
            raise ValueError(
                "soft_overlong_punishment=True punishes completions near max_completion_length, which is None. Set "
                "max_completion_length (DAPO's L_max, in tokens), or set soft_overlong_punishment=False."
            )
        if self.multi_objective_aggregation == "normalize_then_sum":
            raise ValueError(
                "multi_objective_aggregation='normalize_then_sum' normalises every reward within its group, which "
                "scales the soft overlong punishment (a small length penalty) up to the size of the accuracy reward "
                "and can erase the learning signal. Use multi_objective_aggregation='sum_then_normalize' (DAPO's: "
                "the punishment is added to the reward), or set soft_overlong_punishment=False."
            )
        if self.overlong_buffer_length is None:
            self.overlong_buffer_length = max(1, round(0.2 * self.max_completion_length))
        if not 0 < self.overlong_buffer_length <= self.max_completion_length:
            raise ValueError(
                f"overlong_buffer_length must be between 1 and max_completion_length={self.max_completion_length}, "
                f"got {self.overlong_buffer_length}. Lower it, or set soft_overlong_punishment=False."
            )
        if self.overlong_penalty_factor < 0:
            raise ValueError(
                f"overlong_penalty_factor must be non-negative (it weighs a penalty), got {self.overlong_penalty_factor}."
            )
