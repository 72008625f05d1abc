"""Estimators: each one is a plan of mechanism calls built from public parameters plus core numerics."""
from .dpsir import DPSIR, SparseDPSIR
from .mean_covariance import DPMeanCovariance
from .sparse_pca import DPSparsePCA

__all__ = ["DPMeanCovariance", "DPSIR", "DPSparsePCA", "SparseDPSIR"]
