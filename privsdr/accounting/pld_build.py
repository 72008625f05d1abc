"""dp-accounting's Connect-the-Dots privacy-loss distributions of one Gaussian or Laplace release, built in a few array
operations instead of a Python loop per grid point: the same distribution, bit for bit.

dp-accounting (``from_gaussian_mechanism`` / ``from_laplace_mechanism`` with sensitivity 1, no subsampling, REMOVE
adjacency, pessimistic, connect the dots; Doroshenko et al. 2022, Algorithm 1) builds the grid of rounded epsilons
e_i = i * d between the bounds of ``connect_dots_bounds``, then the hockey-stick divergence at each:

    delta(e) = F_upper(x(e)) - exp(e + log F_lower(x(e))),  x(e) = inverse privacy loss at e,

clipped to [0, 1], and turns the deltas into masses (``create_pmf_pessimistic_connect_dots_fixed_gap``). At d = 1e-4
its ``get_delta_for_epsilon`` calls the inverse privacy loss once per grid point in Python (10^4-10^6 calls, ~75% of a
build) and the masses go through a dict and a list. Here:

* x(e) for the whole grid in one array expression, with the library's own scalar formula (the same IEEE operations in
  the same order): Gaussian x = -s/2 - e z^2 / s; Laplace x = (-s - e b) / 2 within |e b| <= s, else -inf / +inf;
* the noise CDFs: Laplace through the same ``scipy.stats`` methods the library's frozen variables call (without freezing
  one per build: a frozen variable copies its distribution, ~9 ms), Gaussian through the kernels those methods call
  (``scipy.special.ndtr``, ``log_ndtr``, ``ndtri``) on the same standardised arguments;
* the masses by the library's fixed-gap arithmetic, stored in its ``DensePLDPmf`` without the dict.

Small grids (at most ``pld_pmf._MAX_PMF_SPARSE_SIZE`` points, a sparse PMF) and every other case go through the
library's own functions. ``tests/test_pld_build.py`` compares every array and scalar of the result with
dp-accounting's own construction on a grid of parameters, exactly.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

#: dp-accounting's default ``log_mass_truncation_bound`` of the Gaussian mechanism
_LOG_MASS_TRUNCATION = -50.0


def gaussian_pld(standard_deviation: float, vdi: float) -> Any:
    """``pld.from_gaussian_mechanism(standard_deviation, sensitivity=1.0, value_discretization_interval=vdi)``."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    from scipy import special

    z, s = float(standard_deviation), 1.0
    if not (0.0 < z < math.inf and 0.0 < vdi < math.inf):
        return pld.from_gaussian_mechanism(standard_deviation, sensitivity=s, value_discretization_interval=vdi)
    # GaussianPrivacyLoss.privacy_loss_tail (REMOVE), then connect_dots_bounds: the loss at the two truncations;
    # scipy.stats.norm(scale=z).ppf(q) is ndtri(q) * z + 0 (its location), and its cdf / logcdf at a finite x are
    # ndtr((x - 0) / z) / log_ndtr((x - 0) / z): the kernels are called directly, without the distribution's argument
    # checks (2/3 of a build)
    lower_x = float(special.ndtri(0.5 * math.exp(_LOG_MASS_TRUNCATION))) * z + 0.0
    upper_x = -lower_x
    lower_x -= s
    epsilon_upper = s * (-0.5 * s - lower_x) / (z**2)
    epsilon_lower = s * (-0.5 * s - upper_x) / (z**2)
    lo, hi = math.floor(epsilon_lower / vdi), math.ceil(epsilon_upper / vdi)
    epsilons = np.arange(lo, hi + 1) * vdi
    x = -0.5 * s - epsilons * (z**2) / s  # _inverse_privacy_loss_without_subsampling_remove, per element
    upper_cdf = special.ndtr(np.add(x, s) / z)  # mu_upper_cdf (REMOVE): the noise CDF at x + s
    lower_log_cdf = special.log_ndtr(x / z)  # mu_lower_log_cdf (REMOVE): the noise log CDF at x
    deltas = np.clip(upper_cdf - np.exp(epsilons + lower_log_cdf), 0, 1)
    return pld.PrivacyLossDistribution(_connect_dots_pmf(vdi, lo, hi, deltas))


def laplace_pld(parameter: float, vdi: float) -> Any:
    """``pld.from_laplace_mechanism(parameter, sensitivity=1.0, value_discretization_interval=vdi)``."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    from scipy import stats

    b, s = float(parameter), 1.0
    if not (0.0 < b < math.inf and 0.0 < vdi < math.inf):
        return pld.from_laplace_mechanism(parameter, sensitivity=s, value_discretization_interval=vdi)
    max_epsilon = s / b  # LaplacePrivacyLoss.connect_dots_bounds: [-s/b, s/b]
    lo, hi = math.floor(-max_epsilon / vdi), math.ceil(max_epsilon / vdi)
    epsilons = np.arange(lo, hi + 1) * vdi
    threshold = epsilons * b  # _inverse_privacy_loss_without_subsampling_remove, per element
    x = np.where(threshold > s, -math.inf, np.where(threshold <= -s, math.inf, 0.5 * (-s - threshold)))
    upper_cdf = stats.laplace.cdf(np.add(x, s), scale=b)
    lower_log_cdf = stats.laplace.logcdf(x, scale=b)
    deltas = np.clip(upper_cdf - np.exp(epsilons + lower_log_cdf), 0, 1)
    return pld.PrivacyLossDistribution(_connect_dots_pmf(vdi, lo, hi, deltas))


def _connect_dots_pmf(vdi: float, lo: int, hi: int, deltas: np.ndarray) -> Any:
    """``pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lo, hi, deltas)``: its arithmetic, its checks,
    its dense PMF (the same ``probs`` array its dict and list would give); small grids are left to it."""
    from dp_accounting.pld import pld_pmf

    if hi - lo + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE or deltas.size != hi - lo + 1:
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lo, hi, deltas)
    if np.any(deltas < 0) or np.any(deltas > 1):
        raise ValueError(f"deltas are not between 0 and 1 : deltas={deltas}.")
    delta_diffs = np.diff(deltas)
    if np.any(delta_diffs > pld_pmf._DELTA_DIFF_TOLERANCE):
        raise ValueError(f"deltas are not in non-increasing order: deltas={deltas}.")
    deltas = np.minimum.accumulate(deltas)
    delta_diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + delta_diffs[0] / math.expm1(vdi)
    probs[1:-1] = (delta_diffs[1:] - delta_diffs[:-1] * math.exp(vdi)) / math.expm1(vdi)
    probs[-1] = delta_diffs[-1] / math.expm1(-vdi)
    probs = np.maximum(0.0, probs)
    return pld_pmf.DensePLDPmf(vdi, lo, probs, deltas[-1], True)


#: grid points whose privacy losses the epsilon search reads per step (the first block; each next one is twice as long)
_FIRST_BLOCK = 4096


def epsilon_for_delta(distribution: Any, delta: float) -> float:
    """``distribution.get_epsilon_for_delta(delta)``, the same double, for a symmetric dense distribution (any other
    goes to the library).

    dp-accounting's ``pld_pmf._get_epsilon_for_delta`` walks the losses from the largest down, one Python step per grid
    point (~2 us): before adding loss l_k it stops if U_k > delta, L_k > 0 and log((U_k - delta) / L_k) >= l_k, with
    U_k = infinity mass + the masses above l_k and L_k = sum of exp(-l_j) p_j above l_k; it returns max(0, l_k) as soon
    as U_{k+1} >= delta with L_{k+1} = 0, else 0 if U <= L + delta, else log((U - delta) / L). Here the same sums, in
    the same order, are running sums of blocks of the walk (``np.cumsum`` adds in sequence, as the loop does): the
    losses are its repeated subtraction of the grid step (``itertools.count``), the terms exp(-l_j) p_j use
    ``math.exp`` as it does, and where numpy's log could decide the stopping test differently from ``math.log``
    (within 1e-9 relative of l_k) ``math.log`` decides."""
    from dp_accounting.pld import pld_pmf

    pmf = distribution._pmf_remove
    if not distribution._symmetric or type(pmf) is not pld_pmf.DensePLDPmf:
        return float(distribution.get_epsilon_for_delta(delta))
    infinity_mass, probs = pmf._infinity_mass, pmf._probs[::-1]
    if infinity_mass > delta:
        return math.inf
    n = probs.size
    steps = np.full(n, -pmf._discretization)
    steps[0] = (pmf._lower_loss + n - 1) * pmf._discretization
    losses = np.cumsum(steps)
    if losses[-1] < -700.0:  # exp(-l) of a block's later points would overflow where the library's walk stops first
        return float(distribution.get_epsilon_for_delta(delta))
    upper = np.cumsum(np.concatenate(([infinity_mass], probs)))  # U_0 .. U_n
    start, block, lower_end = 0, _FIRST_BLOCK, 0.0
    while start < n:
        stop = min(n, start + block)
        loss = losses[start:stop]
        terms = np.fromiter(map(math.exp, (-loss).tolist()), dtype=float, count=stop - start) * probs[start:stop]
        lower = np.cumsum(np.concatenate(([lower_end], terms)))  # L_start .. L_stop
        up = upper[start:stop + 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (up[:-1] - delta) / lower[:-1]
            logs = np.log(ratio)
        checked = (up[:-1] > delta) & (lower[:-1] > 0)
        stops = checked & (logs >= loss)
        for i in np.flatnonzero(checked & (np.abs(logs - loss) <= 1e-9 * (1.0 + np.abs(loss)))):
            stops[i] = math.log(ratio[i]) >= loss[i]
        early = np.flatnonzero((up[1:] >= delta) & (lower[1:] == 0))
        first_stop = np.flatnonzero(stops)
        if early.size and (not first_stop.size or early[0] < first_stop[0]):
            return float(max(0, float(loss[early[0]])))
        if first_stop.size:
            mass_upper, mass_lower = float(up[first_stop[0]]), float(lower[first_stop[0]])
            break
        start, block, lower_end = stop, 2 * block, lower[-1]
    else:
        mass_upper, mass_lower = float(upper[n]), float(lower_end)
    if mass_upper <= mass_lower + delta:
        return 0.0
    return math.log((mass_upper - delta) / mass_lower)
