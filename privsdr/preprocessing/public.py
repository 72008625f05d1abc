"""``PublicRangeScaler``: declared public ranges mapped onto a target range, free of charge.

Column j is clipped to its declared range [low_j, high_j] and mapped affinely onto ``feature_range`` = [a, b]::

    z_j = a + (clip(x_j, low_j, high_j) - low_j) * (b - a) / (high_j - low_j)

``low``/``high`` are parameters (public knowledge: a questionnaire's scale, a lab value's reporting range), never read
off the data, so the transform is a public function applied to each row on its own. ``fit`` checks the rows as every
privsdr fit does (finite numbers, a 2-D table) and keeps only the number and names of the columns; nothing is charged.
Every transformed value lies in [a, b]: ``bound_`` (max(|a|, |b|) per column) is the public per-column bound a following
privsdr estimator can be given (``DPSIR(..., bound=1.0)`` after the default [-1, 1]), and ``row_bound_`` = ||bound_||_2
(sqrt(p) after [-1, 1]) the public bound on a row's L2 norm (``DPPLS``/``AdaSSPRegression``'s ``bound_x``,
``DPMeanCovariance``'s ``clip``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin

from .._sklearn import SklearnEstimator
from .._validation import check_matrix
from ..algorithms._base import public_center
from ..errors import InputTypeError, ValidationError
from ..persistence import model_class


def public_values(value: Any, p: int, name: str) -> np.ndarray:
    """One finite number, or one per column, as p floats (never read off the data)."""
    if value is None:
        raise ValidationError(f"{name} (the public lower/upper end of each column's range) is required; it is never read off the data")
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in value)):
        raise InputTypeError(f"{name} must be a number or one number per column, got {value!r}")
    try:
        np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(f"{name} must be a number or one number per column, got {value!r}") from None
    return public_center(value, p, name)  # one number or one per column, finite (the same rule as a centre)


def target_range(value: Any) -> tuple[float, float]:
    """``feature_range`` (a, b): two finite numbers with a < b."""
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValidationError(f"feature_range must be two numbers (a, b) with a < b, got {value!r}") from None
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ValidationError(f"feature_range must be two finite numbers (a, b) with a < b, got {value!r}")
    return a, b


@model_class
class PublicRangeScaler(OneToOneFeatureMixin, TransformerMixin, SklearnEstimator):
    """Scale each column from its declared public range [low_j, high_j] to ``feature_range`` (default [-1, 1]),
    clipping values outside the range. Free: nothing is read off the data but the columns' number and names.

    Parameters
    ----------
    low, high: the public range of every column: one number, or one per column (low_j < high_j). Required.
    feature_range: the target range (a, b), default (-1.0, 1.0).

    After ``fit``: ``low_``, ``high_`` (per column), ``bound_`` (max(|a|, |b|) per column: a public bound on every
    transformed value, to give the privsdr estimator that follows, e.g. ``DPSIR(..., bound=1.0)``), ``row_bound_``
    (||bound_||_2: a public bound on a transformed row's L2 norm, e.g. ``DPPLS(..., bound_x=...)``), ``n_features_in_``
    and ``feature_names_in_`` (a DataFrame with string column names). ``inverse_transform`` maps back (into the range).
    """

    model_public = True  # releases nothing: its model file has no privacy report
    model_attributes = ("low_", "high_", "bound_", "row_bound_")
    model_required = ("low_", "high_", "bound_")

    def __init__(self, low: Any = None, high: Any = None, *, feature_range: tuple[float, float] = (-1.0, 1.0)) -> None:
        self.low = low
        self.high = high
        self.feature_range = feature_range

    def _ranges(self, p: int) -> tuple[np.ndarray, np.ndarray, float, float]:
        low, high = public_values(self.low, p, "low"), public_values(self.high, p, "high")
        if np.any(low >= high):
            bad = int(np.argmax(low >= high))
            raise ValidationError(f"every column needs low < high; column {bad} has low = {low[bad]:g}, high = {high[bad]:g}")
        return (low, high, *target_range(self.feature_range))

    def fit(self, X: Any, y: Any = None) -> PublicRangeScaler:
        """Check the parameters and X; keep the number and names of X's columns (no data value is kept)."""
        X_raw, X = X, check_matrix(X, "X")
        low, high, a, b = self._ranges(X.shape[1])
        self.low_, self.high_ = low, high
        self.bound_ = np.full(X.shape[1], max(abs(a), abs(b)))
        self.row_bound_ = float(np.linalg.norm(self.bound_))
        self._record_features(X_raw, X.shape[1])
        return self

    def _checked(self, X: Any) -> np.ndarray:
        self._check_fitted("low_", "high_")
        X_raw, X = X, check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        return X

    def transform(self, X: Any) -> np.ndarray:
        """clip(X, low, high) mapped affinely onto ``feature_range``: a public function of each row."""
        X = self._checked(X)
        a, b = target_range(self.feature_range)
        return a + (np.clip(X, self.low_, self.high_) - self.low_) * ((b - a) / (self.high_ - self.low_))

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Values on the target scale back on the columns' scale (clipped to the target range first)."""
        X = self._checked(X)
        a, b = target_range(self.feature_range)
        return self.low_ + (np.clip(X, a, b) - a) * ((self.high_ - self.low_) / (b - a))
