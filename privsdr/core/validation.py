"""Input checks shared by the estimators (numerics only, no privacy code)."""
from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np


def check_matrix(X: Any, name: str = "X", min_rows: int = 1, min_cols: int = 1) -> np.ndarray:
    """A finite 2-D float array with at least ``min_rows`` rows; ValueError/TypeError otherwise."""
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric 2-D array: {exc}") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {arr.shape[0]}")
    if arr.shape[1] < min_cols:
        raise ValueError(f"{name} needs at least {min_cols} columns, got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def check_positive(value: Any, name: str) -> float:
    """A positive finite real (public bounds, hyperparameters)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a positive real number, got {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return value
