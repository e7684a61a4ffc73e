"""pass@k of a model on a prompt dataset, scored by a reward function (a registry verifier, usually)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from datasets import Dataset

from trl_ext.rewards import call_reward

from .generation import sample_completions
from .pass_at_k import mean_pass_at_k, parse_ks


@dataclass
class PassAtKResult:
    """What one evaluation measured.

    `num_correct[j]` counts the correct samples (out of `num_samples`) of prompt `j`; `pass_at_k` maps each k to
    the unbiased estimate averaged over prompts; `mean_reward` averages the verifier's reward over every sample
    it could judge (`None` rewards are left out and count as incorrect).
    """

    num_samples: int
    pass_at_k: dict[int, float]
    mean_reward: float
    num_correct: list[int] = field(repr=False)

    @property
    def num_prompts(self) -> int:
        return len(self.num_correct)

    def metrics(self, prefix: str = "eval/") -> dict[str, float]:
        """Flat metrics for a trainer log, e.g. `{"eval/pass@1": 0.42, "eval/mean_reward": 0.42}`."""
        metrics = {f"{prefix}pass@{k}": value for k, value in self.pass_at_k.items()}
        metrics[f"{prefix}mean_reward"] = self.mean_reward
        return metrics

    def summary(self) -> str:
        scores = "  ".join(f"pass@{k} = {value:.3f}" for k, value in self.pass_at_k.items())
        samples = f"n = {self.num_samples} samples x {self.num_prompts} prompts"
        return f"{scores}  ({samples}, mean reward {self.mean_reward:.3f})"


def count_correct(rewards: Sequence[float | None], num_samples: int, threshold: float = 0.0) -> list[int]:
    """Per-prompt counts of rewards above `threshold`; `rewards` holds `num_samples` consecutive values per prompt.

    A `None` reward (the verifier could not judge) or NaN counts as incorrect.
    """
    if len(rewards) % num_samples:
        raise ValueError(f"{len(rewards)} rewards is not a multiple of num_samples={num_samples}.")
    correct = [r is not None and not math.isnan(r) and r > threshold for r in rewards]
    return [sum(correct[start : start + num_samples]) for start in range(0, len(correct), num_samples)]


def _shard_indices(num_items: int, num_shards: int, shard: int) -> tuple[list[int], int]:
    """This shard's item indices, padded by repetition so every shard has as many; returns (indices, real count).

    Equal counts keep the processes' `generate` calls in lockstep, which sharded (ZeRO-3, FSDP) models need.
    """
    per_shard = math.ceil(num_items / num_shards)
    indices = list(range(shard * per_shard, min((shard + 1) * per_shard, num_items)))
    real = len(indices)
    filler = indices[-1] if indices else 0
    return indices + [filler] * (per_shard - real), real


def evaluate_pass_at_k(
    model,
    tokenizer,
    dataset: Dataset,
    reward_func: Callable,
    num_samples: int = 16,
    ks: str | Iterable[int] = (1,),
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 64,
    correct_threshold: float = 0.0,
    seed: int | None = 0,
    accelerator=None,
    progress: bool = True,
) -> PassAtKResult:
    """Sample `num_samples` completions per prompt of `dataset`, score them with `reward_func`, estimate pass@k.

    `dataset` needs a `prompt` column (plain text or conversational); its other columns (`solution`, ...) reach
    the reward function as TRL passes them during training. A sample is correct when its reward exceeds
    `correct_threshold` (0 suits both 1/0 and DAPO's +1/-1 scoring). `seed` fixes the sampling and leaves the
    caller's random state untouched. With `accelerator`, the processes split the prompts and gather the counts;
    every process gets the same result.
    """
    import torch

    ks = parse_ks(ks, num_samples)
    if "prompt" not in dataset.column_names:
        raise ValueError(f"The evaluation dataset needs a 'prompt' column; it has {dataset.column_names}.")
    num_processes = accelerator.num_processes if accelerator is not None else 1
    process_index = accelerator.process_index if accelerator is not None else 0
    indices, num_real = _shard_indices(len(dataset), num_processes, process_index)
    shard = dataset.select(indices)

    with torch.random.fork_rng() if seed is not None else nullcontext():
        if seed is not None:
            torch.manual_seed(seed + process_index)
        samples = sample_completions(
            model,
            tokenizer,
            shard["prompt"],
            num_samples=num_samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            batch_size=batch_size,
            accelerator=accelerator,
            progress=progress,
            description=f"pass@k: {len(dataset)} prompts x {num_samples}",
        )

    columns = {
        name: [value for value in shard[name] for _ in range(num_samples)]
        for name in shard.column_names
        if name != "prompt"
    }
    prompts = [prompt for prompt in shard["prompt"] for _ in range(num_samples)]
    completions = [completion for group in samples.completions for completion in group]
    completion_ids = [ids for group in samples.completion_ids for ids in group]
    rewards = call_reward(
        reward_func, prompts=prompts, completions=completions, completion_ids=completion_ids, **columns
    )
    if len(rewards) != len(completions):
        raise ValueError(f"The reward function returned {len(rewards)} rewards for {len(completions)} completions.")
    num_correct = count_correct(rewards, num_samples, correct_threshold)[:num_real]
    judged = [r for r in rewards[: num_real * num_samples] if r is not None and not math.isnan(r)]
    reward_sum, reward_count = float(sum(judged)), len(judged)

    if num_processes > 1:
        from accelerate.utils import gather_object

        gathered = gather_object([(num_correct, reward_sum, reward_count)])
        num_correct = [count for part in gathered for count in part[0]]
        reward_sum = sum(part[1] for part in gathered)
        reward_count = sum(part[2] for part in gathered)

    return PassAtKResult(
        num_samples=num_samples,
        pass_at_k={k: mean_pass_at_k(num_correct, num_samples, k) for k in ks},
        mean_reward=reward_sum / reward_count if reward_count else float("nan"),
        num_correct=num_correct,
    )
