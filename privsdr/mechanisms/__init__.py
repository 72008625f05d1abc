"""Noise mechanisms: calibration, sampling from a supplied Generator, and their privacy events."""
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
