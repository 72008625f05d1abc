"""Distributed noise for secure aggregation: Gaussian noise on a public grid, drawn as the sum of per-party
discrete Gaussian shares (Kairouz, Liu & Steinke, ICML 2021, "The Distributed Discrete Gaussian Mechanism for
Federated Learning with Secure Aggregation").

Each of ``parties`` parties rounds its own statistic to the public grid and adds one exact discrete Gaussian
share N_Z(0, sigma_local^2) (CKS20 sampler, ``secure.py``); only the sum of the parties' vectors is opened
(``privsdr.secure``). With a declared collusion threshold t, a coalition of t parties knows its own shares and
can subtract them, so the calibration is met by the ``h = parties - t`` other shares alone:

    sigma_local^2 = sigma_total^2 / h,   sigma_total = z (Delta2 / gamma + ceil(sqrt(d)))   (grid steps),

where gamma is the public grid of ``secure.grid`` and Delta2 / gamma + ceil(sqrt(d)) bounds the change of the
rounded statistic of the one party whose record changes (every other party's rounded statistic is the same on
both neighbours). The release is priced by ``DistributedDiscreteGaussianEvent`` (KLS21 Prop. 14: rho-zCDP with
rho = (1/z + sqrt(d) tau)^2 / 2), never by the continuous Gaussian's curve. Without collusion the opened noise has
sigma_total sqrt(parties / h): the price of tolerating t colluders.

``sample`` draws the same distribution in this process (for audits and simulations); a secure run never calls it:
its parties draw their shares where their data lives.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from ..accounting.budget import Budget
from ..accounting.events import DistributedDiscreteGaussianEvent, Event, distributed_tau
from ..accounting.zcdp import zcdp_epsilon
from . import secure
from .base import Mechanism, NoiseSpec, as_float_array
from .calibration import discrete_gaussian_noise_multiplier
from .search import smallest_fitting_factor
from .sensitivity import Sensitivity

SAMPLER = "distributed"  #: the ``sampler`` of a distributed node's spec: its noise is drawn by the parties


def shares_of(params: Mapping[str, Any]) -> tuple[int, int, int]:
    """(parties that add a share, colluders tolerated, honest shares h = parties - colluders), checked."""
    parties, colluders = int(params["parties"]), int(params["colluders"])
    if parties < 1 or not 0 <= colluders < parties:
        raise ValueError(f"need parties >= 1 noise shares and 0 <= colluders < parties, got parties={parties}, colluders={colluders}")
    return parties, colluders, parties - colluders


@attrs.frozen
class ShareNoise:
    """The public numbers of one distributed release: the grid, the grid sensitivity and each party's share."""

    gamma: float  #: the grid step (a power of two)
    grid_sensitivity: float  #: Delta2 / gamma + ceil(sqrt(d)): the rounded statistic's L2 change between neighbours
    sigma_total: float  #: what the honest shares add up to (grid steps)
    sigma_local2: Fraction  #: each party's share variance (grid steps^2), exact for the sampler
    parties: int
    honest: int
    dimension: int

    @property
    def sigma_local(self) -> float:
        return math.sqrt(float(self.sigma_local2))

    @property
    def opened_sd(self) -> float:
        """The standard deviation of the opened noise in real units: every party adds its share."""
        return math.sqrt(self.parties * float(self.sigma_local2)) * self.gamma

    @property
    def tau(self) -> float:
        return distributed_tau(self.sigma_local, self.honest)


def share_noise(spec: NoiseSpec) -> ShareNoise:
    """The grid and the per-party share of a distributed node's spec (public quantities only). An optional param
    ``grid_exponent`` k puts the release on the finer grid 2^k (a statistic computed exactly in those units inside
    the secure computation, e.g. cross-products of rounded columns); it must not be coarser than the default grid."""
    parties, _, honest = shares_of(spec.params)
    d = int(spec.params["dimension"])
    gamma, sigma = secure.grid_noise(spec.noise_multiplier, spec.sensitivity.value, d, "l2")
    if spec.params.get("grid_exponent") is not None:
        fine = 2.0 ** int(spec.params["grid_exponent"])
        if fine > gamma:
            raise ValueError(f"grid 2^{int(spec.params['grid_exponent'])} is coarser than the release's default grid {gamma:g}")
        gamma = fine
        sigma = Fraction(spec.noise_multiplier) * (Fraction(spec.sensitivity.value) / Fraction(gamma) + secure._spread(d, "l2"))
    return ShareNoise(gamma, float(Fraction(spec.sensitivity.value) / Fraction(gamma) + secure._spread(d, "l2")), float(sigma),
                      sigma * sigma / honest, parties, honest, d)


#: memo of ``DistributedGaussianMechanism._multiplier`` (cleared when it reaches ``_MEMO_SIZE`` entries)
_MULTIPLIERS: dict[Any, float] = {}
_MEMO_SIZE = 1024


class DistributedGaussianMechanism(Mechanism):
    """Secure aggregation's Gaussian noise on a vector (module docstring). Params: ``parties`` (noise shares),
    ``colluders`` (t), ``dimension`` (numbers released)."""

    name = "distributed_gaussian"
    norms = ("l2",)
    calibrations = ("analytic",)
    default_calibration = "analytic"
    required_params = ("parties", "colluders", "dimension")
    samplers = (SAMPLER,)

    def _sampler(self, sampler: str) -> str:
        return SAMPLER  # whatever the plan asks for: the parties draw exact discrete shares

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        """The calibrated multiplier, memoised: a pure function of its arguments (~40 ms of rho solves each), asked
        again by every fit of the same shape (every launcher, party and probe of one job)."""
        shares_of(params)
        try:
            key = (sensitivity, share, calibration, tuple(sorted(params.items())))
            hash(key)
        except TypeError:  # a parameter that is not hashable: solve without the memo
            return self._solve_multiplier(sensitivity, share, params)
        if key not in _MULTIPLIERS:
            if len(_MULTIPLIERS) >= _MEMO_SIZE:
                _MULTIPLIERS.clear()
            _MULTIPLIERS[key] = self._solve_multiplier(sensitivity, share, params)
        return _MULTIPLIERS[key]

    def _solve_multiplier(self, sensitivity: Sensitivity, share: Budget, params: Mapping[str, Any]) -> float:
        z = discrete_gaussian_noise_multiplier(share.epsilon, share.delta)
        spent: dict[float, float] = {}

        def epsilon(f: float) -> float:
            if f not in spent:
                spent[f] = zcdp_epsilon(self._event(z * f, sensitivity, share.delta, params).rho, share.delta)
            return spent[f]

        # tau is ~0 for any realistic share and z fits; if it does not, the smallest larger multiplier whose bound with
        # tau holds, by the one calibration search (``search``)
        factor = smallest_fitting_factor(lambda f: epsilon(f) <= share.epsilon,
                                         lambda f: math.log(epsilon(f) / share.epsilon) if epsilon(f) > 0 else -math.inf,
                                         1e-6, below_one=False)
        if math.isinf(factor):
            raise ValueError("the distributed discrete Gaussian cannot meet this share at any noise level (tau too large)")
        return z * factor

    def _event(self, z: float, sensitivity: Sensitivity, delta: float, params: Mapping[str, Any]) -> DistributedDiscreteGaussianEvent:
        spec = NoiseSpec(self.name, sensitivity, z, "analytic", delta, None, params, SAMPLER)
        noise = share_noise(spec)
        return DistributedDiscreteGaussianEvent(z, noise.tau, noise.dimension, delta)

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        if spec.noise_off:
            return (DistributedDiscreteGaussianEvent(0.0, 0.0, int(spec.params["dimension"]), spec.delta),)
        return (self._event(spec.noise_multiplier, spec.sensitivity, spec.delta, spec.params),)

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> Any:
        arr = as_float_array(value, self.name)
        if arr.size != int(spec.params["dimension"]):
            raise ValueError(f"{self.name} was planned for {spec.params['dimension']} numbers, got {arr.size}")
        return arr

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        """The opened sum as the protocol computes it, simulated here: round to the grid, add ``parties`` exact
        shares. (``rng`` is not used: the shares come from the CSPRNG, as in the parties.)"""
        arr = np.asarray(value, dtype=float)
        if spec.noise_off:
            return arr.copy()
        noise = share_noise(spec)
        q = np.array(secure._round_to_grid(arr, noise.gamma), dtype=object)
        total = q + sum_of_shares(arr.size, noise.sigma_local2, noise.parties)
        return (np.array(total, dtype=float) * noise.gamma).reshape(arr.shape)


class DistributedSymmetricGaussianMechanism(DistributedGaussianMechanism):
    """The same on the upper triangle (with diagonal) of a symmetric matrix, mirrored (``dimension`` = p(p+1)/2)."""

    name = "distributed_symmetric_gaussian"

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> Any:
        arr = as_float_array(value, self.name)
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"{self.name} releases a square matrix, got shape {arr.shape}")
        p = arr.shape[0]
        if p * (p + 1) // 2 != int(spec.params["dimension"]):
            raise ValueError(f"{self.name} was planned for dimension {spec.params['dimension']}, got a {p} x {p} matrix")
        return (arr + arr.T) / 2.0

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        arr = np.asarray(value, dtype=float)
        p = arr.shape[0]
        rows, cols = np.triu_indices(p)
        upper = super().sample(arr[rows, cols], spec, rng)
        out: np.ndarray = np.zeros_like(arr)
        out[rows, cols] = upper
        mirrored: np.ndarray = out + np.triu(out, 1).T
        return mirrored


def sum_of_shares(size: int, sigma_local2: Fraction, parties: int) -> np.ndarray:
    """``parties`` independent exact N_Z(0, sigma_local2) vectors of ``size``, summed (object array of Python ints)."""
    num, den = sigma_local2.numerator, sigma_local2.denominator
    total = np.zeros(size, dtype=object)
    for _ in range(parties):
        total = total + np.array([secure._discrete_gaussian(num, den) for _ in range(size)], dtype=object)
    return total


def upper_triangle(matrix: np.ndarray) -> np.ndarray:
    """The numbers a symmetric release carries (row-major upper triangle with diagonal)."""
    rows, cols = np.triu_indices(matrix.shape[0])
    upper: np.ndarray = np.asarray(matrix)[rows, cols]
    return upper


def from_upper_triangle(values: np.ndarray, p: int) -> np.ndarray:
    rows, cols = np.triu_indices(p)
    out = np.zeros((p, p))
    out[rows, cols] = values
    return out + np.triu(out, 1).T
