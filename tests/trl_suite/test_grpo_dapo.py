"""TRL's GRPO tests against DAPOTrainer with DAPOConfig's defaults (dynamic sampling and the soft overlong punishment on)."""

from .substitution import load_upstream_suite

globals().update(load_upstream_suite("dapo"))
