"""Differentially private PLS1 regression (edPLS: Nikzad-Langerodi et al. 2024; spec edpls_001.md).

``DPPLS(n_components, mode=..., bound_x=C_x, bound_y=C_y, budget=Budget(eps, delta))``:

* ``mode="certified"`` (default, S2): sufficient-statistics perturbation, cost independent of A;
* ``mode="certified_iterative"`` (S1): the paper's per-component loop with public bounds, clipping
  and the budget split over the 4A releases;
* ``mode="paper"``: Algorithm E as published. Its noise scales are read off the private data, so it
  has NO DP guarantee (status ``none``); ``budget`` is then the paper's per-release (eps, delta) and
  the ledger is charged what those 4A releases compose to (spec O-15/O-16). Needs
  ``allow_uncertified=True``.

Contract: the fit never stores raw data, residuals or the noise-free scores; certified modes never
release scores. Relation: add/remove one row (the paper's, spec §4.1). Rows are clipped around the
public centre (``x_center``, ``y_center``; default 0) to the public bounds before any query.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import partial
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import RegressorMixin

from .. import core
from .._validation import privsdr_errors, warn_column_vector
from ..accounting import Budget, Ledger, as_budget, make_accountant
from ..accounting.default import fresh_ledger, ledger_for
from ..errors import ValidationError
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, regression
from ..released.fitted import Fitted
from ..released.sites import SiteBlocks
from ..released.ssp import ssp_postprocess
from ._base import PrivateEstimator, check_matrix, check_positive, diagnostic_rng, for_ledger, public_center
from ._pls_modes import (
    RELATION,
    fit_iterative,
    fit_paper,
    fit_ssp,
    iterative_plan,
    paper_plan,
    paper_releases,
    release_ssp,
    ssp_plan,
    ssp_site_parts,
)
from ._pls_queries import chunk_ssp, ssp_statistics
from .forecast import ForecastMixin, forecast_regression

MODES = ("certified", "certified_iterative", "paper")
CENTERINGS = ("dp", "public")
#: certified (S2) post-processing: "snr" keeps the leading components above the noise, none when X^T y is noise
SHRINKAGES = ("snr", "none")
AUTO_MAX_COMPONENTS = 30
#: the DP means are the fallback of a certified fit (issue 33): y_sum weighs as much as X^T y (4x its old share of rho)
DEFAULT_WEIGHTS = {"xtx": 1.0, "xty": 1.0, "count": 0.5, "x_sum": 0.5, "y_sum": 1.0}
#: S1 (certified_iterative) releases four statistics per component, each at weight 1: its DP means get more than S2's
ITERATIVE_WEIGHTS = {"count": 1.0, "y_sum": 2.0}


@model_class
class DPPLS(RegressorMixin, ForecastMixin, PrivateEstimator):
    """Private PLS1 regression of one response on m predictors.

    Parameters
    ----------
    n_components: A, the number of latent variables (1 <= A <= min(n - 1, m)); in certified (S2) mode
        also ``"auto"``: the leading components (at most 30) whose ``component_snr_`` exceeds 1, chosen
        from the released statistics (post-processing, spec A11).
    mode: ``certified`` (S2), ``certified_iterative`` (S1) or ``paper`` (Algorithm E, not private).
    bound_x, bound_y: public bounds C_x on ||x - x_center|| and C_y on |y - y_center| (certified modes;
        rows beyond them are clipped). Never read off the data.
    x_center, y_center: public centre of the rows (default 0). ``centering="dp"`` (default) then
        estimates the means privately (count, sum x, sum y: charged); ``"public"`` treats the public
        centre as the mean.
    budget, ledger, accountant: see ``PrivateEstimator``; in paper mode ``budget`` is per release.
    weights: certified budget weights by node name: xtx, xty (S2) and count, x_sum, y_sum (DP centring,
        both certified modes; defaults ``DEFAULT_WEIGHTS``, for S1 with ``ITERATIVE_WEIGHTS`` over them); S1's
        per-component releases weigh 1 each.
    tight: one global noise factor so that the composed cost meets the budget (certified modes).
    psd_repair: project the noisy X^T X onto the PSD cone before kernel PLS (S2; post-processing).
    ridge: S2: add lambda I to the noisy X^T X first; ``"noise"`` (default) uses lambda = sigma_S sqrt(m)
        from the public noise scale, a number is used as given, 0 switches it off (post-processing).
    release_scores: paper mode only (default True, as published): also release the noisy scores T.
    legacy_std_is_variance: paper mode only: draw noise with std sigma^2, the reference code's bug
        (spec A13), to reproduce the paper's figures.
    random_state, allow_uncertified, sampler: as everywhere in privsdr (sampler="secure": exact discrete noise).
    shrinkage: certified modes (issue 24). S1: ``"snr"`` (default) keeps the components up to the first whose released
        E^T f cannot be told from its noise (a pre-test per component at level 0.05 / A); none kept: the DP mean and a
        ``NoiseDominatesWarning``. S2: ``"snr"`` makes ``n_components`` a maximum: the leading
        components whose ``component_snr_`` exceeds 1 are kept (at least one), and none when the centred X^T y cannot
        be told from its own noise (a pre-test at level 0.05: ``released.ssp.signal_in_xty``): the fit then predicts
        the DP mean; the slopes are then scaled by ``shrinkage_factor_`` = max(0, 1 - noise_ratio_^2), the share of
        the predictions' spread the noise does not explain (positive-part James-Stein, from the parametric bootstrap
        of ``diagnose_noise``). Post-processing; noise off it changes nothing. ``"none"``: exactly ``n_components``.
    diagnose_noise: certified (S2) mode: measure ``noise_ratio_``, how far the noise alone moves the fitted
        predictions relative to their spread (a parametric bootstrap of the release, 30 draws, 8 for m > 200:
        ``privsdr.released.regression``), and warn ``NoiseDominatesWarning`` above 1/2. Free.

    After ``fit``: ``coef_`` (b, length m), ``intercept_``, ``x_weights_`` (W, unit columns),
    ``x_loadings_`` (P), ``y_loadings_`` (c), ``coef_path_`` (m x A: b for 1..A components, free
    post-processing), ``x_mean_``, ``y_mean_``, ``n_components_``, ``condition_number_``
    (cond(P^T W)), ``statistics_`` (S2: the released noisy statistics), ``component_snr_`` (S2: variance
    along each component over the noise's spectral norm; <= 1 means mostly noise), ``x_scores_`` (paper mode
    with released scores: the noisy T), ``plan_``, ``ledger_``, ``privacy_report_``.

    ``save``/``load`` keep the regression (coefficients, loadings, means, ``component_snr_``), not the
    raw released statistics or the paper mode's per-row scores.
    """

    model_attributes = ("coef_", "intercept_", "x_weights_", "x_loadings_", "y_loadings_", "coef_path_", "x_mean_", "y_mean_",
                        "n_components_", "condition_number_", "component_snr_", "noise_ratio_", "shrinkage_factor_",
                        "n_features_in_")
    model_required = ("coef_", "coef_path_", "x_mean_", "y_mean_", "n_components_")
    coef_: np.ndarray
    coef_path_: np.ndarray
    x_mean_: np.ndarray
    y_mean_: float

    def __init__(
        self,
        n_components: int | str = 2,  # or "auto"
        *,
        mode: str = "certified",
        bound_x: float | None = None,
        bound_y: float | None = None,
        x_center: Any = None,
        y_center: float | None = None,
        centering: str = "dp",
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        weights: Mapping[str, float] | None = None,
        tight: bool = True,
        psd_repair: bool = True,
        ridge: str | float = "noise",
        release_scores: bool | None = None,
        legacy_std_is_variance: bool = False,
        random_state: Any = None,
        allow_uncertified: bool = False,
        sampler: str = "numpy",
        diagnose_noise: bool = True,
        shrinkage: str = "snr",
    ) -> None:
        self.diagnose_noise = diagnose_noise
        self.shrinkage = shrinkage
        self.n_components = n_components
        self.mode = mode
        self.bound_x = bound_x
        self.bound_y = bound_y
        self.x_center = x_center
        self.y_center = y_center
        self.centering = centering
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.weights = weights
        self.tight = tight
        self.psd_repair = psd_repair
        self.ridge = ridge
        self.release_scores = release_scores
        self.legacy_std_is_variance = legacy_std_is_variance
        self.random_state = random_state
        self.allow_uncertified = allow_uncertified
        self.sampler = sampler

    # -- public parameters ------------------------------------------------------------------------
    def _checked(self, n: int, m: int) -> dict[str, Any]:
        """Every public parameter validated (before anything is spent)."""
        if self.mode not in MODES:
            raise ValidationError(f"mode must be one of {MODES}, got {self.mode!r}")
        A = self.n_components
        auto = isinstance(A, str) and A == "auto"
        if auto:
            if self.mode != "certified":
                raise ValidationError("n_components='auto' chooses A from the released statistics: certified (S2) mode only")
            A = min(n - 1, m, AUTO_MAX_COMPONENTS)
        if isinstance(A, bool) or not isinstance(A, Integral) or A < 1:
            raise ValidationError(f"n_components must be an integer >= 1 or 'auto', got {A!r}")
        if A > min(n - 1, m):
            raise ValidationError(f"n_components = {A} exceeds min(n - 1, m) = {min(n - 1, m)}")
        paper = self.mode == "paper"
        c: dict[str, Any] = {"A": int(A), "paper": paper, "auto": auto}
        if paper:
            for name in ("bound_x", "bound_y", "x_center", "y_center"):
                if getattr(self, name) is not None:
                    raise ValidationError(f"paper mode reads its bounds and means off the data; {name} is not used (certified modes only)")
            c["release_scores"] = True if self.release_scores is None else bool(self.release_scores)
            c["legacy"] = bool(self.legacy_std_is_variance)
            return c
        if self.release_scores:
            raise ValidationError("certified modes never release the scores T (one entry per record; spec A9)")
        if self.legacy_std_is_variance:
            raise ValidationError("legacy_std_is_variance reproduces a bug of the paper's code: paper mode only")
        for name in ("bound_x", "bound_y"):
            if getattr(self, name) is None:
                raise ValidationError(f"{name} (a public bound) is required in {self.mode} mode; it is never read off the data")
        c["bound_x"], c["bound_y"] = check_positive(self.bound_x, "bound_x"), check_positive(self.bound_y, "bound_y")
        if self.centering not in CENTERINGS:
            raise ValidationError(f"centering must be one of {CENTERINGS}, got {self.centering!r}")
        c["dp_centring"] = self.centering == "dp"
        c["x_center"] = public_center(self.x_center, m, "x_center")
        yc = 0.0 if self.y_center is None else self.y_center
        if isinstance(yc, bool) or not isinstance(yc, (int, float, np.floating, np.integer)) or not np.isfinite(yc):
            raise ValidationError(f"y_center must be a finite number, got {self.y_center!r}")
        c["y_center"] = float(yc)
        c["psd_repair"] = bool(self.psd_repair)
        if self.shrinkage not in SHRINKAGES:
            raise ValidationError(f"shrinkage must be one of {SHRINKAGES}, got {self.shrinkage!r}")
        c["shrinkage"] = self.shrinkage
        if not isinstance(getattr(self, "diagnose_noise", True), (bool, np.bool_)):
            raise ValidationError(f"diagnose_noise must be True or False, got {self.diagnose_noise!r}")
        if self.ridge == "noise":
            c["ridge"] = "noise"
        elif isinstance(self.ridge, (int, float, np.floating, np.integer)) and not isinstance(self.ridge, bool) and np.isfinite(self.ridge) and self.ridge >= 0:
            c["ridge"] = float(self.ridge)
        else:
            raise ValidationError(f"ridge must be 'noise' or a finite number >= 0, got {self.ridge!r}")
        c["weights"] = self._weights()
        return c

    def _weights(self) -> dict[str, float]:
        weights = {**DEFAULT_WEIGHTS, **(ITERATIVE_WEIGHTS if self.mode == "certified_iterative" else {})}
        for name, value in dict(self.weights or {}).items():
            if name not in weights:
                raise ValidationError(f"unknown weight {name!r}; expected some of {sorted(weights)}")
            weights[name] = check_positive(value, f"weights[{name!r}]")
        return weights

    def build_plan(self, n_samples: int, n_features: int, budget: Budget) -> Plan:
        """The release plan of a fit on n x m data: public parameters only (n is used to check A)."""
        n, m = int(n_samples), int(n_features)
        c = self._checked(n, m)
        public = {"mode": self.mode, "n_components": c["A"], "n_features": m}
        if c["paper"]:
            public.update({"release_scores": c["release_scores"], "legacy_std_is_variance": c["legacy"],
                           "per_release_budget": [budget.epsilon, budget.delta]})
            return paper_plan(Plan("edpls_paper", RELATION, public), c["A"], budget, c["release_scores"])
        public.update({"bound_x": c["bound_x"], "bound_y": c["bound_y"], "centering": self.centering,
                       "x_center": "0" if not np.any(c["x_center"]) else "public vector", "y_center": c["y_center"]})
        if self.mode == "certified":
            public.update({"ridge": c["ridge"], "psd_repair": c["psd_repair"]})
            return ssp_plan(Plan("dppls_ssp", RELATION, public), c["bound_x"], c["bound_y"], c["dp_centring"], c["weights"])
        return iterative_plan(Plan("dppls_iterative", RELATION, public), c["A"], c["bound_x"], c["bound_y"], c["dp_centring"], c["weights"])

    def _budget_and_ledger(self, n: int, m: int) -> tuple[Budget, Ledger, CalibratedPlan]:
        if self.mode != "paper":
            budget, ledger = self._resolve_budget()
            plan = for_ledger(self.build_plan(n, m, budget), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight,
                                                                              sampler=self._sampler())
            return budget, ledger, plan
        if self.budget is None:
            raise ValidationError("paper mode needs budget=(epsilon, delta): the per-release (epsilon, delta) of Algorithm E")
        per_release = as_budget(self.budget)
        if self.ledger is not None and not isinstance(self.ledger, Ledger):
            raise ValidationError(f"ledger must be a privsdr.Ledger, got {type(self.ledger).__name__}")
        plan = self.build_plan(n, m, per_release).allocate(per_release, sampler=self._sampler())
        given = ledger_for(self)
        if given is not None:
            return per_release, given, plan
        if per_release.is_infinite:  # else a ledger exactly as large as the composed published claim
            return per_release, Ledger(Budget.infinite()), plan
        accountant = make_accountant(self.accountant, per_release.delta)
        claimed = accountant.cost(plan.charges())
        return per_release, fresh_ledger(Budget(claimed.epsilon, claimed.delta), self.accountant, type(self).__name__), plan

    def plan(self, n_samples: int, n_features: int) -> CalibratedPlan:
        """The calibrated plan of a fit on data of this shape; ``.cost()`` prices it and, in certified (S2) mode,
        ``.forecast()`` forecasts its accuracy (``privsdr.algorithms.forecast``) before any data is read."""
        calibrated = self._budget_and_ledger(int(n_samples), int(n_features))[2]
        if self.mode == "certified":
            calibrated.forecaster = partial(forecast_regression, self, int(n_samples), int(n_features))
        return calibrated

    # -- fitting ------------------------------------------------------------------------------------
    def _check_xy(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        # certified (S2): X's finiteness is checked in the statistics' one pass (core.gram_pass), before any charge
        X = check_matrix(X, "X", min_rows=2, finite=self.mode != "certified")
        if y is None:
            raise ValidationError("y is required: DPPLS requires y to be passed, but the target y is None")
        try:
            yy = np.asarray(y, dtype=float)
        except (TypeError, ValueError):
            raise ValidationError("y must be numeric") from None
        if yy.ndim == 2 and yy.shape[1] == 1:
            warn_column_vector(yy)
            yy = yy[:, 0]
        if yy.ndim != 1:
            raise ValidationError(f"PLS1 takes one response: y must have shape (n,) or (n, 1), got {yy.shape}")
        if yy.shape[0] != X.shape[0]:
            raise ValidationError(f"y has {yy.shape[0]} values for {X.shape[0]} rows of X")
        if not np.all(np.isfinite(yy)):
            raise ValidationError("y contains NaN or inf")
        if self.mode == "paper" and np.all(yy == yy[0]):
            # paper mode only (not private anyway): a certified fit never refuses on what one record can
            # change -- "y constant" and its neighbour with one y moved would be told apart by the refusal
            raise ValidationError("y is constant: PLS needs a response that varies")
        return X, yy

    def _chunked_statistics(self, X: Any, y: Any) -> dict[str, Any]:
        """The S2 statistics summed over row chunks; the in-memory fit's checks on n and y, before anything is spent."""
        from functools import partial

        from ..rows import reduce_rows

        if self.mode != "certified":
            raise ValidationError("a chunked or Dask fit reduces sums over rows: mode='certified' (S2, sufficient statistics) only")
        for name in ("bound_x", "bound_y"):
            if getattr(self, name) is None:
                raise ValidationError(f"{name} (a public bound) is required in {self.mode} mode; it is never read off the data")
        yc = 0.0 if self.y_center is None else self.y_center
        if isinstance(yc, bool) or not isinstance(yc, (int, float, np.floating, np.integer)) or not np.isfinite(yc):
            raise ValidationError(f"y_center must be a finite number, got {self.y_center!r}")
        fn = partial(chunk_ssp, x_center=self.x_center, y_center=float(yc), bound_x=check_positive(self.bound_x, "bound_x"),
                     bound_y=check_positive(self.bound_y, "bound_y"))
        total = reduce_rows(X, y, fn, with_y=True, desc="DPPLS: sums", fn_checks_finite=True)
        if total["n"] < 2:
            raise ValidationError(f"X needs at least 2 rows, got {total['n']} sample{'' if total['n'] == 1 else 's'}")
        # no "y is constant" refusal: a chunked fit is certified, and one record can make y vary (the refusal
        # alone would tell the two neighbours apart); a constant y fits to a degenerate, noisy model
        return total

    def _notes(self, budget: Budget, plan: CalibratedPlan, n: int) -> list[str]:
        if self.mode == "paper":
            if budget.is_infinite:
                return ["paper mode with the noise switched off: Algorithm B (noise-free PLS1)"]
            k = sum(1 for node in plan.nodes.values() if node.data_dependent)
            notes = [
                f"paper mode (Algorithm E): every one of the {k} releases is calibrated to the full per-release "
                f"(epsilon={budget.epsilon:g}, delta={budget.delta:g}) with sensitivities read off the private data "
                "(Eq. 8): NO differential-privacy guarantee holds (spec §4.5). The totals show what the published "
                "per-release claim composes to if its sensitivities were true global bounds.",
            ]
        else:
            notes = []
        if not budget.is_infinite and budget.delta >= 1.0 / n:
            notes.append(f"delta = {budget.delta:g} >= 1/n = {1.0 / n:.3g}: a mechanism may then publish a whole record (spec §4.5-8)")
        return notes

    _requires_y = True

    def fit(self, X: Any, y: Any = None) -> DPPLS:
        """Fit on X (n x m) and y; in certified (S2) mode also on ``privsdr.Chunks`` or a dask array (the
        statistics are sums over rows, reduced chunk by chunk: ``privsdr.rows``, docs/scale.md)."""
        from ..rows import is_chunked

        X_raw = X
        stats = None
        if is_chunked(X):
            stats = self._chunked_statistics(X, y)
            n, m = int(stats["n"]), int(stats["p"])
            X_raw = None
        else:
            X, y = self._check_xy(X, y)
            n, m = X.shape
        c = self._checked(n, m)
        if stats is None and self.mode == "certified":  # S2's statistics in one blocked pass, before anything is charged
            with privsdr_errors():
                stats = ssp_statistics(X, y, c["x_center"], c["y_center"], c["bound_x"], c["bound_y"])
        budget, ledger, calibrated = self._budget_and_ledger(n, m)
        notes = self._notes(budget, calibrated, n)
        if not budget.is_infinite and budget.delta >= 1.0 / n:
            warnings.warn(notes[-1], stacklevel=2)
        fits = {"certified_iterative": fit_iterative, "paper": fit_paper}
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=(n, m), algorithm=f"DPPLS ({self.mode})",
                 allow_uncertified=self.allow_uncertified, notes=notes) as run:
            if self.mode == "certified":
                released = release_ssp(run, stats, c, "chunks") if stats is not None else fit_ssp(run, X, y, c)
            else:
                out = fits[self.mode](run, X, y, c)
        self._record_features(X_raw, m)
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = run.report
        if self.mode == "certified":
            self._finish_released(released, run.report, calibrated, ledger, c)
        else:
            self._store(out, m)
        if self.mode == "certified_iterative" and c["shrinkage"] == "snr" and self.n_components_ == 0:
            self._trivial_s1(run)
        return self

    def _trivial_s1(self, run: Run) -> None:
        """S1 with every component's released E^T f below its noise: the fit is the DP mean; the report and a
        ``NoiseDominatesWarning`` say so."""
        from ..errors import NoiseDominatesWarning
        from ..released.regression import with_noise_message

        message = ("the first component's released X^T y cannot be told from its noise: the fit is the DP mean (the trivial "
                   "model); more data or more budget is needed")
        self.privacy_report_ = with_noise_message(run.report, message)
        warnings.warn(message, NoiseDominatesWarning, stacklevel=3)

    def _site_blocks(self, n_features: int, n_samples: int) -> SiteBlocks:
        """S2's declared blocks for a secure fit over sites (``privsdr.federated.SecureSites``): its nodes (``ssp_plan``),
        each site's S2 sums of its clipped rows, and S2's post-processing (``_finish_released``)."""
        if self.mode != "certified":
            raise ValidationError(f"a secure fit over sites releases sums of the sites' statistics: mode='certified' (S2) only, "
                                  f"not {self.mode!r}")
        n, m = int(n_samples), int(n_features)
        c = self._checked(n, m)
        budget, ledger = self._resolve_budget()
        shapes, entries = ssp_site_parts(m, c["bound_x"], c["bound_y"], c["dp_centring"])
        return SiteBlocks(for_ledger(self.build_plan(n, m, budget), ledger), budget, ledger, shapes, entries, 1.0,
                          partial(ssp_statistics, x_center=c["x_center"], y_center=c["y_center"], bound_x=c["bound_x"], bound_y=c["bound_y"]),
                          partial(self._finish_sites, m=m, c=c), "DPPLS (certified)", self.random_state)

    def _finish_sites(self, released: Released, report: Any, calibrated: CalibratedPlan, ledger: Ledger, *, m: int,
                      c: dict[str, Any]) -> DPPLS:
        """A secure fit over sites: the features are known only by their number."""
        self._record_features(None, m)
        return self._finish_released(released, report, calibrated, ledger, c)

    def _finish_released(self, released: Released, report: Any, calibrated: CalibratedPlan, ledger: Ledger, c: dict[str, Any]) -> DPPLS:
        """S2's consumer (``pls_from_released``) applied to a ``Released`` (central, or a secure sum over sites:
        ``_site_blocks``)."""
        self.plan_, self.ledger_ = calibrated, ledger
        fitted = pls_from_released(released, n_components=c["A"], auto=c["auto"], bound_x=c["bound_x"], bound_y=c["bound_y"],
                                   x_center=c["x_center"], y_center=c["y_center"], centering=self.centering,
                                   ridge=c["ridge"], psd_repair=c["psd_repair"], shrinkage=c["shrinkage"],
                                   diagnose_noise=self.diagnose_noise, rng=diagnostic_rng(self.random_state))
        self.privacy_report_ = fitted.apply(self, report)
        return self

    def _released_row_count(self) -> int | None:
        """The DP count (certified S2 with DP centring; ``forecast`` exists for S2 only). None without one."""
        self._check_fitted("plan_")
        if self.mode != "certified":
            from ..errors import ValidationError

            raise ValidationError(f"the accuracy forecast exists for mode='certified' (S2) only, not {self.mode!r}")
        count = getattr(self, "statistics_", {}).get("count")
        return None if count is None else max(2, round(float(np.asarray(count).ravel()[0])))

    def _store(self, out: dict[str, Any], m: int) -> None:
        attributes, warned = stored_attributes(out, m, self.n_components)
        for name, value in attributes.items():
            setattr(self, name, value)
        for category, message in warned:
            warnings.warn(message, category, stacklevel=3)

    # -- prediction ---------------------------------------------------------------------------------
    def predict(self, X: Any, n_components: int | None = None) -> np.ndarray:
        """y_hat = (x - x_mean_)^T b + y_mean_, with b from the first ``n_components`` (default all)."""
        self._check_fitted("coef_", "n_features_in_")
        X_raw, X = X, check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        if n_components is None:
            b = self.coef_
        else:
            if isinstance(n_components, bool) or not isinstance(n_components, Integral) or not 1 <= n_components <= self.n_components_:
                raise ValidationError(f"n_components must be in 1..{self.n_components_}")
            b = self.coef_path_[:, int(n_components) - 1]
        return (X - self.x_mean_) @ b + self.y_mean_

    def score(self, X: Any, y: Any, n_components: int | None = None) -> float:
        """R^2 of the predictions (scikit-learn's convention)."""
        y = np.asarray(y, dtype=float).ravel()
        resid = y - self.predict(X, n_components)
        total = float(np.sum((y - y.mean()) ** 2))
        return 1.0 - float(resid @ resid) / total if total > 0 else float("nan")


def stored_attributes(out: dict[str, Any], m: int, requested: int | str) -> tuple[dict[str, Any], list[tuple[type[Warning], str]]]:
    """The fitted attributes of a PLS fit's output (``ssp_postprocess``, or S1's and the paper's fits), and the warning
    when the statistics admit fewer components than ``requested``."""
    A = out["weights"].shape[1]
    warned: list[tuple[type[Warning], str]] = []
    if requested != "auto" and A < int(requested):
        warned.append((UserWarning, f"the noisy statistics admit only {A} of the {requested} components requested"))
    coef_path = out["coef_path"] if A else np.zeros((m, 0))
    coef = coef_path[:, -1] if A else np.zeros(m)
    x_mean, y_mean = np.asarray(out["x_mean"], dtype=float), float(out["y_mean"])
    attributes: dict[str, Any] = {
        "x_weights_": out["weights"], "x_loadings_": out["loadings"], "y_loadings_": out["y_loadings"], "coef_path_": coef_path,
        "coef_": coef, "x_mean_": x_mean, "y_mean_": y_mean, "intercept_": y_mean - float(x_mean @ coef), "n_components_": A,
        "condition_number_": core.regression_vector(out["weights"], out["loadings"], out["y_loadings"])[1] if A else 1.0,
        "n_features_in_": m}
    if out.get("statistics") is not None:
        attributes["statistics_"], attributes["component_snr_"] = out["statistics"], out["snr"]
    if out.get("scores") is not None:
        attributes["x_scores_"] = out["scores"]
    return attributes, warned


def pls_from_released(released: Released, *, n_components: int, bound_x: float, bound_y: float, x_center: np.ndarray,
                      y_center: float = 0.0, centering: str = "dp", auto: bool = False, ridge: str | float = "noise",
                      psd_repair: bool = True, shrinkage: str = "snr", diagnose_noise: bool = True,
                      rng: np.random.Generator | None = None) -> Fitted:
    """DPPLS certified (S2) from a ``Released`` with arrays xtx, xty (and, with ``centering="dp"``, count, x_sum, y_sum)
    of the rows shifted by the public centres and clipped to ``bound_x``, ``bound_y``: ``ssp_postprocess`` (DP centring,
    ridge, PSD repair, kernel PLS1 with ``n_components`` components, at most, with ``auto``), then the noise ratio
    of the slopes (``released.regression``) and, with ``shrinkage="snr"``, the fallback towards the DP mean of y.
    Post-processing of the record and public parameters only; ``rng``: the bootstrap's randomness (default seeded)."""
    m = released["xtx"].shape[0]
    c = {"A": int(n_components), "auto": bool(auto), "dp_centring": centering == "dp", "bound_x": float(bound_x),
         "bound_y": float(bound_y), "x_center": np.asarray(x_center, dtype=float), "y_center": float(y_center),
         "ridge": ridge, "psd_repair": bool(psd_repair), "shrinkage": shrinkage}
    sigma = released.scales["xtx"]
    out = ssp_postprocess(dict(released.arrays), sigma, c, released.scales)
    attributes, warned = stored_attributes(out, m, "auto" if auto else n_components)
    attributes["released_"] = released
    snr = shrinkage == "snr"
    if not (diagnose_noise or snr):
        return Fitted(attributes, (), tuple(warned))

    def slopes(r: Released) -> np.ndarray:
        path = ssp_postprocess(dict(r.arrays), sigma, c, r.scales)["coef_path"]
        return path[:, -1] if path.shape[1] else np.zeros(m)

    reps = 30 if m <= 200 else 8  # each draw refits (an m x m eigendecomposition): fewer for wide spectra
    ratio = regression.noise_ratio(released, slopes, out["metric"], rng if rng is not None else np.random.default_rng(0), reps=reps)
    attributes["noise_ratio_"] = ratio
    if snr:  # never worse than the DP mean (issue 33): a warned fit is the DP mean
        factor = attributes["shrinkage_factor_"] = regression.fallback_factor(ratio)
        attributes["coef_path_"] = factor * attributes["coef_path_"]
        attributes["coef_"] = factor * attributes["coef_"]
        attributes["intercept_"] = attributes["y_mean_"] - float(attributes["x_mean_"] @ attributes["coef_"])
    if not diagnose_noise:
        return Fitted(attributes, (), tuple(warned))
    return Fitted(attributes, (regression.diagnostic(ratio),),
                  (*warned, *regression.warned(ratio, regression.FALLBACK_NOTE if snr else None)))


def paper_event_count(n_components: int, release_scores: bool = True) -> int:
    """4A Gaussian releases (3A without T): what the paper's composition should have counted (spec O-15)."""
    return n_components * len(paper_releases(release_scores))
