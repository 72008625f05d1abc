"""Certified DP-SIR from its sufficient statistics, released once on all n rows (DPSIR's default).

Rows are shifted by a public centre and clipped to public per-column bounds |x_j| <= c_j. Three
releases, replace-one with n public (``core.sufficient`` for the algebra):

* ``slice_sums``   s = [sum_{i in h} x_i]_h / n  (p x H), Gaussian; L2 sensitivity 2 ||c|| / n
  (a record replaced within its slice moves one column by ||x - x'|| <= 2||c||; moved between slices
  it changes two columns, by sqrt(||x||^2 + ||x'||^2) <= sqrt(2) ||c||);
* ``slice_counts`` (n_h / n)_h, Gaussian; L2 sensitivity sqrt(2) / n;
* ``second_moment`` X^T X / n, symmetric-matrix Gaussian (Analyze-Gauss, analytic calibration);
  upper-triangle L2 sensitivity sqrt(||x||^4 + ||x'||^4) / n <= sqrt(2) ||c||^2 / n.

Everything after is post-processing: the mean (sum of the slice sums), the centred kernel with the
noise bias v I / p_h removed, the covariance, the generalized eigenproblem, K by BIC, and a parametric
bootstrap of the noise (``noise_error``): the released statistics are re-noised at their public scales
and the spread of the re-estimated directions measures the error the noise alone induces.
"""
from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from .. import core
from ..mechanisms import Sensitivity
from ..plan import CalibratedPlan, Plan, Run

RELATION = "replace_one"
#: budget weights of the three releases (the counts need little: n_h / n is large against sqrt(2)/n)
WEIGHTS = {"slice_sums": 1.0, "slice_counts": 0.2, "second_moment": 1.0}


def add_moment_nodes(plan: Plan, n: int, p: int, bound: np.ndarray, parents: tuple[str, ...]) -> None:
    """The three releases of the moments estimator (public parameters only)."""
    c2 = float(np.sum(np.asarray(bound, dtype=float) ** 2))
    c = math.sqrt(c2)
    plan.add("slice_sums", "gaussian",
             Sensitivity(2.0 * c / n, "l2", RELATION, "||x - x'|| <= 2||c|| within a slice; sqrt(2)||c|| across slices; / n"),
             weight=WEIGHTS["slice_sums"], calibration="analytic", parents=parents,
             description="slice sums of the clipped rows / n (p x H): the slice means and the mean")
    plan.add("slice_counts", "gaussian",
             Sensitivity(math.sqrt(2.0) / n, "l2", RELATION, "a record moved between two slices changes two counts by 1; / n"),
             weight=WEIGHTS["slice_counts"], calibration="analytic", parents=parents,
             description="slice proportions n_h / n")
    plan.add("second_moment", "symmetric_gaussian",
             Sensitivity(math.sqrt(2.0) * c2 / n, "l2", RELATION, "||xx^T - x'x'^T||_F / n <= sqrt(||x||^4 + ||x'||^4) / n <= sqrt(2)||c||^2 / n"),
             weight=WEIGHTS["second_moment"], calibration="analytic",
             description="X^T X / n of the clipped rows (Analyze-Gauss)")


@attrs.frozen
class MomentRelease:
    """The released statistics and the public scales of their noise."""

    slice_sums: np.ndarray
    proportions: np.ndarray
    second_moment: np.ndarray
    sums_scale: float
    counts_scale: float
    second_scale: float
    n: int

    def min_proportion(self) -> float:
        """Slices whose released proportion is within 4 noise sds of zero carry no usable mean (public rule)."""
        return 4.0 * self.counts_scale

    def directions(self, K: int, centred: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = self.second_moment.shape[0]
        floor = 2.0 * math.sqrt(p) * self.second_scale
        return core.sir_from_moments(
            self.slice_sums, self.proportions, self.second_moment, K, centred=centred,
            sums_noise_var=self.sums_scale**2, min_proportion=self.min_proportion(), floor=floor,
        )

    def resampled(self, rng: np.random.Generator) -> MomentRelease:
        """The release re-noised at its public scales (one parametric-bootstrap draw)."""
        p = self.second_moment.shape[0]
        upper = np.triu(self.second_scale * rng.standard_normal((p, p)))
        return attrs.evolve(
            self,
            slice_sums=self.slice_sums + self.sums_scale * rng.standard_normal(self.slice_sums.shape),
            proportions=self.proportions + self.counts_scale * rng.standard_normal(self.proportions.shape),
            second_moment=self.second_moment + upper + np.triu(upper, 1).T,
        )


def release_moments(run: Run, plan: CalibratedPlan, X: np.ndarray, labels: np.ndarray, H: int,
                    center: np.ndarray, bound: np.ndarray) -> MomentRelease:
    """Accumulate the clipped statistics chunk by chunk and release them (each charged before its noise)."""
    sums, counts, xtx = core.clipped_sufficient_sums(X, labels, H, center, bound)
    return release_sums(run, plan, sums, counts, xtx, X.shape[0])


def chunk_sums(X: np.ndarray, y: np.ndarray, *, cuts: np.ndarray, bound: Any, center: Any) -> dict[str, Any]:
    """One row chunk's slice sums, slice counts and X^T X of its clipped rows (``privsdr.rows``: chunks add up).

    ``bound``: the public bound(s) as given; ``center``: None or the public centre as given (checked per chunk
    against its number of columns)."""
    from ._base import column_bounds

    p = X.shape[1]
    bounds = column_bounds(bound, p)
    shift = public_center(center, p)
    labels = core.slice_by_cut_points(y, cuts)
    sums, counts, xtx = core.clipped_sufficient_sums(X, labels, len(cuts) + 1, shift, bounds)
    return {"slice_sums": sums, "counts": counts, "xtx": xtx}


def chunk_grid_counts(X: np.ndarray, y: np.ndarray, *, grid: np.ndarray) -> dict[str, Any]:
    """One row chunk's #{y <= c} over the public grid (the first pass of DP quantile slicing)."""
    from ._sir_common import grid_counts

    return {"grid_counts": grid_counts(y, grid)}


def public_center(center: Any, p: int) -> np.ndarray:
    """The public vector rows are shifted by before clipping (zeros for None)."""
    if center is None:
        return np.zeros(p)
    vec = np.asarray(center, dtype=float).ravel()
    if vec.size not in (1, p):
        from ..errors import ValidationError

        raise ValidationError(f"center has {vec.size} values for {p} columns")
    return np.broadcast_to(vec, (p,)).astype(float)


def release_sums(run: Run, plan: CalibratedPlan, sums: np.ndarray, counts: np.ndarray, xtx: np.ndarray, n: int) -> MomentRelease:
    """Release the accumulated statistics of all n rows, each divided by n (each charged before its noise)."""
    s = run.release("slice_sums", sums / n)
    w = run.release("slice_counts", counts / n)
    S = run.release("second_moment", xtx / n)
    return MomentRelease(np.asarray(s), np.asarray(w), np.asarray(S), plan.specs["slice_sums"].scale,
                         plan.specs["slice_counts"].scale, plan.specs["second_moment"].scale, n)


def random_subspace_error(p: int, K: int) -> float:
    """sqrt(E ||P_A - P_B||_F^2) for two independent uniformly random K-dimensional subspaces of R^p."""
    return math.sqrt(2.0 * K * (1.0 - K / p))


def noise_error(release: MomentRelease, B: np.ndarray, K: int, centred: bool, rng: np.random.Generator, reps: int = 30) -> float:
    """Median distance between the estimate and re-estimates from the release re-noised at its public
    scales: the error the noise alone induces (post-processing of the release; no extra cost)."""
    if release.sums_scale == 0 and release.second_scale == 0:
        return 0.0
    dists = [core.projection_distance(release.resampled(rng).directions(K, centred)[0], B) for _ in range(reps)]
    return float(np.median(dists))


#: warn when the noise alone moves the estimate by more than this share of a random subspace's distance
NOISE_WARNING_SHARE = 0.5


def noise_message(noise: float, random: float, K: int, p: int) -> str:
    verdict = ("cannot be told reliably from a random subspace: more data or more budget is needed"
               if noise > NOISE_WARNING_SHARE * random else "well above the noise")
    return (f"the noise alone moves the estimated {K}-dimensional subspace by about {noise:.3g} (||P - P'||_F, parametric "
            f"bootstrap of the released statistics); a random subspace of R^{p} lies {random:.3g} away: the estimate is {verdict}")


def with_diagnostics(report: Any, noise: float, random: float, K: int, p: int) -> Any:
    """The run's report with the noise diagnostic attached (post-processing: no cost)."""
    diagnostics = {**report.diagnostics, "noise_error": noise, "random_subspace_error": random,
                   "messages": {**report.diagnostics.get("messages", {}), "noise": noise_message(noise, random, K, p)}}
    return attrs.evolve(report, diagnostics=diagnostics)


def warn_if_noise_wins(noise: float, random: float, stacklevel: int = 4) -> None:
    import warnings

    from ..errors import NoiseDominatesWarning

    if noise > NOISE_WARNING_SHARE * random:
        warnings.warn(
            f"the noise alone moves the estimate by {noise:.3g}, over half the distance of a random subspace ({random:.3g}): "
            "at this budget and sample size the directions cannot be told reliably from noise", NoiseDominatesWarning, stacklevel=stacklevel,
        )
