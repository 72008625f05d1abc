"""The mechanism registry: look mechanisms up by name; users can register their own."""
from __future__ import annotations

from .base import Mechanism
from .distributed import DistributedGaussianMechanism, DistributedSymmetricGaussianMechanism
from .gaussian import GaussianMechanism, ShapedGaussianMechanism
from .laplace import LaplaceMechanism
from .opaque import NonPrivateMechanism, OpaqueMechanism
from .selection import NoisyTopMechanism, PeelingMechanism, ReportNoisyMaxMechanism
from .symmetric import SymmetricGaussianMechanism

_REGISTRY: dict[str, Mechanism] = {}


def register_mechanism(mechanism: Mechanism, *, replace: bool = False) -> Mechanism:
    """Register ``mechanism`` under ``mechanism.name`` (refuses to shadow one unless ``replace``)."""
    if not isinstance(mechanism, Mechanism):
        raise TypeError("register a Mechanism instance (subclass privsdr.mechanisms.Mechanism)")
    if mechanism.name in _REGISTRY and not replace:
        raise ValueError(f"a mechanism named {mechanism.name!r} is already registered; pass replace=True")
    _REGISTRY[mechanism.name] = mechanism
    return mechanism


def get_mechanism(name: str) -> Mechanism:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def available_mechanisms() -> list[str]:
    return sorted(_REGISTRY)


for _m in (
    LaplaceMechanism(),
    GaussianMechanism(),
    ShapedGaussianMechanism(),
    SymmetricGaussianMechanism(),
    DistributedGaussianMechanism(),
    DistributedSymmetricGaussianMechanism(),
    ReportNoisyMaxMechanism(),
    PeelingMechanism(),
    NoisyTopMechanism(),
    OpaqueMechanism(),
    NonPrivateMechanism(),
):
    register_mechanism(_m)
