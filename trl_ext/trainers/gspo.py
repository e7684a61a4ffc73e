"""GSPO: Group Sequence Policy Optimization (Qwen team, arXiv 2507.18071), with the paper's defaults.

TRL already computes GSPO's sequence ratio (`importance_sampling_level="sequence"`). What it lacks, and what this
module adds: defaults that give the paper's objective (per-sequence averaging, the tiny sequence-level clip range,
off-policy mini-batch updates), checks that refuse configurations where GSPO silently degenerates, GSPO-token,
and sequence-ratio metrics.
"""

from __future__ import annotations

import inspect
import textwrap
import warnings
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import get_config_model_id, nanmax, nanmin

from ..objectives import (
    gspo_token_old_logps,
    sequence_clip_fractions,
    sequence_log_ratio,
)
from .dataset_checks import check_dataset, resolve_reward_names
from .dynamic_sampling_trainer import DynamicSamplingTrainer
from .sampling_arguments import DynamicSamplingArguments, documents_dynamic_sampling

# The paper splits each rollout batch into 4 mini-batches, one optimiser update each.
PAPER_UPDATES_PER_ROLLOUT = 4

# Importance-sampling levels GSPOConfig accepts: GSPO's sequence ratio, and GSPO-token's.
GSPO_LEVELS = ("sequence", "sequence_token")

# Losses that sum per-token terms, so a sequence ratio ends up weighted by the completion's length.
LENGTH_WEIGHTED_LOSSES = ("dapo", "bnpo", "dr_grpo", "cispo", "luspo")

# s_i is a geometric mean of token ratios and typically stays within ~1e-3 of 1; a clip range this wide (a
# token-level habit such as GRPO's 0.2) almost never binds at the sequence level.
WIDE_SEQUENCE_EPSILON = 0.05


@documents_dynamic_sampling
@dataclass
class GSPOConfig(DynamicSamplingArguments, GRPOConfig):
    r"""
    Configuration class for the [`GSPOTrainer`].

    Every [`~trl.GRPOConfig`] argument is accepted; only the defaults below differ, and `__post_init__` refuses
    configurations in which the objective would not be GSPO's. Dynamic sampling, as in [`DAPOConfig`], is off by
    default and turned on with `dynamic_sampling=True`; its parameters, the same as `DAPOConfig`'s, are listed last.

    Parameters:
        > Parameters that control the GSPO objective

        importance_sampling_level (`str`, *optional*, defaults to `"sequence"`):
            `"sequence"`: GSPO. One ratio per completion, the geometric mean of its token ratios,
            `s_i = exp(1/|o_i| · Σ_t log(π_θ(o_t)/π_old(o_t)))`, clipped and multiplied by the sequence advantage.
            `"sequence_token"`: GSPO-token. Ratio `sg[s_i] · π_θ(o_t)/sg[π_θ(o_t)]` for each token: the same value
            as `s_i` (so the same clipping), and the same gradient as GSPO when every token of a completion has the
            same advantage, but it also accepts per-token advantages of shape `(B, T)`. `"token"` (GRPO's ratio)
            is refused: use [`~trl.GRPOConfig`] for it.
        loss_type (`str`, *optional*, defaults to `"grpo"`):
            How per-completion terms are averaged. GSPO needs `"grpo"`: each completion's term is averaged over its
            own tokens, then completions are averaged, so every completion weighs the same whatever its length.
            `"dapo"`, `"bnpo"`, `"dr_grpo"`, `"cispo"` and `"luspo"` sum token terms and so weight each sequence by
            its length; they are refused, as is any other loss that is not GSPO's clipped objective.
        epsilon (`float`, *optional*, defaults to `3e-4`):
            Lower clip range ε_low of the sequence ratio, as in the paper. Because `s_i` is length-normalised it
            stays close to 1, so the range is three orders of magnitude smaller than GRPO's token-level 0.2; a value
            of 0.05 or more triggers a warning, since it would almost never clip.
        epsilon_high (`float`, *optional*, defaults to `4e-4`):
            Upper clip range ε_high of the sequence ratio, as in the paper.
        beta (`float`, *optional*, defaults to `0.0`):
            KL coefficient. The paper uses no KL penalty, and with `0.0` no reference model is loaded.

        > Parameters that control how each rollout batch is used

        steps_per_generation (`int`, *optional*):
            Micro-batches taken from each generated batch. In TRL one trainer step consumes one micro-batch, an
            optimiser update happens every `gradient_accumulation_steps` micro-batches, and completions are
            regenerated every `steps_per_generation × num_iterations` micro-batches. So each rollout batch feeds
            `steps_per_generation × num_iterations / gradient_accumulation_steps` optimiser updates. If neither
            this nor `generation_batch_size` is set, GSPO uses `4 × gradient_accumulation_steps`: one rollout batch
            of `4 × per_device_train_batch_size × num_processes × gradient_accumulation_steps` completions, split
            into the paper's 4 mini-batches, one update each. Updates 2 to 4 use completions sampled by an older
            policy, so `s_i ≠ 1` and clipping can act; TRL notices that generation and updates are misaligned and
            computes the old log-probabilities `π_old` at generation time. (TRL's own default,
            `gradient_accumulation_steps`, gives one on-policy update per rollout, where `s_i ≡ 1`.)
            A value for which every update is on-policy (`gradient_accumulation_steps` is a multiple of
            `steps_per_generation × num_iterations`) is refused.
    """

    importance_sampling_level: str = field(
        default="sequence",
        metadata={
            "help": "`'sequence'` for GSPO (one length-normalised ratio per completion) or `'sequence_token'` for "
            "GSPO-token (ratio sg[s_i]·π_θ(o_t)/sg[π_θ(o_t)], which also accepts per-token advantages). "
            "`'token'` is GRPO's ratio and is refused: use GRPOConfig for it.",
            "choices": list(GSPO_LEVELS),
        },
    )
    loss_type: str = field(
        default="grpo",
        metadata={
            "help": "Must be `'grpo'`: average each completion's term over its tokens, then over completions, so "
            "every completion weighs the same. Token-sum losses (`'dapo'`, `'bnpo'`, `'dr_grpo'`, `'cispo'`, "
            "`'luspo'`) would weight each sequence by its length and are refused."
        },
    )
    epsilon: float = field(
        default=3e-4,
        metadata={"help": "Lower clip range of the sequence ratio (the paper's 3e-4)."},
    )
    epsilon_high: float | None = field(
        default=4e-4,
        metadata={"help": "Upper clip range of the sequence ratio (the paper's 4e-4)."},
    )
    beta: float = field(
        default=0.0,
        metadata={"help": "KL coefficient. The paper uses none; with 0.0 no reference model is loaded."},
    )
    steps_per_generation: int | None = field(
        default=None,
        metadata={
            "help": "Micro-batches taken from each generated batch. If unset (and `generation_batch_size` is "
            "unset too), 4 × gradient_accumulation_steps: each rollout batch is split into the paper's 4 "
            "optimiser updates, so later updates are off-policy and the sequence ratio can be clipped."
        },
    )

    def __post_init__(self):
        if self.steps_per_generation is None and self.generation_batch_size is None:
            self.steps_per_generation = PAPER_UPDATES_PER_ROLLOUT * self.gradient_accumulation_steps
        super().__post_init__()
        self._check_gspo_objective()

    @property
    def updates_per_generation(self) -> float:
        """Optimiser updates fed by each rollout batch (fractional when generation is not aligned with updates)."""
        return self.steps_per_generation * self.num_iterations / self.gradient_accumulation_steps

    def _check_gspo_objective(self) -> None:
        if self.importance_sampling_level not in GSPO_LEVELS:
            raise ValueError(
                f"GSPOConfig: importance_sampling_level={self.importance_sampling_level!r} is not GSPO. Set it to "
                "'sequence' (GSPO) or 'sequence_token' (GSPO-token); for token-level ratios use GRPOConfig."
            )
        if self.loss_type in LENGTH_WEIGHTED_LOSSES:
            raise ValueError(
                f"GSPOConfig: loss_type={self.loss_type!r} sums per-token terms, which weights each sequence ratio "
                "by the completion's length instead of giving every completion the same weight. Set "
                "loss_type='grpo' (the default)."
            )
        if self.loss_type != "grpo":
            raise ValueError(
                f"GSPOConfig: loss_type={self.loss_type!r} is not GSPO's clipped objective. Set loss_type='grpo' "
                "(the default), or use GRPOConfig with importance_sampling_level='sequence' for other losses."
            )
        if self.importance_sampling_level == "sequence" and self.top_entropy_quantile < 1.0:
            raise ValueError(
                f"GSPOConfig: top_entropy_quantile={self.top_entropy_quantile} keeps only high-entropy tokens in the "
                "loss, but with importance_sampling_level='sequence' every token of a completion shares one ratio, so "
                "the token mask only rescales each sequence's term instead of selecting tokens. Set "
                "importance_sampling_level='sequence_token' (GSPO-token, whose per-token terms the mask selects), or "
                "top_entropy_quantile=1.0."
            )
        generate_every = self.steps_per_generation * self.num_iterations
        if self.gradient_accumulation_steps % generate_every == 0:
            raise ValueError(
                f"GSPOConfig: steps_per_generation ({self.steps_per_generation}) × num_iterations "
                f"({self.num_iterations}) divides gradient_accumulation_steps ({self.gradient_accumulation_steps}), "
                "so every optimiser update uses completions from the current policy: the sequence ratio is "
                "identically 1 and clipping never acts. Leave steps_per_generation and generation_batch_size unset "
                f"(GSPO then uses {PAPER_UPDATES_PER_ROLLOUT} × gradient_accumulation_steps), or set "
                "steps_per_generation to a multiple of gradient_accumulation_steps larger than it, or num_iterations "
                "> 1."
            )
        widest = max(self.epsilon, self.epsilon_high if self.epsilon_high is not None else self.epsilon)
        if widest >= WIDE_SEQUENCE_EPSILON:
            warnings.warn(
                f"GSPOConfig: epsilon={self.epsilon}, epsilon_high={self.epsilon_high} is a token-level clip range. "
                "The sequence ratio typically stays within about 1e-3 of 1, so this range will almost never clip. "
                "The paper uses epsilon=3e-4, epsilon_high=4e-4 (the defaults).",
                UserWarning,
                stacklevel=3,
            )


class GSPOTrainer(DynamicSamplingTrainer):
    """[`~trl.GRPOTrainer`] optimising GSPO or GSPO-token, configured by a [`GSPOConfig`].

    Takes the same arguments as `GRPOTrainer`; `args` must be a `GSPOConfig` (or `None` for its defaults).

    With `dynamic_sampling=True` in the config, training batches are filled with informative groups by the same
    sampler as [`DAPOTrainer`]'s, with the same settings and the same `dynamic_sampling/*` metrics; carried groups
    keep the log-probabilities of the policy that generated them, so their sequence ratio `s_i` is taken against
    it. Off (the default), GSPOTrainer trains on TRL's batches as they come. Either way, a completion that every
    judging reward scored `None` is left out of the advantages, whatever shaping rewards (length, repetition) add.

    GSPO itself is TRL's sequence-level ratio under the config's defaults. GSPO-token reuses TRL's token-level loss
    unchanged: the one thing that differs is the baseline the ratio divides by. `_compute_loss` hands its inputs to
    the policy forward (`_get_per_token_logps_and_entropies`), which, once it has π_θ's log-probabilities, rewrites
    `old_per_token_logps` to `sg[log π_θ] - sg[log s_i]` (see `trl_ext.objectives.gspo_token_old_logps`); TRL's
    token log-ratio then equals GSPO-token's in value and gradient. TRL reads the old log-probabilities only after
    that forward, and never uses them for anything but the ratio and the off-policy mask (whose per-sequence mean
    log-ratio is unchanged by the re-basing).

    Logged metrics, per micro-batch, gathered across processes, completions without counted tokens left out:
    `gspo/seq_ratio/mean`, `gspo/seq_ratio/min`, `gspo/seq_ratio/max` (the sequence ratio `s_i`) and
    `gspo/clip_ratio/low`, `gspo/clip_ratio/high` (fraction of sequences whose objective is clipped below, with a
    negative advantage, or above, with a positive one).
    """

    _tag_names = ["trl", "grpo", "gspo", "trl-ext"]
    _name = "GSPO"
    _paper = {
        "title": "Group Sequence Policy Optimization",
        "id": "2507.18071",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @article{zheng2025group,
                title        = {{Group Sequence Policy Optimization}},
                author       = {Chujie Zheng and Shixuan Liu and Mingze Li and Xiong-Hui Chen and Bowen Yu and Chang Gao and Kai Dang and Yuqiong Liu and Rui Men and An Yang and Jingren Zhou and Junyang Lin},
                year         = 2025,
                eprint       = {arXiv:2507.18071},
            }"""),
    }

    def __init__(self, model, reward_funcs=None, args: GSPOConfig | None = None, *trainer_args, **trainer_kwargs):
        if args is None:
            model_name = model if isinstance(model, str) else get_config_model_id(model.config)
            args = GSPOConfig(f"{model_name.split('/')[-1]}-GSPO")
        if not isinstance(args, GSPOConfig):
            raise TypeError(
                f"GSPOTrainer: args is a {type(args).__name__}; pass a GSPOConfig, whose defaults and checks make "
                "the objective GSPO's (e.g. GSPOConfig(output_dir=...), with any GRPOConfig argument)."
            )
        # Inputs of the `_compute_loss` call in progress, read by the policy forward it makes first.
        self._loss_inputs: dict | None = None
        reward_funcs = resolve_reward_names(reward_funcs)
        train_dataset = trainer_kwargs.get("train_dataset", trainer_args[0] if trainer_args else None)
        check_dataset(reward_funcs if isinstance(reward_funcs, list) else [reward_funcs], train_dataset)
        super().__init__(model, reward_funcs, args, *trainer_args, **trainer_kwargs)
        if args.importance_sampling_level == "sequence_token":
            # TRL computes the token-level ratio; the re-based old log-probabilities make it GSPO-token's.
            self.importance_sampling_level = "token"

    __init__.__signature__ = inspect.signature(GRPOTrainer.__init__)

    # Both overrides below wrap the bridge's (`DynamicSamplingBridge`, next in the MRO), which, for a batch holding
    # carried groups, gives fresh rows their old log-probs from this same training forward: `super()` runs first, so
    # those are in place before the sequence ratios are logged and GSPO-token re-bases them.

    def _compute_loss(self, model, inputs):
        # Copy: the buffered batch is reused by later steps and must keep the true old log-probabilities.
        inputs = dict(inputs)
        self._loss_inputs = inputs
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._loss_inputs = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        outputs = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        )
        # Only the first forward inside `_compute_loss` is the policy's; generation-time forwards see None.
        loss_inputs, self._loss_inputs = self._loss_inputs, None
        if loss_inputs is not None:
            self._use_policy_logps(outputs[0], loss_inputs)
        return outputs

    def _use_policy_logps(self, per_token_logps: torch.Tensor, inputs: dict) -> None:
        """Log the sequence-ratio metrics and, for GSPO-token, re-base `inputs["old_per_token_logps"]`."""
        per_token_logps = per_token_logps.detach()
        # The same mask TRL's loss uses.
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        old_per_token_logps = inputs.get("old_per_token_logps")
        if old_per_token_logps is None:  # TRL skips computing π_old when updates are on-policy
            old_per_token_logps = per_token_logps
        self._log_sequence_ratios(per_token_logps, old_per_token_logps, mask, inputs["advantages"])
        if self.args.importance_sampling_level == "sequence_token":
            inputs["old_per_token_logps"] = gspo_token_old_logps(per_token_logps, old_per_token_logps, mask)

    def _log_sequence_ratios(self, per_token_logps, old_per_token_logps, mask, advantages) -> None:
        has_tokens = mask.sum(-1) > 0
        ratio = sequence_log_ratio(per_token_logps, old_per_token_logps, mask).exp()
        ratio = torch.where(has_tokens, ratio, torch.full_like(ratio, float("nan")))
        clipped_low, clipped_high = sequence_clip_fractions(
            ratio, advantages, mask, self.epsilon_low, self.epsilon_high
        )
        ratio, clipped_low, clipped_high = self.accelerator.gather((ratio, clipped_low, clipped_high))
        metrics = self._metrics["train" if self.model.training else "eval"]
        metrics["gspo/seq_ratio/mean"].append(torch.nanmean(ratio).item())
        metrics["gspo/seq_ratio/min"].append(nanmin(ratio).item())
        metrics["gspo/seq_ratio/max"].append(nanmax(ratio).item())
        metrics["gspo/clip_ratio/low"].append(torch.nanmean(clipped_low).item())
        metrics["gspo/clip_ratio/high"].append(torch.nanmean(clipped_high).item())
