"""Confidence bounds and trade-off curves for empirical DP audits (spec/auditing.md §1).

A threshold test "say D' when T(y) > t" has false-positive rate FPR = P_D(T > t) and false-negative
rate FNR = P_D'(T <= t). Any (eps, delta)-DP mechanism satisfies (Kairouz et al. 2015, Thm 2.1)

    FPR + e^eps FNR >= 1 - delta   and   e^eps FPR + FNR >= 1 - delta,

and a mu-GDP mechanism satisfies FNR >= Phi(Phi^-1(1 - FPR) - mu) (Dong, Roth & Su 2022). Both
right-hand sides decrease in the rates, so one-sided Clopper-Pearson *upper* bounds on FPR and FNR
(each at level alpha/2) give lower confidence bounds on eps and mu at level 1 - alpha.
"""
from __future__ import annotations

import math
from typing import Any


def cp_upper(k: int, n: int, a: float) -> float:
    """One-sided Clopper-Pearson upper bound U(k; n, a) = Beta^-1(1 - a; k + 1, n - k)."""
    if k >= n:
        return 1.0
    return float(_stats().beta.ppf(1.0 - a, k + 1, n - k))


def cp_lower(k: int, n: int, a: float) -> float:
    """One-sided Clopper-Pearson lower bound L(k; n, a) = Beta^-1(a; k, n - k + 1)."""
    if k <= 0:
        return 0.0
    return float(_stats().beta.ppf(a, k, n - k + 1))


def epsilon_lower_bound(fpr: float, fnr: float, delta: float) -> float:
    """max{0, ln((1 - delta - FNR)/FPR), ln((1 - delta - FPR)/FNR)} (a term counts only if positive)."""
    best = 0.0
    for x, y in ((fpr, fnr), (fnr, fpr)):
        num = 1.0 - delta - y
        if num <= 0.0:
            continue
        if x <= 0.0:
            return math.inf
        best = max(best, math.log(num / x))
    return best


def mu_lower_bound(fpr: float, fnr: float) -> float:
    """Phi^-1(1 - FPR) - Phi^-1(FNR), floored at 0 (never take an absolute value)."""
    if fpr <= 0.0 or fnr <= 0.0:
        return math.inf
    if fpr >= 1.0 or fnr >= 1.0:
        return 0.0
    return max(0.0, float(_stats().norm.isf(fpr) - _stats().norm.ppf(fnr)))


def approx_dp_tradeoff(epsilon: float, delta: float, a: float) -> float:
    """f(a) = max{0, 1 - delta - e^eps a, e^-eps (1 - delta - a)}: the (eps, delta)-DP trade-off curve."""
    if math.isinf(epsilon):
        return 0.0
    return max(0.0, 1.0 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1.0 - delta - a))


def gdp_tradeoff(mu: float, a: float) -> float:
    """G_mu(a) = Phi(Phi^-1(1 - a) - mu)."""
    if math.isinf(mu):
        return 0.0
    return float(_stats().norm.cdf(_stats().norm.isf(a) - mu))


def _stats() -> Any:
    """scipy.stats, imported at the first audit (about 1 s): a process that never audits never pays for it."""
    from scipy import stats

    return stats
