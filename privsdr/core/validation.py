"""Input checks shared by the estimators (numerics only, no privacy code)."""
from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np

from .arrays import FloatArray


class ComplexValuesError(TypeError, ValueError):
    """Complex input: a TypeError (not a real number) and, as scikit-learn expects, a ValueError."""


def as_real_array(X: Any, name: str = "X") -> FloatArray:
    """``X`` as a float array if it holds real numbers only; TypeError for booleans, complex
    numbers, strings or other objects (they would be converted silently, or lose their imaginary part)."""
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array: {exc}") from None
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"{name} must be numeric, not boolean: give it as numbers (0/1) if that is what you mean")
    if kind == "c":
        raise ComplexValuesError(f"Complex data not supported: {name} must be numeric with real values, not complex")
    if kind == "O":
        offending = [v for v in arr.ravel() if isinstance(v, (bool, np.bool_)) or not isinstance(v, Real)][:1]
        if offending:
            bad = offending[0]
            raise TypeError(f"{name} must be numeric (real numbers only), found {type(bad).__name__} {bad!r}")
    elif kind not in "iuf":
        raise TypeError(f"{name} must be numeric (real numbers), got {arr.dtype} values (strings are not converted)")
    out = arr.astype(float, copy=False)
    if out is arr or np.shares_memory(out, arr):
        out = out.view()  # the caller's own float64 data: no copy, and nothing of ours may write to it
        out.flags.writeable = False
    return out


def check_matrix(X: Any, name: str = "X", min_rows: int = 1, min_cols: int = 1, finite: bool = True) -> FloatArray:
    """A finite 2-D float array with at least ``min_rows`` rows; ValueError/TypeError otherwise. ``finite=False``
    leaves the finiteness check to the caller's one pass over the rows (``gram_pass.gram_sums`` checks each block)."""
    arr = as_real_array(X, name)
    if arr.ndim != 2:
        hint = ": Reshape your data with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one sample" if arr.ndim == 1 else ""
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}{hint}")
    if arr.shape[0] < min_rows:
        n = arr.shape[0]
        raise ValueError(f"{name} needs at least {min_rows} rows, got {n} sample{'' if n == 1 else 's'}")
    if arr.shape[1] < min_cols:  # scikit-learn's wording
        raise ValueError(f"{name} has too few columns: {arr.shape[1]} feature(s) (shape={arr.shape}) while a minimum of {min_cols} is required.")
    if finite and arr.size and not (np.isfinite(arr.min()) and np.isfinite(arr.max())):  # NaN propagates through min/max
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def check_vector(y: Any, name: str = "y") -> FloatArray:
    """A 1-D float array of real numbers (a column vector is flattened); finiteness is checked by the caller."""
    if y is None:  # scikit-learn's wording
        raise ValueError(f"{name} is required: this estimator requires y to be passed, but the target y is None")
    arr = as_real_array(y, name)
    if arr.ndim > 2 or (arr.ndim == 2 and 1 not in arr.shape) or arr.ndim == 0:
        raise ValueError(f"{name} must be 1-D (n_samples,), got shape {arr.shape}")
    return arr.ravel()


def check_positive(value: Any, name: str) -> float:
    """A positive finite real (public bounds, hyperparameters)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a positive real number, got {type(value).__name__}")
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be positive and finite, got {number!r}")
    return number
