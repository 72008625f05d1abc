"""Symmetric-matrix Gaussian: noise on the upper triangle (with diagonal), mirrored.

The sensitivity is the L2 norm of the change of the upper triangle (e.g. sqrt(2) c^2 / n for a
second-moment matrix of n records with ||x|| <= c under replace-one; FSIR spec §3.3), so this is
a plain Gaussian mechanism on p(p+1)/2 numbers. Calibrations: the Gaussian ones (``classical`` is
Analyze-Gauss, Dwork et al. 2014) and ``modsulq`` (Chaudhuri et al. 2012, FSIR Lemma 1: needs the
public ``n``, ``p`` and ``scale`` = c^2 with ||x|| <= c; noise std = scale * sigma_MODSULQ).
Whatever the calibration, the accountants price the release by its exact Gaussian profile (the
discrete Gaussian's zCDP curve under ``sampler="secure"``, which draws the upper triangle exactly).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ..accounting.budget import Budget
from . import secure
from .base import NoiseSpec, as_float_array
from .calibration import GAUSSIAN_CALIBRATIONS, gaussian_noise_multiplier, modsulq_sigma
from .gaussian import GaussianMechanism
from .sensitivity import Sensitivity


class SymmetricGaussianMechanism(GaussianMechanism):
    name = "symmetric_gaussian"
    calibrations = GAUSSIAN_CALIBRATIONS + ("analyze_gauss", "modsulq")
    default_calibration = "analytic"

    def required_for(self, calibration: str) -> tuple[str, ...]:
        return ("n", "p", "scale") if calibration == "modsulq" else ()

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        if calibration == "modsulq":
            sigma = float(params["scale"]) * modsulq_sigma(int(params["n"]), int(params["p"]), share.epsilon, share.delta)
            return sigma / sensitivity.value
        if calibration == "analyze_gauss":
            calibration = "classical"
        return gaussian_noise_multiplier(share.epsilon, share.delta, calibration)

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> np.ndarray:
        arr = as_float_array(value, self.name)
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"symmetric_gaussian releases a square matrix, got shape {arr.shape}")
        magnitude = np.abs(arr)
        # np.allclose(arr, arr.T, rtol=1e-12, atol=1e-12 max(1, max|arr|)) for a finite arr, without its per-call overhead
        if not np.all(np.abs(arr - arr.T) <= 1e-12 * max(1.0, float(magnitude.max(initial=0.0))) + 1e-12 * magnitude.T):
            raise ValueError("symmetric_gaussian releases a symmetric matrix")
        return (arr + arr.T) / 2.0

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        arr: npt.NDArray[np.float64] = np.array(value, dtype=float)
        if spec.noise_off:
            return arr
        p = arr.shape[0]
        if spec.secure:
            rows, cols = np.triu_indices(p)
            noisy = np.zeros_like(arr)
            noisy[rows, cols] = secure.release(arr[rows, cols], spec.noise_multiplier, spec.sensitivity.value, "gaussian")
            return noisy + np.triu(noisy, 1).T
        upper = np.triu(spec.scale * rng.standard_normal((p, p)))
        return arr + upper + np.triu(upper, 1).T
