"""The accuracy of a certified DP-SIR fit, forecast before any data is read (issue 24): ``DPSIR(...).plan(n, p).forecast()``.

The estimator, with its public bounds, centre, slicing and budget, is fitted on a public single-index problem of the
same shape (one direction u, drawn once from a fixed seed):

    x_j = c_j + b_j clip(fill z_j, -1, 1),   z ~ N(0, I_p)     (``fill``: the share of the public bound one sd of a
                                                                column fills; 1/3 by default, a public assumption)
    y = q(Phi(s)),   s = (u^T z + noise_sd e) / sqrt(1 + noise_sd^2),  e ~ N(0, 1)

where q maps (0, 1) onto the estimator's public y scale: through the public cut points at the probabilities h/H (so
the public slices hold equal shares of the rows), or linearly onto ``y_grid`` for DP quantile slicing. The direction in
x is u_j / b_j (for ``SparseDPSIR``, u has equal weights +-1/sqrt(s) on ``sparsity`` columns). The error is the projection distance ||P_u - P_hat||_F (random level ``random_subspace_error``), the
median over ``reps`` draws, beside the same estimator with the noise off, and the smallest epsilon on a doubling grid
at which it is within 1.5 times the noise-off error. Each simulated data set has at most ``forecast.simulated_rows`` rows;
beyond, the squared distances are carried to n by the rates of small noise (``forecast.at_full_size``). ``noise_sd`` (0.5 by default) is a public assumption about how
much of y the index leaves unexplained. Nothing here reads data: only the public parameters.
"""
from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
from scipy.stats import norm

from ..accounting import Budget
from ..core import projection_distance
from ..released.moments import random_subspace_error
from .forecast import (
    GRID,
    WITHIN,
    ForecastMixin,
    at_full_size,
    extrapolation,
    private_and_within,
    simulated_draws,
    simulated_fit,
    simulated_rows,
)


@attrs.frozen
class SIRForecast:
    """The forecast of one certified DP-SIR fit (module docstring): projection distances to the true direction."""

    n_samples: int
    n_features: int
    epsilon: float
    delta: float
    noise_sd: float
    reps: int
    private_error: float
    nonprivate_error: float
    random_error: float
    epsilon_within: float | None  #: None: not within 1.5x even at the largest epsilon tried (or not searched)
    searched: bool = True
    simulated_rows: int = 0  #: the rows of each simulated data set (< n: extrapolated, ``forecast.at_full_size``; 0: n)

    def summary(self) -> str:
        if not self.searched:
            within = "the epsilon within 1.5x of it not searched"
        elif self.epsilon_within is not None:
            within = f"within {WITHIN:g}x of it from eps = {self.epsilon_within:.3g}"
        else:
            within = f"not within {WITHIN:g}x of it up to eps = {self.epsilon * GRID[-1]:.3g}"
        return (f"forecast at n = {self.n_samples}, p = {self.n_features}, (eps = {self.epsilon:g}, delta = {self.delta:g}), on a "
                f"public single-index problem: projection distance {self.private_error:.3g} (noise off: "
                f"{self.nonprivate_error:.3g}; a random direction: {self.random_error:.3g}), {within}"
                f"{extrapolation(self.simulated_rows, self.n_samples, 'squared distances')}")


def quantile_map(c: dict[str, Any]) -> Any:
    """q: (0, 1) -> the public y scale (module docstring), from the estimator's checked slicing parameters."""
    if c["slicing"] == "public":
        cuts = np.asarray(c["cuts"], dtype=float)
        H = len(cuts) + 1
        width = float(cuts[-1] - cuts[0]) / max(H - 2, 1) if H > 2 else 1.0
        knots_p = np.arange(H + 1) / H
        knots_y = np.concatenate([[cuts[0] - width], cuts, [cuts[-1] + width]])
        return lambda prob: np.interp(prob, knots_p, knots_y)
    if c["slicing"] == "dp_quantile":
        grid = np.asarray(c["grid"], dtype=float)
        lo, hi = float(grid.min()), float(grid.max())
        return lambda prob: lo + (hi - lo) * prob
    from ..errors import ValidationError

    raise ValidationError("a forecast needs public slicing (cut_points) or DP quantile slicing (y_grid)")


def single_index(n: int, bounds: np.ndarray, center: np.ndarray, q: Any, u: np.ndarray, noise_sd: float,
                 rng: np.random.Generator, fill: float = 1.0 / 3.0) -> tuple[np.ndarray, np.ndarray]:
    """One draw of the public single-index problem (module docstring)."""
    z = rng.standard_normal((n, len(bounds)))
    X = center + bounds * np.clip(fill * z, -1.0, 1.0)
    s = (z @ u + noise_sd * rng.standard_normal(n)) / math.sqrt(1.0 + noise_sd**2)
    return X, q(norm.cdf(s))


def forecast_sir(estimator: Any, n_samples: int, n_features: int, *, noise_sd: float = 0.5, fill: float = 1.0 / 3.0,
                 reps: int = 5, seed: int = 0, search: bool = True, budget: Budget | None = None) -> SIRForecast:
    """The forecast of ``estimator`` (an unfitted certified DP-SIR estimator with public bounds, slicing and a budget)
    at n x p (module docstring). Each simulated fit is a clone with one direction and a fresh in-memory budget: nothing
    is charged to the estimator's ledger."""
    from ..errors import ValidationError
    from ._base import column_bounds

    n, p = int(n_samples), int(n_features)
    if n < 4 or p < 2:
        raise ValidationError(f"a forecast needs n >= 4 rows and p >= 2 features, got {n} x {p}")
    if not (math.isfinite(noise_sd) and noise_sd >= 0):
        raise ValidationError(f"noise_sd must be >= 0, got {noise_sd!r}")
    if not (math.isfinite(fill) and 0 < fill <= 1):
        raise ValidationError(f"fill must be in (0, 1], got {fill!r}")
    c = estimator._checked()
    q = quantile_map(c)
    bounds = column_bounds(c["bound"], p)
    center = estimator._center_vector(c, p)
    budget = budget if budget is not None else estimator._resolve_budget()[0]
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(p)
    if getattr(estimator, "sparse", False):  # the sparse estimators: equal weights on ``sparsity`` columns (a public choice)
        u = np.where(np.arange(p) < int(c["s"]), np.sign(u), 0.0)
    u /= np.linalg.norm(u)
    truth = (u / bounds)[:, None]
    rows = simulated_rows(n, p)

    draw = simulated_draws(lambda rep: single_index(rows, bounds, center, q, u, noise_sd, np.random.default_rng([seed, rep]), fill),
                           reps, rows, p)

    def error(fit_budget: Budget) -> float:
        distances = []
        for rep in range(reps):
            X, y = draw(rep)
            est = simulated_fit(estimator, X, y, fit_budget, seed + rep, n_directions=1, diagnose_noise=False)
            distances.append(projection_distance(truth, est.directions_))
        return float(np.median(distances))

    random = random_subspace_error(p, 1)
    scaled = at_full_size(error, rows, n, power=2.0)
    private, nonprivate, within = private_and_within(lambda b: min(scaled(b), random), budget, search)
    return SIRForecast(n, p, budget.epsilon, budget.delta, noise_sd, reps, private, nonprivate, random, within, search, rows)


class SIRForecastMixin(ForecastMixin):
    """``record_forecast`` for DPSIR and SparseDPSIR: n is public under their replace-one relation (the sensitivities
    are divided by it), and the forecast is ``forecast_sir``."""

    def _released_row_count(self) -> int | None:
        from ..errors import ValidationError

        self._check_fitted("plan_")  # type: ignore[attr-defined]
        if self.mode != "certified":  # type: ignore[attr-defined]
            raise ValidationError(f"the accuracy forecast exists for mode='certified' only, not {self.mode!r}")  # type: ignore[attr-defined]
        return int(self.plan_.plan.public_params["n_samples"])  # type: ignore[attr-defined]

    def _forecast_at(self, n: int, budget: Budget, **options: Any) -> Any:
        return forecast_sir(self, n, int(self.n_features_in_), budget=budget, **options)  # type: ignore[attr-defined]
