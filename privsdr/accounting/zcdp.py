"""Zero-concentrated DP (zCDP): the guarantee of the discrete Gaussian, and its (eps, delta) reading.

A mechanism is rho-zCDP when its Renyi divergence is at most alpha * rho at every order alpha > 1
(Bun & Steinke 2016). Adding N_Z(0, sigma^2) noise to an integer-valued query whose L2 sensitivity is
Delta is (Delta^2 / 2 sigma^2)-zCDP (Canonne, Kamath & Steinke 2020, Thm 4, and additivity of Renyi
divergence over independent coordinates). Unlike the continuous Gaussian, the discrete one has no
closed-form privacy profile we may use, so it is read through this curve only.

``zcdp_epsilon(rho, delta)`` converts with CKS20 Prop. 12 (also dp-accounting's RDP conversion):
eps = alpha rho + ln(1 - 1/alpha) - ln(alpha delta) / (alpha - 1), valid at *every* alpha > 1, so the
minimum over any fixed set of orders is a valid bound; it is never worse than the classical
rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke 2016, Prop. 1.3), which is also evaluated. Results are
rounded outward.
"""
from __future__ import annotations

import math

import numpy as np

from .rounding import outward

#: the orders at which the conversion is evaluated (a fixed grid: any order gives a valid bound)
ORDERS = np.concatenate([1.0 + np.geomspace(1e-3, 1.0, 200), np.geomspace(2.0, 1e6, 800)[1:]])


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest eps on the fixed order grid with rho-zCDP => (eps, delta)-DP (rounded outward)."""
    if rho < 0 or math.isnan(rho):
        raise ValueError(f"rho must be >= 0, got {rho!r}")
    if not 0 < delta < 1:
        return 0.0 if rho == 0 else (math.inf if delta <= 0 else 0.0)
    if rho == 0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    a = ORDERS
    with np.errstate(over="ignore", invalid="ignore"):
        improved = a * rho + np.log1p(-1.0 / a) - (np.log(delta) + np.log(a)) / (a - 1.0)
    classical = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    return outward(max(0.0, min(float(np.nanmin(improved)), classical)))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest delta on the order grid with rho-zCDP => (eps, delta)-DP (CKS20 Prop. 12 solved for delta:
    ln delta = (alpha - 1)(alpha rho - eps) + (alpha - 1) ln(1 - 1/alpha) - ln alpha)."""
    if rho == 0:
        return 0.0
    a = ORDERS
    with np.errstate(over="ignore", invalid="ignore"):
        log_delta = (a - 1.0) * (a * rho - epsilon) + (a - 1.0) * np.log1p(-1.0 / a) - np.log(a)
    return float(min(1.0, math.exp(min(0.0, float(np.nanmin(log_delta))))))


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-12 relative, on the feasible side) with zcdp_epsilon(rho, delta) <= epsilon."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"zCDP calibration needs epsilon > 0 and 0 < delta < 1, got ({epsilon}, {delta})")
    if math.isinf(epsilon):
        return math.inf
    hi = max(epsilon, 1e-300)  # zcdp_epsilon(rho) >= rho, so rho = eps is infeasible or the boundary
    lo = hi
    for _ in range(2000):
        if zcdp_epsilon(lo, delta) <= epsilon:
            break
        hi, lo = lo, lo / 2.0
    else:  # pragma: no cover - unreachable: zcdp_epsilon -> 0 as rho -> 0
        raise ValueError(f"no rho meets ({epsilon}, {delta})")
    for _ in range(200):
        if hi / lo <= 1.0 + 1e-12:
            break
        mid = math.sqrt(lo * hi)
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo
