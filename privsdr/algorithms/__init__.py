"""Estimators: each one is a plan of mechanism calls built from public parameters plus core numerics."""
from .mean_covariance import DPMeanCovariance

__all__ = ["DPMeanCovariance"]
