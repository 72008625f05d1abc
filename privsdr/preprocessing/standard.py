"""``DPStandardScaler``: standardisation with a DP mean and a DP variance per column, charged to the ledger.

Rows are shifted by a public ``center`` c (default 0), divided by public half-widths ``bound`` b_j and clipped:
u_j = clip((x_j - c_j) / b_j, -1, 1). Under replace-one with n public, two Gaussian releases on p coordinates:

* ``mean``: (1/n) sum_i u_i. Each coordinate lies in [-1, 1], so replacing one row moves the sum by at most
  2 sqrt(p) in L2: sensitivity 2 sqrt(p) / n.
* ``second_moment``: (1/n) sum_i u_i^2 (elementwise: the diagonal only). Each coordinate lies in [0, 1]:
  sensitivity sqrt(p) / n.

Working on the unit scale gives every column the same *relative* noise (its noise sd on the column's own scale is
b_j times the common one), which is what a scaler needs; released on the raw scale, an L2 sensitivity 2 ||b||_2 / n
would bury the columns with small ranges under the noise the widest column needs. Compared with
``DPMeanCovariance`` (the whole p x p second moment), only p diagonal entries are released.

Post-processing (free; each step a projection onto a convex set that holds the clipped rows' true value, so never
further from it): the DP mean is clamped into [-1, 1], the second moment into [0, 1], the variance (second moment -
mean^2) into [0, 1]; the unit scale is max(sqrt(variance), ``min_scale``) (a public floor, so that a noisy variance
near 0 cannot blow the scaled values up). Back on the columns' scale: ``mean_`` = c + b m, ``var_`` = b^2 v,
``scale_`` = b s. ``transform`` = (clip(x, c - b, c + b) - ``mean_``) / ``scale_``: a public function of each row and
the releases. Every transformed value of column j is at most (1 + |m_j|) / s_j in absolute value: ``bound_``, a bound
(derived from releases, so public) for the privsdr estimator that follows; a smaller one (say 3, three standard
deviations) is fine too, the estimator clips.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin

from .._validation import privsdr_errors
from ..accounting import Budget, Ledger
from ..algorithms._base import (
    PrivateEstimator,
    check_matrix,
    check_random_state,
    column_bounds,
    for_ledger,
    moment_split,
    public_bound,
    public_center,
)
from ..algorithms._sir_common import check_int
from ..core.gram_pass import RowParts, gram_sums
from ..errors import NoiseDominatesWarning, ValidationError
from ..mechanisms import Sensitivity, get_mechanism
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram
from ..released.fitted import Diagnostic, Fitted
from ..released.regression import NOISE_WARNING_SHARE


def scaler_moments(X: np.ndarray, center: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two released queries: the column means of U = clip((X - c) / b, -1, 1) and of U^2 (the blocks x_sum and x_sq
    of one blocked pass, ``core.gram_pass``; X's finiteness is checked in it, ValueError)."""
    parts = RowParts(shift=center, scale=bounds, box=1.0)
    sums = gram_sums(X, None, parts, ("x_sum", "x_sq"))
    n = np.shape(X)[0]
    return sums["x_sum"] / n, sums["x_sq"] / n


def scaler_sensitivities(p: int, n: int) -> tuple[Sensitivity, Sensitivity]:
    """L2 sensitivities (replace-one) of ``scaler_moments`` on p columns, the column sums / n of U in [-1, 1]^p and of
    U^2 in [0, 1]^p (Gram blocks, ``released.gram``): 2 sqrt(p) / n and sqrt(p) / n."""
    ones = np.ones(p)
    return gram.box_sum(-ones, ones, "replace_one", n), gram.box_sum(0.0 * ones, ones, "replace_one", n)


@model_class
class DPStandardScaler(OneToOneFeatureMixin, TransformerMixin, PrivateEstimator):
    """Standardise columns with a differentially private mean and variance (rows clipped to public bounds).

    Parameters
    ----------
    bound: public half-width b_j of every column around ``center``: one number or one per column. Values outside
        [c_j - b_j, c_j + b_j] are clipped (that is what makes the sensitivities true). Required, never read off the data.
    center: a public centre c (one number, or one per column; default 0), e.g. the middle of a declared range.
    budget, ledger, accountant, random_state, sampler: as every privsdr estimator (``PrivateEstimator``).
    split: budget weights of (mean, second moment), default (1, 1).
    calibration: Gaussian calibration (``analytic`` default, ``thm3_exact``, ``classical``, ...).
    min_scale: public floor of ``scale_`` as a share of b_j (default 0.01), in (0, 1].
    tight: rescale both noises by one factor so the composed cost meets the budget under the ledger's accountant.

    After ``fit``: ``mean_`` (c + the DP mean), ``var_``, ``scale_``, ``bound_`` (a public bound on every transformed
    value, per column), ``bounds_`` (the b_j), ``center_`` (c), ``n_samples_seen_``, ``noise_ratio_`` (the noise sd of a
    column's mean over b_j or of its second moment over b_j^2, the larger: the same for every column; over 1/2 the fit
    warns ``NoiseDominatesWarning``), ``privacy_report_``, ``plan_``, ``ledger_``.
    """

    model_attributes = ("mean_", "var_", "scale_", "bound_", "bounds_", "center_", "n_samples_seen_", "noise_ratio_")
    model_required = ("mean_", "scale_", "bounds_", "center_")

    def __init__(self, bound: Any = None, *, center: Any = None, budget: Budget | tuple[float, float] | None = None,
                 ledger: Ledger | None = None, accountant: str = "best", split: Sequence[float] = (1.0, 1.0),
                 calibration: str = "analytic", min_scale: float = 0.01, tight: bool = True, random_state: Any = None,
                 sampler: str = "numpy") -> None:
        self.bound = bound
        self.center = center
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.split = split
        self.calibration = calibration
        self.min_scale = min_scale
        self.tight = tight
        self.random_state = random_state
        self.sampler = sampler

    def _min_scale(self) -> float:
        value = self.min_scale
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValidationError(f"min_scale must be a number in (0, 1], got {value!r}")
        if not (math.isfinite(value) and 0 < value <= 1):
            raise ValidationError(f"min_scale must be in (0, 1] (a share of each column's public half-width), got {value!r}")
        return float(value)

    def build_plan(self, n_samples: int, n_features: int) -> Plan:
        """The plan of one fit on n_samples x n_features rows: public parameters only."""
        n, p = check_int(n_samples, "n_samples", 1), check_int(n_features, "n_features", 1)
        column_bounds(self.bound, p, "bound")  # checked against p
        center = public_center(self.center, p)
        split = moment_split(self.split)
        choices = get_mechanism("gaussian").calibrations
        if self.calibration not in choices:
            raise ValidationError(f"calibration must be one of {', '.join(choices)}, got {self.calibration!r}")
        self._min_scale()
        check_random_state(self.random_state)
        if not isinstance(self.tight, (bool, np.bool_)):
            raise ValidationError(f"tight must be True or False, got {self.tight!r}")
        mean_sens, second_sens = scaler_sensitivities(p, n)
        plan = Plan("dp_standard_scaler", "replace_one", {"bound": public_bound(self.bound), "center": [float(c) for c in center],
                                                         "n_samples": n, "n_features": p})
        plan.add("mean", "gaussian", mean_sens,
                 weight=split[0], calibration=self.calibration, description="column means of the unit-scale rows")
        plan.add("second_moment", "gaussian", second_sens,
                 weight=split[1], calibration=self.calibration, description="column means of the squared unit-scale rows")
        return plan

    def plan(self, n_samples: int, n_features: int) -> CalibratedPlan:
        """The calibrated plan for rows of this shape: price it with ``.cost()`` before fitting."""
        plan = self.build_plan(n_samples, n_features)
        budget, ledger = self._resolve_budget()
        return for_ledger(plan, ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())

    def fit(self, X: Any, y: Any = None) -> DPStandardScaler:
        """Release the DP moments of X (n x p, y ignored) and derive ``mean_`` and ``scale_`` from them."""
        X_raw, X = X, check_matrix(X, "X", min_rows=2, finite=False)  # finiteness: in the one pass below
        n, p = X.shape
        plan = self.build_plan(n, p)  # every parameter checked before the budget is resolved
        bounds, center = column_bounds(self.bound, p, "bound"), public_center(self.center, p)
        with privsdr_errors():  # one blocked pass over the rows, before anything is charged
            first, second = scaler_moments(X, center, bounds)
        budget, ledger = self._resolve_budget()
        calibrated = for_ledger(plan, ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=(n, p), algorithm="DPStandardScaler") as run:
            run.release("mean", first)
            run.release("second_moment", second)
        released = from_run(run, ("mean", "second_moment"), n=n, source="in memory")
        self.plan_, self.ledger_ = calibrated, ledger
        self.privacy_report_ = standard_scaler_from_released(released, bounds, center, self._min_scale()).apply(self, run.report)
        self._record_features(X_raw, p)
        return self

    def _rows(self, X: Any) -> np.ndarray:
        self._check_fitted("mean_", "scale_", "bounds_", "center_")
        X_raw, X = X, check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        return X

    def transform(self, X: Any) -> np.ndarray:
        """(clip(X, center_ - b, center_ + b) - mean_) / scale_ (no charge: post-processing of the releases)."""
        X = self._rows(X)
        return (np.clip(X, self.center_ - self.bounds_, self.center_ + self.bounds_) - self.mean_) / self.scale_

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Scaled values back on the columns' scale: X * scale_ + mean_."""
        return self._rows(X) * self.scale_ + self.mean_


def standard_scaler_from_released(released: Released, bounds: np.ndarray, center: np.ndarray, min_scale: float) -> Fitted:
    """DPStandardScaler from a ``Released`` with arrays ``mean`` and ``second_moment`` (p each, on the unit scale
    u = clip((x - center) / bounds, -1, 1)): m = clip(mean, -1, 1), v = clip(clip(second, 0, 1) - m^2, 0, 1),
    s = max(sqrt(v), min_scale); ``mean_`` = c + b m, ``var_`` = b^2 v, ``scale_`` = b s, ``bound_`` = (1 + |m|) / s; the
    noise diagnostic is the two releases' public noise sds (on the unit scale). Post-processing only (module docstring)."""
    m = np.clip(released["mean"].ravel(), -1.0, 1.0)
    v = np.clip(np.clip(released["second_moment"].ravel(), 0.0, 1.0) - m * m, 0.0, 1.0)
    s = np.maximum(np.sqrt(v), min_scale)
    bounds, center = np.asarray(bounds, dtype=float), np.asarray(center, dtype=float)
    ratios = (float(released.scales["mean"]), float(released.scales["second_moment"]))
    attributes = {"mean_": center + bounds * m, "var_": bounds**2 * v, "scale_": bounds * s, "bound_": (1.0 + np.abs(m)) / s,
                  "bounds_": bounds, "center_": center, "n_samples_seen_": released.n, "noise_ratio_": max(ratios),
                  "released_": released}
    message = noise_message(*ratios)
    diagnostic = Diagnostic("noise", message, {"noise_ratio": max(ratios), "mean_noise_ratio": ratios[0],
                                               "second_moment_noise_ratio": ratios[1]})
    return Fitted(attributes, (diagnostic,), ((NoiseDominatesWarning, message),) if max(ratios) > NOISE_WARNING_SHARE else ())


def noise_message(mean_ratio: float, second_ratio: float) -> str:
    ratio = max(mean_ratio, second_ratio)
    verdict = ("some column's DP mean or variance cannot be told reliably from its public centre (or 0): more rows, more budget "
               "or tighter public bounds are needed" if ratio > NOISE_WARNING_SHARE else "the released moments stand above the noise")
    return (f"the noise sd of every column's DP mean is {mean_ratio:.3g} times its public half-width, and of its second moment "
            f"{second_ratio:.3g} times the half-width squared: {verdict}")
