"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

With `n` samples of a problem of which `c` are correct, the probability that at least one of `k` samples drawn
without replacement is correct is

    pass@k = 1 - C(n - c, k) / C(n, k),

which is 1 when `n - c < k`. The binomials overflow floats for realistic `n` (C(200, 100) ~ 9e58) and lose
precision when they are close, so the ratio is computed as the product

    C(n - c, k) / C(n, k) = prod_{i = n - c + 1}^{n} (1 - k / i),

whose factors all lie in [0, 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with `n` samples, `c` of them correct; needs `0 <= c <= n`, `1 <= k <= n`."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got n={n}, c={c}.")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n (k samples drawn from n), got n={n}, k={k}.")
    if n - c < k:
        return 1.0
    probability_all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        probability_all_wrong *= 1.0 - k / i
    return 1.0 - probability_all_wrong


def mean_pass_at_k(num_correct: Sequence[int], n: int, k: int) -> float:
    """pass@k averaged over problems; `num_correct[j]` is the number of correct samples (out of `n`) of problem `j`."""
    if len(num_correct) == 0:
        raise ValueError("mean_pass_at_k needs at least one problem.")
    return sum(pass_at_k(n, c, k) for c in num_correct) / len(num_correct)


def parse_ks(ks: str | Iterable[int], n: int) -> list[int]:
    """Sorted, de-duplicated k values from `"1,4,16"` or a list, each checked against the `n` samples per problem."""
    values = [int(part) for part in ks.split(",") if part.strip()] if isinstance(ks, str) else [int(k) for k in ks]
    if not values:
        raise ValueError("Give at least one k, e.g. k=1,4,16.")
    too_large = [k for k in values if not 1 <= k <= n]
    if too_large:
        raise ValueError(
            f"Every k must be between 1 and n={n} (the samples per problem); got {too_large}. Raise n or drop them."
        )
    return sorted(set(values))
