"""Privacy claims an audit tests, each with its trade-off curve f (spec/auditing.md §1.4).

The claim is rejected when the confidence corner (FPR_U, FNR_U) lies strictly under f:
``FNR_U < f(FPR_U) or FPR_U < f(FNR_U)``. With probability >= 1 - alpha the true rates are below
the corner, so a correct mechanism is rejected with probability <= alpha.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import numpy as np

from ..accounting.gaussian import gaussian_epsilon
from ..accounting.zcdp import zcdp_delta, zcdp_epsilon
from .stats import approx_dp_tradeoff, gdp_tradeoff


@attrs.frozen
class ApproxDP:
    """An (epsilon, delta)-DP claim (pure DP when delta = 0)."""

    epsilon: float
    delta: float = 0.0

    def tradeoff(self, a: float) -> float:
        return approx_dp_tradeoff(self.epsilon, self.delta, a)

    def describe(self) -> str:
        return f"({self.epsilon:g}, {self.delta:g})-DP"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "approx_dp", "epsilon": self.epsilon, "delta": self.delta}


@attrs.frozen
class GDP:
    """A mu-GDP claim: exactly what a Gaussian mechanism with sigma = Delta/mu satisfies."""

    mu: float
    delta: float = 0.0  #: the delta at which the equivalent epsilon is reported

    @classmethod
    def gaussian(cls, noise_multiplier: float, delta: float = 0.0) -> GDP:
        """The claim of a Gaussian release with ``noise_multiplier = sigma / Delta`` (mu = 1/z)."""
        return cls(math.inf if noise_multiplier == 0 else 1.0 / noise_multiplier, delta)

    @classmethod
    def composed(cls, noise_multipliers: list[float], delta: float = 0.0) -> GDP:
        """k Gaussian releases compose to sqrt(sum mu_i^2)-GDP (Dong, Roth & Su 2022, Cor. 3.3)."""
        mus = [math.inf if z == 0 else 1.0 / z for z in noise_multipliers]
        return cls(math.sqrt(math.fsum(m * m for m in mus)), delta)

    @property
    def epsilon(self) -> float:
        """The epsilon this claim implies at ``delta`` (exact Gaussian profile)."""
        if self.delta <= 0:
            return math.inf
        return gaussian_epsilon(1.0 / self.mu if self.mu > 0 else math.inf, self.delta)

    def tradeoff(self, a: float) -> float:
        return gdp_tradeoff(self.mu, a)

    def describe(self) -> str:
        return f"{self.mu:.4g}-GDP" + (f" (epsilon {self.epsilon:.4g} at delta {self.delta:g})" if self.delta > 0 else "")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "gdp", "mu": self.mu, "delta": self.delta}


@attrs.frozen
class ZCDP:
    """A rho-zCDP claim (the discrete Gaussian's guarantee): the trade-off curve is the upper envelope of the
    (eps, delta(eps))-DP curves it implies, delta(eps) from the CKS20 Prop. 12 conversion on a grid of eps."""

    rho: float
    delta: float = 0.0  #: the delta at which the equivalent epsilon is reported

    @property
    def epsilon(self) -> float:
        return zcdp_epsilon(self.rho, self.delta) if self.delta > 0 else math.inf

    def tradeoff(self, a: float) -> float:
        eps, deltas = _zcdp_grid(self.rho)
        return max(approx_dp_tradeoff(e, d, a) for e, d in zip(eps, deltas, strict=True))

    def describe(self) -> str:
        return f"{self.rho:.4g}-zCDP" + (f" (epsilon {self.epsilon:.4g} at delta {self.delta:g})" if self.delta > 0 else "")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "zcdp", "rho": self.rho, "delta": self.delta}


@functools.lru_cache(maxsize=64)
def _zcdp_grid(rho: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    top = zcdp_epsilon(rho, 1e-15)
    eps = tuple(float(e) for e in np.linspace(0.0, top, 300))
    return eps, tuple(zcdp_delta(rho, e) for e in eps)


Claim = ApproxDP | GDP | ZCDP


def rejects(claim: Claim, fpr_upper: float, fnr_upper: float) -> bool:
    return fnr_upper < claim.tradeoff(fpr_upper) or fpr_upper < claim.tradeoff(fnr_upper)
