"""The one calibration search: the smallest noise factor whose cost fits, given a test of fit.

Used by the plan's tight calibration (``plan.graph``: one factor on every node's noise so that the composed cost meets
the budget) and by the distributed discrete Gaussian (``distributed``: the smallest multiplier at or above the
tau-free one whose zCDP bound meets the share). Cost is monotone in the factor (more noise never costs more), so the
feasible factors are an interval [f*, inf): a bracket [lo infeasible, hi feasible] by halving or doubling from 1,
then false position on log(epsilon) against log(factor) (Illinois rule), which needs a handful of cost evaluations
where bisection needs ~15. It stops when the bracket is within ``rel_tol`` or the feasible end spends the epsilon to
within ``rel_tol / 2``. The answer is always a factor that was checked to fit; only the number of steps depends on the
secant guesses.
"""
from __future__ import annotations

import math
from collections.abc import Callable

#: the factors the bracket search explores, from 1 by halving or doubling
SMALLEST, LARGEST = 1e-6, 1e6


def smallest_fitting_factor(fits: Callable[[float], bool], excess: Callable[[float], float], rel_tol: float,
                            *, below_one: bool = True) -> float:
    """The smallest factor f that ``fits`` (to ``rel_tol``; ``math.inf`` when none up to ``LARGEST`` does).
    ``excess(f)``: log(eps(f) / eps_target), negative where f fits on epsilon (+inf when it cannot fit, -inf when its
    epsilon is 0). ``below_one=False``: a factor of 1 that fits is the answer (the caller's starting point is a
    lower bound it keeps)."""
    hi, lo = 1.0, 1.0
    if fits(1.0):
        if not below_one:
            return 1.0
        lo = 0.5
        while fits(lo):
            hi, lo = lo, lo / 2.0
            if lo < SMALLEST:
                return hi
    else:
        hi = 2.0
        while not fits(hi):
            lo, hi = hi, hi * 2.0
            if hi > LARGEST:
                return math.inf
    g_lo, g_hi = excess(lo), excess(hi)
    side = 0
    for _ in range(200):
        # done when the bracket is tight, or the feasible end already spends the budget's epsilon to within rel_tol/2
        if hi / lo <= 1.0 + rel_tol or g_hi >= -0.5 * rel_tol:
            break
        x_lo, x_hi = math.log(lo), math.log(hi)
        if math.isfinite(g_lo) and math.isfinite(g_hi) and g_lo > 0 > g_hi:
            x = x_hi - g_hi * (x_hi - x_lo) / (g_hi - g_lo)  # false position on log f
            x = min(max(x, x_lo + 0.02 * (x_hi - x_lo)), x_hi - 0.02 * (x_hi - x_lo))  # stay strictly inside
        else:
            x = 0.5 * (x_lo + x_hi)
        mid = math.exp(x)
        if fits(mid):
            hi, g_hi = mid, excess(mid)
            if side == 1:
                g_lo /= 2.0  # Illinois: halve the stale end so the bracket shrinks from both sides
            side = 1
        else:
            lo, g_lo = mid, excess(mid)
            if side == -1:
                g_hi /= 2.0
            side = -1
    return hi
