"""DP mean and covariance: the first estimator on the stack.

Rows are clipped to the public L2 bound ``clip`` (= C). Under replace-one with n public:

* mean ``(1/n) sum x_i``: L2 sensitivity ``2C/n``, Gaussian mechanism;
* second moment ``(1/n) sum x_i x_i^T``: the upper triangle (with diagonal) changes by at most
  ``||x x^T - x' x'^T||_F / n <= sqrt(2) C^2 / n``, symmetric-matrix Gaussian (Analyze-Gauss style,
  or MOD-SULQ with ``scale = C^2``).

The covariance ``S - m m^T`` (projected onto the PSD cone) is post-processing.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from .. import core
from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ..mechanisms import Sensitivity, get_mechanism
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ._base import PrivateEstimator, check_matrix, check_positive, check_random_state
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
    sampler: "numpy" (fast floating-point noise) or "secure" (exact discrete noise on a public grid with
        CSPRNG randomness, priced by its own zCDP/pure bound: docs/accounting.md "Secure sampling").
    """

    model_attributes = ("mean_", "second_moment_", "covariance_", "n_features_in_")
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
    ) -> None:
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

    def _validated_clip(self) -> float:
        if self.clip is None:
            raise ValidationError("clip (a public bound on the rows' L2 norm) is required; it is never read off the data")
        return check_positive(self.clip, "clip")

    def build_plan(self, n_samples: int, n_features: int) -> Plan:
        """The plan of one fit on n_samples x n_features data: public parameters only."""
        C = self._validated_clip()
        n, p = check_int(n_samples, "n_samples", 1), check_int(n_features, "n_features", 1)
        try:
            split = [float(w) for w in self.split]
        except (TypeError, ValueError):
            raise ValidationError(f"split must be two positive weights (mean, second moment), got {self.split!r}") from None
        if len(split) != 2 or not all(math.isfinite(w) and w > 0 for w in split):
            raise ValidationError("split must be two positive weights (mean, second moment)")
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
            Sensitivity(2.0 * C / n, "l2", "replace_one", "||x - x'||/n <= 2C/n for rows clipped to L2 norm C"),
            weight=split[0], calibration=self.calibration,
            description="mean of the clipped rows",
        )
        plan.add(
            "second_moment", "symmetric_gaussian",
            Sensitivity(math.sqrt(2.0) * C * C / n, "l2", "replace_one", "||xx^T - x'x'^T||_F / n <= sqrt(2) C^2 / n"),
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
            C = self._validated_clip()
            total = reduce_rows(X, None, partial(chunk_moments, clip=C), with_y=False, desc="DPMeanCovariance: sums")
            n, p = int(total["n"]), int(total["p"])
            if n < 2:
                raise ValidationError(f"X needs at least 2 rows, got {n} sample{'' if n == 1 else 's'}")
            X_raw, shape = None, (n, p)
            first = total["x_sum"] / n
            second_raw = total["xtx"] / n
            statistics = (first, (second_raw + second_raw.T) / 2.0)
        else:
            X_raw, X = X, check_matrix(X, "X", min_rows=2)
            shape, statistics = X.shape, None
        budget, ledger = self._resolve_budget()
        calibrated = self.build_plan(*shape).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=shape, algorithm="DPMeanCovariance") as run:
            if statistics is None:
                Xc = core.clip_rows_l2(X, self._validated_clip())
                statistics = (core.mean(Xc), core.second_moment(Xc))
            mean = run.release("mean", statistics[0])
            second = run.release("second_moment", statistics[1])
        self.mean_ = mean
        self.second_moment_ = second
        self.covariance_ = core.nearest_psd(second - np.outer(mean, mean))
        self._record_features(X_raw, shape[1])
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = run.report
        return self


def chunk_moments(X: np.ndarray, y: Any = None, *, clip: float) -> dict[str, Any]:
    """One row chunk's sum and X^T X of its rows clipped to L2 norm ``clip`` (``privsdr.rows``: chunks add up)."""
    Xc = core.clip_rows_l2(X, clip)
    return {"x_sum": Xc.sum(axis=0), "xtx": Xc.T @ Xc}
