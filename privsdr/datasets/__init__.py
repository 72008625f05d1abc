"""Synthetic data for demos and tests, the papers' simulation models, and CSV loading."""
from .corn import load_corn
from .edpls_models import two_holders
from .fsir_models import FSIR_D, FSIR_MODELS, fsir_coefficients, fsir_model
from .pride_models import PRIDEData, climate_standin, design_statistics, pride_simulation
from .sir_models import MODELS, TRUE_K, band_covariance, sir_model
from .synthetic import gaussian_rows
from .tables import csv_header, load_csv
from .vertical import VerticalData, dpbcd_synthetic, forest_fires, garment_productivity

__all__ = ["load_corn", "two_holders", "FSIR_D", "FSIR_MODELS", "fsir_coefficients", "fsir_model", "MODELS", "TRUE_K",
           "band_covariance", "gaussian_rows", "csv_header", "load_csv", "sir_model", "VerticalData", "dpbcd_synthetic",
           "forest_fires", "garment_productivity", "PRIDEData", "climate_standin", "design_statistics", "pride_simulation"]
