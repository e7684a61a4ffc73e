"""Trainers: thin subclasses of TRL's GRPOTrainer."""

from .dapo_config import DAPOConfig
from .dapo_trainer import DAPOTrainer
from .gspo import GSPOConfig, GSPOTrainer

__all__ = ["DAPOConfig", "DAPOTrainer", "GSPOConfig", "GSPOTrainer"]
