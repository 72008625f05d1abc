"""What every privsdr estimator shares: budget/ledger resolution, public per-column bounds, input
checks before spending, and model files (``save``/``load``, ``privsdr.persistence``)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import core
from .._sklearn import SklearnEstimator
from .._validation import (  # noqa: F401 (re-exported for the estimators)
    check_matrix,
    check_positive,
    check_random_state,
    check_vector,
    diagnostic_rng,
)
from ..errors import InputTypeError, ValidationError
from ..mechanisms.secure import SAMPLERS
from ..plan.fit_budget import BudgetedFit, for_ledger  # noqa: F401 (re-exported for the estimators)


class PrivateEstimator(SklearnEstimator, BudgetedFit):
    """Base class of the estimators: a scikit-learn ``BaseEstimator`` (``privsdr._sklearn``: parameters
    stored as given in ``__init__``, validated in ``fit``; ``*_`` after fit; ``clone`` keeps the ledger).

    ``budget`` is what one fit may spend; ``ledger`` (optional) is the account it is charged to. Without
    ``ledger=`` the process's default ledger is used when one is configured (``privsdr.set_default_ledger``);
    otherwise a fresh ledger of the budget, whose fit is entered in the process's tracking ledger
    (``accounting.default``). With only a ledger, the fit spends what remains of it (``plan.fit_budget.BudgetedFit``).
    """

    def _sampler(self) -> str:
        """The validated noise sampler (``numpy`` or ``secure``; estimators built before it default to numpy)."""
        sampler = getattr(self, "sampler", "numpy")
        if sampler not in SAMPLERS:
            raise ValidationError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        return str(sampler)


def moment_split(split: Any) -> list[float]:
    """Two positive, finite weights (mean, second moment): how a moments estimator splits its budget."""
    try:
        weights = [float(w) for w in split]
    except (TypeError, ValueError):
        raise ValidationError(f"split must be two positive weights (mean, second moment), got {split!r}") from None
    if len(weights) != 2 or not all(math.isfinite(w) and w > 0 for w in weights):
        raise ValidationError("split must be two positive weights (mean, second moment)")
    return weights


def public_center(value: Any, p: int, name: str = "center") -> np.ndarray:
    """A public centre the rows are shifted by before clipping: None (zeros), one number, or one per column, finite.
    Never read off the data."""
    if value is None:
        return np.zeros(p)
    try:
        vec = np.asarray(value, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number or one number per column, got {value!r}") from None
    if vec.size not in (1, p):
        raise ValidationError(f"{name} has {vec.size} values for {p} columns")
    if not np.all(np.isfinite(vec)):
        raise ValidationError(f"{name} must be finite")
    return np.broadcast_to(vec, (p,)).astype(float)


def public_split(random_state: Any, n: int, n_init: int, n_batches: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A data-independent split of range(n): the sorted init rows and ``n_batches`` sorted batches of
    the rest (DP-SIR spec §4.0 item 4). Under replace-one each record stays in one part, so the
    parts are disjoint scopes; sorting keeps the sets and makes row gathers sequential in memory."""
    seed = random_state.integers(2**63) if isinstance(random_state, np.random.Generator) else random_state
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    rest = order[n_init:]
    return np.sort(order[:n_init]), [np.sort(rest[b]) for b in core.batches(n - n_init, n_batches, rng)]


def split_cells(init_idx: np.ndarray, batch_idx: list[np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The row cells of a ``public_split`` as ``Run(row_cells=...)`` takes them: partition "part" (init,
    refine) and "batch" (0..T-1, within refine)."""
    return {"part": {"init": init_idx, "refine": np.concatenate(batch_idx) if batch_idx else np.array([], dtype=np.intp)},
            "batch": {str(t): idx for t, idx in enumerate(batch_idx)}}


def check_bound(bound: Any, name: str = "bound") -> float | np.ndarray:
    """A public bound: one positive number, or one positive number per column (a 1-D array)."""
    if bound is None:
        raise ValidationError(f"{name} (a public bound c_X on |x_ij|) is required; it is never read off the data")
    if np.ndim(bound) == 0:
        return check_positive(bound.item() if isinstance(bound, np.generic) else bound, name)
    try:
        arr = np.asarray(bound)
    except (TypeError, ValueError):
        raise InputTypeError(f"{name} must be a positive number or one positive number per column") from None
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise InputTypeError(f"{name} must be a positive number or one positive number per column, got {arr.dtype} values")
    arr = arr.astype(float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValidationError(f"{name} must be a number or a 1-D sequence with one bound per column, got shape {arr.shape}")
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValidationError(f"every per-column {name} must be positive and finite")
    return arr


def column_bounds(bound: Any, p: int, name: str = "bound") -> np.ndarray:
    """The per-column bounds c_1..c_p (a scalar bound repeated), checked against p."""
    checked = check_bound(bound, name)
    if isinstance(checked, float):
        return np.full(p, checked)
    if checked.size != p:
        raise ValidationError(f"{name} has {checked.size} per-column values for {p} columns")
    return checked


def uniform_bound(bounds: float | np.ndarray) -> float | None:
    """c if every column has the same bound c (the scalar case, computed exactly as before), else None."""
    arr = np.asarray(bounds, dtype=float)
    return float(arr.flat[0]) if arr.size and np.all(arr == arr.flat[0]) else None


def square_mass(bounds: np.ndarray, d: int) -> tuple[float, float]:
    """(k, c2) with k * c2 = the sum of the d largest c_j^2: a public bound on ||x_S||^2 over any d
    columns S. The scalar case returns (d, c^2), so formulas written ``k * c2`` keep their values."""
    c = uniform_bound(bounds)
    if c is not None:
        return float(d), c * c
    return 1.0, float(np.sort(np.asarray(bounds, dtype=float) ** 2)[::-1][:d].sum())


def bound_l2(bounds: np.ndarray) -> float:
    """A public bound on ||x||_2 when |x_j| <= c_j: c sqrt(p) (scalar case) or ||c||_2."""
    c = uniform_bound(bounds)
    return c * math.sqrt(len(bounds)) if c is not None else float(np.sqrt(np.sum(np.asarray(bounds, dtype=float) ** 2)))


def public_bound(bound: Any) -> float | list[float]:
    """The bound as the report records it: a number or a list of numbers."""
    checked = check_bound(bound)
    return checked if isinstance(checked, float) else [float(v) for v in checked]


def project_rows(estimator: Any, X: Any, directions: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
    """``clip(X - shift, -c, c) @ directions`` for a fitted estimator with per-column bounds ``bounds_``
    (``shift``: a public centre, default none), after the fitted/feature checks of ``transform``."""
    estimator._check_fitted("bounds_")
    X_raw, X = X, check_matrix(X, "X")
    bounds = np.asarray(estimator.bounds_, dtype=float)
    estimator._check_features(X_raw, X.shape[1])
    if X.shape[1] != bounds.size:
        raise ValidationError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting {bounds.size} features as input")
    if shift is not None and shift.size == X.shape[1] and np.any(shift):
        X = X - shift
    return np.clip(X, -bounds, bounds) @ directions


class ClippedRows:
    """Rows of X clipped to [-c_j, c_j] on demand, part by part (no clipped copy of all of X)."""

    def __init__(self, X: np.ndarray, bound: float | np.ndarray, labels: np.ndarray | None = None) -> None:
        self.X, self.bound, self.labels = X, bound, labels
        self.p = X.shape[1]

    def take(self, idx: np.ndarray) -> Any:
        """The clipped rows ``idx`` (integer indices: always a copy), with their labels if any."""
        rows = self.X[np.asarray(idx, dtype=np.intp)]
        np.clip(rows, -self.bound, self.bound, out=rows)  # what makes the declared sensitivities true
        return rows if self.labels is None else (rows, self.labels[idx])
