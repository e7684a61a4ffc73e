"""trl-ext: DAPO with dynamic sampling, GSPO and verifiable rewards for Hugging Face TRL."""

from .trainers import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer

__version__ = "0.1.0.dev0"

__all__ = ["DAPOConfig", "DAPOTrainer", "GSPOConfig", "GSPOTrainer", "__version__"]
