"""Spectral preprocessing that keeps a private fit's guarantee (edPLS spec A12; paper Sec. 3.2, Fig. 5).

Row-local transforms -- Savitzky-Golay (``core.savgol``), SNV (``core.snv``), airPLS baseline
removal (``core.airpls``) -- use one spectrum and public constants each, so applying them before a
private fit is free. Multiplicative scatter correction is row-local only given its reference
spectrum; the usual reference, the mean spectrum of the data, reads every row. ``MSC`` therefore
takes either a public ``reference`` (free) or estimates the mean spectrum privately
(``reference="dp_mean"``): count (Delta 1) and sum of rows clipped to ||x - center|| <= bound
(Delta = bound), Gaussian, add/remove -- charged to the budget/ledger like any release.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin

from .. import core
from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram
from ..released.fitted import Fitted
from ._base import PrivateEstimator, check_matrix, check_positive, for_ledger, public_center

RELATION = "add_remove"


def msc_from_released(released: Released, center: np.ndarray) -> Fitted:
    """MSC's DP reference spectrum from a ``Released`` with arrays ``count`` (1) and ``sum`` (m) of the rows clipped to
    ||x - center|| <= bound (add/remove): ``reference_`` = center + sum / max(count, 1). Post-processing only."""
    count = max(float(released["count"].ravel()[0]), 1.0)
    return Fitted({"reference_": np.asarray(center, dtype=float) + released["sum"].ravel() / count, "released_": released})


def clipped_sum(X: np.ndarray, center: np.ndarray, bound: float) -> np.ndarray:
    """sum of (x - center) over rows clipped to L2 norm ``bound``: one row moves it by <= bound."""
    return core.clip_rows_l2(np.asarray(X, dtype=float) - center, bound).sum(axis=0)


def chunk_clipped_sum(X: np.ndarray, y: Any = None, *, center: Any, bound: float | None) -> dict[str, Any]:
    """One chunk's sum of spectra clipped around the public centre (nothing for a public reference)."""
    if bound is None:
        return {}
    m = X.shape[1]
    shift = np.zeros(m) if center is None else np.asarray(center, dtype=float)
    try:
        shift = np.broadcast_to(shift, (m,))
    except ValueError:
        raise ValidationError(f"center must be a number or a spectrum of {m} values") from None
    if not np.all(np.isfinite(shift)):
        raise ValidationError("center must be finite")
    return {"x_sum": clipped_sum(X, shift, bound)}


@model_class
class MSC(OneToOneFeatureMixin, TransformerMixin, PrivateEstimator):
    """Multiplicative scatter correction with a public or a DP reference spectrum.

    ``MSC(reference=r).fit(X)`` spends nothing; ``MSC("dp_mean", bound=C, budget=...).fit(X)``
    releases the mean spectrum privately. ``transform(X)`` maps each row x ~ a + b r to (x - a)/b.
    After fit: ``reference_``, and ``privacy_report_`` for the DP reference (which ``save`` needs: a
    public reference is already public, there is nothing to keep).
    """

    model_attributes = ("reference_", "n_features_in_")

    def __init__(self, reference: Any = "dp_mean", *, bound: float | None = None, center: Any = None,
                 budget: Budget | tuple[float, float] | None = None, ledger: Ledger | None = None,
                 accountant: str = "best", count_weight: float = 0.25, random_state: Any = None,
                 sampler: str = "numpy") -> None:
        self.reference = reference
        self.bound = bound
        self.center = center
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.count_weight = count_weight
        self.random_state = random_state
        self.sampler = sampler

    def _dp(self) -> bool:
        return isinstance(self.reference, str)

    def build_plan(self, n_features: int) -> Plan:
        if self.reference != "dp_mean":
            raise ValidationError(f"reference must be a public spectrum or 'dp_mean', got {self.reference!r}")
        if self.bound is None:
            raise ValidationError("bound (a public bound on ||x - center||) is required for a DP mean spectrum")
        C = check_positive(self.bound, "bound")
        plan = Plan("msc_dp_mean", RELATION, {"bound": C, "n_features": int(n_features)})
        plan.add("count", "gaussian", gram.count(RELATION), weight=check_positive(self.count_weight, "count_weight"),
                 description="number of spectra")
        plan.add("sum", "gaussian", gram.column_sum(C, RELATION), weight=1.0,
                 description="sum of the clipped spectra (x - center)")
        return plan

    def plan(self, n_features: int) -> CalibratedPlan:
        budget, ledger = self._resolve_budget()
        return for_ledger(self.build_plan(n_features), ledger).allocate(budget, accountant=ledger.accountant, tight=True,
                                                                         sampler=self._sampler())

    def fit(self, X: Any, y: Any = None) -> MSC:
        """Fit on X (n spectra x m channels; y is ignored), or on ``privsdr.Chunks`` / a dask array (the count and
        the clipped sum reduced chunk by chunk: ``privsdr.rows``, docs/scale.md)."""
        from ..rows import is_chunked, reduce_rows

        summed = None
        if is_chunked(X):
            if self._dp():
                self.build_plan(1)  # the public parameters, checked before the data is read
                fn = partial(chunk_clipped_sum, center=self.center, bound=check_positive(self.bound, "bound"))
            else:
                fn = partial(chunk_clipped_sum, center=None, bound=None)
            summed = reduce_rows(X, None, fn, with_y=False, desc="MSC: sums")
            X_raw, shape = None, (int(summed["n"]), int(summed["p"]))
        else:
            X_raw, X = X, check_matrix(X, "X", min_rows=1)
            shape = X.shape
        m = shape[1]
        if not self._dp():
            self.reference_ = self._public_reference(m)
            self._record_features(X_raw, m)
            return self
        center = self._center(m)
        plan = self.build_plan(m)
        budget, ledger = self._resolve_budget()
        calibrated = for_ledger(plan, ledger).allocate(budget, accountant=ledger.accountant, tight=True, sampler=self._sampler())
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=shape, algorithm="MSC (DP mean reference)") as run:
            run.release("count", np.array([float(shape[0])]))
            run.release("sum", summed["x_sum"] if summed is not None else clipped_sum(X, center, check_positive(self.bound, "bound")))
        released = from_run(run, ("count", "sum"), n=0, source="in memory" if summed is None else "chunks")
        self.plan_, self.ledger_ = calibrated, ledger
        self.privacy_report_ = msc_from_released(released, center).apply(self, run.report)
        self._record_features(X_raw, m)
        return self

    def _public_reference(self, m: int) -> np.ndarray:
        ref = np.asarray(self.reference, dtype=float).ravel()
        if ref.shape != (m,) or not np.all(np.isfinite(ref)):
            raise ValidationError(f"the public reference must be a finite spectrum of {m} values")
        return ref

    def _center(self, m: int) -> np.ndarray:
        return public_center(self.center, m)

    def transform(self, X: Any) -> np.ndarray:
        self._check_fitted("reference_")
        X_raw, X = X, check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        return core.msc(X, self.reference_)
