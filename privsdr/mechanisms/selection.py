"""Private selection with Laplace noise (pure eps-DP).

* ``report_noisy_max``: argmax_j (score_j + Laplace(b)), b = 2 Delta_inf / eps where Delta_inf bounds
  the change of every score (Dwork & Roth 2014, Claim 3.9). Releases the index only.
* ``peeling``: Algorithm 1 of Cai, Wang & Zhang / DP-SIR spec §3 ("vector noisy hard thresholding").
  For ``A`` (d x p) with entry-wise sensitivity lambda, select s columns by s rounds of noisy max on
  column norms, then release the selected columns with Laplace noise, one scale everywhere::

      b = lambda * 2 sqrt(3 d s ln(1/delta)) / eps

  Events (DP-SIR spec §3, accounting check of Lemma 3): s pure eps0 = 2 sqrt(d) lambda / b selections
  and d s Laplace(b/lambda) releases. The ledger composes them (advanced/RDP give <= eps for
  eps <= 1 and ln(1/delta) >~ 5); nothing hard-codes "(eps, delta)".
* ``noisy_top``: the selection part of peeling alone (Dwork, Su & Zhang 2021; Cai, Wang & Zhang 2021, Alg. 1 without
  the value release): s rounds of report-noisy-max on the remaining scores, Laplace(b) each round, b from peeling's
  calibration with d = 1 (b = lambda 2 sqrt(3 s ln(1/delta)) / eps). Releases the s indices only; events: s pure
  eps0 = 2 lambda / b selections, composed by the ledger.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..accounting.budget import Budget
from ..accounting.events import Event, LaplaceEvent, PureEvent
from ..accounting.rounding import div_up, mul_up, sqrt_up
from .base import Mechanism, NoiseSpec, as_float_array
from .calibration import inverse_at_least
from .sensitivity import Sensitivity


def peeling_multiplier(name: str, s: int, d: int, delta: float, epsilon: float) -> float:
    """Peeling's Laplace scale per unit of entry-wise sensitivity, 2 sqrt(3 d s ln(1/delta)) / eps (Cai, Wang & Zhang
    2021, Alg. 1); ``noisy_top`` is its selection alone, d = 1."""
    if not 0 < delta < 1:
        raise ValueError(f"{name} needs the public parameter 0 < delta < 1 in its calibration")
    return 2.0 * math.sqrt(3.0 * d * s * math.log(1.0 / delta)) / epsilon


def noisy_top_indices(scores: np.ndarray, s: int, b: float, rng: np.random.Generator) -> np.ndarray:
    """s rounds of report-noisy-max without replacement: fresh Laplace(b) on every score each round, the largest
    still available is taken. The selection of peeling and of ``noisy_top``; indices in the order they were picked."""
    available = np.ones(scores.size, dtype=bool)
    selected: list[int] = []
    for _ in range(s):
        noisy = scores + (rng.laplace(0.0, b, size=scores.shape) if b > 0 else 0.0)
        j = int(np.argmax(np.where(available, noisy, -np.inf)))
        selected.append(j)
        available[j] = False
    return np.array(selected, dtype=int)


class ReportNoisyMaxMechanism(Mechanism):
    name = "report_noisy_max"
    norms = ("linf",)
    calibrations = ("classical",)
    default_calibration = "classical"
    pure = True

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        return inverse_at_least(2.0, share.epsilon)

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        z = spec.noise_multiplier
        return (PureEvent(div_up(2.0, z)),)

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> np.ndarray:
        arr = as_float_array(value, self.name).ravel()
        if arr.size == 0:
            raise ValueError("report_noisy_max needs at least one score")
        return arr

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> int:
        scores = np.asarray(value, dtype=float)
        if not spec.noise_off:
            scores = scores + rng.laplace(0.0, spec.scale, size=scores.shape)
        return int(np.argmax(scores))


class PeelingMechanism(Mechanism):
    name = "peeling"
    norms = ("linf",)
    calibrations = ("paper",)
    default_calibration = "paper"
    pure = True
    required_params = ("s", "d", "delta")

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        return peeling_multiplier(self.name, int(params["s"]), int(params["d"]), float(params["delta"]), share.epsilon)

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        s, d = int(spec.params["s"]), int(spec.params["d"])
        z = spec.noise_multiplier
        select = PureEvent(div_up(mul_up(2.0, sqrt_up(d)), z))
        return (select,) * s + (LaplaceEvent(z),) * (d * s)

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> np.ndarray:
        arr = np.atleast_2d(as_float_array(value, self.name))
        s, d = int(spec.params["s"]), int(spec.params["d"])
        if arr.ndim != 2 or arr.shape[0] != d or not 1 <= s <= arr.shape[1]:
            raise ValueError(f"peeling expects a {d} x p matrix with p >= s = {s}, got shape {arr.shape}")
        return arr

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(A_hat, selected)``: the sparse noisy matrix and the selected column indices."""
        a = np.asarray(value, dtype=float)
        s = int(spec.params["s"])
        b = spec.scale
        idx = noisy_top_indices(np.linalg.norm(a, axis=0), s, b, rng)
        out = np.zeros_like(a)
        out[:, idx] = a[:, idx] + (rng.laplace(0.0, b, size=(a.shape[0], s)) if b > 0 else 0.0)
        return out, idx


class NoisyTopMechanism(Mechanism):
    """s rounds of report-noisy-max without replacement (module docstring); the output is the index array."""

    name = "noisy_top"
    norms = ("linf",)
    calibrations = ("paper",)
    default_calibration = "paper"
    pure = True
    required_params = ("s", "delta")

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        return peeling_multiplier(self.name, int(params["s"]), 1, float(params["delta"]), share.epsilon)

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        z = spec.noise_multiplier
        return (PureEvent(div_up(2.0, z)),) * int(spec.params["s"])

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> np.ndarray:
        arr = as_float_array(value, self.name).ravel()
        s = int(spec.params["s"])
        if not 1 <= s <= arr.size:
            raise ValueError(f"noisy_top selects s = {s} of {arr.size} scores: need 1 <= s <= the number of scores")
        return arr

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        """The s selected indices, in the order they were picked."""
        return noisy_top_indices(np.asarray(value, dtype=float), int(spec.params["s"]), spec.scale, rng)
