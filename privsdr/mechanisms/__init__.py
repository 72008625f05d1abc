"""Noise mechanisms: calibration, sampling from a supplied Generator, and their privacy events.

The names are loaded on first use (PEP 562): a secure-aggregation party process imports the exact sampler
(``privsdr.mechanisms.secure``) and the collusion rule only, not the accounting every mechanism's events need."""
from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_NAMES = {
    "Mechanism": ".base", "NoiseSpec": ".base",
    "GAUSSIAN_CALIBRATIONS": ".calibration", "discrete_gaussian_noise_multiplier": ".calibration",
    "gaussian_noise_multiplier": ".calibration", "laplace_noise_multiplier": ".calibration", "modsulq_sigma": ".calibration",
    "GaussianMechanism": ".gaussian", "ShapedGaussianMechanism": ".gaussian", "smallest_singular_value": ".gaussian",
    "LaplaceMechanism": ".laplace",
    "NonPrivateMechanism": ".opaque", "OpaqueMechanism": ".opaque",
    "available_mechanisms": ".registry", "get_mechanism": ".registry", "register_mechanism": ".registry",
    "SAMPLERS": ".secure",
    "PeelingMechanism": ".selection", "ReportNoisyMaxMechanism": ".selection",
    "NORMS": ".sensitivity", "Sensitivity": ".sensitivity",
    "SymmetricGaussianMechanism": ".symmetric",
}

__getattr__ = lazy_getattr(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from .base import Mechanism, NoiseSpec
    from .calibration import (
        GAUSSIAN_CALIBRATIONS,
        discrete_gaussian_noise_multiplier,
        gaussian_noise_multiplier,
        laplace_noise_multiplier,
        modsulq_sigma,
    )
    from .gaussian import GaussianMechanism, ShapedGaussianMechanism, smallest_singular_value
    from .laplace import LaplaceMechanism
    from .opaque import NonPrivateMechanism, OpaqueMechanism
    from .registry import available_mechanisms, get_mechanism, register_mechanism
    from .secure import SAMPLERS
    from .selection import PeelingMechanism, ReportNoisyMaxMechanism
    from .sensitivity import NORMS, Sensitivity
    from .symmetric import SymmetricGaussianMechanism

__all__ = [
    "available_mechanisms", "discrete_gaussian_noise_multiplier", "GAUSSIAN_CALIBRATIONS",
    "gaussian_noise_multiplier", "GaussianMechanism", "get_mechanism", "laplace_noise_multiplier",
    "LaplaceMechanism", "Mechanism", "modsulq_sigma", "NoiseSpec", "NonPrivateMechanism", "NORMS",
    "OpaqueMechanism", "PeelingMechanism", "register_mechanism", "ReportNoisyMaxMechanism", "SAMPLERS",
    "Sensitivity", "ShapedGaussianMechanism", "smallest_singular_value", "SymmetricGaussianMechanism",
]
