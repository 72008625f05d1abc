"""Laplace mechanism: value + Laplace(b) per entry, b = Delta1/eps (pure eps-DP; Dwork & Roth 2014).

With ``sampler="secure"``: exact discrete Laplace noise on a public grid (``secure.py``), pure 1/z
(``DiscreteLaplaceEvent``; the continuous Laplace's RDP/PLD curves are not used for it)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..accounting.budget import Budget
from ..accounting.events import DiscreteLaplaceEvent, Event, LaplaceEvent
from . import secure
from .base import Mechanism, NoiseSpec
from .calibration import laplace_noise_multiplier
from .sensitivity import Sensitivity


class LaplaceMechanism(Mechanism):
    name = "laplace"
    norms = ("l1",)
    calibrations = ("classical",)
    default_calibration = "classical"
    pure = True
    samplers = ("numpy", "secure")

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        return laplace_noise_multiplier(share.epsilon)

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        if spec.secure:
            return (DiscreteLaplaceEvent(spec.noise_multiplier),)
        return (LaplaceEvent(spec.noise_multiplier),)

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:
        arr = np.array(value, dtype=float)
        if spec.noise_off:
            return arr
        if spec.secure:
            return secure.release(arr, spec.noise_multiplier, spec.sensitivity.value, "laplace")
        return arr + rng.laplace(0.0, spec.scale, size=arr.shape)
