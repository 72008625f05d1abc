"""Synthetic data for demos and tests, the papers' simulation models, and CSV loading."""
from .sir_models import MODELS, TRUE_K, band_covariance, sir_model
from .synthetic import gaussian_rows
from .tables import load_csv

__all__ = ["MODELS", "TRUE_K", "band_covariance", "gaussian_rows", "load_csv", "sir_model"]
