"""The statistics of an evaluation report: pass@k, bootstrap intervals, paired differences.

Layer: plain functions over numbers (stdlib only); `harness.report` applies them to trajectories.

- `pass_at_k(n, c, k)`: the unbiased estimator of the chance that at least one of k samples,
  drawn without replacement from a task's n samples of which c succeeded, succeeds:
  1 - C(n-c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").
  Computed as a product, so large n never overflows.
- `bootstrap_interval`: a percentile bootstrap of a statistic over tasks (the task, not the
  episode, is the unit that is resampled: samples of one task are not independent), from a
  seeded `random.Random`, so a report is reproducible.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

RESAMPLES = 2000
LEVEL = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with `n` samples, `c` of them successes (k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0  # every draw of k samples holds a success
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def bootstrap_interval(
    values: Sequence[float],
    rng: random.Random,
    *,
    statistic: Callable[[Sequence[float]], float] = mean,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> tuple[float, float]:
    """The percentile bootstrap interval of `statistic` over `values` (NaN, NaN for none)."""
    if not values:
        return math.nan, math.nan
    draws = sorted(statistic(rng.choices(values, k=len(values))) for _ in range(resamples))
    low = draws[math.floor((1 - level) / 2 * (resamples - 1))]
    high = draws[math.ceil((1 + level) / 2 * (resamples - 1))]
    return low, high
