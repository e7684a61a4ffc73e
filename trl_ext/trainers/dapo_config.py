"""Configuration for `DAPOTrainer`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

ON_EXHAUSTED_CHOICES = ("warn", "raise")


@dataclass
class DAPOConfig(GRPOConfig):
    r"""
    Configuration class for the [`DAPOTrainer`]: a [`~trl.GRPOConfig`] whose defaults are DAPO's
    ([arXiv 2503.14476](https://huggingface.co/papers/2503.14476)), plus the settings of the two techniques TRL
    lacks: dynamic sampling and built-in soft overlong punishment.

    DAPO's four techniques map to these settings: clip-higher (`epsilon=0.2`, `epsilon_high=0.28`), dynamic sampling
    (`dynamic_sampling=True`), token-level policy-gradient loss (`loss_type="dapo"`), overlong reward shaping
    (`soft_overlong_punishment=True`; overlong *filtering* stays TRL's `mask_truncated_completions`, off by default
    because a masked truncated completion would never feel the punishment). The KL term is off (`beta=0.0`) and
    advantages are normalised per group (`scale_rewards="group"`).

    Parameters:
        > Parameters that control dynamic sampling

        dynamic_sampling (`bool`, *optional*, defaults to `True`):
            Drop every prompt group whose filter reward has zero variance (all completions equally right or wrong:
            zero advantage, no gradient) and generate for fresh prompts until the batch holds only informative
            groups. Evaluation is never filtered.
        dynamic_sampling_filter_reward (`str` or `None`, *optional*, defaults to `None`):
            Name of the reward function that decides whether a group is informative, as it appears in the metric
            `rewards/<name>/mean` (e.g. the accuracy reward). `None` uses the weighted sum of all reward functions
            except the soft overlong punishment, so a length penalty never makes an all-correct group look
            informative.
        dynamic_sampling_max_rounds (`int`, *optional*, defaults to `10`):
            Most generation rounds per batch (the first round included) before giving up on filling it.
        dynamic_sampling_on_exhausted (`str`, *optional*, defaults to `"warn"`):
            What happens when the rounds run out with too few informative groups: `"warn"` logs a warning, sets the
            metric `dynamic_sampling/rounds_exhausted` and completes the batch with uninformative groups whose
            advantage is set to zero (they add no gradient); `"raise"` stops training with an error.
        dynamic_sampling_confidence (`float`, *optional*, defaults to `0.95`):
            Adaptive over-sampling: each round requests enough prompts to fill the batch on every process with this
            probability, given the keep rate estimated from recent rounds. Higher means fewer rounds and more
            generated sequences.
        dynamic_sampling_max_oversampling (`float`, *optional*, defaults to `8.0`):
            One round generates for at most this many times the per-process prompt batch, which bounds the memory of
            a generation round when the keep rate is low. When the recent rounds show (almost) no informative group,
            so that no amount of over-sampling can fill a batch, dynamic sampling backs off to one plain round per
            step until informative groups reappear (metric `dynamic_sampling/backoff`).
        dynamic_sampling_max_skip_probability (`float`, *optional*, defaults to `0.0`):
            Prompt history (selective rollout, as in GRESO, arXiv 2506.02177): a prompt whose last `k` groups were
            all uninformative (all right or all wrong) is not generated for with probability `1 - 0.5**k`, at most
            this value, so every prompt keeps a chance to come back. Skipped prompts are replaced by fresh ones
            before generation (metric `dynamic_sampling/prompts_skipped`). `0` (the default) turns the history off:
            on the built-in task it lowered final pass@1 without saving tokens (`benchmarks/RESULTS.md`); 0.9 is
            the value to try.
        dynamic_sampling_carry_max_staleness (`int` or `None`, *optional*, defaults to `None`):
            Surplus informative groups (beyond what the batch needs) are carried to the next generation batch instead
            of being discarded, with the log-probabilities of the policy that generated them, so their importance
            ratio stays right; the next batch uses them first and generates only for what they leave open. A carried
            group is dropped once it lags the policy by more than this many optimiser updates. `None` (the default)
            lets a group wait for the next generation batch: 1 update when every optimiser step generates,
            `steps_per_generation * num_iterations / gradient_accumulation_steps` updates when a rollout feeds
            several. With vLLM's importance-sampling correction (TRL's default with `use_vllm=True`), a carried row
            keeps the log-probs vLLM returned when it sampled the row, and TRL corrects it from them to the current
            policy, as it corrects fresh rows. `0` discards surplus groups. On the built-in task
            carrying generated 24% fewer tokens per step and reached the accuracy target with 16% fewer tokens
            (`benchmarks/RESULTS.md`).
        dynamic_sampling_carry_max_groups (`int` or `None`, *optional*, defaults to `None`):
            Most groups carried per process; `None`: one per-process batch of groups.

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

    # Dynamic sampling
    dynamic_sampling: bool = field(
        default=True,
        metadata={
            "help": "Drop prompt groups whose filter reward has zero variance and generate for fresh prompts until "
            "the batch holds only informative groups. Evaluation is never filtered."
        },
    )
    dynamic_sampling_filter_reward: str | None = field(
        default=None,
        metadata={
            "help": "Name of the reward function that decides whether a group is informative (as in the metric "
            "`rewards/<name>/mean`). `None`: the weighted sum of all reward functions but the overlong punishment."
        },
    )
    dynamic_sampling_max_rounds: int = field(
        default=10,
        metadata={"help": "Most generation rounds per batch, the first included, before giving up on filling it."},
    )
    dynamic_sampling_on_exhausted: str = field(
        default="warn",
        metadata={
            "help": "When rounds run out: 'warn' (warning, metric `dynamic_sampling/rounds_exhausted`, batch "
            "completed with zero-advantage groups) or 'raise' (stop with an error).",
            "choices": list(ON_EXHAUSTED_CHOICES),
        },
    )
    dynamic_sampling_confidence: float = field(
        default=0.95,
        metadata={
            "help": "Each round requests enough prompts to fill the batch on every process with this probability, "
            "given the keep rate estimated from recent rounds."
        },
    )
    dynamic_sampling_max_oversampling: float = field(
        default=8.0,
        metadata={"help": "A round generates for at most this many times the per-process prompt batch."},
    )

    dynamic_sampling_max_skip_probability: float = field(
        default=0.0,
        metadata={
            "help": "Skip, before generation, prompts whose recent groups were all right or all wrong, with a "
            "probability rising with their streak up to this value (0, the default, turns prompt history off)."
        },
    )

    dynamic_sampling_carry_max_staleness: int | None = field(
        default=None,
        metadata={
            "help": "Carry surplus informative groups to the next generation batch, dropped once they lag the policy "
            "by more than this many optimiser updates (0: discard them). None, the default: until the next "
            "generation batch."
        },
    )
    dynamic_sampling_carry_max_groups: int | None = field(
        default=None,
        metadata={"help": "Most surplus groups carried per process. None: one per-process batch of groups."},
    )

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
        super().__post_init__()
        self._validate_dynamic_sampling()
        self._validate_overlong_shaping()

    @property
    def updates_per_generation(self) -> int:
        """Optimiser updates between two generation batches (at least 1): TRL generates every
        `steps_per_generation * num_iterations` micro-steps and updates every `gradient_accumulation_steps`."""
        micro_steps = self.steps_per_generation * self.num_iterations
        return max(1, -(-micro_steps // self.gradient_accumulation_steps))

    def _validate_dynamic_sampling(self):
        if self.dynamic_sampling_max_rounds < 1:
            raise ValueError(f"dynamic_sampling_max_rounds must be at least 1, got {self.dynamic_sampling_max_rounds}.")
        if self.dynamic_sampling_on_exhausted not in ON_EXHAUSTED_CHOICES:
            raise ValueError(
                f"dynamic_sampling_on_exhausted must be one of {list(ON_EXHAUSTED_CHOICES)}, got "
                f"{self.dynamic_sampling_on_exhausted!r}."
            )
        if not 0.0 < self.dynamic_sampling_confidence < 1.0:
            raise ValueError(
                f"dynamic_sampling_confidence must be strictly between 0 and 1, got {self.dynamic_sampling_confidence}."
            )
        if self.dynamic_sampling_max_oversampling < 1.0:
            raise ValueError(
                "dynamic_sampling_max_oversampling must be at least 1.0 (one round generates at least the normal "
                f"batch), got {self.dynamic_sampling_max_oversampling}."
            )
        if not 0.0 <= self.dynamic_sampling_max_skip_probability < 1.0:
            raise ValueError(
                "dynamic_sampling_max_skip_probability must be in [0, 1) (a skipped prompt must keep a chance to come "
                f"back; 0 turns prompt history off), got {self.dynamic_sampling_max_skip_probability}."
            )
        per_process_batch = self.generation_batch_size // self.world_size
        if self.dynamic_sampling_carry_max_staleness is None:
            self.dynamic_sampling_carry_max_staleness = self.updates_per_generation
        if self.dynamic_sampling_carry_max_staleness < 0:
            raise ValueError(
                "dynamic_sampling_carry_max_staleness must be at least 0 (0 discards surplus groups), got "
                f"{self.dynamic_sampling_carry_max_staleness}."
            )
        if self.dynamic_sampling_carry_max_groups is None:
            self.dynamic_sampling_carry_max_groups = per_process_batch // self.num_generations
        if self.dynamic_sampling_carry_max_groups < 0:
            raise ValueError(
                f"dynamic_sampling_carry_max_groups must be at least 0, got {self.dynamic_sampling_carry_max_groups}."
            )
        if self.dynamic_sampling and per_process_batch % self.num_generations:
            raise ValueError(
                f"With dynamic sampling, the per-process generation batch ({per_process_batch} completions = "
                f"per_device_train_batch_size={self.per_device_train_batch_size} x "
                f"steps_per_generation={self.steps_per_generation}) must be a multiple of "
                f"num_generations={self.num_generations}, so that every prompt group lives on one process. Change "
                "per_device_train_batch_size, steps_per_generation or num_generations accordingly."
            )

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
