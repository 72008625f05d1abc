"""Exact privacy profile of the Gaussian mechanism (Balle & Wang 2018, Theorem 8), rounded outward.

For noise multiplier ``z = sigma / Delta`` (Delta = L2 sensitivity under the node's relation)::

    delta(eps) = Phi(1/(2z) - eps*z) - exp(eps) * Phi(-1/(2z) - eps*z)

``gaussian_delta`` evaluates it in log space. The two terms nearly cancel when delta << Phi(1/(2z) -
eps z), so the double-precision value can sit a few ulps below the real delta (e.g. 1.0000000000000126e-5
against a computed 1e-5). ``gaussian_delta_upper`` adds a bound on that error, and every direction the
ledger relies on is solved against the upper bound: ``gaussian_epsilon`` (what a node is charged) is
never below the exact epsilon, and ``analytic_noise_multiplier`` never below the exact sigma. Both
searches are bracketed and bounded, so they return or refuse in bounded time for any finite input.
This is pure math (no dp-accounting import) so that ``import privsdr`` stays light.
"""
from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

from ..errors import ValidationError  # a ValueError: callers that caught ValueError still do

#: relative error of one double-precision operation
_U = 2.0**-53
#: epsilons above this are refused: no noise level is meaningful there, and exp(eps) is not representable
MAX_EPSILON = 1e12


@functools.cache
def _log_ndtr() -> Any:
    """scipy's log Phi for one double, imported at the first calibration (not by ``import privsdr``), then looked up
    once. ``cython_special.log_ndtr`` is the ``special.log_ndtr`` ufunc's own kernel without the ufunc's per-call
    overhead (half the time of a Python-float call; the calibrations evaluate it hundreds of times per plan); a test
    checks that the two agree bit for bit."""
    from scipy.special import cython_special

    return cython_special.log_ndtr


def _log_terms(z: float, epsilon: float) -> tuple[float, float, float]:
    log_ndtr = _log_ndtr()
    a = 1.0 / (2.0 * z)
    b = epsilon * z
    log_ndtr_minus = float(log_ndtr(-a - b))
    return float(log_ndtr(a - b)), epsilon + log_ndtr_minus, log_ndtr_minus


def _upper(z: float, epsilon: float) -> float:
    """``gaussian_delta_upper`` for one finite z > 0 as one flat function (the solves evaluate it ~25 times each): the
    same operations in the same order as ``_log_terms`` and the bound below, so the same doubles (a test checks it)."""
    log_ndtr = _log_ndtr()
    a = 1.0 / (2.0 * z)
    b = epsilon * z
    log_p: float = log_ndtr(a - b)
    log_ndtr_minus: float = log_ndtr(-a - b)
    log_q = epsilon + log_ndtr_minus
    p = math.exp(log_p)
    q = math.exp(min(log_q, log_p))  # e^eps q <= p up to rounding near the root
    err = 4.0 * _U * ((abs(log_p) + 8.0) * p + (abs(epsilon) + abs(log_ndtr_minus) + 8.0) * q)
    value = 0.0 if log_q >= log_p else p * -math.expm1(log_q - log_p)
    return min(1.0, value + err)


@functools.cache
def _brent() -> Callable[..., float]:
    """scipy's Brent root finder (the C routine behind ``optimize.brentq``) called without brentq's Python wrapper, which
    adds a NaN check around every evaluation (``_upper`` returns no NaN for finite arguments) and costs as much
    as the evaluation itself. The same routine on the same function values gives the same root, bit for bit (a test
    compares it with ``optimize.brentq``); where scipy no longer has it, ``optimize.brentq`` answers."""
    from scipy import optimize

    routine = getattr(getattr(optimize, "_zeros", None), "_brentq", None)
    if routine is None:  # pragma: no cover - another scipy layout
        return lambda f, lo, hi: float(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500))
    return lambda f, lo, hi: float(routine(f, lo, hi, 1e-15, 1e-15, 500, (), False, True))


def gaussian_delta(noise_multiplier: float, epsilon: float) -> float:
    """delta(eps) of one Gaussian release with ``noise_multiplier = sigma / sensitivity`` (nearest)."""
    z = float(noise_multiplier)
    if z <= 0.0:
        return 1.0
    if math.isinf(z):
        return 0.0
    log_p, log_q, _ = _log_terms(z, epsilon)
    if log_q >= log_p:
        return 0.0
    return float(math.exp(log_p) * -math.expm1(log_q - log_p))


def gaussian_delta_upper(noise_multiplier: float, epsilon: float) -> float:
    """An upper bound on the exact delta(eps): the computed value plus its floating-point error.

    log_ndtr is accurate to a few ulps of its result, so p = exp(log p) carries a relative error of
    about (|log p| + 8) u, and e^eps q (whose log adds eps) about (eps + |log q| + 8) u; the difference
    p - e^eps q then errs by at most the sum of the two absolute errors (with a factor 4 of margin).
    """
    z = float(noise_multiplier)
    if z <= 0.0:
        return 1.0
    if math.isinf(z):
        return 0.0
    return _upper(z, epsilon)


def gaussian_delta_lower(noise_multiplier: float, epsilon: float) -> float:
    """A lower bound on the exact delta(eps): the computed value v minus twice what ``gaussian_delta_upper`` added to
    it, v - 2 (upper - v) (``-inf`` where the upper bound is clipped at 1 and so says nothing of the error).

    v is within err of the exact delta (``gaussian_delta_upper``), and upper - v is err up to the rounding of the
    two additions, which err (at least 32 u v) dwarfs: twice it is more than err plus the last subtraction's
    rounding. Used only to show that an epsilon is *below* a release's charge (``BestAccountant``), never to charge.
    """
    upper = gaussian_delta_upper(noise_multiplier, epsilon)
    if not upper < 1.0:
        return -math.inf
    value = gaussian_delta(noise_multiplier, epsilon)
    return value - 2.0 * (upper - value)


def check_epsilon(epsilon: float) -> None:
    """Refuse a finite epsilon beyond ``MAX_EPSILON`` before any calibration: every noise calibration (the analytic
    Gaussian here, the discrete Gaussian of the secure paths in ``mechanisms.calibration``) says the same."""
    if epsilon > MAX_EPSILON:
        raise ValidationError(
            f"epsilon = {epsilon:g} (one release's share of the budget) is beyond {MAX_EPSILON:g}: no noise calibration is "
            "meaningful there (use Budget.infinite() for a non-private baseline)"
        )


def _epsilon_excess(z: float, delta: float) -> Callable[[float], float]:
    """eps -> ``_upper(z, eps) - delta`` for one finite z > 0, remembering its values:
    Brent's routine first evaluates the bracket's ends, which the bracketing has just evaluated, and the step-up check
    below re-reads its last point."""
    known: dict[float, float] = {}

    def excess(epsilon: float) -> float:
        value = known.get(epsilon)
        if value is None:
            value = known[epsilon] = _upper(z, epsilon) - delta
        return value

    return excess


@functools.lru_cache(maxsize=16384)
def gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Smallest eps >= 0 with delta_upper(eps) <= delta for one Gaussian release (inf if impossible).

    Rounded outward: the exact profile at the returned eps is <= delta, so a node is never charged
    below its exact cost.
    """
    z = float(noise_multiplier)
    if z <= 0.0 or delta <= 0.0:
        return math.inf
    if math.isinf(z):
        return 0.0
    if delta < sys.float_info.min:  # a subnormal delta: the bound's relative error term underflows there, so no
        return math.inf             # eps is certified (charged as delta = 0: inf, never below the exact epsilon)

    excess = _epsilon_excess(z, delta)
    if excess(0.0) <= 0.0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0.0:
        hi *= 2.0
        if hi > MAX_EPSILON:
            return math.inf
    lo = hi / 2.0 if hi > 1.0 else 0.0
    eps = _brent()(excess, lo, hi)
    step = max(abs(eps), 1e-300) * 1e-15
    for _ in range(200):  # brentq may land a hair below the root: step up until the bound holds
        if excess(eps) <= 0.0:
            return float(eps)
        eps, step = eps + step, step * 2.0
    return float(hi)  # delta_upper(z, hi) <= delta by the bracketing above


@functools.lru_cache(maxsize=4096)
def analytic_noise_multiplier(epsilon: float, delta: float) -> float:
    """Smallest z = sigma/Delta with delta_upper(eps) <= delta: the analytic Gaussian mechanism.

    The result is consistent with ``gaussian_epsilon``: charging the node at its delta gives at most
    ``epsilon``. Refuses eps > MAX_EPSILON; returns or refuses in bounded time for any finite input.
    """
    if math.isinf(epsilon):
        return 0.0
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError("the analytic Gaussian needs epsilon > 0 and 0 < delta < 1")
    check_epsilon(epsilon)

    # delta_upper(z, eps) decreases in z; bracket the root in log z
    hi = 1.0
    while _upper(hi, epsilon) > delta:
        hi *= 2.0
        if hi > 1e300:
            raise ValueError(f"no Gaussian noise level meets (epsilon={epsilon:g}, delta={delta:g})")
    lo = hi
    while _upper(lo, epsilon) <= delta:
        hi, lo = lo, lo / 2.0
        if lo < 1e-300:
            return hi

    def excess(log_z: float) -> float:
        return _upper(math.exp(log_z), epsilon) - delta

    t = _brent()(excess, math.log(lo), math.log(hi))
    z = math.exp(t)
    step = 1e-15
    for _ in range(200):  # make the two directions agree exactly: the charge of this z is <= epsilon
        if _upper(z, epsilon) <= delta and gaussian_epsilon(z, delta) <= epsilon:
            return float(z)
        z, step = z * (1.0 + step), step * 2.0
    raise ValueError(f"could not calibrate the analytic Gaussian at (epsilon={epsilon:g}, delta={delta:g})")
