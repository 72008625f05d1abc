"""DP mean and covariance: the first estimator on the stack.

Rows are clipped to the public L2 bound ``clip`` (= C). Under replace-one with n public:

* mean ``(1/n) sum x_i``: L2 sensitivity ``2C/n``, Gaussian mechanism;
* second moment ``(1/n) sum x_i x_i^T``: the upper triangle (with diagonal) changes by at most
  ``||x x^T - x' x'^T||_F / n <= sqrt(2) C^2 / n``, symmetric-matrix Gaussian (Analyze-Gauss style,
  or MOD-SULQ with ``scale = C^2``).

Rows may first be shifted by a public ``center`` and clipped per column to public half-widths ``bounds`` (a range
[lo, hi] is the centre (lo + hi)/2 and the half-width (hi - lo)/2: the sensitivity then comes from the width, not
from max(|lo|, |hi|)); C is then ``clip`` or ||bounds||_2, whichever is smaller.

Post-processing (free, and never further from the truth: each step projects onto a convex set that holds the
clipped rows' true mean or covariance): the DP mean is projected onto the ball ||m|| <= C, then clamped into the box
|m_j| <= b_j; the covariance ``S - m m^T`` is clamped entrywise into |c_ij| <= b_i b_j with variances in [0, b_j^2]
(with ``bounds``), then projected onto the PSD cone; ``mean_`` is ``center + m``.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from .. import core
from .._validation import privsdr_errors
from ..accounting import Budget, Ledger
from ..core.gram_pass import RowParts, gram_sums
from ..errors import NoiseDominatesWarning, ValidationError
from ..mechanisms import get_mechanism
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram
from ..released.fitted import Diagnostic, Fitted
from ..released.regression import NOISE_WARNING_SHARE  # warn when a noise sd exceeds this share of its public scale
from ..released.sites import SiteBlocks
from ._base import (
    PrivateEstimator,
    check_bound,
    check_matrix,
    check_positive,
    check_random_state,
    column_bounds,
    moment_split,
    public_center,
)
from ._sir_common import check_int


@model_class
class DPMeanCovariance(PrivateEstimator):
    """Differentially private mean and covariance of rows with public L2 bound ``clip``.

    Parameters
    ----------
    clip: public bound C on every row's L2 norm (rows above it are scaled down). Required.
    budget, ledger: see ``PrivateEstimator``.
    accountant: accountant of the ledger created when none is given (default ``"best"``).
    split: budget weights of (mean, second moment).
    calibration: Gaussian calibration of the mean (``analytic``, ``thm3_exact``, ``classical``, ...).
    second_moment_calibration: ``analytic`` (default), ``analyze_gauss``, ``thm3_exact``, ``modsulq``.
    tight: rescale both noises by one factor so that the composed cost meets the budget exactly
        under the ledger's accountant (less noise than basic composition of the shares).
    random_state: None, int, SeedSequence or Generator.
    center: a public centre (one number, or one per column) subtracted before clipping (default 0).
    bounds: public per-column half-widths b_j: |x_j - center_j| is clipped to b_j (default: none). With ``bounds``
        alone, C = ||b||_2; ``clip`` may then be omitted.
    sampler: "numpy" (fast floating-point noise) or "secure" (exact discrete noise on a public grid with
        CSPRNG randomness, priced by its own zCDP/pure bound: docs/accounting.md "Secure sampling").

    After ``fit``: ``mean_``, ``second_moment_``, ``covariance_``, and ``noise_ratio_`` (issue 24: the larger of the noise
    sd of a released mean over its column's public half-width and of a covariance entry over its public bound, at the
    tightest column; over 1/2 the fit warns
    ``NoiseDominatesWarning`` and the report says so; public scales only, so it is known before the fit: ``plan``).
    """

    model_attributes = ("mean_", "second_moment_", "covariance_", "noise_ratio_", "n_features_in_")
    model_required = ("mean_", "covariance_")

    def __init__(
        self,
        clip: float | None = None,
        *,
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        split: Sequence[float] = (1.0, 1.0),
        calibration: str = "analytic",
        second_moment_calibration: str = "analytic",
        tight: bool = True,
        random_state: Any = None,
        sampler: str = "numpy",
        center: Any = None,
        bounds: Any = None,
    ) -> None:
        self.center = center
        self.bounds = bounds
        self.clip = clip
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.split = split
        self.calibration = calibration
        self.second_moment_calibration = second_moment_calibration
        self.tight = tight
        self.random_state = random_state
        self.sampler = sampler

    def _validated_clip(self, p: int | None = None) -> float:
        """C: ``clip``, or ||bounds||_2 when only per-column bounds are given (the smaller when both are)."""
        if self.clip is None and self.bounds is None:
            raise ValidationError("clip (a public bound on the rows' L2 norm) or bounds (public per-column half-widths) "
                                  "is required; they are never read off the data")
        limits = [] if self.clip is None else [check_positive(self.clip, "clip")]
        if self.bounds is not None:  # p unknown (before the chunks are read): the bounds are only checked
            box = column_bounds(self.bounds, p, "bounds") if p is not None else np.asarray(check_bound(self.bounds, "bounds"))
            limits.append(float(np.linalg.norm(box)))
        return min(limits)

    def _box(self, p: int) -> np.ndarray | None:
        """The per-column half-widths b (checked against p), or None."""
        return None if self.bounds is None else column_bounds(self.bounds, p, "bounds")

    def _center(self, p: int) -> np.ndarray:
        return public_center(self.center, p)

    def _row_parts(self, p: int) -> RowParts:
        """The declared clip rule of the rows: x - center, boxed to |.| <= b_j (with ``bounds``), scaled to ||.|| <= C."""
        center = self._center(p)
        return RowParts(shift=center, box=self._box(p), l2=self._validated_clip(p))

    def build_plan(self, n_samples: int, n_features: int) -> Plan:
        """The plan of one fit on n_samples x n_features data: public parameters only."""
        n, p = check_int(n_samples, "n_samples", 1), check_int(n_features, "n_features", 1)
        C = self._validated_clip(p)
        self._center(p)
        split = moment_split(self.split)
        for mechanism, name, value in (("gaussian", "calibration", self.calibration),
                                       ("symmetric_gaussian", "second_moment_calibration", self.second_moment_calibration)):
            choices = get_mechanism(mechanism).calibrations
            if value not in choices:
                raise ValidationError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        check_random_state(self.random_state)
        if not isinstance(self.tight, (bool, np.bool_)):
            raise ValidationError(f"tight must be True or False, got {self.tight!r}")
        plan = Plan("dp_mean_covariance", "replace_one", {"clip": C, "n_samples": n, "n_features": p})
        plan.add(
            "mean", "gaussian",
            gram.column_sum(C, "replace_one", n),
            weight=split[0], calibration=self.calibration,
            description="mean of the clipped rows",
        )
        plan.add(
            "second_moment", "symmetric_gaussian",
            gram.xtx(C, "replace_one", n),
            weight=split[1], calibration=self.second_moment_calibration,
            params={"n": n, "p": p, "scale": C * C},
            description="(1/n) X^T X of the clipped rows (upper triangle noised, mirrored)",
        )
        return plan

    def plan(self, n_samples: int, n_features: int) -> CalibratedPlan:
        """The calibrated plan for data of this shape: price it with ``.cost()`` before fitting."""
        budget, ledger = self._resolve_budget()
        return self.build_plan(n_samples, n_features).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())

    def fit(self, X: Any, y: Any = None) -> DPMeanCovariance:
        """Fit on X (n x p; y is ignored), or on ``privsdr.Chunks`` / a dask array (sums over rows reduced chunk
        by chunk, everything validated before anything is charged: ``privsdr.rows``, docs/scale.md)."""
        from ..rows import is_chunked, reduce_rows

        if is_chunked(X):
            self._validated_clip()  # the public parameters, checked before any row is read
            centre = None if self.center is None else np.asarray(self.center, dtype=float)
            box = None if self.bounds is None else np.asarray(check_bound(self.bounds, "bounds"))
            total = reduce_rows(X, None, partial(chunk_moments, clip=None if self.clip is None else float(self.clip), center=centre, bounds=box), with_y=False,
                                desc="DPMeanCovariance: sums", fn_checks_finite=True)
            n, p = int(total["n"]), int(total["p"])
            if n < 2:
                raise ValidationError(f"X needs at least 2 rows, got {n} sample{'' if n == 1 else 's'}")
            X_raw, shape = None, (n, p)
            first = total["x_sum"] / n
            second_raw = total["xtx"] / n
            statistics = (first, (second_raw + second_raw.T) / 2.0)
        else:
            X_raw, X = X, check_matrix(X, "X", min_rows=2, finite=False)  # finiteness: in the one pass below
            shape = X.shape
            with privsdr_errors():  # one blocked pass (core.gram_pass), before anything is charged
                sums = gram_sums(X, None, self._row_parts(shape[1]), ("x_sum", "xtx"))
            statistics = (sums["x_sum"] / shape[0], sums["xtx"] / shape[0])
        budget, ledger = self._resolve_budget()
        calibrated = self.build_plan(*shape).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=shape, algorithm="DPMeanCovariance") as run:
            run.release("mean", statistics[0])
            run.release("second_moment", statistics[1])
        released = from_run(run, ("mean", "second_moment"), n=shape[0], source="chunks" if X_raw is None else "in memory")
        return self._finish_released(released, run.report, calibrated, ledger, X_raw)

    def _finish_released(self, released: Released, report: Any, calibrated: CalibratedPlan, ledger: Ledger, X_raw: Any) -> DPMeanCovariance:
        """The fit's consumer (``mean_covariance_from_released``) applied to its ``Released`` (central, or a secure sum
        over sites: ``_site_blocks``)."""
        p = released["mean"].ravel().shape[0]
        fitted = mean_covariance_from_released(released, self._validated_clip(p), self._center(p), self._box(p))
        self._record_features(X_raw, p)
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = fitted.apply(self, report)
        return self

    def _site_blocks(self, n_features: int, n_samples: int) -> SiteBlocks:
        """The declared blocks for a secure fit over sites (``privsdr.federated.SecureSites``): this plan at the public
        total N (replace-one), each site's column sums and X^T X of its clipped rows divided by N, and the
        post-processing above."""
        p, N = int(n_features), int(n_samples)
        C, centre, box = self._validated_clip(p), self._center(p), self._box(p)
        budget, ledger = self._resolve_budget()

        def statistics(X: np.ndarray, y: Any = None) -> dict[str, np.ndarray]:
            local = chunk_moments(X, clip=C, center=centre, bounds=box)
            return {"mean": local["x_sum"] / N, "second_moment": local["xtx"] / N}

        return SiteBlocks(self.build_plan(N, p), budget, ledger, {"mean": (p,), "second_moment": (p, p)}, {"mean": C, "second_moment": C * C},
                          float(N), statistics, lambda released, report, plan, ledger: self._finish_released(released, report, plan, ledger, None),
                          "DPMeanCovariance", self.random_state, needs_y=False)



def mean_covariance_from_released(released: Released, clip: float, center: np.ndarray | None = None,
                                  bounds: np.ndarray | None = None) -> Fitted:
    """DPMeanCovariance from a ``Released`` with arrays ``mean`` (p) and ``second_moment`` (p x p) of the rows shifted by
    the public ``center`` and clipped to ||x|| <= ``clip`` (and into the public half-widths ``bounds``): m = the mean
    projected onto the ball and the box, ``mean_`` = center + m, ``covariance_`` = PSD(clamp(S - m m^T)), and the
    noise diagnostic from the public scales (``noise_ratios``). Post-processing only (module docstring)."""
    mean, second = released["mean"].ravel(), released["second_moment"]
    p = mean.shape[0]
    m = project_mean(mean, clip, bounds)
    ratios = noise_ratios(released.scales["mean"], released.scales["second_moment"], clip, bounds)
    shift = np.zeros(p) if center is None else np.broadcast_to(np.asarray(center, dtype=float), (p,))
    attributes = {"mean_": shift + m, "second_moment_": second,
                  "covariance_": core.nearest_psd(clamp_covariance(second - np.outer(m, m), bounds)),
                  "noise_ratio_": max(ratios), "released_": released}
    diagnostic = Diagnostic("noise", noise_message(*ratios), {"noise_ratio": max(ratios), "mean_noise_ratio": ratios[0],
                                                              "covariance_noise_ratio": ratios[1]})
    warned = ((NoiseDominatesWarning, noise_message(*ratios)),) if max(ratios) > NOISE_WARNING_SHARE else ()
    return Fitted(attributes, (diagnostic,), warned)


def noise_ratios(mean_sd: float, second_sd: float, clip: float, bounds: np.ndarray | None) -> tuple[float, float]:
    """The noise diagnostic (issue 24), from public scales only, at the tightest column: the noise sd of a column's DP
    mean over its public half-width b_j (the clip C without ``bounds``), and of a covariance entry over b_j^2 (C^2).
    Over 1/2 the release cannot tell that column's mean from its public centre (its variance from 0) reliably."""
    scale = float(np.min(bounds)) if bounds is not None else float(clip)
    return mean_sd / scale, second_sd / scale**2


def noise_message(mean_ratio: float, covariance_ratio: float) -> str:
    ratio = max(mean_ratio, covariance_ratio)
    verdict = ("some column's DP moments cannot be told reliably from the trivial answer (its public centre, a zero "
               "covariance): more data, more budget or tighter public ranges are needed" if ratio > NOISE_WARNING_SHARE
               else "the released moments stand above the noise")
    return (f"at the tightest column the noise sd of the DP mean is {mean_ratio:.3g} times its public half-width, and of a "
            f"covariance entry {covariance_ratio:.3g} times its public bound: {verdict}")




def project_mean(mean: np.ndarray, C: float, bounds: np.ndarray | None) -> np.ndarray:
    """The DP mean projected onto the ball ||m|| <= C, then clamped into the box |m_j| <= b_j: each a projection onto
    a convex set that holds the true mean of the clipped rows, so neither moves the estimate away from it."""
    m = np.asarray(core.clip_rows_l2(np.asarray(mean, dtype=float)[None, :], C)[0], dtype=float)
    return m if bounds is None else np.clip(m, -bounds, bounds)


def clamp_covariance(cov: np.ndarray, bounds: np.ndarray | None) -> np.ndarray:
    """With per-column half-widths b: every entry clamped into [-b_i b_j, b_i b_j] and the variances into [0, b_j^2]
    (Popoviciu: a variable within a range of width 2 b_j has variance <= b_j^2; |cov_ij| <= sd_i sd_j). A projection
    onto a convex set that holds the clipped rows' covariance: it never moves the estimate away from it."""
    if bounds is None:
        return cov
    limit = np.outer(bounds, bounds)
    out = np.clip(cov, -limit, limit)
    np.fill_diagonal(out, np.clip(np.diag(out), 0.0, bounds**2))
    return out


def chunk_moments(X: np.ndarray, y: Any = None, *, clip: float | None, center: np.ndarray | None = None,
                  bounds: np.ndarray | None = None) -> dict[str, Any]:
    """One row chunk's sum and X^T X of its rows (shifted and boxed, then) clipped to L2 norm C: ``clip``, or
    ||bounds||_2 over the chunk's columns, the smaller of the two (as ``DPMeanCovariance._validated_clip``)."""
    if bounds is not None and np.size(bounds) not in (1, X.shape[1]):
        raise ValidationError(f"bounds has {np.size(bounds)} per-column values for {X.shape[1]} columns")
    center = None if center is None else public_center(center, X.shape[1])
    if bounds is not None:
        box_norm = float(np.linalg.norm(np.broadcast_to(bounds, (X.shape[1],))))
        clip = box_norm if clip is None else min(clip, box_norm)
    if clip is None:
        raise ValidationError("clip or bounds is required")
    with privsdr_errors():  # the blocks of one blocked pass (core.gram_pass)
        return gram_sums(X, None, RowParts(shift=center, box=bounds, l2=clip), ("x_sum", "xtx"))
