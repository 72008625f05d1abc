"""The accuracy of a certified regression forecast before any data is read (issue 24): ``est.plan(n, p).forecast()``.

The estimator, with its public bounds, centres and budget, is fitted on a public synthetic problem of the same shape:

    x = x_center + tau * z,   z ~ N(0, R),  R = (1 - rho) I + rho 11^T    (tau_j = C_x / (2 sqrt(p)): E||x - x_center||^2
                                                                          = C_x^2 / 4, rows inside the bound; per party's
                                                                          block C_k / (2 sqrt(m_k)) for DP-BCD)
    y = y_center + g^T z + (C_y / 3) sqrt(1 - s) e,   g = (C_y / 3) sqrt(s) u / sqrt(u^T R u)   (|y - y_center| <= C_y w.h.p.)

with ``signal`` s the share of var(y) a linear model explains (a public assumption: 0.3 by default), u a random
direction and ``correlation`` rho the columns' correlation (a public assumption: 0 by default; the vertical estimators
gain from it, because one party's block then carries part of the others' signal). On fresh rows of the same problem,
the error of a fit is its excess risk, (test MSE - the noise variance) / var(y) = R^2 of the true model - R^2 of the
fit, computed exactly from the fitted intercept and slopes (``excess_risk``): what the estimate loses against the best
linear model (the irreducible noise would make any ratio look small). The forecast is the median over ``reps`` draws,
beside the same estimator with the noise off, and the smallest epsilon on a doubling grid at which the private excess
risk is within 1.5 times the non-private one (each fitted on the same ``reps`` draws of the data: the non-private
excess risk is the sampling error). Nothing here reads data: only the public parameters.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import attrs
import numpy as np

from ..accounting import Budget

#: the private error is "within" the non-private one at this ratio
WITHIN = 1.5
#: the epsilons tried for ``epsilon_within``: the budget's epsilon times these factors
GRID = tuple(2.0**k for k in range(-3, 11))


@attrs.frozen
class Forecast:
    """The forecast of one certified fit (module docstring). Errors are excess risks, (MSE - noise variance) / var(y)."""

    n_samples: int
    n_features: int
    epsilon: float
    delta: float
    signal: float
    reps: int
    private_error: float
    nonprivate_error: float
    epsilon_within: float | None  #: None: not within 1.5x even at the largest epsilon tried (or not searched)
    searched: bool = True  #: whether the epsilon grid was searched for ``epsilon_within``

    @property
    def private_r2(self) -> float:
        """The forecast test R^2 on the synthetic problem (``signal`` for a perfect fit)."""
        return self.signal - self.private_error

    @property
    def nonprivate_r2(self) -> float:
        return self.signal - self.nonprivate_error

    def summary(self) -> str:
        within = (f"within {WITHIN:g}x of it from eps = {self.epsilon_within:.3g}" if self.epsilon_within is not None
                  else f"not within {WITHIN:g}x of it up to eps = {self.epsilon * GRID[-1]:.3g}")
        if not self.searched:
            within = "the epsilon within 1.5x of it not searched"
        return (f"forecast at n = {self.n_samples}, p = {self.n_features}, (eps = {self.epsilon:g}, delta = {self.delta:g}), "
                f"on a public synthetic problem whose linear signal explains {self.signal:.0%} of var(y): test R^2 "
                f"{self.private_r2:.3f} (noise off: {self.nonprivate_r2:.3f}); excess risk {self.private_error:.3g} "
                f"(noise off: {self.nonprivate_error:.3g}), {within}")


@attrs.frozen(eq=False)
class RegressionProblem:
    """The public synthetic problem of one estimator: per-column centres and sds of x, the centre and sd of y, and
    how a pooled X is handed to ``fit`` (``split``: column blocks for the multi-party estimators)."""

    x_center: np.ndarray
    x_sd: np.ndarray
    y_center: float
    y_sd: float
    split: tuple[int, ...] | None = None
    correlation: float = 0.0  #: rho of equicorrelated columns (a public assumption; 0: independent columns)

    def corr(self) -> np.ndarray:
        p = self.x_center.shape[0]
        return (1.0 - self.correlation) * np.eye(p) + self.correlation * np.ones((p, p))

    def signal_coefficients(self, signal: float, direction: np.ndarray) -> np.ndarray:
        """g: y = y_center + g^T z + noise with z ~ N(0, R) and var(g^T z) = signal var(y)."""
        return self.y_sd * math.sqrt(signal) * direction / math.sqrt(float(direction @ self.corr() @ direction))

    @classmethod
    def from_bounds(cls, p: int, bound_x: float, bound_y: float, x_center: np.ndarray, y_center: float) -> RegressionProblem:
        """Rows inside ||x - x_center|| <= C_x on average (sd C_x / (2 sqrt(p)) per column), sd(y) = C_y / 3."""
        return cls(x_center, np.full(p, bound_x / (2.0 * math.sqrt(p))), y_center, bound_y / 3.0)

    def fit_input(self, X: np.ndarray) -> Any:
        return X if self.split is None else np.split(X, np.cumsum(self.split)[:-1], axis=1)


def synthetic_regression(n: int, problem: RegressionProblem, signal: float, rng: np.random.Generator,
                         direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """n rows of the public synthetic problem (module docstring)."""
    p, rho = problem.x_center.shape[0], problem.correlation
    z = math.sqrt(1.0 - rho) * rng.standard_normal((n, p)) + math.sqrt(rho) * rng.standard_normal((n, 1))
    X = problem.x_center + problem.x_sd * z
    y = problem.y_center + z @ problem.signal_coefficients(signal, direction) + problem.y_sd * math.sqrt(1.0 - signal) * rng.standard_normal(n)
    return X, y


def excess_risk(predict: Any, problem: RegressionProblem, signal: float, direction: np.ndarray) -> float:
    """The exact excess risk of a linear predictor on the synthetic problem: with yhat(x) = a + b^T x read off
    ``predict`` at x_center and x_center + e_j, tau_j the sd of column j, g the signal's coefficients and R the
    columns' correlation,

        (MSE - noise variance) / var(y) = ((y_center - yhat(x_center))^2 + (g - tau b)^T R (g - tau b)) / var(y)."""
    p = problem.x_center.shape[0]
    points = np.vstack([problem.x_center, problem.x_center + np.eye(p)])
    values = np.asarray(predict(problem.fit_input(points)), dtype=float)
    slopes = values[1:] - values[0]
    miss = problem.signal_coefficients(signal, direction) - problem.x_sd * slopes
    return float(((problem.y_center - values[0]) ** 2 + miss @ problem.corr() @ miss) / problem.y_sd**2)


def default_problem(estimator: Any, p: int) -> RegressionProblem:
    """AdaSSP's and DPPLS's public scales: ``bound_x``, ``bound_y``, ``x_center``, ``y_center``."""
    from ._base import public_center

    return RegressionProblem.from_bounds(p, float(estimator.bound_x), float(estimator.bound_y),
                                         public_center(estimator.x_center, p, "x_center"), float(estimator.y_center or 0.0))


def forecast_regression(estimator: Any, n_samples: int, n_features: int, *, signal: float = 0.3, correlation: float = 0.0,
                        reps: int = 5, seed: int = 0, search: bool = True, budget: Budget | None = None,
                        problem: RegressionProblem | None = None) -> Forecast:
    """The forecast of ``estimator`` (unfitted, with public bounds, centres and a budget) at n x p (module docstring).
    Each simulated fit is a clone with a fresh in-memory budget: nothing is charged to the estimator's ledger.
    ``search=False`` skips the epsilon search (``epsilon_within`` is then None); ``budget`` overrides the estimator's
    (a fitted estimator's own run: its ledger may have nothing left); ``problem`` the scales read off its bounds."""
    from ..errors import ValidationError

    if not 0.0 < signal < 1.0:
        raise ValidationError(f"signal must be in (0, 1), got {signal!r}")
    if not 0.0 <= correlation < 1.0:
        raise ValidationError(f"correlation must be in [0, 1), got {correlation!r}")
    n, p = int(n_samples), int(n_features)
    if n < 2 or p < 1:
        raise ValidationError(f"a forecast needs n >= 2 rows and p >= 1 features, got {n} x {p}")
    budget = budget if budget is not None else estimator._resolve_budget()[0]
    problem = attrs.evolve(problem if problem is not None else default_problem(estimator, p), correlation=float(correlation))
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(p)
    direction /= np.linalg.norm(direction)
    draws = [synthetic_regression(n, problem, signal, rng, direction) for _ in range(reps)]

    def error(fit_budget: Budget) -> float:
        fits = [simulated_fit(estimator, problem.fit_input(X), y, fit_budget, seed + rep) for rep, (X, y) in enumerate(draws)]
        return float(np.median([excess_risk(est.predict, problem, signal, direction) for est in fits]))

    private, nonprivate, within = private_and_within(error, budget, search)
    return Forecast(n, p, budget.epsilon, budget.delta, signal, reps, private, nonprivate, within, search)


def simulated_fit(estimator: Any, X: Any, y: np.ndarray, budget: Budget, seed: int, **params: Any) -> Any:
    """A clone of ``estimator`` fitted on public synthetic rows with ``budget`` and seed ``seed``: fresh in-memory ledgers
    (nothing is charged to the estimator's), no message reports, ``params`` set where the estimator has them, its
    warnings silenced. Every forecast's simulated fit."""
    from sklearn.base import clone

    est = clone(estimator)
    wanted = {"budget": budget, "random_state": seed, "ledger": None, "ledgers": None, "message_reports": False, **params}
    est.set_params(**{name: value for name, value in wanted.items() if name in est.get_params()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est


def private_and_within(error: Any, budget: Budget, search: bool) -> tuple[float, float, float | None]:
    """(the error at ``budget``, with the noise off, and the smallest epsilon on the doubling grid ``GRID`` x eps at
    which it is within ``WITHIN`` x the noise-off error, or None): every forecast's last step."""
    nonprivate = error(Budget.infinite())
    private = error(budget)
    for factor in GRID if search else ():
        eps = budget.epsilon * factor
        if (private if factor == 1.0 else error(Budget(eps, budget.delta))) <= WITHIN * nonprivate:
            return private, nonprivate, eps
    return private, nonprivate, None


class ForecastMixin:
    """``record_forecast`` for a fitted certified estimator that has a forecast (AdaSSP and DPPLS S2 here; DPSIR and
    SparseDPSIR through ``forecast_sir.SIRForecastMixin``)."""

    def _released_row_count(self) -> int | None:
        """The row count the fit's releases make public: n itself under replace-one, the DP count under add/remove
        (None when the fit released none)."""
        raise NotImplementedError

    def _forecast_at(self, n: int, budget: Budget, **options: Any) -> Any:
        """The estimator's forecast at n rows with this budget (``forecast_regression`` for the regressions)."""
        return forecast_regression(self, n, int(self.n_features_in_), budget=budget, **options)  # type: ignore[attr-defined]

    def record_forecast(self, forecast: Any = None, **options: Any) -> Any:
        """Record an accuracy forecast in ``privacy_report_`` beside the achieved noise diagnostic (post-processing of
        public parameters: free) and return it as ``forecast_``. ``forecast``: one made before the fit from a public n
        (``est.plan(n, p).forecast()``); without it the forecast is computed now at the row count the releases made
        public (n under replace-one, the DP count under add/remove: the true n is never used). ``options`` go to
        ``forecast_regression`` (``signal``, ``reps``, ``search``)."""
        from ..errors import ValidationError
        from ..released.regression import with_noise_message

        self._check_fitted("privacy_report_", "plan_")  # type: ignore[attr-defined]
        source = "made before the fit"
        if forecast is None:
            n = self._released_row_count()
            if n is None:
                raise ValidationError("this fit released no row count (public centring under add/remove): pass "
                                      "forecast=est.plan(n, p).forecast() made from a public n")
            forecast = self._forecast_at(n, self.plan_.budget, **options)  # type: ignore[attr-defined]
            source = "at the row count the releases made public"
        if not hasattr(forecast, "summary") or not attrs.has(type(forecast)):
            raise ValidationError(f"forecast must be a privsdr Forecast (est.plan(n, p).forecast()), got {type(forecast).__name__}")
        self.forecast_ = forecast
        report: Any = getattr(self, "privacy_report_")  # noqa: B009 - set by the fit (checked above)
        self.privacy_report_ = with_noise_message(report, f"{forecast.summary()} ({source})", "forecast",
                                                  forecast={**attrs.asdict(forecast), "source": source})
        return forecast
