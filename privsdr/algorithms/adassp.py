"""AdaSSP: differentially private ridge/OLS from noisy sufficient statistics (Wang, "Revisiting differentially
private linear regression: optimal and adaptive prediction & estimation in unbounded domain", UAI 2018, Alg. 2).

Rows are shifted by public centres and clipped: x <- (x - mu_x) min(1, C_x / ||x - mu_x||), y <- clip(y - mu_y,
-C_y, C_y); with ``fit_intercept`` the public constant C_x is appended to every row (z = (x, C_x), ||z||^2 <= 2 C_x^2
= C^2: the slopes pay at most twice the noise of a model without intercept, and the intercept's column is on their
scale, whatever the units of x; its coefficient times C_x is the intercept).
As published (``shrinkage="none"``, or without an intercept): three releases, add/remove-one (n is not public, as
in DPPLS's S2):

=============  ===========================  ============================================================
node           statistic                    L2 sensitivity (add/remove one row z)
=============  ===========================  ============================================================
``lambda_min``  lambda_min(Z^T Z)            ||z||^2 <= C^2 (Weyl: adding z z^T >= 0 moves it by <= ||z||^2)
``xtx``         Z^T Z (upper triangle)       ||z z^T||_F = ||z||^2 <= C^2 (Analyze-Gauss)
``xty``         Z^T y                        ||z y|| <= C C_y
=============  ===========================  ============================================================

Post-processing (``adassp_solution``, the paper's rule written for the released noise sds s_lambda, s_G and a
failure probability rho):

    lambda_lo = max(lambda_min~ - s_lambda sqrt(2 log(3 / rho)), 0)      (a lower bound w.p. >= 1 - rho/3)
    lambda    = max(0, s_G sqrt(d log(2 d^2 / rho)) - lambda_lo)         (s_G sqrt(d log(2d^2/rho)) bounds ||E||_2)
    theta     = (X^T X~ + lambda I)^{-1} X^T y~

so the ridge is as large as the Gram's noise can make its smallest eigenvalue wrong, and no larger: with noise
off it is 0 and the fit is OLS on the clipped rows. The paper's (eps/3, delta/3) split is replaced by the plan's
weights under the ledger's accountant (tighter composition, same statistics).

The certified default (``shrinkage="snr"`` with an intercept; issue 33) releases DPPLS S2's statistics of the clipped
rows instead, with S2's nodes and weights (``_pls_modes.ssp_plan``: count 1, x_sum C_x, y_sum C_y, X^T X C_x^2,
X^T y C_x C_y; no constant column, whose ||z||^2 <= 2 C_x^2 doubled the Gram's sensitivity), centres them at their DP
means by post-processing and applies the rule above to the centred Gram S with d = p (``centred_solution``;
lambda_lo = max(lambda_min(S~) - s_G sqrt(d log(2d^2/rho)), 0) from S~ itself, by Weyl, unless ``lambda_min`` gets a
weight), then falls back towards the DP mean (``released.regression.towards_dp_mean``).
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from .._validation import privsdr_errors
from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram, regression
from ..released.fitted import Fitted
from ..released.sites import SiteBlocks
from ..released.ssp import adassp_solution, centred_slopes_stacked, dp_means, ridge_rule
from ._base import (
    PrivateEstimator,
    check_matrix,
    check_positive,
    check_random_state,
    check_vector,
    diagnostic_rng,
    for_ledger,
    public_center,
)
from ._pls_modes import CENTRING_NODES, ssp_plan, ssp_site_parts
from ._pls_queries import chunk_ssp, ssp_statistics
from .forecast import ForecastMixin, forecast_regression
from .pls import DEFAULT_WEIGHTS as S2_WEIGHTS

RELATION = "add_remove"
NODES = ("lambda_min", "xtx", "xty")
DEFAULT_WEIGHTS = {"lambda_min": 1.0, "xtx": 1.0, "xty": 1.0}  #: AdaSSP's equal thirds (``shrinkage="none"``)
#: the certified default (``shrinkage="snr"`` with an intercept) releases DPPLS S2's statistics (issue 33): count,
#: x_sum, y_sum, X^T X, X^T y of the clipped rows, without the constant column
CENTRED_NODES = CENTRING_NODES + ("xtx", "xty")
#: S2's weights (``pls.DEFAULT_WEIGHTS``) for the same five releases; no ``lambda_min`` (the ridge's lower bound comes
#: from the noisy centred Gram, as for the secure vertical Gram) unless the caller gives it a weight
CENTRED_WEIGHTS = dict(S2_WEIGHTS)
SHRINKAGES = ("snr", "none")


def add_adassp_nodes(plan: Plan, row_bound: float, label_bound: float, weights: dict[str, float]) -> None:
    """The three releases of AdaSSP for rows with ||z|| <= ``row_bound`` and |y| <= ``label_bound`` (public)."""
    plan.add("lambda_min", "gaussian", gram.gram_eigenvalue(row_bound, RELATION),
             weight=weights["lambda_min"], calibration="analytic", description="smallest eigenvalue of Z^T Z (sets the ridge)")
    plan.add("xtx", "symmetric_gaussian", gram.xtx(row_bound, RELATION),
             weight=weights["xtx"], calibration="analytic", description="Z^T Z of the clipped rows (Analyze-Gauss)")
    plan.add("xty", "gaussian", gram.xty(row_bound, label_bound, RELATION), weight=weights["xty"],
             calibration="analytic", description="Z^T y of the clipped rows")


def add_centred_nodes(plan: Plan, bound_x: float, bound_y: float, weights: dict[str, float]) -> None:
    """The certified default's releases (``CENTRED_NODES``, DPPLS S2's nodes: ``_pls_modes.ssp_plan``) and, when
    ``weights`` names it, ``lambda_min`` of the Gram of the rows with the constant column C_x (sensitivity 2 C_x^2; a
    lower bound on lambda_min of the centred Gram, its Schur complement)."""
    if "lambda_min" in weights:  # z = (x, C_x): ||z||^2 <= 2 C_x^2
        plan.add("lambda_min", "gaussian", gram.gram_eigenvalue(math.sqrt(2.0) * bound_x, RELATION, square=2.0 * bound_x * bound_x),
                 weight=weights["lambda_min"], calibration="analytic",
                 description="smallest eigenvalue of Z^T Z, Z = (x, C_x) (a lower bound for the centred Gram's)")
    ssp_plan(plan, bound_x, bound_y, True, weights)


def centred_solution(released: Released, failure_probability: float, bound_x: float, bound_y: float
                     ) -> tuple[np.ndarray, float, float, np.ndarray, float, np.ndarray]:
    """(beta, ridge, lambda_lo, x_bar, y_bar, S + ridge I) of the certified default from DPPLS S2's releases
    (``CENTRED_NODES``): the DP means n~, x_bar, y_bar of the count and sums (``released.ssp.dp_means``), the centred
    S = X^T X~ - n~ x_bar x_bar^T, v = X^T y~ - n~ y_bar x_bar, then AdaSSP's ridge on them (``ridge_rule``; lambda_lo
    from the noisy S itself unless ``lambda_min`` is released). Post-processing only."""
    n_t, x_bar, y_bar = dp_means(dict(released.arrays), bound_x, bound_y)
    metric = released["xtx"] - n_t * np.outer(x_bar, x_bar)
    target = released["xty"].ravel() - n_t * y_bar * x_bar
    beta, ridge, lambda_lo = ridge_rule(released, metric, target, failure_probability)
    return beta, ridge, lambda_lo, x_bar, y_bar, metric + ridge * np.eye(len(beta))


def adassp_from_released(released: Released, *, bound_x: float, bound_y: float, x_center: np.ndarray, y_center: float = 0.0,
                         fit_intercept: bool = True, failure_probability: float = 0.05, shrinkage: str = "snr",
                         diagnose_noise: bool = True, rng: np.random.Generator | None = None) -> Fitted:
    """AdaSSPRegression from a ``Released`` (post-processing only; every argument but the record is public).

    ``shrinkage="snr"`` with ``fit_intercept`` (the certified default): DPPLS S2's releases (count, x_sum, y_sum, xtx,
    xty, optionally lambda_min) give ``centred_solution``, and the slopes move towards the DP mean of y by
    ``regression.fallback_factor`` of the noise ratio. Otherwise the paper's releases (lambda_min, xtx, xty of Z, whose
    last column is the constant ``bound_x`` with an intercept) give ``adassp_solution``. ``x_center``, ``y_center``: the
    public centres the rows were shifted by. ``rng``: the parametric bootstrap's randomness (``diagnose_noise`` or
    the shrinkage; default a fixed seed)."""
    rho, m = float(failure_probability), len(x_center)
    shrink = shrinkage == "snr" and bool(fit_intercept)
    constant = bound_x if fit_intercept else None
    x_center = np.asarray(x_center, dtype=float)
    if shrink:
        beta, ridge, lambda_lo, x_bar, y_bar, metric = centred_solution(released, rho, bound_x, bound_y)
        coef, intercept = beta, y_center + y_bar - float((x_center + x_bar) @ beta)
    else:
        theta, ridge, lambda_lo = adassp_solution(released, rho, constant, bound_y)
        coef = theta[:m]
        intercept = y_center + (float(theta[m]) * bound_x if fit_intercept else 0.0) - float(x_center @ theta[:m])
        metric = regression.slope_gram(released["xtx"], bool(fit_intercept)) + ridge * np.eye(m)
    attributes: dict[str, Any] = {"coef_": coef, "intercept_": intercept, "ridge_": ridge, "lambda_lower_": lambda_lo,
                                  "x_center_": x_center, "y_center_": float(y_center), "released_": released}
    if not (diagnose_noise or shrink):
        return Fitted(attributes)
    rng = rng if rng is not None else np.random.default_rng(0)
    if shrink:
        ratio = regression.noise_ratio(released, lambda r: centred_solution(r, rho, bound_x, bound_y)[0], metric, rng,
                                       stacked_slopes=lambda a: centred_slopes_stacked(a, released.scales, rho, bound_x, bound_y))
        # never worse than the DP mean (issue 33): the fit predicts y_c + y_bar at x_c + x_bar
        coef, intercept, attributes["shrinkage_factor_"] = regression.towards_dp_mean(coef, intercept, x_center + x_bar, ratio)
        attributes["coef_"], attributes["intercept_"] = coef, intercept
    else:
        ratio = regression.noise_ratio(released, lambda r: adassp_solution(r, rho, constant, bound_y)[0][:m], metric, rng)
    attributes["noise_ratio_"] = ratio
    return Fitted(attributes, (regression.diagnostic(ratio),), regression.warned(ratio, regression.FALLBACK_NOTE if shrink else None))


def chunk_statistics(X: np.ndarray, y: np.ndarray | None, *, x_center: np.ndarray, y_center: float, bound_x: float,
                     bound_y: float, intercept: bool) -> dict[str, Any]:
    """One row chunk's Z^T Z and Z^T y of its clipped rows z = [x | C_x] (``privsdr.rows``: chunks add up), from the
    blocks of one blocked pass (``core.gram_pass``): Z^T Z = [[X^T X, C_x X^T 1], [., C_x^2 n]], Z^T y = [X^T y, C_x y^T 1]."""
    s = ssp_statistics(X, np.asarray(y), x_center, y_center, bound_x, bound_y)
    if not intercept:
        return {"xtx": s["xtx"], "xty": s["xty"]}
    b, m = bound_x, X.shape[1]
    xtx = np.empty((m + 1, m + 1))
    xtx[:m, :m], xtx[:m, m], xtx[m, :m], xtx[m, m] = s["xtx"], b * s["x_sum"], b * s["x_sum"], b * b * s["count"][0]
    return {"xtx": xtx, "xty": np.append(s["xty"], b * s["y_sum"][0])}


def lambda_min_of(statistics: dict[str, np.ndarray], c: dict[str, Any]) -> float:
    """The smallest eigenvalue the ``lambda_min`` node releases: of Z^T Z (the paper's statistics), or, from S2's sums,
    of the Gram of (x, C_x): [[X^T X, C_x sum x], [C_x sum x^T, C_x^2 n]]."""
    if "x_sum" not in statistics:
        return float(np.linalg.eigvalsh(statistics["xtx"])[0])
    b, s = c["bound_x"], statistics["x_sum"]
    gram = np.block([[statistics["xtx"], b * s[:, None]], [b * s[None, :], np.array([[b * b * float(statistics["count"][0])]])]])
    return float(np.linalg.eigvalsh(gram)[0])


@model_class
class AdaSSPRegression(ForecastMixin, PrivateEstimator):
    """Differentially private linear regression by AdaSSP (Wang 2018): noisy X^T X, X^T y and smallest
    eigenvalue, then ridge with a noise-aware lambda. The central (one trusted curator) baseline.

    Parameters
    ----------
    bound_x: public bound C_x on ||x - x_center||_2 (rows beyond it are scaled down). Required.
    bound_y: public bound C_y on |y - y_center| (clipped). Required.
    x_center, y_center: public centres (default 0); never read off the data.
    fit_intercept: append the constant C_x to every row (its coefficient times C_x is the intercept; penalised like the rest).
    failure_probability: rho of AdaSSP's ridge rule (module docstring).
    weights: budget weights of the releases: ``lambda_min``, ``xtx``, ``xty`` (default equal, as in the paper) with
        ``shrinkage="none"``; ``count``, ``x_sum``, ``y_sum``, ``xtx``, ``xty`` (``CENTRED_WEIGHTS``) and optionally
        ``lambda_min`` with ``shrinkage="snr"``.
    diagnose_noise: measure ``noise_ratio_`` (how far the noise alone moves the fitted predictions, relative to
        their spread: ``privsdr.released.regression``) and warn ``NoiseDominatesWarning`` above 1/2. Free.
    shrinkage: ``"snr"`` (default, with ``fit_intercept``): never worse than the DP mean (issue 33): the slopes are
        scaled by ``shrinkage_factor_`` = ``released.regression.fallback_factor(noise_ratio_)`` = max(0, 1 - r^2) and
        the intercept keeps the prediction at the DP means: the fit moves towards the DP mean of y its release
        carries, and is that mean when the noise explains all of its spread (r >= 1). The releases are DPPLS S2's
        (``CENTRED_NODES``: the rows without a constant column, centred at their DP means by post-processing) and the
        ridge is AdaSSP's rule on the centred Gram (``centred_solution``); ``"none"``: AdaSSP as published (Wang 2018,
        its three releases). Noise off neither changes the fit.
    budget, ledger, accountant, random_state, tight, sampler: as for the other estimators.
    """

    model_attributes = ("coef_", "intercept_", "ridge_", "lambda_lower_", "x_center_", "y_center_", "noise_ratio_", "shrinkage_factor_",
                        "n_features_in_")
    model_required = ("coef_", "intercept_")
    _requires_y = True

    def __init__(
        self,
        bound_x: float | None = None,
        bound_y: float | None = None,
        *,
        x_center: Any = None,
        y_center: float = 0.0,
        fit_intercept: bool = True,
        failure_probability: float = 0.05,
        weights: dict[str, float] | None = None,
        diagnose_noise: bool = True,
        shrinkage: str = "snr",
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        tight: bool = True,
        random_state: Any = None,
        sampler: str = "numpy",
    ) -> None:
        self.bound_x = bound_x
        self.bound_y = bound_y
        self.x_center = x_center
        self.y_center = y_center
        self.fit_intercept = fit_intercept
        self.failure_probability = failure_probability
        self.weights = weights
        self.diagnose_noise = diagnose_noise
        self.shrinkage = shrinkage
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.tight = tight
        self.random_state = random_state
        self.sampler = sampler

    # -- public parameters -------------------------------------------------------------------------
    def _checked(self, m: int | None) -> dict[str, Any]:
        """The public parameters, checked (``m`` None: before the width is known, the centre is not checked)."""
        for name in ("bound_x", "bound_y"):
            if getattr(self, name) is None:
                raise ValidationError(f"{name} (a public bound) is required; it is never read off the data")
        bound_x, bound_y = check_positive(self.bound_x, "bound_x"), check_positive(self.bound_y, "bound_y")
        y_center = check_vector([self.y_center], "y_center")[0] if np.ndim(self.y_center) == 0 else None
        if y_center is None or not math.isfinite(y_center):
            raise ValidationError(f"y_center must be one finite number, got {self.y_center!r}")
        x_center = None if m is None else public_center(self.x_center, m, "x_center")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValidationError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")
        rho = check_positive(self.failure_probability, "failure_probability")
        if not rho < 1:
            raise ValidationError(f"failure_probability must be in (0, 1), got {rho}")
        shrink = self.shrinkage == "snr" and bool(self.fit_intercept)
        weights = dict(CENTRED_WEIGHTS if shrink else DEFAULT_WEIGHTS)
        for name, value in dict(self.weights or {}).items():
            if name not in weights and not (shrink and name == "lambda_min"):
                raise ValidationError(f"unknown weight {name!r}; expected some of {sorted(weights)}")
            weights[name] = check_positive(value, f"weights[{name!r}]")
        for name in ("tight", "diagnose_noise"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValidationError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.shrinkage not in SHRINKAGES:
            raise ValidationError(f"shrinkage must be one of {SHRINKAGES}, got {self.shrinkage!r}")
        check_random_state(self.random_state)
        row_bound = math.sqrt(2.0) * bound_x if self.fit_intercept else bound_x
        return {"bound_x": bound_x, "bound_y": bound_y, "x_center": x_center, "y_center": float(y_center),
                "intercept": bool(self.fit_intercept), "rho": rho, "weights": weights, "row_bound": row_bound,
                "shrink": shrink}

    def build_plan(self, n_features: int) -> Plan:
        """The release plan for data with ``n_features`` columns: public parameters only (n is not public)."""
        m = int(n_features)
        if m < 1:
            raise ValidationError(f"X needs at least one column, got {m}")
        c = self._checked(m)
        public = {"n_features": m, "bound_x": c["bound_x"], "bound_y": c["bound_y"], "fit_intercept": c["intercept"],
                  "x_center": "0" if not np.any(c["x_center"]) else "public vector", "y_center": c["y_center"],
                  "failure_probability": c["rho"]}
        plan = Plan("adassp", RELATION, public)
        if c["shrink"]:
            add_centred_nodes(plan, c["bound_x"], c["bound_y"], c["weights"])
        else:
            add_adassp_nodes(plan, c["row_bound"], c["bound_y"], c["weights"])
        return plan

    def plan(self, n_samples: int, n_features: int) -> CalibratedPlan:
        """The calibrated plan for data of this shape: price it with ``.cost()`` and forecast its accuracy with
        ``.forecast()`` (``privsdr.algorithms.forecast``) before fitting."""
        budget, ledger = self._resolve_budget()
        calibrated = for_ledger(self.build_plan(n_features), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight,
                                                                              sampler=self._sampler())
        calibrated.forecaster = partial(forecast_regression, self, int(n_samples), int(n_features))
        return calibrated

    # -- fit ---------------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> AdaSSPRegression:
        """Fit on X (n x m) and y, or on ``privsdr.Chunks`` / a dask array (Z^T Z and Z^T y are sums over rows,
        reduced chunk by chunk). Everything is checked before anything is charged."""
        from ..rows import is_chunked, is_dask, reduce_rows

        X_raw: Any = X
        source = "dask" if is_dask(X) else "chunks" if is_chunked(X) else "in memory"
        statistics: dict[str, np.ndarray] | None = None
        if is_chunked(X):
            c0 = self._checked(None)  # the bounds before any row is read (the centre is checked per chunk width)
            centre = 0.0 if self.x_center is None else np.asarray(self.x_center, dtype=float)
            fn = partial(_chunk, x_center=centre, y_center=c0["y_center"], bound_x=c0["bound_x"], bound_y=c0["bound_y"],
                         intercept=c0["intercept"], centred=c0["shrink"])
            total = reduce_rows(X, y, fn, with_y=True, desc="AdaSSPRegression: sums", fn_checks_finite=True)
            n, m = int(total["n"]), int(total["p"])
            X_raw, shape = None, (n, m)
            statistics = {name: np.asarray(value) for name, value in total.items() if name not in ("n", "p")}
            statistics["xtx"] = (statistics["xtx"] + statistics["xtx"].T) / 2.0
        else:
            X = check_matrix(X, "X", min_rows=1, finite=False)  # finiteness: in the one pass below, before any charge
            if y is None:
                raise ValidationError("y is required: AdaSSPRegression requires y to be passed, but the target y is None")
            y = check_vector(y)
            if len(y) != X.shape[0]:
                raise ValidationError(f"X has {X.shape[0]} rows but y has {len(y)}")
            shape = X.shape
        c = self._checked(shape[1])
        if statistics is None:  # one blocked pass over the rows (core.gram_pass), before anything is charged
            with privsdr_errors():
                if c["shrink"]:
                    statistics = ssp_statistics(X, y, c["x_center"], c["y_center"], c["bound_x"], c["bound_y"])
                else:
                    statistics = chunk_statistics(X, y, x_center=c["x_center"], y_center=c["y_center"], bound_x=c["bound_x"],
                                                  bound_y=c["bound_y"], intercept=c["intercept"])
        budget, ledger = self._resolve_budget()
        calibrated = for_ledger(self.build_plan(shape[1]), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight,
                                                                            sampler=self._sampler())
        names = tuple(calibrated.specs)
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=shape, algorithm="AdaSSPRegression") as run:
            for name in names:
                run.release(name, np.array([lambda_min_of(statistics, c)]) if name == "lambda_min" else statistics[name])
        public_n = shape[0] if calibrated.relation.value == "replace_one" else 0  # n is not public under add/remove
        return self._finish_released(from_run(run, names, n=public_n, source=source), run.report, calibrated, ledger, c, X_raw, shape[1])

    def _finish_released(self, released: Released, report: Any, calibrated: CalibratedPlan, ledger: Ledger, c: dict[str, Any],
                         X_raw: Any, m: int) -> AdaSSPRegression:
        """The fit's consumer applied to its ``Released`` (central, or a secure sum over sites: ``_site_blocks``)."""
        fitted = adassp_from_released(released, bound_x=c["bound_x"], bound_y=c["bound_y"], x_center=c["x_center"],
                                      y_center=c["y_center"], fit_intercept=c["intercept"], failure_probability=c["rho"],
                                      shrinkage=self.shrinkage, diagnose_noise=self.diagnose_noise,
                                      rng=diagnostic_rng(self.random_state))
        self._record_features(X_raw, m)
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = fitted.apply(self, report)
        return self

    def _site_blocks(self, n_features: int, n_samples: int) -> SiteBlocks:
        """The certified default's declared blocks for a secure fit over sites (``privsdr.federated.SecureSites``): DPPLS
        S2's nodes (``ssp_plan``), each site's S2 sums of its clipped rows, and this fit's post-processing."""
        m = int(n_features)
        c = self._checked(m)
        if not c["shrink"] or "lambda_min" in c["weights"]:
            raise ValidationError("a secure fit over sites releases sums of the sites' statistics: AdaSSP's certified default "
                                  "(shrinkage='snr' with fit_intercept=True) without a lambda_min weight (the smallest eigenvalue "
                                  "of the pooled Gram is not a sum of the sites' own)")
        budget, ledger = self._resolve_budget()
        shapes, entries = ssp_site_parts(m, c["bound_x"], c["bound_y"], True)
        return SiteBlocks(for_ledger(self.build_plan(m), ledger), budget, ledger, shapes, entries, 1.0,
                          partial(ssp_statistics, x_center=c["x_center"], y_center=c["y_center"], bound_x=c["bound_x"], bound_y=c["bound_y"]),
                          lambda released, report, plan, ledger: self._finish_released(released, report, plan, ledger, c, None, m),
                          "AdaSSPRegression", self.random_state)

    def _released_row_count(self) -> int | None:
        """n under replace-one; under add/remove the DP count: the ``count`` release (certified default), else
        G_cc / c^2 of the constant column (with an intercept)."""
        self._check_fitted("released_", "plan_")
        if self.plan_.relation.value == "replace_one":
            return int(self.released_.n)
        if "count" in self.released_.arrays:
            return max(2, round(float(np.ravel(self.released_["count"])[0])))
        if not self._checked(None)["intercept"]:
            return None
        return max(2, round(regression.dp_count(self.released_["xtx"], float(self._checked(None)["bound_x"]))))

    # -- prediction --------------------------------------------------------------------------------
    def predict(self, X: Any) -> np.ndarray:
        """x^T coef_ + intercept_ (on the raw scale of X and y)."""
        self._check_fitted("coef_", "intercept_", "n_features_in_")
        X_raw, X = X, check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        if X.shape[1] != self.n_features_in_:
            raise ValidationError(f"X has {X.shape[1]} features, but AdaSSPRegression is expecting {self.n_features_in_} features as input")
        return X @ np.asarray(self.coef_) + float(self.intercept_)

    def score(self, X: Any, y: Any) -> float:
        """R^2 of the predictions (scikit-learn's convention)."""
        y = check_vector(y)
        resid = y - self.predict(X)
        total = float(np.sum((y - y.mean()) ** 2))
        return 1.0 - float(resid @ resid) / total if total > 0 else float("nan")


def _chunk(X: np.ndarray, y: np.ndarray | None, *, x_center: Any, y_center: float, bound_x: float, bound_y: float,
           intercept: bool, centred: bool) -> dict[str, Any]:
    """One chunk's statistics (``chunk_ssp`` for the certified default, else ``chunk_statistics``) with the public
    centre broadcast to the chunk's width (picklable for Dask)."""
    if centred:
        return chunk_ssp(X, np.asarray(y), x_center=x_center, y_center=y_center, bound_x=bound_x, bound_y=bound_y)
    return chunk_statistics(X, y, x_center=public_center(x_center, X.shape[1], "x_center"), y_center=y_center, bound_x=bound_x,
                            bound_y=bound_y, intercept=intercept)
