"""The `dynamic_sampling*` configuration fields, shared by every config whose trainer can sample dynamically.

`DynamicSamplingArguments` is a dataclass mixin: a config lists it before `GRPOConfig` in its bases
(`class DAPOConfig(DynamicSamplingArguments, GRPOConfig)`) and gets the fields, their command-line help, their
validation in `__post_init__`, and their "Parameters:" entries in its docstring (`documents_dynamic_sampling`).
A new `dynamic_sampling_*` field goes here, with its entry in `_PARAMETER_DOCS`, and nowhere else.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field, fields

ON_EXHAUSTED_CHOICES = ("warn", "raise")
MODE_CHOICES = ("filter", "adaptive")
# `dynamic_sampling_max_skip_probability` when left at None: the prompt history is off in DAPO's mode, and the
# estimate skip's cap is 0.9 in the adaptive mode.
DEFAULT_MAX_SKIP_PROBABILITY = {"filter": 0.0, "adaptive": 0.9}
# `dynamic_sampling_pilot_size` when left at None in the adaptive mode with num_generations >= 4.
DEFAULT_PILOT_SIZE = 2

# Metadata of the `dynamic_sampling` switch, for a config that redeclares it with its own default:
# `dynamic_sampling: bool = field(default=True, metadata=DYNAMIC_SAMPLING_METADATA)`.
DYNAMIC_SAMPLING_METADATA = {
    "help": "Drop prompt groups whose filter reward has zero variance and generate for fresh prompts until the "
    "batch holds only informative groups. Evaluation is never filtered."
}


# Field -> (type as the docstrings write it, description): the "Parameters:" entries of every config that mixes in
# `DynamicSamplingArguments`; `documents_dynamic_sampling` adds each config's own default.
_PARAMETER_DOCS = {
    "dynamic_sampling": (
        "bool",
        """Drop every prompt group whose filter reward has zero variance (all completions equally right or wrong:
        zero advantage, no gradient) and generate for fresh prompts until the batch holds only informative
        groups. Evaluation is never filtered.""",
    ),
    "dynamic_sampling_filter_reward": (
        "str` or `None",
        """Name of the reward function that decides whether a group is informative, as it appears in the metric
        `rewards/<name>/mean` (e.g. the accuracy reward). `None` uses the weighted sum of all reward functions
        except the shaping ones (the soft overlong punishment, repetition penalties), so a length penalty never
        makes an all-correct group look informative.""",
    ),
    "dynamic_sampling_max_rounds": (
        "int",
        """Most generation rounds per batch (the first round included) before giving up on filling it.""",
    ),
    "dynamic_sampling_on_exhausted": (
        "str",
        """What happens when the rounds run out with too few informative groups: `"warn"` logs a warning, sets the
        metric `dynamic_sampling/rounds_exhausted` and completes the batch with uninformative groups whose
        advantage is set to zero (they add no gradient); `"raise"` stops training with an error.""",
    ),
    "dynamic_sampling_confidence": (
        "float",
        """Adaptive over-sampling: each round requests enough prompts to fill the batch on every process with this
        probability, given the keep rate estimated from recent rounds. Higher means fewer rounds and more
        generated sequences.""",
    ),
    "dynamic_sampling_max_oversampling": (
        "float",
        """One round generates for at most this many times the per-process prompt batch, which bounds the memory of
        a generation round when the keep rate is low. When the recent rounds show (almost) no informative group,
        so that no amount of over-sampling can fill a batch, dynamic sampling backs off to one plain round per
        step until informative groups reappear (metric `dynamic_sampling/backoff`).""",
    ),
    "dynamic_sampling_mode": (
        "str",
        """`"filter"`: DAPO's dynamic sampling, exactly (drop zero-variance groups, refill). `"adaptive"`: spend
        generation where a prompt is still undecided (docs: DAPO > Adaptive sampling): per-prompt pass-rate
        beliefs from every completion sampled for it, a skip of prompts whose groups are predictably all-equal
        (capped by `dynamic_sampling_max_skip_probability`), and, with `dynamic_sampling_history_baseline`,
        advantages against the prompt's history, so that an all-wrong group of a prompt solved before still
        trains.""",
    ),
    "dynamic_sampling_max_skip_probability": (
        "float` or `None",
        """The most a prompt is skipped before generation, in [0, 1): every prompt keeps a chance to come back.
        Skipped prompts are replaced by fresh ones before generation (metric `dynamic_sampling/prompts_skipped`).
        In the `"filter"` mode this is the prompt history (selective rollout, as in GRESO, arXiv 2506.02177): a
        prompt whose last `k` groups were all uninformative is skipped with probability `1 - 0.5**k`, at most
        this value; in the `"adaptive"` mode, the estimate skip. `None` (the default): 0 in the `"filter"` mode
        (the history off: on the built-in task it lowered final pass@1 without saving tokens,
        `benchmarks/RESULTS.md`), 0.9 in the `"adaptive"` mode; `0` turns the skip off in either.""",
    ),
    "dynamic_sampling_history_baseline": (
        "bool",
        """Adaptive mode only: advantages `R_i - b_i`, where `b_i` is the mean of the prompt's earlier rewards
        (discounted) and of the group's other completions, without division by the std. It keeps the
        policy-gradient estimate unbiased, and a group whose rewards are all equal but differ from the prompt's
        history counts as informative. `False` keeps TRL's group-normalised advantages.""",
    ),
    "dynamic_sampling_history_decay": (
        "float",
        """Adaptive mode only: the weight, in [0, 1), of a prompt's earlier evidence each time it is sampled again
        (the pass-rate beliefs and the history baseline follow a policy that changes). 0 keeps only the last
        visit.""",
    ),
    "dynamic_sampling_pilot_size": (
        "int` or `None",
        """Adaptive mode only: each prompt of a round is first generated this many completions (the pilot); a
        prompt whose pilot is all-right or all-wrong gets its other `num_generations - pilot_size` completions only
        when the chance that they bring the missing outcome, per completion, is at least the recent yield of mixed
        groups per completion; otherwise it stops at the pilot (metric `dynamic_sampling/prompts_stopped`). Trained
        groups keep `num_generations` completions. `None` (the default): 2 in the `"adaptive"` mode when
        `num_generations >= 4`, else 0; `0` turns the pilot off. Needs generation that takes any number of rows per
        prompt: `transformers`, or vLLM in `"colocate"` mode; with vLLM's `"server"` mode (which asks vLLM for
        `num_generations` completions per prompt) or a `rollout_func` the default is 0 and a pilot is refused.""",
    ),
    "dynamic_sampling_extensions": (
        "int",
        """Adaptive mode with the pilot and the history baseline: how many more groups of `num_generations`
        completions a prompt whose group came out all-right or all-wrong may get in the same round, when the chance
        that they bring the missing outcome, counted over every slot of the group they would make informative, per
        completion, is at least the recent yield of mixed groups per completion (metric
        `dynamic_sampling/prompts_extended`). The prompt's completions then train as one group of variable size:
        each extension is a slot of `num_generations` rows, and the baseline runs over the whole group. `0` (the
        default) turns extensions off.""",
    ),
    "dynamic_sampling_carry_max_staleness": (
        "int` or `None",
        """Surplus informative groups (beyond what the batch needs) are carried to the next generation batch instead
        of being discarded, with the log-probabilities of the policy that generated them, so their importance
        ratio stays right; the next batch uses them first and generates only for what they leave open. A carried
        group is dropped once it lags the policy by more than this many optimiser updates. `None` (the default)
        lets a group wait for the next generation batch: 1 update when every optimiser step generates,
        `steps_per_generation * num_iterations / gradient_accumulation_steps` updates (rounded up) when a rollout
        feeds several. With vLLM's importance-sampling correction (TRL's default with `use_vllm=True`), a carried
        row keeps the log-probs vLLM returned when it sampled the row, and TRL corrects it from them to the current
        policy, as it corrects fresh rows. `0` discards surplus groups. On the built-in task carrying generated
        24% fewer tokens per step and reached the accuracy target with 16% fewer tokens
        (`benchmarks/RESULTS.md`).""",
    ),
    "dynamic_sampling_carry_max_groups": (
        "int` or `None",
        """Most groups carried per process; `None`: one per-process batch of groups.""",
    ),
}

_INDENT = " " * 8


def _default_text(value) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def dynamic_sampling_parameters(config_class: type) -> str:
    """The "Parameters:" group documenting the `dynamic_sampling*` fields of `config_class`, with its defaults, in
    TRL's layout (entries indented by 8 spaces, descriptions by 12)."""
    entries = [f"{_INDENT}> Parameters that control dynamic sampling", ""]
    for config_field in fields(config_class):
        if not config_field.name.startswith("dynamic_sampling"):
            continue
        if config_field.name not in _PARAMETER_DOCS:
            raise TypeError(f"The field {config_field.name} has no entry in {__name__}._PARAMETER_DOCS.")
        type_text, description = _PARAMETER_DOCS[config_field.name]
        default = _default_text(config_field.default)
        entries.append(f"{_INDENT}{config_field.name} (`{type_text}`, *optional*, defaults to `{default}`):")
        entries.extend(f"{_INDENT}    {line.strip()}" for line in description.splitlines())
    return "\n".join(entries)


def documents_dynamic_sampling(config_class: type) -> type:
    """Class decorator: append the dynamic-sampling "Parameters:" group to a config's docstring, whose last section
    must be its "Parameters:"."""
    doc = inspect.cleandoc(config_class.__doc__ or "")
    if not re.search(r"^Parameters:$", doc, re.MULTILINE):
        raise TypeError(f"{config_class.__name__}'s docstring has no 'Parameters:' section to extend.")
    # Re-indent to the layout the parameter entries use (the class body's 4 spaces).
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    separator = "\n" if doc.endswith("Parameters:") else "\n\n"
    config_class.__doc__ = f"\n{body}{separator}{dynamic_sampling_parameters(config_class)}\n"
    return config_class


@documents_dynamic_sampling
@dataclass
class DynamicSamplingArguments:
    """
    Dataclass mixin holding the `dynamic_sampling*` fields; mix it in before a `GRPOConfig`.

    Dynamic sampling is off unless the config turns it on (`dynamic_sampling=True`, `DAPOConfig`'s default). The
    fields are validated, and the carry defaults resolved, in `__post_init__`, after `GRPOConfig`'s own (which
    resolves `steps_per_generation` and `generation_batch_size`).

    Parameters:
    """

    dynamic_sampling: bool = field(default=False, metadata=DYNAMIC_SAMPLING_METADATA)
    dynamic_sampling_filter_reward: str | None = field(
        default=None,
        metadata={
            "help": "Name of the reward function that decides whether a group is informative (as in the metric "
            "`rewards/<name>/mean`). `None`: the weighted sum of all reward functions but the shaping ones (the "
            "overlong punishment, repetition penalties)."
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
    dynamic_sampling_mode: str = field(
        default="filter",
        metadata={
            "help": "'filter': DAPO's dynamic sampling, exactly. 'adaptive': pass-rate beliefs per prompt, a skip "
            "of prompts whose groups are predictably all-equal, and advantages against the prompt's history.",
            "choices": list(MODE_CHOICES),
        },
    )
    dynamic_sampling_max_skip_probability: float | None = field(
        default=None,
        metadata={
            "help": "The most a prompt is skipped before generation, in [0, 1). 'filter' mode: the prompt history "
            "(streaks of all-right or all-wrong groups); 'adaptive' mode: the pass-rate estimate. None: 0 in "
            "'filter' mode (off), 0.9 in 'adaptive' mode."
        },
    )
    dynamic_sampling_history_baseline: bool = field(
        default=True,
        metadata={
            "help": "Adaptive mode: advantages against the mean of the prompt's earlier rewards and the group's "
            "others (unbiased; no std division); all-equal groups unlike the prompt's history train."
        },
    )
    dynamic_sampling_history_decay: float = field(
        default=0.5,
        metadata={"help": "Adaptive mode: weight in [0, 1) of a prompt's earlier evidence at each new visit."},
    )
    dynamic_sampling_pilot_size: int | None = field(
        default=None,
        metadata={
            "help": "Adaptive mode: completions generated first for each prompt; the rest only when worth its tokens "
            "(0: off). None: 2 in 'adaptive' mode when num_generations >= 4, else 0."
        },
    )
    dynamic_sampling_extensions: int = field(
        default=0,
        metadata={
            "help": "Adaptive mode: more groups of num_generations an all-equal group may get in its round when worth "
            "their tokens, trained with it as one group (0: off)."
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

    def __post_init__(self):
        super().__post_init__()
        self._validate_dynamic_sampling()

    def _whole_updates_per_generation(self) -> int:
        """Optimiser updates between two generation batches, rounded up, at least 1: TRL generates every
        `steps_per_generation * num_iterations` micro-steps and updates every `gradient_accumulation_steps`."""
        micro_steps = self.steps_per_generation * self.num_iterations
        return max(1, -(-micro_steps // self.gradient_accumulation_steps))

    def _validate_adaptive_mode(self):
        if self.dynamic_sampling_mode not in MODE_CHOICES:
            raise ValueError(
                f"dynamic_sampling_mode must be one of {list(MODE_CHOICES)}, got {self.dynamic_sampling_mode!r}."
            )
        if self.dynamic_sampling_mode == "adaptive" and not self.dynamic_sampling:
            raise ValueError(
                "dynamic_sampling_mode='adaptive' is a mode of dynamic sampling, which is off: set "
                "dynamic_sampling=True as well (or leave dynamic_sampling_mode='filter')."
            )
        if self.dynamic_sampling_max_skip_probability is None:
            self.dynamic_sampling_max_skip_probability = DEFAULT_MAX_SKIP_PROBABILITY[self.dynamic_sampling_mode]
        if not 0.0 <= self.dynamic_sampling_max_skip_probability < 1.0:
            raise ValueError(
                "dynamic_sampling_max_skip_probability must be in [0, 1) (a skipped prompt must keep a chance to come "
                f"back; 0 turns the skip off), got {self.dynamic_sampling_max_skip_probability}."
            )
        self._validate_pilot()
        if not 0.0 <= self.dynamic_sampling_history_decay < 1.0:
            raise ValueError(
                "dynamic_sampling_history_decay must be in [0, 1) (the weight of a prompt's earlier evidence at each "
                f"new visit; 0 keeps only the last visit), got {self.dynamic_sampling_history_decay}."
            )

    def _validate_pilot(self):
        adaptive = self.dynamic_sampling_mode == "adaptive"
        # Whether the pilot size is the default's (a trainer with a `rollout_func` then turns it off).
        self._pilot_size_defaulted = self.dynamic_sampling_pilot_size is None
        if self.dynamic_sampling_pilot_size is None:
            # Off by default where it cannot run: vLLM's server mode generates num_generations per prompt.
            server = self.use_vllm and self.vllm_mode == "server"
            usable = adaptive and self.num_generations >= 4 and not server
            self.dynamic_sampling_pilot_size = DEFAULT_PILOT_SIZE if usable else 0
        pilot = self.dynamic_sampling_pilot_size
        if pilot and not adaptive:
            raise ValueError(
                f"dynamic_sampling_pilot_size={pilot} is a rule of the adaptive mode: set "
                "dynamic_sampling_mode='adaptive', or dynamic_sampling_pilot_size=0."
            )
        if not 0 <= pilot < self.num_generations:
            raise ValueError(
                f"dynamic_sampling_pilot_size must be in [0, num_generations - 1] = [0, {self.num_generations - 1}] "
                f"(0 turns the pilot off), got {pilot}."
            )
        extensions = self.dynamic_sampling_extensions
        if extensions < 0:
            raise ValueError(f"dynamic_sampling_extensions must be at least 0 (0 turns them off), got {extensions}.")
        if extensions and not (pilot and self.dynamic_sampling_history_baseline):
            raise ValueError(
                f"dynamic_sampling_extensions={extensions} is decided by the adaptive mode's pilot and trained through "
                "its history baseline: set dynamic_sampling_mode='adaptive' with dynamic_sampling_pilot_size > 0 and "
                "dynamic_sampling_history_baseline=True, or dynamic_sampling_extensions=0."
            )
        if pilot and self.use_vllm and self.vllm_mode == "server":
            raise ValueError(
                f"dynamic_sampling_pilot_size={pilot} generates a prompt's completions in two calls of "
                "pilot_size and num_generations - pilot_size rows, and TRL's vLLM server mode asks for "
                "num_generations completions per prompt: use vllm_mode='colocate', or set "
                "dynamic_sampling_pilot_size=0."
            )

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
        self._validate_adaptive_mode()
        per_process_batch = self.generation_batch_size // self.world_size
        if self.dynamic_sampling_carry_max_staleness is None:
            self.dynamic_sampling_carry_max_staleness = self._whole_updates_per_generation()
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
