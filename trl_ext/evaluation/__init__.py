"""Evaluation: the unbiased pass@k estimator, sampling-based evaluation, and a training callback."""

from .callback import PassAtKCallback
from .evaluate import PassAtKResult, count_correct, evaluate_pass_at_k
from .generation import SampledCompletions, sample_completions
from .pass_at_k import mean_pass_at_k, parse_ks, pass_at_k

__all__ = [
    "PassAtKCallback",
    "PassAtKResult",
    "SampledCompletions",
    "count_correct",
    "evaluate_pass_at_k",
    "mean_pass_at_k",
    "parse_ks",
    "pass_at_k",
    "sample_completions",
]
