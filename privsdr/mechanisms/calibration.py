"""Gaussian noise calibrations (noise std per unit of L2 sensitivity) and MOD-SULQ.

* ``classical``:  sqrt(2 ln(1.25/delta)) / eps  (Dwork & Roth 2014, Thm A.1; proven for eps < 1).
* ``thm3_exact``: (sqrt(L) + sqrt(L + eps)) / (eps sqrt 2), L = ln(2/delta) (FSIR spec §3.6: the
  exact form of the paper's Theorem 3 floor).
* ``paper_approx``: sqrt(2 ln(2/delta)) / eps (FSIR eq. 4, the paper's Taylor approximation; a
  variance about 5-12% below Theorem 3).
* ``analytic``:   the smallest multiplier whose exact profile meets (eps, delta) (Balle & Wang 2018).
* discrete Gaussian (``sampler="secure"``): z = 1 / sqrt(2 rho) with rho the largest zCDP parameter whose
  conversion (CKS20 Prop. 12) meets (eps, delta) -- 5-10% more noise than ``analytic``.
* ``kenthapadi``: sqrt(2 (ln(1/(2 delta)) + eps)) / eps (Kenthapadi et al. 2013, PRIDE's Theorem 1,
  spec pride_004.md A2; needs delta < 1/2). Conservative: the exact profile at it is far below delta.
* MOD-SULQ (Chaudhuri et al. 2012, FSIR Lemma 1) for a second-moment matrix of n records with
  ``||x|| <= 1``: sigma = (p+1)/(n eps) sqrt(2 log((p^2+p)/(2 sqrt(2 pi) delta))) + 1/(n sqrt(eps)).
"""
from __future__ import annotations

import math

from ..accounting.gaussian import analytic_noise_multiplier, check_epsilon
from ..accounting.rounding import div_up
from ..accounting.zcdp import zcdp_epsilon, zcdp_rho_for

GAUSSIAN_CALIBRATIONS: tuple[str, ...] = ("classical", "thm3_exact", "paper_approx", "analytic", "kenthapadi")


def _check(epsilon: float, delta: float) -> None:
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"Gaussian calibration needs epsilon > 0 and 0 < delta < 1, got ({epsilon}, {delta})")


def gaussian_noise_multiplier(epsilon: float, delta: float, calibration: str = "analytic") -> float:
    """Noise std per unit of L2 sensitivity that makes one Gaussian release (eps, delta)-DP."""
    if math.isinf(epsilon):
        return 0.0
    _check(epsilon, delta)
    if calibration == "classical":
        return math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    if calibration == "thm3_exact":
        L = math.log(2.0 / delta)
        return (math.sqrt(L) + math.sqrt(L + epsilon)) / (epsilon * math.sqrt(2.0))
    if calibration == "paper_approx":
        return math.sqrt(2.0 * math.log(2.0 / delta)) / epsilon
    if calibration == "analytic":
        return analytic_noise_multiplier(epsilon, delta)
    if calibration == "kenthapadi":
        if not delta < 0.5:
            raise ValueError(f"the Kenthapadi calibration needs delta < 1/2, got {delta}")
        return math.sqrt(2.0 * (math.log(1.0 / (2.0 * delta)) + epsilon)) / epsilon
    raise ValueError(f"unknown Gaussian calibration {calibration!r}; expected one of {GAUSSIAN_CALIBRATIONS}")


def discrete_gaussian_noise_multiplier(epsilon: float, delta: float) -> float:
    """The smallest multiplier z (to ~1e-12) whose discrete Gaussian, (1/2z^2)-zCDP, meets (eps, delta). A finite
    epsilon beyond ``MAX_EPSILON`` is refused as the analytic Gaussian refuses it (its zCDP rho overflowed at 1e308);
    ``Budget.infinite()`` is noise off."""
    if math.isinf(epsilon):
        return 0.0
    _check(epsilon, delta)
    check_epsilon(epsilon)
    z = 1.0 / math.sqrt(2.0 * zcdp_rho_for(epsilon, delta))
    while zcdp_epsilon(0.5 / (z * z) * (1.0 + 1e-15), delta) > epsilon:  # the event's rho, rounded as it is
        z = math.nextafter(z, math.inf) * (1.0 + 1e-15)
    return z


def modsulq_sigma(n: int, p: int, epsilon: float, delta: float) -> float:
    """MOD-SULQ noise std for ``X X^T / n`` with ``||x_i|| <= 1`` (Chaudhuri et al. 2012; FSIR Lemma 1)."""
    if math.isinf(epsilon):
        return 0.0
    _check(epsilon, delta)
    return (p + 1) / (n * epsilon) * math.sqrt(
        2.0 * math.log((p * p + p) / (2.0 * math.sqrt(2.0 * math.pi) * delta))
    ) + 1.0 / (n * math.sqrt(epsilon))


def laplace_noise_multiplier(epsilon: float) -> float:
    """Laplace scale per unit of L1 sensitivity for pure eps-DP: 1/eps."""
    if math.isinf(epsilon):
        return 0.0
    if not epsilon > 0:
        raise ValueError(f"Laplace calibration needs epsilon > 0, got {epsilon}")
    return inverse_at_least(1.0, epsilon)


def inverse_at_least(numerator: float, epsilon: float) -> float:
    """The smallest float z with numerator / z <= epsilon in exact arithmetic (so the charge, numerator / z
    rounded up, never exceeds the share)."""
    z = numerator / epsilon
    while div_up(numerator, z) > epsilon:
        z = math.nextafter(z, math.inf)
    return z
