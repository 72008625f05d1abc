"""The accuracy of a certified regression forecast before any data is read (issue 24): ``est.plan(n, p).forecast()``.

The estimator, with its public bounds, centres and budget, is fitted on a public synthetic problem of the same shape:

    x = x_center + tau * z,   z ~ N(0, R),  R = (1 - rho) I + rho 11^T    (tau_j = C_x / (2 sqrt(p)): E||x - x_center||^2
                                                                          = C_x^2 / 4, rows inside the bound; per party's
                                                                          block C_k / (2 sqrt(m_k)) for DP-BCD)
    y = y_center + g^T z + (C_y / 3) sqrt(1 - s) e,   g = (C_y / 3) sqrt(s) u / sqrt(u^T R u)   (|y - y_center| <= C_y w.h.p.)

with ``signal`` s the share of var(y) a linear model explains (a public assumption: 0.3 by default), ``correlation`` rho
the columns' correlation (a public assumption: 0 by default; the vertical estimators gain from it, because one party's
block then carries part of the others' signal) and ``direction`` where the signal lies (a public assumption, u: "random"
by default, "common" the columns' common factor 1 / sqrt(p), "same_sign" |g| / ||g||: every column pushing y the same
way). With correlated columns the direction decides much: a signal along the common factor is estimated far better than
one on a random direction. The forecast then also reports the error along the other directions and says when they
differ by more than 2x (issue 33: on the DP-BCD simulation, whose coefficients share a sign, "common" is within 2x for
DP-BCD and "same_sign" for AdaSSP, ``docs/accuracy.md``). On fresh rows of the same problem,
the error of a fit is its excess risk, (test MSE - the noise variance) / var(y) = R^2 of the true model - R^2 of the
fit, computed exactly from the fitted intercept and slopes (``excess_risk``): what the estimate loses against the best
linear model (the irreducible noise would make any ratio look small). The forecast is the median over ``reps`` draws,
beside the same estimator with the noise off, and the smallest epsilon on a doubling grid at which the private excess
risk is within 1.5 times the non-private one (each fitted on the same ``reps`` draws of the data: the non-private
excess risk is the sampling error). Each simulated data set has at most ``simulated_rows(n, p)`` rows (10^5, fewer for
wide p), made one at a time: beyond, the errors are carried to n by the rates of small noise (``at_full_size``), so a
forecast's memory does not grow with n (issue 33: 10^8 rows used to allocate 10^8-row data sets). Nothing here reads
data: only the public parameters.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from ..accounting import Budget

#: the private error is "within" the non-private one at this ratio
WITHIN = 1.5
#: the epsilons tried for ``epsilon_within``: the budget's epsilon times these factors
GRID = tuple(2.0**k for k in range(-3, 11))
#: the simulated data sets have at most this many rows, and at most ``MAX_SIMULATED_CELLS`` entries (but at least
#: ``MIN_SIMULATED_ROWS`` rows): a forecast at more rows extrapolates (``at_full_size``), its memory is independent of n
MAX_SIMULATED_ROWS = 100_000
MAX_SIMULATED_CELLS = 20_000_000
MIN_SIMULATED_ROWS = 20_000
#: a forecast keeps its ``reps`` simulated data sets across the budgets it tries while they hold at most this many
#: entries in all (40 MB), else makes each afresh from its seed every time (``simulated_draws``)
KEPT_CELLS = 5_000_000
#: the directions of the signal a regression forecast can assume (``forecast_regression``)
DIRECTIONS = ("random", "common", "same_sign")


def simulated_rows(n: int, p: int) -> int:
    """The rows of each simulated data set of a forecast at n x p: n up to a cap that depends on p only."""
    return min(n, max(MIN_SIMULATED_ROWS, min(MAX_SIMULATED_ROWS, MAX_SIMULATED_CELLS // max(p, 1))))


def simulated_draws(make: Callable[[int], Any], reps: int, rows: int, p: int) -> Callable[[int], Any]:
    """``draw(rep)``: the forecast's simulated data set ``rep`` (``make(rep)``, deterministic in its seed), kept across
    the budgets a forecast tries when all ``reps`` sets of ``rows`` x ``p`` fit in ``KEPT_CELLS`` entries, else made
    afresh on every call, so that the memory never grows with n (one set at a time)."""
    keep = reps * rows * max(p, 1) <= KEPT_CELLS
    kept: dict[int, Any] = {}

    def draw(rep: int) -> Any:
        if rep in kept:
            return kept[rep]
        data = make(rep)
        if keep:
            kept[rep] = data
        return data

    return draw


def at_full_size(error: Any, simulated: int, n: int, power: float = 1.0) -> Any:
    """``error`` (budget -> the median error of fits on ``simulated`` rows) carried to n >= ``simulated`` rows by the
    rates of the perturbation regime: the noise-off error (to the power ``power``: 1 for excess risks, 2 for projection
    distances) decays as a / n (sampling), the private one as a / n + b / n^2 (noise of statistics whose sensitivity
    over n falls as 1 / n, squared). With r = simulated / n and e_off the noise-off error at ``simulated`` rows,

        e_off(n)^power = r e_off^power,   e(n)^power = r e_off^power + r^2 max(0, e^power - e_off^power).

    The identity when ``simulated`` = n."""
    if simulated >= n:
        return error
    r = simulated / n
    cache: dict[str, float] = {}

    def scaled(fit_budget: Budget) -> float:
        if "off" not in cache:
            cache["off"] = error(Budget.infinite()) ** power
        off = cache["off"]
        excess = 0.0 if fit_budget.is_infinite else max(0.0, error(fit_budget) ** power - off)
        return float((r * off + r * r * excess) ** (1.0 / power))

    return scaled


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
    simulated_rows: int = 0  #: the rows of each simulated data set (< n: extrapolated, ``at_full_size``; 0: n)
    correlation: float = 0.0  #: the public assumption on the columns' correlation
    direction: str = "random"  #: the public assumption on where the signal lies (``forecast_regression``)
    #: with correlated columns: the private error along every direction of ``DIRECTIONS`` (at the budget; empty otherwise)
    by_direction: dict[str, float] = attrs.field(factory=dict)

    def direction_spread(self) -> float:
        """max / min of ``by_direction`` (1 without correlation): above 2, where the signal lies (not public) decides the
        error by more than the factor 2 a forecast aims at."""
        values = [v for v in self.by_direction.values() if v > 0]
        return max(values) / min(values) if len(values) > 1 else 1.0

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
                f"on a public synthetic problem whose linear signal explains {self.signal:.0%} of var(y)"
                f"{assumed(self.correlation, self.direction)}: test R^2 {self.private_r2:.3f} (noise off: {self.nonprivate_r2:.3f}); "
                f"excess risk {self.private_error:.3g} (noise off: {self.nonprivate_error:.3g}), {within}"
                f"{extrapolation(self.simulated_rows, self.n_samples)}{self.direction_caveat()}")

    def direction_caveat(self) -> str:
        """The summary's sentence on the other directions (correlated columns only)."""
        if not self.by_direction:
            return ""
        text = "; excess risk by where the signal lies: " + ", ".join(f"{k} {v:.3g}" for k, v in self.by_direction.items())
        if self.direction_spread() > 2.0:
            text += (f" (they differ {self.direction_spread():.1f}-fold: unless the direction assumption holds, the measured "
                     "error can be more than 2x from this forecast)")
        return text


def extrapolation(simulated: int, n: int, what: str = "errors") -> str:
    """The summary's sentence on a forecast simulated at fewer rows than n (``at_full_size``); empty otherwise."""
    if not 0 < simulated < n:
        return ""
    return (f" (simulated on {simulated} rows and the {what} carried to n by the rates of small noise: sampling 1/n, "
            "privacy noise 1/n^2)")


def assumed(correlation: float, direction: str) -> str:
    """The summary's words for the public correlation and direction assumptions."""
    if correlation == 0.0:
        return ", independent columns" + (", the signal on all columns equally" if direction == "common" else "")
    where = "the columns' common factor" if direction == "common" else "a random direction"
    return f", columns of correlation {correlation:g}, the signal along {where}"


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
                        direction: str = "random", reps: int = 5, seed: int = 0, search: bool = True, budget: Budget | None = None,
                        problem: RegressionProblem | None = None) -> Forecast:
    """The forecast of ``estimator`` (unfitted, with public bounds, centres and a budget) at n x p (module docstring).
    Each simulated fit is a clone with a fresh in-memory budget: nothing is charged to the estimator's ledger.
    ``direction``: where the signal lies (``signal_direction``: "random", "common" or "same_sign"); with ``correlation``
    > 0 they differ, and the forecast also reports the private error along the others (``by_direction``).
    ``search=False`` skips the epsilon search (``epsilon_within`` is then None); ``budget`` overrides the estimator's
    (a fitted estimator's own run: its ledger may have nothing left); ``problem`` the scales read off its bounds.
    The simulated data sets have ``simulated_rows(n, p)`` rows; beyond, the errors are carried to n (``at_full_size``)."""
    from ..errors import ValidationError

    if not 0.0 < signal < 1.0:
        raise ValidationError(f"signal must be in (0, 1), got {signal!r}")
    if not 0.0 <= correlation < 1.0:
        raise ValidationError(f"correlation must be in [0, 1), got {correlation!r}")
    if direction not in DIRECTIONS:
        raise ValidationError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    n, p = int(n_samples), int(n_features)
    if n < 2 or p < 1:
        raise ValidationError(f"a forecast needs n >= 2 rows and p >= 1 features, got {n} x {p}")
    budget = budget if budget is not None else estimator._resolve_budget()[0]
    problem = attrs.evolve(problem if problem is not None else default_problem(estimator, p), correlation=float(correlation))
    rows = simulated_rows(n, p)

    def error_along(where: str) -> Any:
        u = signal_direction(where, p, seed)
        draw = simulated_draws(lambda rep: synthetic_regression(rows, problem, signal, np.random.default_rng([seed, rep]), u),
                               reps, rows, p)

        def error(fit_budget: Budget) -> float:
            risks = []
            for rep in range(reps):
                X, y = draw(rep)
                risks.append(excess_risk(simulated_fit(estimator, problem.fit_input(X), y, fit_budget, seed + rep).predict,
                                         problem, signal, u))
            return float(np.median(risks))

        return at_full_size(error, rows, n)

    private, nonprivate, within = private_and_within(error_along(direction), budget, search)
    # with correlated columns, where the signal lies matters: the private error along each other direction, for the summary
    others = {where: error_along(where)(budget) for where in DIRECTIONS if where != direction} if correlation > 0 else {}
    return Forecast(n, p, budget.epsilon, budget.delta, signal, reps, private, nonprivate, within, search, rows,
                    float(correlation), direction, {direction: private, **others} if others else {})


def signal_direction(where: str, p: int, seed: int) -> np.ndarray:
    """u of the module docstring, a unit vector: "random" (a standard normal direction, drawn from ``seed``), "common"
    (1 / sqrt(p): the columns' common factor) or "same_sign" (|g| for a standard normal g: every column pushes y the same
    way, by random amounts)."""
    g = np.random.default_rng(seed).standard_normal(p)
    u = g if where == "random" else np.ones(p) if where == "common" else np.abs(g)
    return np.asarray(u / np.linalg.norm(u))


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
