"""Mechanism interface and the noise specification a calibrated plan node carries."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from ..accounting.budget import Budget
from ..accounting.events import Event
from .secure import check_sampler
from .sensitivity import Sensitivity


@attrs.frozen
class NoiseSpec:
    """How much noise one node adds, and why.

    ``noise_multiplier`` is the noise scale per unit of sensitivity (Gaussian sigma/Delta2,
    Laplace b/Delta1); ``scale`` is the absolute noise scale. ``share`` is the (eps_i, delta_i) the
    node was calibrated for (None when given a multiplier directly); ``delta`` is the delta share
    at which basic composition prices it. ``sampler`` is ``numpy`` (fast floating-point noise) or
    ``secure`` (exact discrete noise on a public grid, ``mechanisms.secure``), which changes the event.
    """

    mechanism: str
    sensitivity: Sensitivity
    noise_multiplier: float
    calibration: str
    delta: float = 0.0
    share: Budget | None = None
    params: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    sampler: str = "numpy"

    @property
    def secure(self) -> bool:
        return self.sampler == "secure"

    @property
    def scale(self) -> float:
        return self.noise_multiplier * self.sensitivity.value

    @property
    def noise_off(self) -> bool:
        return self.noise_multiplier == 0.0

    def scaled(self, factor: float) -> NoiseSpec:
        """The same node with its noise multiplied by ``factor`` (plan-level tight calibration)."""
        # the fields in order, as attrs.evolve passes them (~3x its speed: the tight search scales every spec per step)
        return type(self)(self.mechanism, self.sensitivity, self.noise_multiplier * factor, f"{self.calibration}*tight", self.delta,
                          self.share, self.params, self.sampler)


class Mechanism:
    """A noise mechanism: calibrate from (sensitivity, share), sample from a Generator, describe its events.

    Subclasses set ``name``, ``norms`` (accepted sensitivity norms), ``calibrations`` and implement
    ``_multiplier``, ``events`` and ``sample``.
    """

    name: ClassVar[str] = "abstract"
    norms: ClassVar[tuple[str, ...]] = ("l2",)
    calibrations: ClassVar[tuple[str, ...]] = ()
    default_calibration: ClassVar[str] = ""
    #: whether a plan may rescale this node's noise by one global factor (tight calibration)
    scalable: ClassVar[bool] = True
    #: whether the mechanism is pure eps-DP (ignores delta)
    pure: ClassVar[bool] = False
    #: public parameters the mechanism requires (e.g. ``("n", "p")``)
    required_params: ClassVar[tuple[str, ...]] = ()
    #: the noise samplers the mechanism implements (``secure``: exact discrete noise, see ``secure.py``)
    samplers: ClassVar[tuple[str, ...]] = ("numpy",)

    def check_sensitivity(self, sensitivity: Sensitivity) -> None:
        if sensitivity.norm not in self.norms:
            raise ValueError(
                f"mechanism {self.name!r} needs a sensitivity in {self.norms}, got {sensitivity.norm!r}"
            )

    def required_for(self, calibration: str) -> tuple[str, ...]:
        return self.required_params

    def calibrate(
        self,
        sensitivity: Sensitivity,
        share: Budget,
        calibration: str | None = None,
        params: Mapping[str, Any] | None = None,
        sampler: str = "numpy",
    ) -> NoiseSpec:
        """Noise for one release of this node at privacy share ``share``. A ``sampler`` the mechanism does
        not implement falls back to ``numpy`` (the spec says which one runs)."""
        self.check_sensitivity(sensitivity)
        calibration = calibration or self.default_calibration
        if self.calibrations and calibration not in self.calibrations:
            raise ValueError(f"mechanism {self.name!r} has no calibration {calibration!r}; choose from {self.calibrations}")
        params = dict(params or {})
        missing = [k for k in self.required_for(calibration) if k not in params]
        if missing:
            raise ValueError(f"mechanism {self.name!r} with calibration {calibration!r} needs public parameters {missing}")
        if share.is_infinite:
            z = 0.0
        else:
            if not self.pure and share.delta == 0.0:
                raise ValueError(f"mechanism {self.name!r} needs delta > 0 in its budget share")
            z = self._multiplier(sensitivity, share, calibration, params)
            if self._sampler(sampler) == "secure":
                z = self._secure_multiplier(z, share, calibration)
        delta = 0.0 if self.pure else share.delta
        return NoiseSpec(self.name, sensitivity, z, calibration, delta, share, params, self._sampler(sampler))

    def _sampler(self, sampler: str) -> str:
        check_sampler(sampler)
        return sampler if sampler in self.samplers else "numpy"

    def _secure_multiplier(self, z: float, share: Budget, calibration: str) -> float:
        """The multiplier under the secure sampler (default: the same; the Gaussian recalibrates)."""
        return z

    def from_noise_multiplier(
        self, sensitivity: Sensitivity, noise_multiplier: float, delta: float = 0.0, params: Mapping[str, Any] | None = None,
        sampler: str = "numpy",
    ) -> NoiseSpec:
        """A node given its noise multiplier directly; ``delta`` is its share for basic composition."""
        self.check_sensitivity(sensitivity)
        if not (math.isfinite(noise_multiplier) and noise_multiplier >= 0):
            raise ValueError(f"noise multiplier must be finite and >= 0, got {noise_multiplier!r}")
        return NoiseSpec(self.name, sensitivity, float(noise_multiplier), "noise_multiplier", 0.0 if self.pure else float(delta),
                         None, dict(params or {}), self._sampler(sampler))

    def _multiplier(self, sensitivity: Sensitivity, share: Budget, calibration: str, params: Mapping[str, Any]) -> float:
        raise NotImplementedError

    def events(self, spec: NoiseSpec) -> tuple[Event, ...]:
        raise NotImplementedError

    def prepare(self, value: Any, spec: NoiseSpec, **kwargs: Any) -> Any:
        """Validate the query value (and release options) before anything is charged."""
        return as_float_array(value, self.name)

    def sample(self, value: Any, spec: NoiseSpec, rng: np.random.Generator, **kwargs: Any) -> Any:
        """Release ``value`` (as returned by ``prepare``) with noise drawn from ``rng``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<mechanism {self.name}>"


def as_float_array(value: Any, name: str) -> npt.NDArray[np.float64]:
    """The query value as a float array; NaN/inf is a bug in the query (clip first), so refuse it."""
    arr = np.array(value, dtype=float, copy=True)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"the value released by {name!r} contains NaN or inf")
    return arr
