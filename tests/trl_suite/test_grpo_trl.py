"""TRL's GRPO tests against TRL's own GRPOTrainer and GRPOConfig (the baseline; run with --trl-suite=full)."""

from .substitution import load_upstream_suite

globals().update(load_upstream_suite("trl"))
