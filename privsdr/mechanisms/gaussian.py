"""Gaussian mechanisms: isotropic and shaped covariance.

* ``gaussian``: value + N(0, sigma^2 I), sigma = z * Delta2 with z from a calibration
  (classical / thm3_exact / paper_approx / analytic).
* ``shaped_gaussian``: value + L Z with a public (or earlier-released) factor L, certified when
  lambda_min(L L^T) >= sigma_floor^2, where sigma_floor is the isotropic calibration: the privacy
  loss of N(0, S) at a shift v is governed by ||S^{-1/2} v|| <= ||v|| / sqrt(lambda_min(S)), so the
  release is at least as private as the isotropic Gaussian at the floor (FSIR Theorem 3).
  Alternatively pass ``boost=W``: noise sigma_floor Z1 + W Z2 has covariance
  sigma_floor^2 I + W W^T, above the floor by construction.
  Applied column by column to matrices (each column gets covariance L L^T).

With ``sampler="secure"`` the isotropic part is exact discrete Gaussian noise on a public grid
(``secure.py``), priced as (1/2z^2)-zCDP (``DiscreteGaussianEvent``); the analytic calibration then
solves the zCDP conversion for the share instead of the continuous profile. For the shaped mechanism
the discrete isotropic part carries the guarantee and the rest of L L^T (above that floor) is added as
data-independent floating-point noise: post-processing, so the release keeps its covariance.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..accounting.budget import Budget
from ..accounting.events import DiscreteGaussianEvent, Event, GaussianEvent
from . import secure
from .base import Mechanism, NoiseSpec, as_float_array
from .calibration import GAUSSIAN_CALIBRATIONS, discrete_gaussian_noise_multiplier, gaussian_noise_multiplier
from .sensitivity import Sensitivity


class GaussianMechanism(Mechanism):
    name = "gaussian"
    norms = ("l2",)
    calibrations = GAUSSIAN_CALIBRATIONS
    default_calibration = "analytic"
    samplers = ("numpy", "secure")

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        return gaussian_noise_multiplier(share.epsilon, share.delta, calibration)

    def _secure_multiplier(self, z: float, share: Budget, calibration: str) -> float:
        # "analytic" means "exactly the share": for the discrete Gaussian that is the zCDP conversion
        return discrete_gaussian_noise_multiplier(share.epsilon, share.delta) if calibration == "analytic" else z

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        if spec.secure:
            return (DiscreteGaussianEvent(spec.noise_multiplier, spec.delta),)
        return (GaussianEvent(spec.noise_multiplier, spec.delta),)

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        arr = np.array(value, dtype=float)
        if spec.noise_off:
            return arr
        if spec.secure:
            return secure.release(arr, spec.noise_multiplier, spec.sensitivity.value, "gaussian")
        return arr + spec.scale * rng.standard_normal(arr.shape)


def secure_floor(spec: NoiseSpec, size: int) -> float:
    """The standard deviation of the secure sampler's isotropic discrete noise for a value of ``size`` entries
    (the grid noise times the grid; at most (1 + 1/GRID_RATIO) x the node's scale)."""
    gamma, scale = secure.grid_noise(spec.noise_multiplier, spec.sensitivity.value, size, "l2")
    return float(scale) * gamma


def smallest_singular_value(factor: np.ndarray) -> float:
    """sqrt(lambda_min(L L^T)); zero when L has fewer columns than rows."""
    factor = np.atleast_2d(np.asarray(factor, dtype=float))
    if factor.shape[1] < factor.shape[0]:
        return 0.0
    return float(np.linalg.svd(factor, compute_uv=False).min())


class ShapedGaussianMechanism(GaussianMechanism):
    name = "shaped_gaussian"

    def sample(
        self,
        value: Any,
        spec: NoiseSpec,
        rng: np.random.Generator,
        shape: np.ndarray | None = None,
        boost: np.ndarray | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        arr = np.array(value, dtype=float)
        if spec.noise_off:
            return arr
        cols = arr.reshape(arr.shape[0], -1)
        if spec.secure:
            return self._secure_sample(cols, spec, rng, shape, boost).reshape(arr.shape)
        if shape is not None:
            factor = np.asarray(shape, dtype=float)
            noise = factor @ rng.standard_normal((factor.shape[1], cols.shape[1]))
        else:
            noise = spec.scale * rng.standard_normal(cols.shape)
            if boost is not None:
                w = np.atleast_2d(np.asarray(boost, dtype=float))
                noise = noise + w @ rng.standard_normal((w.shape[1], cols.shape[1]))
        return (cols + noise).reshape(arr.shape)

    def prepare(
        self, value: Any, spec: NoiseSpec, shape: np.ndarray | None = None, boost: np.ndarray | None = None, **kwargs: Any
    ) -> np.ndarray:
        """Refuse (before any charge) a factor below the floor or of the wrong size."""
        arr = as_float_array(value, self.name)
        if shape is not None and boost is not None:
            raise ValueError("pass either shape=L or boost=W, not both")
        for name, m in (("shape", shape), ("boost", boost)):
            if m is None:
                continue
            m = np.atleast_2d(np.asarray(m, dtype=float))
            if m.shape[0] != arr.shape[0] or not np.all(np.isfinite(m)):
                raise ValueError(f"{name} must be a finite matrix with {arr.shape[0]} rows, got shape {m.shape}")
        if shape is not None and not spec.noise_off:
            smin = smallest_singular_value(shape)
            floor = secure_floor(spec, arr.size) if spec.secure else spec.scale
            if smin < floor:
                raise ValueError(
                    f"shaped noise factor has sqrt(lambda_min(L L^T)) = {smin:.6g} below the certified floor "
                    f"sigma = {floor:.6g}; the release would not meet its budget"
                )
        return arr

    @staticmethod
    def _secure_sample(cols: np.ndarray, spec: NoiseSpec, rng: np.random.Generator, shape: np.ndarray | None,
                       boost: np.ndarray | None) -> np.ndarray:
        """Exact isotropic discrete noise at the floor (the guarantee) plus, as post-processing, the
        data-independent Gaussian noise that brings the covariance up to L L^T (or adds W W^T)."""
        out = secure.release(cols, spec.noise_multiplier, spec.sensitivity.value, "gaussian")
        if shape is not None:
            factor = np.asarray(shape, dtype=float)
            floor = secure_floor(spec, cols.size)
            lam, vec = np.linalg.eigh(factor @ factor.T)
            rest = vec * np.sqrt(np.clip(lam - floor**2, 0.0, None))
            return out + rest @ rng.standard_normal((rest.shape[1], cols.shape[1]))
        if boost is not None:
            w = np.atleast_2d(np.asarray(boost, dtype=float))
            return out + w @ rng.standard_normal((w.shape[1], cols.shape[1]))
        return out
