"""Small statistics helpers for the distribution tests (scipy is not a dependency)."""

import math

import numpy as np


def regularized_lower_gamma(a: float, x: float) -> float:
    """P(a, x) by its power series (converges for all x; fine for the values used in tests)."""
    if x <= 0:
        return 0.0
    term = total = 1.0 / a
    n = 1
    while term > total * 1e-17:
        term *= x / (a + n)
        total += term
        n += 1
    return total * math.exp(a * math.log(x) - x - math.lgamma(a))


def chi2_critical(df: int, alpha: float = 0.01) -> float:
    """The (1 - alpha) quantile of the chi-square distribution, by bisection on its CDF."""
    lo, hi = 0.0, 10.0 * df + 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if regularized_lower_gamma(df / 2, mid / 2) < 1 - alpha:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def two_sample_chi2(a: list[int], b: list[int], min_expected: float = 5.0) -> tuple[float, int]:
    """Chi-square homogeneity statistic of two samples of categories, and its degrees of freedom.
    Categories with a small expected count are pooled into one."""
    categories = sorted(set(a) | set(b))
    counts = np.array([[a.count(c) for c in categories], [b.count(c) for c in categories]], dtype=float)
    expected_small = counts.sum(axis=0) * min(len(a), len(b)) / (len(a) + len(b)) < min_expected
    if expected_small.any():
        pooled = counts[:, expected_small].sum(axis=1, keepdims=True)
        counts = np.hstack([counts[:, ~expected_small], pooled])
    counts = counts[:, counts.sum(axis=0) > 0]
    expected = counts.sum(axis=1, keepdims=True) * counts.sum(axis=0, keepdims=True) / counts.sum()
    return float(((counts - expected) ** 2 / expected).sum()), counts.shape[1] - 1
