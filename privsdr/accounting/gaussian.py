"""Exact privacy profile of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

For noise multiplier ``z = sigma / Delta`` (Delta = L2 sensitivity under the node's relation)::

    delta(eps) = Phi(1/(2z) - eps*z) - exp(eps) * Phi(-1/(2z) - eps*z)

Both directions are solved with a bracketed root finder in log space. This is pure math (no
dp-accounting import) so that ``import privsdr`` stays light.
"""
from __future__ import annotations

import functools
import math


def gaussian_delta(noise_multiplier: float, epsilon: float) -> float:
    """delta(eps) of one Gaussian release with ``noise_multiplier = sigma / sensitivity``."""
    z = float(noise_multiplier)
    if z <= 0.0:
        return 1.0
    if math.isinf(z):
        return 0.0
    from scipy import special

    a = 1.0 / (2.0 * z)
    b = epsilon * z
    log_p = special.log_ndtr(a - b)
    log_q = epsilon + special.log_ndtr(-a - b)
    if log_q >= log_p:
        return 0.0
    return float(math.exp(log_p) * -math.expm1(log_q - log_p))


@functools.lru_cache(maxsize=16384)
def gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Smallest eps >= 0 with delta(eps) <= delta for one Gaussian release (inf if impossible)."""
    z = float(noise_multiplier)
    if z <= 0.0 or delta <= 0.0:
        return math.inf
    if math.isinf(z) or gaussian_delta(z, 0.0) <= delta:
        return 0.0
    from scipy import optimize

    hi = 1.0
    while gaussian_delta(z, hi) > delta:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    eps = optimize.brentq(lambda e: gaussian_delta(z, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)
    # brentq may land a hair below the root; step up until the profile really is <= delta.
    while gaussian_delta(z, eps) > delta:
        eps = eps * (1.0 + 1e-12) + 1e-15
    return float(eps)


@functools.lru_cache(maxsize=4096)
def analytic_noise_multiplier(epsilon: float, delta: float) -> float:
    """Smallest z = sigma/Delta with delta(eps) <= delta: the analytic Gaussian mechanism."""
    if math.isinf(epsilon):
        return 0.0
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError("the analytic Gaussian needs epsilon > 0 and 0 < delta < 1")
    from scipy import optimize

    lo, hi = 1e-3, 1.0
    while gaussian_delta(hi, epsilon) > delta:
        hi *= 2.0
    while gaussian_delta(lo, epsilon) <= delta and lo > 1e-12:
        lo /= 2.0
    z = optimize.brentq(lambda s: gaussian_delta(s, epsilon) - delta, lo, hi, xtol=1e-15, rtol=1e-14)
    # the ledger prices the node with gaussian_epsilon: make the two directions agree exactly
    while gaussian_delta(z, epsilon) > delta or gaussian_epsilon(z, delta) > epsilon:
        z *= 1.0 + 1e-13
    return float(z)
