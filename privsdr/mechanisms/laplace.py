"""Laplace mechanism: value + Laplace(b) per entry, b = Delta1/eps (pure eps-DP; Dwork & Roth 2014)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..accounting.budget import Budget
from ..accounting.events import Event, LaplaceEvent
from .base import Mechanism, NoiseSpec
from .calibration import laplace_noise_multiplier
from .sensitivity import Sensitivity


class LaplaceMechanism(Mechanism):
    name = "laplace"
    norms = ("l1",)
    calibrations = ("classical",)
    default_calibration = "classical"
    pure = True

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        return laplace_noise_multiplier(share.epsilon)

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        return (LaplaceEvent(spec.noise_multiplier),)

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        arr = np.array(value, dtype=float)
        if spec.noise_off:
            return arr
        return arr + rng.laplace(0.0, spec.scale, size=arr.shape)
