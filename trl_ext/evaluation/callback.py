"""Held-out pass@k during training, logged with the trainer's metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from datasets import Dataset
from transformers import Trainer, TrainerCallback

from .evaluate import PassAtKResult, evaluate_pass_at_k


class PassAtKCallback(TrainerCallback):
    """Evaluate pass@k on a held-out split before the first update, every `eval_steps` steps, and after training.

    Each evaluation is logged as `eval/pass@<k>` and `eval/mean_reward` (in `trainer_state.json`'s log history and
    every `report_to` integration) and kept in `history` as `(global_step, PassAtKResult)`, so a script can print
    the before/after figures: `history[0]` is the model before training, `history[-1]` after.

    Generation settings default to the trainer's (`max_completion_length`, `temperature`, `top_p`). Under
    multi-process training every process takes part and evaluates a share of the prompts.

    Args:
        trainer: the TRL trainer (GRPOTrainer or a subclass) whose model is evaluated.
        dataset: held-out prompts with a `prompt` column and the columns `reward_func` reads.
        reward_func: the verifier; a sample is correct when its reward exceeds `correct_threshold`.
        num_samples: samples per prompt (`n`).
        ks: which pass@k to report; each k at most `num_samples`.
        eval_steps: evaluate every this many optimizer steps; `None` evaluates only before and after training.
    """

    def __init__(
        self,
        trainer: Trainer,
        dataset: Dataset,
        reward_func: Callable,
        num_samples: int = 4,
        ks: str | Iterable[int] = (1,),
        eval_steps: int | None = None,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        batch_size: int = 64,
        correct_threshold: float = 0.0,
        seed: int = 0,
    ):
        if eval_steps is not None and eval_steps < 1:
            raise ValueError(f"eval_steps must be a positive number of steps or None, got {eval_steps}.")
        self.trainer = trainer
        self.dataset = dataset
        self.reward_func = reward_func
        self.num_samples = num_samples
        self.ks = ks
        self.eval_steps = eval_steps
        args = trainer.args
        self.max_new_tokens = max_new_tokens or args.max_completion_length
        self.temperature = args.temperature if temperature is None else temperature
        self.top_p = args.top_p if top_p is None else top_p
        self.batch_size = batch_size
        self.correct_threshold = correct_threshold
        self.seed = seed
        self.history: list[tuple[int, PassAtKResult]] = []

    def evaluate(self) -> PassAtKResult:
        """Evaluate the trainer's current model now, log the metrics and record them in `history`."""
        trainer = self.trainer
        result = evaluate_pass_at_k(
            trainer.model_wrapped,
            trainer.processing_class,
            self.dataset,
            self.reward_func,
            num_samples=self.num_samples,
            ks=self.ks,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            batch_size=self.batch_size,
            correct_threshold=self.correct_threshold,
            seed=self.seed,
            accelerator=trainer.accelerator,
        )
        step = trainer.state.global_step
        self.history.append((step, result))
        # `Trainer.log`, not the GRPO trainer's own `log`: that one would flush the training metrics gathered
        # since the last logging step into this record.
        Trainer.log(trainer, result.metrics())
        return result

    def on_step_begin(self, args, state, control, **kwargs):
        # The first step, not `on_train_begin`: only now is the model wrapped for distributed training.
        if not self.history:
            self.evaluate()

    def on_step_end(self, args, state, control, **kwargs):
        if self.eval_steps and state.global_step % self.eval_steps == 0 and state.global_step < state.max_steps:
            self.evaluate()

    def on_train_end(self, args, state, control, **kwargs):
        if not self.history or self.history[-1][0] != state.global_step:
            self.evaluate()
