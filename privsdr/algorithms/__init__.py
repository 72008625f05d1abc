"""Estimators: each one is a plan of mechanism calls built from public parameters plus core numerics."""
from .adassp import AdaSSPRegression
from .dpsir import DPSIR, SparseDPSIR
from .mean_covariance import DPMeanCovariance
from .pls import DPPLS
from .sparse_pca import DPSparsePCA
from .spectral import MSC

__all__ = ["AdaSSPRegression", "DPMeanCovariance", "DPPLS", "DPSIR", "DPSparsePCA", "MSC", "SparseDPSIR"]
