"""Noise that floating point cannot betray: exact discrete Laplace and Gaussian on a public grid.

Textbook floating-point noise leaks the noiseless value through the low bits of the output (Mironov,
CCS 2012). ``sampler="secure"`` replaces it with the exact samplers of Canonne, Kamath & Steinke
(NeurIPS 2020): Python integers and rationals only, randomness from the operating system's CSPRNG
(``secrets``), no floating-point operation between the noise and the output.

A release on the grid of granularity ``gamma`` (a power of two, public):

1. q = round(value / gamma), an integer vector (value / gamma is exact in binary floating point);
2. q + Y with Y_j i.i.d. exact N_Z(0, sigma_Z^2) or Lap_Z(t_Z);
3. output (q + Y) * gamma (post-processing of the integer release).

Rounding moves each coordinate by at most 1/2, so two neighbours' integer vectors differ by at most
Delta_2 / gamma + sqrt(d) in L2 and Delta_1 / gamma + d in L1. ``gamma`` is the largest power of two with
Delta / gamma >= GRID_RATIO * ceil(sqrt(d)) (L2; ceil(d) for L1), and the grid noise is
sigma_Z = z (Delta_2 / gamma + ceil(sqrt(d))), so the release is exactly as private as the node's noise
multiplier z says (at most 1/GRID_RATIO = 0.1% more noise than the float mechanism). The privacy of the
noise itself is the discrete mechanisms' own: (1/2z^2)-zCDP (``DiscreteGaussianEvent``) and pure 1/z
(``DiscreteLaplaceEvent``).

What this does not cover: the floating-point arithmetic of the *query* (a sum of floats can move more
than the declared sensitivity in the last bits; Casacuberta et al. 2022). Rounding to a grid ~1000x
coarser than the sensitivity's own scale absorbs such errors only when they are far below gamma.
"""
from __future__ import annotations

import functools
import math
import secrets
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import ValidationError

#: the randomness source: uniform integer in [0, n). Tests may swap in a seeded one to check the samplers'
#: distributions reproducibly; releases always use the operating system's CSPRNG unless a caller does that.
randbelow = secrets.randbelow

#: the grid is at least this many times finer than the sensitivity per sqrt(d) (L2) or d (L1)
GRID_RATIO = 1000
SAMPLERS = ("numpy", "secure")


def check_sampler(sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise ValidationError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    return sampler


# -- exact samplers (CKS 2020, Algorithms 1-3), on integer pairs (num, den) to avoid gcd work ---------
def bernoulli(p: Fraction) -> bool:
    """True with probability p (a rational in [0, 1])."""
    return randbelow(p.denominator) < p.numerator


def bernoulli_exp(gamma: Fraction) -> bool:
    """True with probability exp(-gamma), gamma >= 0 rational (CKS20 Algorithm 1)."""
    return _bernoulli_exp(gamma.numerator, gamma.denominator)


def _bernoulli_exp(num: int, den: int) -> bool:
    while num > den:  # exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma)))
        if not _bernoulli_exp(1, 1):
            return False
        num -= den
    # K = the first k with Bernoulli(gamma / k) false; True iff K is odd. Bernoulli(gamma / 1) is certain when
    # gamma = 1 and Bernoulli(0) never succeeds: those outcomes are taken without a draw (same law, fewer draws).
    if num == 0:
        return True
    k = 2 if num == den else 1
    while randbelow(den * k) < num:  # Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def discrete_laplace(scale: Fraction) -> int:
    """One draw of Lap_Z(scale): P(x) proportional to exp(-|x| / scale), scale = t / s > 0 (CKS20 Algorithm 2)."""
    return _discrete_laplace(scale.numerator, scale.denominator)


def _discrete_laplace(t: int, s: int) -> int:
    while True:
        u = randbelow(t)
        if not _bernoulli_exp(u, t):
            continue
        v = 0
        while _bernoulli_exp(1, 1):
            v += 1
        y = (u + t * v) // s
        negative = randbelow(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma2: Fraction) -> int:
    """One draw of N_Z(0, sigma2): P(x) proportional to exp(-x^2 / (2 sigma2)) (CKS20 Algorithm 3)."""
    return _discrete_gaussian(sigma2.numerator, sigma2.denominator)


def _discrete_gaussian(num: int, den: int) -> int:
    t = math.isqrt(num // den) + 1  # floor(sigma) + 1
    while True:
        y = _discrete_laplace(t, 1)
        # accept with probability exp(-(|y| - sigma2/t)^2 / (2 sigma2)), sigma2 = num/den, as one fraction
        if _bernoulli_exp((abs(y) * t * den - num) ** 2, 2 * t * t * den * num):
            return y


# -- releases on a grid -----------------------------------------------------------------------------
def grid(sensitivity: float, dimension: int, norm: str) -> float:
    """The public granularity: the largest power of two with sensitivity / gamma >= GRID_RATIO * spread,
    spread = ceil(sqrt(d)) for L2 and d for L1 (the worst rounding shift between neighbours)."""
    spread = _spread(dimension, norm)
    if sensitivity <= 0:
        return 2.0**-60
    target = Fraction(sensitivity) / (GRID_RATIO * spread)
    k = math.floor(math.log2(sensitivity / (GRID_RATIO * spread)))
    while Fraction(2) ** k > target:  # exact: the float log2 rounds up just below a power of two
        k -= 1
    while Fraction(2) ** (k + 1) <= target:
        k += 1
    return 2.0**k


def _spread(dimension: int, norm: str) -> int:
    return max(1, dimension) if norm == "l1" else max(1, math.isqrt(max(0, dimension - 1)) + 1)


@functools.lru_cache(maxsize=256)
def grid_noise(noise_multiplier: float, sensitivity: float, dimension: int, norm: str) -> tuple[float, Fraction]:
    """(gamma, the noise scale on the grid): z (Delta / gamma + spread), exact rational. Public numbers only, so
    kept per node (``lru_cache``): a release repeated with one spec does the rational arithmetic once."""
    gamma = grid(sensitivity, dimension, norm)
    return gamma, Fraction(noise_multiplier) * (Fraction(sensitivity) / Fraction(gamma) + _spread(dimension, norm))


def _round_to_grid(values: np.ndarray, gamma: float) -> list[int]:
    return [round(float(v) / gamma) for v in values.ravel()]


def release(value: np.ndarray, noise_multiplier: float, sensitivity: float, kind: str) -> np.ndarray:
    """value + exact discrete noise on the grid (``kind`` gaussian: L2 sensitivity; laplace: L1)."""
    arr = np.asarray(value, dtype=float)
    norm = "l2" if kind == "gaussian" else "l1"
    gamma, scale = grid_noise(noise_multiplier, sensitivity, arr.size, norm)
    q = _round_to_grid(arr, gamma)
    if kind == "gaussian":
        sigma2 = scale * scale
        num, den = sigma2.numerator, sigma2.denominator
        noisy = [k + _discrete_gaussian(num, den) for k in q]
    else:
        t, s = scale.numerator, scale.denominator
        noisy = [k + _discrete_laplace(t, s) for k in q]
    return (np.array(noisy, dtype=float) * gamma).reshape(arr.shape)


def describe(kind: str) -> dict[str, Any]:
    """What a report says about the secure sampler."""
    return {
        "sampler": "secure",
        "noise": f"exact discrete {kind} (Canonne, Kamath & Steinke 2020) on a power-of-two grid",
        "randomness": "secrets (operating-system CSPRNG)",
        "grid_ratio": GRID_RATIO,
    }
