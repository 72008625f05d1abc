"""SIR from released moments: the releases' declarations, the record that holds them, and the post-processing.

Rows are shifted by a public centre and clipped to public per-column bounds |x_j| <= c_j. Three releases,
replace-one with n public (``core.sufficient`` for the algebra):

* ``slice_sums``   s = [sum_{i in h} x_i]_h / n  (p x H), Gaussian: the Gram block X^T e_h / n;
* ``slice_counts`` (n_h / n)_h, Gaussian: the block 1^T e_h / n;
* ``second_moment`` X^T X / n, symmetric-matrix Gaussian (Analyze-Gauss, analytic calibration): the block X^T X / n.

Their sensitivities (2 ||c|| / n, sqrt(2) / n, sqrt(2) ||c||^2 / n) come from the Gram-block spec (``gram``), where
they are derived. ``add_moment_nodes`` is the one place these nodes are declared, for every producer: DPSIR in memory, over
chunks or on Dask (central Gaussian noise), and FederatedSIR's secure aggregation (``distributed=``: the same
releases as sums of the clients' statistics with distributed discrete Gaussian noise, ``privsdr.secure``).

Everything after is post-processing of a ``Released`` (``MomentRelease.from_released``): the mean (sum of the
slice sums), the centred kernel with the noise bias v I / p_h removed, the covariance, the generalized
eigenproblem, and a parametric bootstrap of the noise (``noise_error``): the released statistics are re-noised at
their public scales and the spread of the re-estimated directions measures the error the noise alone induces.
"""
from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from .. import core
from ..plan import Plan
from . import gram
from .record import Released
from .regression import NOISE_WARNING_SHARE, symmetric_from_normals, with_noise_message

RELATION = "replace_one"
#: budget weights of the three releases (the counts need little: n_h / n is large against sqrt(2)/n)
WEIGHTS = {"slice_sums": 1.0, "slice_counts": 0.2, "second_moment": 1.0}


def add_moment_nodes(plan: Plan, n: int, p: int, bound: np.ndarray, parents: tuple[str, ...], *, n_slices: int | None = None,
                     distributed: tuple[int, int] | None = None, row_bound: float | None = None, per: float | None = None,
                     grid_exponent: int | None = None) -> None:
    """The three releases of the moments estimator (public parameters only). ``bound``: the per-column bounds c_j
    (``row_bound``: a public bound on ||x|| instead, for rows clipped in L2). ``distributed=(parties, colluders)``:
    released as secure aggregates with distributed discrete Gaussian noise (``n_slices`` H sizes them).
    ``per``: the public divisor of the three sums (default n; 1: the sums themselves, divided by n afterwards, as the
    secure vertical Gram releases them on its grid 2^``grid_exponent``)."""
    c2 = float(row_bound) ** 2 if row_bound is not None else float(np.sum(np.asarray(bound, dtype=float) ** 2))
    c = math.sqrt(c2)  # ||x|| <= c: the Gram blocks' row bound (``gram``)
    vector, symmetric = "gaussian", "symmetric_gaussian"
    per = n if per is None else per
    params: dict[str, dict[str, Any]] = {"slice_sums": {}, "slice_counts": {}, "second_moment": {}}
    if distributed is not None:
        if n_slices is None:
            raise ValueError("distributed moment nodes need n_slices to size their releases")
        vector, symmetric = "distributed_gaussian", "distributed_symmetric_gaussian"
        parties, colluders = distributed
        shares = {"parties": parties, "colluders": colluders, **({} if grid_exponent is None else {"grid_exponent": grid_exponent})}
        params = {"slice_sums": {**shares, "dimension": p * n_slices}, "slice_counts": {**shares, "dimension": n_slices},
                  "second_moment": {**shares, "dimension": p * (p + 1) // 2}}
    plan.add("slice_sums", vector,
             gram.slice_sums(c, RELATION, per, c2),
             weight=WEIGHTS["slice_sums"], calibration="analytic", parents=parents, params=params["slice_sums"],
             description="slice sums of the clipped rows / n (p x H): the slice means and the mean")
    plan.add("slice_counts", vector,
             gram.slice_counts(RELATION, per),
             weight=WEIGHTS["slice_counts"], calibration="analytic", parents=parents, params=params["slice_counts"],
             description="slice proportions n_h / n")
    plan.add("second_moment", symmetric,
             gram.xtx(c, RELATION, per, c2),
             weight=WEIGHTS["second_moment"], calibration="analytic", params=params["second_moment"],
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

    @classmethod
    def from_released(cls, released: Released) -> MomentRelease:
        """The moments view of a ``Released`` with arrays slice_sums (p x H), slice_counts (H), second_moment (p x p)."""
        p = released["second_moment"].shape[0]
        return cls(released["slice_sums"].reshape(p, -1), released["slice_counts"].ravel(), released["second_moment"],
                   released.scales["slice_sums"], released.scales["slice_counts"], released.scales["second_moment"], released.n)

    def min_proportion(self) -> float:
        """Slices whose released proportion is within 4 noise sds of zero carry no usable mean (public rule)."""
        return 4.0 * self.counts_scale

    def directions(self, K: int, centred: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = self.second_moment.shape[-1]  # a stack of releases (``resampled``) too
        floor = 2.0 * math.sqrt(p) * self.second_scale
        return core.sir_from_moments(
            self.slice_sums, self.proportions, self.second_moment, K, centred=centred,
            sums_noise_var=self.sums_scale**2, min_proportion=self.min_proportion(), floor=floor,
        )

    def resampled(self, rng: np.random.Generator, reps: int) -> MomentRelease:
        """``reps`` copies of the release re-noised at its public scales, stacked on a leading axis (parametric-bootstrap
        draws; the normals are drawn per copy in the order symmetric noise (upper triangle, mirrored), sums, counts)."""
        p, H = self.slice_sums.shape
        draws = rng.standard_normal((reps, p * p + p * H + H))
        return attrs.evolve(
            self,
            slice_sums=self.slice_sums + self.sums_scale * draws[:, p * p:p * p + p * H].reshape(reps, p, H),
            proportions=self.proportions + self.counts_scale * draws[:, p * p + p * H:],
            second_moment=self.second_moment + symmetric_from_normals(self.second_scale, draws[:, :p * p].reshape(reps, p, p)),
        )


def random_subspace_error(p: int, K: int) -> float:
    """sqrt(E ||P_A - P_B||_F^2) for two independent uniformly random K-dimensional subspaces of R^p."""
    return math.sqrt(2.0 * K * (1.0 - K / p))


def noise_error(release: MomentRelease, B: np.ndarray, K: int, centred: bool, rng: np.random.Generator, reps: int = 30) -> float:
    """Median distance between the estimate and re-estimates from the release re-noised at its public
    scales: the error the noise alone induces (post-processing of the release; no extra cost)."""
    if release.sums_scale == 0 and release.second_scale == 0:
        return 0.0
    re_estimates = release.resampled(rng, reps).directions(K, centred)[0]  # one batched eigenproblem for all reps
    return float(np.median(core.projection_distances(re_estimates, B)))


def noise_message(noise: float, random: float, K: int, p: int) -> str:
    verdict = ("cannot be told reliably from a random subspace: more data or more budget is needed"
               if noise > NOISE_WARNING_SHARE * random else "is well above the noise")
    return (f"the noise alone moves the estimated {K}-dimensional subspace by about {noise:.3g} (||P - P'||_F, parametric "
            f"bootstrap of the released statistics); a random subspace of R^{p} lies {random:.3g} away: the estimate {verdict}")


def with_diagnostics(report: Any, noise: float, random: float, K: int, p: int) -> Any:
    """The run's report with the noise diagnostic attached (post-processing: no cost)."""
    return with_noise_message(report, noise_message(noise, random, K, p), noise_error=noise, random_subspace_error=random)


def noise_warning(noise: float, random: float) -> str | None:
    """The ``NoiseDominatesWarning`` text when the noise error is over half a random subspace's, else None."""
    if noise > NOISE_WARNING_SHARE * random:
        return (f"the noise alone moves the estimate by {noise:.3g}, over half the distance of a random subspace ({random:.3g}): "
                "at this budget and sample size the directions cannot be told reliably from noise")
    return None


def warn_if_noise_wins(noise: float, random: float, stacklevel: int = 4) -> None:
    import warnings

    from ..errors import NoiseDominatesWarning

    if (text := noise_warning(noise, random)) is not None:
        warnings.warn(text, NoiseDominatesWarning, stacklevel=stacklevel)
