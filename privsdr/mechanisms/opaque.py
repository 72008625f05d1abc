"""Opaque (eps, delta) mechanisms: methods whose randomness is internal (objective perturbation, ...).

The node's share is its published (eps, delta); the release is a callable ``f(rng)`` the algorithm
supplies. Only basic, advanced and PLD accounting can compose it (RDP adds it on top basically).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..accounting.budget import Budget
from ..accounting.events import ApproxEvent, Event, NonPrivateEvent, PureEvent
from .base import Mechanism, NoiseSpec
from .sensitivity import Sensitivity


class OpaqueMechanism(Mechanism):
    name = "opaque"
    norms = ("l1", "l2", "linf")
    calibrations = ("declared",)
    default_calibration = "declared"
    scalable = False
    pure = False

    def calibrate(self, sensitivity: Sensitivity, share: Budget, calibration: str | None = None, params: Mapping[str, Any] | None = None,
                  sampler: str = "numpy") -> NoiseSpec:
        """Priced by the declared share; ``sampler`` is accepted and unused (the callable draws its own noise)."""
        self.check_sensitivity(sensitivity)
        return NoiseSpec(self.name, sensitivity, 0.0 if share.is_infinite else 1.0, "declared", share.delta, share, dict(params or {}))

    def from_noise_multiplier(self, *args: Any, **kwargs: Any) -> NoiseSpec:
        raise ValueError("an opaque mechanism is priced by its declared (epsilon, delta) share, not a noise multiplier")

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        assert spec.share is not None
        eps, delta = spec.share
        return (PureEvent(eps),) if delta == 0 else (ApproxEvent(eps, delta),)

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> Callable[[np.random.Generator], Any]:
        if not callable(value):
            raise TypeError("an opaque mechanism releases f(rng): pass a callable as the value")
        release: Callable[[np.random.Generator], Any] = value
        return release

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> Any:
        return value(rng)


class NonPrivateMechanism(Mechanism):
    """Releases the value as is. Only for nodes of status ``none`` (e.g. a published method's raw upload)."""

    name = "non_private"
    norms = ("l1", "l2", "linf")
    calibrations = ("none",)
    default_calibration = "none"
    scalable = False
    pure = True

    def calibrate(self, sensitivity: Sensitivity, share: Budget, calibration: str | None = None, params: Mapping[str, Any] | None = None,
                  sampler: str = "numpy") -> NoiseSpec:
        """No noise; ``sampler`` is accepted and unused."""
        return NoiseSpec(self.name, sensitivity, 0.0, "none", 0.0, None, dict(params or {}))

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        return (NonPrivateEvent(),)

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> Any:
        return value

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> Any:
        return value
