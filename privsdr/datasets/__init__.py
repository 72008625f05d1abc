"""Synthetic data for demos and tests (the papers' simulation models arrive with their estimators)."""
from .synthetic import gaussian_rows
from .tables import load_csv

__all__ = ["gaussian_rows", "load_csv"]
