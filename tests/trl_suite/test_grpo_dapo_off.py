"""TRL's GRPO tests against DAPOTrainer with dynamic sampling and the soft overlong punishment off by default."""

from .substitution import load_upstream_suite

globals().update(load_upstream_suite("dapo_off"))
