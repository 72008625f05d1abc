"""The accuracy of a certified regression forecast before any data is read (issue 24): ``est.plan(n, p).forecast()``.

The estimator, with its public bounds, centres and budget, is fitted on a public synthetic problem of the same shape:

    x = x_center + (C_x / (2 sqrt(p))) z,   z ~ N(0, I_p)       (E||x - x_center||^2 = C_x^2 / 4: rows inside the bound)
    y = y_center + (C_y / 3) (sqrt(s) u^T z / ||u|| + sqrt(1 - s) e),   u, e standard normal   (|y - y_center| <= C_y w.h.p.)

with ``signal`` s the share of var(y) a linear model explains (a public assumption: 0.3 by default). On fresh rows
of the same problem, the error of a fit is its excess risk, (test MSE - the noise variance) / var(y) = R^2 of the true
model - R^2 of the fit, computed exactly from the fitted intercept and slopes (``excess_risk``): what the estimate loses against the best linear model (the irreducible noise would make any
ratio look small). The forecast is the median over ``reps`` draws, beside the same estimator with the noise off, and
the smallest epsilon on a doubling grid at which the private excess risk is within 1.5 times the non-private one
(each fitted on the same ``reps`` draws of the data: the non-private excess risk is the sampling error).
Nothing here reads data: only the public parameters.
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


def synthetic_regression(n: int, p: int, bound_x: float, bound_y: float, x_center: np.ndarray, y_center: float, signal: float,
                         rng: np.random.Generator, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """n rows of the public synthetic problem (module docstring)."""
    z = rng.standard_normal((n, p))
    X = x_center + (bound_x / (2.0 * math.sqrt(p))) * z
    y = y_center + (bound_y / 3.0) * (math.sqrt(signal) * z @ direction + math.sqrt(1.0 - signal) * rng.standard_normal(n))
    return X, y


def excess_risk(predict: Any, x_center: np.ndarray, y_center: float, bound_x: float, bound_y: float, signal: float,
                direction: np.ndarray) -> float:
    """The exact excess risk of a linear predictor on the synthetic problem: with yhat(x) = a + b^T x read off
    ``predict`` at x_center and x_center + e_j, tau = C_x / (2 sqrt(p)) and sd(y) = C_y / 3,

        (MSE - noise variance) / var(y) = ((y_center - yhat(x_center))^2 + ||sd(y) sqrt(s) u - tau b||^2) / var(y)."""
    p = x_center.shape[0]
    points = np.vstack([x_center, x_center + np.eye(p)])
    values = np.asarray(predict(points), dtype=float)
    slopes = values[1:] - values[0]
    sd_y, tau = bound_y / 3.0, bound_x / (2.0 * math.sqrt(p))
    miss = sd_y * math.sqrt(signal) * direction - tau * slopes
    return float(((y_center - values[0]) ** 2 + miss @ miss) / sd_y**2)


def forecast_regression(estimator: Any, n_samples: int, n_features: int, *, signal: float = 0.3, reps: int = 5,
                        seed: int = 0, search: bool = True, budget: Budget | None = None) -> Forecast:
    """The forecast of ``estimator`` (unfitted, with public bounds, centres and a budget) at n x p (module docstring).
    Each simulated fit is a clone with a fresh in-memory budget: nothing is charged to the estimator's ledger.
    ``search=False`` skips the epsilon search (``epsilon_within`` is then None); ``budget`` overrides the estimator's
    (a fitted estimator's own run: its ledger may have nothing left)."""
    from sklearn.base import clone

    from ..errors import ValidationError
    from ._base import public_center

    if not 0.0 < signal < 1.0:
        raise ValidationError(f"signal must be in (0, 1), got {signal!r}")
    n, p = int(n_samples), int(n_features)
    if n < 2 or p < 1:
        raise ValidationError(f"a forecast needs n >= 2 rows and p >= 1 features, got {n} x {p}")
    budget = budget if budget is not None else estimator._resolve_budget()[0]
    bound_x, bound_y = float(estimator.bound_x), float(estimator.bound_y)
    x_center = public_center(estimator.x_center, p, "x_center")
    y_center = float(estimator.y_center or 0.0)
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(p)
    direction /= np.linalg.norm(direction)
    draws = [synthetic_regression(n, p, bound_x, bound_y, x_center, y_center, signal, rng, direction) for _ in range(reps)]

    def error(fit_budget: Budget) -> float:
        errors = []
        for rep, (X, y) in enumerate(draws):
            est = clone(estimator).set_params(budget=fit_budget, ledger=None, random_state=seed + rep)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            errors.append(excess_risk(est.predict, x_center, y_center, bound_x, bound_y, signal, direction))
        return float(np.median(errors))

    nonprivate = error(Budget.infinite())
    private = error(budget)
    within = None
    for factor in GRID if search else ():
        eps = budget.epsilon * factor
        if (private if factor == 1.0 else error(Budget(eps, budget.delta))) <= WITHIN * nonprivate:
            within = eps
            break
    return Forecast(n, p, budget.epsilon, budget.delta, signal, reps, private, nonprivate, within, search)


class ForecastMixin:
    """``record_forecast`` for a fitted certified estimator that has a forecast (AdaSSP, DPPLS S2, DPSIR)."""

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
