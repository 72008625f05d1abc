"""Optimally private sliced inverse regression (Xia, Zhang & Cai 2024; spec dpsir_003.md).

* ``DPSIR`` (n > p): initializer B.1 (Gaussian noise on the kernel M and the covariance Sigma, then a
  generalized eigendecomposition) on one part of the data, then Algorithm 2 (one-pass noisy
  mini-batch gradient descent over T = ceil(ln n) disjoint batches) on the other part.
* ``SparseDPSIR`` (p >> n, s-sparse rows): initializer B.2 (private screening of diag(M) by peeling,
  then B.1 on the selected coordinates), then Algorithm 3 (gradient step + matrix peeling).
* ``DPSparsePCA``: the special case M -> Sigma, Sigma -> I (spec §4.8, reconstructed).

Every noisy release is a plan node with a declared sensitivity (spec §5.2, replace-one, rows clipped
to |x_ij| <= c_X = ``bound``). The data split and the batches are disjoint, data-independent scopes,
so the ledger composes them in parallel. Two modes:

* ``certified``: public slice boundaries (``cut_points``) or a DP quantile release over a public grid
  (``y_grid``; report-noisy-max, charged), analytic calibration, each step at the full budget by
  parallel composition, one global noise scale tightened under the ledger's accountant.
* ``paper``: the printed calibration -- classical Gaussian at (eps/2, delta/2) for B.1 and at
  (eps/T, delta/T) per step, equal-count slices read off the data (a ``none`` node: not private)
  unless cut points are given, and for Algorithm 3 the Lemma 5 peeling scale with 1/n (under-noised
  by T: a ``claimed`` node). Needs ``allow_uncertified=True`` unless its nodes are all certified.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from .. import core
from .._validation import privsdr_errors
from ..accounting import Budget, Ledger
from ..errors import NoiseDominatesWarning, NotIdentifiedWarning, ValidationError
from ..mechanisms import Sensitivity
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram
from ..released.fitted import Diagnostic, Fitted
from ..released.moments import MomentRelease, noise_warning
from . import sir_moments, sparse_sir
from ._base import (
    ClippedRows,
    PrivateEstimator,
    bound_l2,
    check_bound,
    check_positive,
    check_random_state,
    column_bounds,
    diagnostic_rng,
    project_rows,
    public_bound,
    public_split,
    split_cells,
    square_mass,
)
from ._sir_common import (
    bic_dimension,
    check_flag,
    check_fraction,
    check_int,
    check_slicing,
    check_xy,
    default_hyperparameters,
    grid_counts,
    not_identified,
    scores_from_counts,
    sir_step_sensitivity,
    stationary_start,
    warn_if_not_identified,
)
from .forecast_sir import SIRForecastMixin, forecast_sir

RELATION = "replace_one"
ALGORITHMS = ("moments", "onepass")


def _is(center: Any, word: str) -> bool:
    """``center`` is a vector or one of the words 'dp' / 'none'."""
    return isinstance(center, str) and center == word


class _SlicedDP(ClassNamePrefixFeaturesOutMixin, TransformerMixin, PrivateEstimator):
    """Shared plan scaffolding of the DP-SIR family (slicing, split, batches, B.1)."""

    sparse = False
    name = "dpsir"
    _requires_y = True
    model_attributes: tuple[str, ...] = ("directions_", "init_directions_", "eigenvalues_", "n_directions_", "hyperparameters_", "cut_points_",
                        "n_features_in_", "bounds_", "bic_penalty_", "center_", "public_center_", "eigengap_",
                        "noise_error_", "random_error_")
    model_required = ("directions_", "bounds_")

    def __init__(
        self,
        n_directions: int | str = 1,
        *,
        bound: float | None = None,
        n_slices: int = 4,
        cut_points: Any = None,
        y_grid: Any = None,
        slicing: str | None = None,
        mode: str = "certified",
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        n_iter: int | None = None,
        eta: float | None = None,
        lambda_pen: float | None = None,
        radius: float | None = None,
        tau: float | None = None,
        init_fraction: float = 0.5,
        quantile_fraction: float = 0.1,
        tight: bool = True,
        random_state: Any = None,
        allow_uncertified: bool = False,
        sampler: str = "numpy",
    ) -> None:
        self.n_directions = n_directions
        self.bound = bound
        self.n_slices = n_slices
        self.cut_points = cut_points
        self.y_grid = y_grid
        self.slicing = slicing
        self.mode = mode
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.n_iter = n_iter
        self.eta = eta
        self.lambda_pen = lambda_pen
        self.radius = radius
        self.tau = tau
        self.init_fraction = init_fraction
        self.quantile_fraction = quantile_fraction
        self.tight = tight
        self.random_state = random_state
        self.allow_uncertified = allow_uncertified
        self.sampler = sampler

    # -- public parameters ------------------------------------------------------------------------
    def _checked(self) -> dict[str, Any]:
        bound = check_bound(self.bound)
        H = check_int(self.n_slices, "n_slices", 2)
        K = self.n_directions
        if K != "bic":
            K = check_int(K, "n_directions", 1)
            if K >= H:
                raise ValidationError(f"n_directions must be < n_slices (SIR finds at most H-1 = {H - 1} directions)")
        slicing, cuts, grid = check_slicing(self.slicing, self.mode, self.cut_points, H, self.y_grid)
        check_fraction(self.init_fraction, "init_fraction", 0.05, 0.95)
        check_fraction(self.quantile_fraction, "quantile_fraction", 0.0, 1.0, closed=False)
        check_flag(self.tight, "tight")
        check_flag(self.allow_uncertified, "allow_uncertified")
        check_random_state(self.random_state)
        for name in ("eta", "lambda_pen", "radius", "tau"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        algorithm = getattr(self, "algorithm", "onepass")
        if algorithm is None:  # the paper's own algorithm in paper mode, the sufficient statistics otherwise
            algorithm = "onepass" if self.mode == "paper" else "moments"
        if algorithm not in ALGORITHMS:
            raise ValidationError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        if algorithm == "moments" and self.mode == "paper":
            raise ValidationError("mode='paper' reproduces the paper's one-pass algorithm: use algorithm='onepass'")
        return {"bound": bound, "H": H, "K": K, "slicing": slicing, "cuts": cuts, "grid": grid,
                "algorithm": algorithm, "center": self._checked_center()}

    def _checked_center(self) -> str | np.ndarray:
        """'dp' (default in certified mode), 'none' (data assumed centred: the paper), or a public vector."""
        center = getattr(self, "center", None)
        if center is None:  # the paper and the sparse estimators (p >> n: a DP mean costs sqrt(p)) assume centred data
            return "none" if self.mode == "paper" or self.sparse else "dp"
        if isinstance(center, str):
            if center not in ("dp", "none"):
                raise ValidationError("center must be 'dp', 'none' or a public vector (one value per column)")
            return center
        try:
            vec = np.asarray(center, dtype=float).ravel()
        except (TypeError, ValueError):
            raise ValidationError("center must be 'dp', 'none' or a numeric public vector") from None
        if not np.all(np.isfinite(vec)):
            raise ValidationError("center must be finite")
        return vec

    def _center_vector(self, c: dict[str, Any], p: int) -> np.ndarray:
        """The public location rows are shifted by before clipping (zero unless a public centre is given)."""
        if isinstance(c["center"], np.ndarray):
            if c["center"].size not in (1, p):
                raise ValidationError(f"center has {c['center'].size} values for {p} columns")
            return np.broadcast_to(c["center"], (p,)).astype(float)
        return np.zeros(p)

    def _center_description(self, c: dict[str, Any]) -> Any:
        return c["center"].tolist() if isinstance(c["center"], np.ndarray) else c["center"]

    def _sizes(self, n: int) -> tuple[int, int, int]:
        if n < 4:
            raise ValidationError(f"need at least 4 rows (an init part and refinement batches), got {n}")
        n1 = int(round(n * float(self.init_fraction)))
        T = check_int(self.n_iter, "n_iter", 1) if self.n_iter is not None else max(1, math.ceil(math.log(n)))
        if n - n1 < T:
            raise ValidationError(f"{n - n1} refinement rows cannot fill {T} batches")
        return n1, n - n1, T

    def build_plan(self, n_samples: int, n_features: int, budget: Budget) -> Plan:
        """The fit's release plan for n x p data: public parameters only, no data."""
        c = self._checked()
        n, p = check_int(n_samples, "n_samples", 1), check_int(n_features, "n_features", 1)
        H, K = c["H"], c["K"]
        if n < 2 * H:
            raise ValidationError(f"need at least {2 * H} rows for {H} slices, got {n}")
        bounds = column_bounds(c["bound"], p)
        if c["algorithm"] == "moments":
            return self._build_moments_plan(c, n, p, bounds, budget)
        n1, n2, T = self._sizes(n)
        paper = self.mode == "paper"
        plan = Plan(self.name, RELATION, {
            "mode": self.mode, "algorithm": c["algorithm"], "bound": public_bound(c["bound"]), "n_slices": H,
            "n_directions": K, "slicing": c["slicing"], "n_samples": n, "n_features": p, "init_rows": n1, "refine_rows": n2,
            "n_iter": T, "center": self._center_description(c),
            **({"cut_points": list(map(float, c["cuts"]))} if c["cuts"] is not None else {}),
            **self._extra_public(),
        })
        init_scope, refine_scope = plan.partition("part", ["init", "refine"], rows=True)
        batch_scopes = plan.partition("batch", range(T), within=refine_scope, rows=True)
        self._add_slicing_nodes(plan, c, H, budget)
        if _is(c["center"], "dp"):
            plan.add("mean", "gaussian", gram.column_sum(bound_l2(bounds), RELATION, n),  # 2 ||c||_2 / n (= 2 c_X sqrt(p) / n)
                     weight=0.2, calibration="analytic", parents=tuple(plan.nodes),
                     description="DP mean of the clipped rows (centring; the rows are then re-clipped)")
        self._add_init_nodes(plan, init_scope, n1, bounds, H, budget, paper)
        parents = tuple(n for n in plan.nodes if n.startswith("init_"))
        for t in range(T):
            self._add_step_node(plan, t, batch_scopes[t], parents + ((f"step_{t - 1}",) if t else ()), T, n, budget, paper)
        return plan

    def _build_moments_plan(self, c: dict[str, Any], n: int, p: int, bounds: np.ndarray, budget: Budget) -> Plan:
        H, K = c["H"], c["K"]
        plan = Plan(self.name, RELATION, {
            "mode": self.mode, "algorithm": "moments", "bound": public_bound(c["bound"]), "n_slices": H, "n_directions": K,
            "slicing": c["slicing"], "n_samples": n, "n_features": p, "center": self._center_description(c),
            **({"cut_points": list(map(float, c["cuts"]))} if c["cuts"] is not None else {}),
        })
        self._add_slicing_nodes(plan, c, H, budget)
        sir_moments.add_moment_nodes(plan, n, p, bounds, parents=tuple(plan.nodes))
        return plan

    def _add_slicing_nodes(self, plan: Plan, c: dict[str, Any], H: int, budget: Budget) -> None:
        eps, delta = budget
        if c["slicing"] == "dp_quantile":
            share = Budget(eps * float(self.quantile_fraction) / (H - 1), 0.0) if not budget.is_infinite else None
            for h in range(1, H):
                plan.add(f"cut_{h}", "report_noisy_max", Sensitivity(1.0, "linf", RELATION, "#{y <= c} changes by at most 1"),
                         share=share, description=f"DP quantile {h}/{H} of y over the public grid")
        elif c["slicing"] == "data_quantile":
            plan.add("cut_points", "non_private", Sensitivity(1.0, "linf", RELATION, "none: read off the data"), status="none",
                     description="equal-count slice boundaries computed from y (as the paper presumably did): NOT private")

    def _extra_public(self) -> dict[str, Any]:
        return {}

    def _init_dims(self, p: int) -> int:
        return p

    def _add_init_nodes(self, plan: Plan, scope: Any, n1: int, bounds: np.ndarray, H: int, budget: Budget, paper: bool) -> None:
        d, c2 = square_mass(bounds, self._init_dims(len(bounds)))  # d c2 = sum_j c_j^2 >= ||x||^2
        kw = self._init_budget(budget, paper, weight=0.5)
        plan.add("init_sigma", "symmetric_gaussian",
                 gram.xtx(math.sqrt(d * c2), RELATION, n1, d * c2),  # ||x||^2 <= sum_j c_j^2 = d c2 (= p c_X^2)
                 scope=scope, parents=self._init_parents(plan), description="B.1: Sigma = X^T X / n1 on the init part", **kw)
        plan.add("init_kernel", "symmetric_gaussian",
                 Sensitivity(6.0 * d * c2 / n1, "l2", RELATION,
                             "M = (1/n1) sum_h S_h S_h^T / n_h: <= 6 sum_j c_j^2 / n1 (= 6 p c_X^2 / n1, spec §5.2)"),
                 scope=scope, parents=self._init_parents(plan), description="B.1: SIR kernel M on the init part", **kw)

    def _init_parents(self, plan: Plan) -> tuple[str, ...]:
        return tuple(n for n in plan.nodes if n.startswith(("cut", "screen", "mean")))

    def _init_budget(self, budget: Budget, paper: bool, weight: float) -> dict[str, Any]:
        if paper and not budget.is_infinite:
            return {"share": Budget(budget.epsilon * weight, budget.delta * weight), "calibration": "classical"}
        return {"weight": weight, "calibration": "analytic"}

    def _add_step_node(self, plan: Plan, t: int, scope: Any, parents: tuple[str, ...], T: int, n: int, budget: Budget, paper: bool) -> None:
        kw: dict[str, Any]
        if paper and not budget.is_infinite:
            kw = {"share": Budget(budget.epsilon / T, budget.delta / T), "calibration": "classical"}
        else:
            kw = {"weight": 1.0, "calibration": "analytic"}
        plan.add(f"step_{t}", "gaussian",
                 Sensitivity(1.0, "l2", RELATION, "2 eta sqrt(pK) c_X L [6 + lambda_pen (2 + 4 K L^2)] / m_t (spec §5.2)"),
                 scope=scope, parents=parents, adaptive=True,
                 description=f"Algorithm 2 step {t}: noisy gradient update on batch {t}", **kw)

    def plan(self, n_samples: int, n_features: int) -> CalibratedPlan:
        """The calibrated plan of a fit on data of this shape; ``.cost()`` prices it without data and, for certified
        DPSIR, ``.forecast()`` forecasts its accuracy on a public single-index problem (``forecast_sir``)."""
        budget, ledger = self._resolve_budget()
        calibrated = self._allocate(self.build_plan(n_samples, n_features, budget), budget, ledger)
        if self.mode == "certified" and getattr(self, "algorithm", None) != "onepass":
            from functools import partial

            calibrated.forecaster = partial(forecast_sir, self, int(n_samples), int(n_features))
        return calibrated

    def _allocate(self, plan: Plan, budget: Budget, ledger: Ledger) -> CalibratedPlan:
        tight = self.tight and self.mode == "certified"
        return plan.allocate(budget, accountant=ledger.accountant, tight=tight, sampler=self._sampler())

    # -- fitting ------------------------------------------------------------------------------------
    def _slices(self, run: Run, y: np.ndarray, c: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        H = c["H"]
        if c["slicing"] == "public":
            cuts = c["cuts"]
        elif c["slicing"] == "dp_quantile":
            cuts = self._dp_cuts(run, grid_counts(y, c["grid"]), y.size, c)
        else:
            # Arc's equal-count rule: never more than the plan's H slices (current dr's may make H + 1)
            cuts = run.release("cut_points", core.equal_count_cut_points(y, H, rule="arc"))
        return core.slice_by_cut_points(y, cuts), np.asarray(cuts, dtype=float)

    def _init_release(self, run: Run, X1: np.ndarray, labels1: np.ndarray, H: int, plan: CalibratedPlan,
                      init_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """B.1: noisy Sigma and M, PD repair, whitened eigendecomposition -> (all directions, eigenvalues).
        ``X1``: the rows ``init_idx`` (the init part, which both releases are charged to)."""
        sigma = run.release("init_sigma", core.covariance_uncentred(X1), rows=init_idx)
        kernel = run.release("init_kernel", core.sir_kernel(X1, labels1, H), rows=init_idx)
        sd = plan.specs["init_sigma"].scale
        floor = 2.0 * math.sqrt(X1.shape[1]) * sd if sd > 0 else 1e-12 * max(float(np.trace(sigma)), 1e-300)
        sigma_floored = core.eigen_floor(sigma, floor)
        self._b1_release = (np.asarray(kernel), sigma_floored, floor)  # for the step-size choice (post-processing)
        return core.whitened_eigen(kernel, sigma_floored, X1.shape[1])

    def _prepare(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        c = self._checked()
        X, y = check_xy(X, y, c["H"], low_dimensional=not self.sparse, require_varying=c["slicing"] == "data_quantile",
                        finite=not self._one_pass(c))
        return X, y, c

    def _one_pass(self, c: dict[str, Any]) -> bool:
        """The moments fit with public cut points: its one pass over the rows (``core.gram_pass``, which checks X's
        finiteness) runs before anything is charged."""
        return c["algorithm"] == "moments" and c["slicing"] == "public" and not self.sparse

    def fit(self, X: Any, y: Any = None) -> _SlicedDP:
        """Fit on X (n x p) and y; with ``algorithm="moments"`` also on ``privsdr.Chunks`` or a dask array
        (sums over rows reduced chunk by chunk: ``privsdr.rows``, docs/scale.md)."""
        from ..rows import is_chunked

        if is_chunked(X):
            return self._fit_chunked(X, y)
        X_raw = X
        X, y, c = self._prepare(X, y)
        n, p = X.shape
        bounds = column_bounds(c["bound"], p)
        center = self._center_vector(c, p)
        if c["algorithm"] == "moments":
            self._fit_moments(X, y, c, bounds, center)
            self._record_features(X_raw, p)
            return self
        n1, n2, T = self._sizes(n)
        budget, ledger = self._resolve_budget()
        calibrated = self._allocate(self.build_plan(n, p, budget), budget, ledger)
        init_idx, batch_idx = public_split(self.random_state, n, n1, T)
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=X.shape, algorithm=type(self).__name__,
                 allow_uncertified=self.allow_uncertified, notes=self._notes(), row_cells=split_cells(init_idx, batch_idx)) as run:
            labels, cuts = self._slices(run, y, c)
            H = len(cuts) + 1
            Xs, dp_mean = self._centred(run, X, c, center, bounds)
            rows = ClippedRows(Xs, bounds, labels)
            self._fit_released(run, calibrated, rows, H, init_idx, batch_idx, c, n, budget)
        self.public_center_ = center
        self.center_ = center + dp_mean
        self.cut_points_ = cuts
        self._record_features(X_raw, p)
        self.bounds_ = bounds
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = run.report
        return self

    def _centred(self, run: Run, X: np.ndarray, c: dict[str, Any], center: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows shifted by the public centre, and (center='dp') by a DP mean of the clipped rows (DP-SIR spec
        §4.0(b): the rows are re-clipped afterwards, which keeps every later sensitivity)."""
        Xs = X - center if np.any(center) else X
        if not _is(c["center"], "dp"):
            return Xs, np.zeros(X.shape[1])
        mean = np.zeros(X.shape[1])
        for rows in core.iter_chunks(X.shape[0]):
            mean += core.clip_rows(Xs[rows], 0.0, bounds).sum(axis=0)
        dp_mean = np.asarray(run.release("mean", mean / X.shape[0]))
        return Xs - dp_mean, dp_mean

    def _fit_moments(self, X: np.ndarray, y: np.ndarray, c: dict[str, Any], bounds: np.ndarray, center: np.ndarray) -> _SlicedDP:
        n, p = X.shape
        sums = None
        if self._one_pass(c):  # public slices: the statistics' one pass runs before anything is charged
            with privsdr_errors():
                sums = core.clipped_sufficient_sums(X, core.slice_by_cut_points(y, c["cuts"]), len(c["cuts"]) + 1, center, bounds)
        budget, ledger = self._resolve_budget()
        calibrated = self._allocate(self.build_plan(n, p, budget), budget, ledger)
        with self._run(calibrated, ledger, (n, p)) as run:
            labels, cuts = self._slices(run, y, c)
            if sums is not None:
                release = sir_moments.release_sums(run, calibrated, *sums, n)
            else:
                release = self._release_moments(run, calibrated, X, labels, len(cuts) + 1, center, bounds)
        return self._solve_moments(run, release, c, cuts, n, p, center, bounds, budget, ledger)

    def _release_moments(self, run: Run, calibrated: CalibratedPlan, X: np.ndarray, labels: np.ndarray, H: int, center: np.ndarray,
                         bounds: np.ndarray) -> Any:
        return sir_moments.release_moments(run, calibrated, X, labels, H, center, bounds)

    def _run(self, calibrated: CalibratedPlan, ledger: Ledger, shape: tuple[int, int]) -> Run:
        return Run(calibrated, ledger, random_state=self.random_state, data_shape=shape, algorithm=type(self).__name__,
                   allow_uncertified=self.allow_uncertified, notes=self._notes())

    def _fit_chunked(self, X: Any, y: Any) -> _SlicedDP:
        """The moments fit on ``Chunks`` or a dask array (``privsdr.rows``): the sums are reduced chunk by
        chunk, validated entirely before anything is charged, and released once here."""
        from functools import partial

        from ..rows import Chunks, is_dask, reduce_rows

        c = self._checked()
        if self.sparse:
            raise ValidationError("SparseDPSIR needs its rows in memory (its iterative algorithm reads them many times): fits "
                                  "on privsdr.Chunks and dask arrays are for DPSIR(algorithm='moments') (docs/scale.md)")
        if c["algorithm"] != "moments":
            raise ValidationError("a chunked or Dask fit reduces sums over rows: it needs algorithm='moments' (the one-pass "
                                  "algorithm splits the rows at random into an initial part and batches)")
        center = c["center"] if isinstance(c["center"], np.ndarray) else None
        sums_of = partial(sir_moments.chunk_sums, bound=c["bound"], center=center)
        name = type(self).__name__
        if c["slicing"] == "dp_quantile":
            if isinstance(X, Chunks) and not X.reusable:
                raise ValidationError("y_grid (DP quantile slicing) reads the rows twice (the quantiles, then the sums): give "
                                      "Chunks a callable that returns a fresh iterator, or public cut_points")
            first = reduce_rows(X, y, partial(sir_moments.chunk_grid_counts, grid=c["grid"]), with_y=True,
                                desc=f"{name}: DP quantiles (pass 1 of 2)")
            n, p, bounds, center_vec, budget, ledger, calibrated = self._chunked_plan(first, c)
            with self._run(calibrated, ledger, (n, p)) as run:
                cuts = self._dp_cuts(run, first["grid_counts"], n, c)
                total = reduce_rows(X, y, partial(sums_of, cuts=cuts), with_y=True, desc=f"{name}: sums (pass 2 of 2)",
                                    fn_checks_finite=True)
                if (total["n"], total["p"]) != (n, p):  # the source changed between passes: fail closed
                    raise ValidationError(f"the second pass read {total['n']} x {total['p']} rows, the first {n} x {p}: "
                                          "the chunks must hold the same rows on every pass")
                release = sir_moments.release_sums(run, calibrated, total["slice_sums"], total["counts"], total["xtx"], n)
        else:
            total = reduce_rows(X, y, partial(sums_of, cuts=c["cuts"]), with_y=True, desc=f"{name}: sums", fn_checks_finite=True)
            n, p, bounds, center_vec, budget, ledger, calibrated = self._chunked_plan(total, c)
            cuts = c["cuts"]
            with self._run(calibrated, ledger, (n, p)) as run:
                release = sir_moments.release_sums(run, calibrated, total["slice_sums"], total["counts"], total["xtx"], n)
        self._solve_moments(run, release, c, np.asarray(cuts, dtype=float), n, p, center_vec, bounds, budget, ledger,
                            "dask" if is_dask(X) else "chunks")
        self._record_features(None, p)
        return self

    def _chunked_plan(self, total: dict[str, Any], c: dict[str, Any]) -> tuple[Any, ...]:
        """The checks an in-memory fit makes on n and p, then the calibrated plan (nothing spent yet)."""
        n, p = int(total["n"]), int(total["p"])
        H = c["H"]
        if n < 2 * H:
            raise ValidationError(f"need at least {2 * H} rows for {H} slices, got {n}")
        if not self.sparse and p >= n // 2:
            raise ValidationError(f"DPSIR is the low-dimensional estimator (p < n/2); got p={p}, n={n}: use SparseDPSIR (`privsdr fit sparse-dpsir`)")
        bounds = column_bounds(c["bound"], p)
        center = self._center_vector(c, p)
        budget, ledger = self._resolve_budget()
        calibrated = self._allocate(self.build_plan(n, p, budget), budget, ledger)
        return n, p, bounds, center, budget, ledger, calibrated

    def _dp_cuts(self, run: Run, counts: np.ndarray, n: int, c: dict[str, Any]) -> np.ndarray:
        """DP quantiles of y over the public grid from its counts #{y <= c} (report-noisy-max, charged)."""
        H, grid = c["H"], c["grid"]
        picks = [grid[run.release(f"cut_{h}", scores_from_counts(counts, n, h / H))] for h in range(1, H)]
        cuts = np.unique(picks)  # post-processing: ties merge slices
        if len(cuts) + 1 < H:
            warnings.warn(f"the DP quantiles collapsed: {len(cuts) + 1} slices instead of {H} (refine y_grid)", stacklevel=4)
        return cuts

    def _solve_moments(self, run: Run, release: Any, c: dict[str, Any], cuts: np.ndarray, n: int, p: int, center: np.ndarray,
                       bounds: np.ndarray, budget: Budget, ledger: Ledger, source: str = "in memory") -> _SlicedDP:
        """Post-processing of every release of the run (``sir_from_released``): directions, K, diagnostics."""
        released = from_run(run, list(run.outputs), n=n, source=source)
        fitted = sir_from_released(released, n_directions=self.n_directions, cut_points=cuts, center=center,
                                   centred=not _is(c["center"], "none"), budget=budget,
                                   rng=diagnostic_rng(self.random_state) if getattr(self, "diagnose_noise", True) else None)
        self._store_fit(run, p, bounds, ledger)
        self.privacy_report_ = fitted.apply(self, run.report, stacklevel=5)
        return self

    def _store_fit(self, run: Run, p: int, bounds: np.ndarray, ledger: Ledger) -> None:
        """The fitted attributes a moments fit sets beside its consumer's (the shape, the bounds, the plan)."""
        self.n_features_in_ = p
        self.bounds_ = bounds
        self.plan_ = run.plan
        self.ledger_ = ledger

    def _notes(self) -> list[str]:
        if self.mode == "paper":
            return ["paper mode: the printed calibration; the paper's own accounting composes the T steps sequentially "
                    "(total (eps, delta)); the ledger composes the disjoint batches in parallel"]
        return []

    def _refine(self, run: Run, rows: ClippedRows, batch_idx: list[np.ndarray], B0: np.ndarray, H: int,
                hyper: dict[str, float], n: int) -> np.ndarray:
        K, p = B0.shape[1], B0.shape[0]
        C, L = hyper["radius"], hyper["tau"] * hyper["radius"]
        B = core.project_columns(B0, C)
        for t, idx in enumerate(batch_idx):
            Xb, labels_b = rows.take(idx)
            kern, A, G = core.batch_terms(Xb, labels_b, B, L, H)
            U = core.sir_update(B, kern, A, G, hyper["eta"], hyper["lambda_pen"])
            delta_t = sir_step_sensitivity(p, K, rows.bound, L, hyper["eta"], hyper["lambda_pen"], len(idx), "l2")
            B = core.project_columns(run.release(f"step_{t}", U, sensitivity=delta_t, rows=idx), C)
        return B

    def transform(self, X: Any) -> np.ndarray:
        """Project rows on the estimated directions: (clip(X - public centre) - DP mean) @ directions_."""
        self._check_fitted("bounds_", "directions_")
        public = np.asarray(getattr(self, "public_center_", np.zeros(self.directions_.shape[0])), dtype=float)
        shift = np.asarray(getattr(self, "center_", public), dtype=float) - public
        return project_rows(self, X, self.directions_, shift=public) - shift @ self.directions_

    @property
    def _n_features_out(self) -> int:
        """The number of output columns of ``transform`` (``get_feature_names_out``: dpsir0, dpsir1, ...)."""
        return int(self.directions_.shape[1])


def choose_k(eigenvalues: np.ndarray, n_directions: int | str, H: int, n: int, p: int, budget: Budget) -> tuple[int, float | None]:
    """(K, the BIC penalty or None): ``n_directions``, or with "bic" the BIC rule on the DP eigenvalues (spec §4.6)."""
    if n_directions != "bic":
        return int(n_directions), None
    eps, delta = (budget.epsilon, budget.delta) if not budget.is_infinite else (1e6, 1e-12)
    k, penalty = bic_dimension(eigenvalues, n, p, eps, max(delta, 1e-300), max_k=max(1, H - 1))
    return int(k), penalty


def _moments_attributes(eigenvalues: np.ndarray, H: int, K: int, center: np.ndarray, shifted: np.ndarray, cuts: np.ndarray,
                        p: int) -> dict[str, Any]:
    return {"eigenvalues_": eigenvalues[: max(H - 1, 1)], "n_directions_": K, "public_center_": center, "center_": shifted,
            "cut_points_": cuts, "random_error_": sir_moments.random_subspace_error(p, K)}


def sir_from_released(released: Released, *, n_directions: int | str, cut_points: np.ndarray, center: np.ndarray,
                      centred: bool = True, budget: Budget | None = None, rng: np.random.Generator | None = None) -> Fitted:
    """DPSIR (moments) from a ``Released`` with arrays slice_sums (p x H), slice_counts (H), second_moment (p x p) of the
    rows shifted by the public ``center`` and clipped (``released.moments``): SIR on the moments (centred at the mean
    the slice sums carry unless ``centred`` is False), K = ``n_directions`` or by BIC (on the public ``budget``), and
    (``rng`` given) the parametric-bootstrap noise error. ``cut_points``: the slices' (public, or picked by the DP
    quantile releases the record holds). Post-processing only; n is the record's (public under replace-one)."""
    release = MomentRelease.from_released(released)
    cuts = np.asarray(cut_points, dtype=float)
    H, p = len(cuts) + 1, release.second_moment.shape[0]
    center = np.asarray(center, dtype=float)
    B_all, eigenvalues, mu = release.directions(max(H - 1, 1), centred)
    K, penalty = choose_k(eigenvalues, n_directions, H, released.n, p, budget if budget is not None else Budget.infinite())
    gap, tie = not_identified(eigenvalues, K, "DPSIR (moments)")
    directions = core.orthonormalize(B_all[:, :K])
    attributes = {**_moments_attributes(eigenvalues, H, K, center, center + mu, cuts, p), "eigengap_": gap,
                  "directions_": directions, "released_": released}
    if penalty is not None:
        attributes["bic_penalty_"] = penalty
    warned: list[tuple[type[Warning], str]] = [] if tie is None else [(NotIdentifiedWarning, tie)]
    diagnostics = []
    if rng is not None:
        noise = attributes["noise_error_"] = sir_moments.noise_error(release, directions, K, centred, rng)
        random = attributes["random_error_"]
        diagnostics.append(Diagnostic("noise", sir_moments.noise_message(noise, random, K, p),
                                      {"noise_error": noise, "random_subspace_error": random}))
        if (text := noise_warning(noise, random)) is not None:
            warned.append((NoiseDominatesWarning, text))
    return Fitted(attributes, tuple(diagnostics), tuple(warned))


def sparse_sir_from_released(released: Released, *, n_directions: int, sparsity: int, n_features: int, cut_points: np.ndarray,
                             center: np.ndarray, bounds: np.ndarray, rng: np.random.Generator | None = None) -> Fitted:
    """SparseDPSIR (moments) from a ``Released`` with arrays support (the selected columns; ``scales["support"]``: the
    selection's Laplace scale) and the moments of the selected columns (``sir_from_released``'s arrays): SIR on them,
    the directions embedded with at most ``sparsity`` rows, the support's pre-test, the selection's margin and (``rng``
    given) the noise error. ``center``, ``bounds``: all ``n_features`` columns' public centre and bounds.
    Post-processing only."""
    release = MomentRelease.from_released(released)
    selected = np.sort(released["support"].ravel().astype(int))
    cuts = np.asarray(cut_points, dtype=float)
    H, p, K, s, n = len(cuts) + 1, int(n_features), int(n_directions), int(sparsity), released.n
    center, bounds = np.asarray(center, dtype=float), np.asarray(bounds, dtype=float)
    B_all, eigenvalues, mu = release.directions(max(H - 1, 1), True)
    gap, tie = not_identified(eigenvalues, K, "SparseDPSIR (moments)")
    B_sel = core.orthonormalize(B_all[:, :K])
    directions = sparse_sir.embedded(B_sel, selected, p, s)
    shifted = center.copy()
    shifted[selected] = center[selected] + mu
    signal = sparse_sir.support_signal(release)
    weakest, miss = sparse_sir.selection_margin(release, bounds[selected], float(released.scales["support"]), p, n)
    margin = sparse_sir.margin_message(weakest, miss, len(selected), p)
    attributes = {**_moments_attributes(eigenvalues, H, K, center, shifted, cuts, p), "eigengap_": gap, "directions_": directions,
                  "support_": np.flatnonzero(np.linalg.norm(directions, axis=1) > 0), "screened_": selected,
                  "support_signal_": signal, "miss_probability_": miss, "released_": released}
    warned: list[tuple[type[Warning], str]] = [] if tie is None else [(NotIdentifiedWarning, tie)]
    if miss >= sparse_sir.MISS_LEVEL:
        warned.append((NoiseDominatesWarning, margin))
    diagnostics = []
    if rng is not None:
        noise = attributes["noise_error_"] = sir_moments.noise_error(release, B_sel, K, True, rng)
        random, screen = attributes["random_error_"], len(selected)
        diagnostics += [Diagnostic("noise", sir_moments.noise_message(noise, random, K, screen) + " (given the selected support)",
                                   {"noise_error": noise, "random_subspace_error": random}),
                        Diagnostic("support", sparse_sir.support_message(signal, screen), {"support_signal": signal})]
        if not signal:
            warned.append((NoiseDominatesWarning, sparse_sir.support_message(signal, screen)))
        elif (text := noise_warning(noise, random)) is not None:
            warned.append((NoiseDominatesWarning, text))
    diagnostics.append(Diagnostic("selection_margin", margin, {"selection_miss_probability": miss}))
    return Fitted(attributes, tuple(diagnostics), tuple(warned))


@model_class
class DPSIR(SIRForecastMixin, _SlicedDP):
    """Differentially private SIR for n > p.

    ``algorithm="moments"`` (the default in certified mode): the slice sums, slice counts and second moment of the
    clipped rows are released once on all n rows, and SIR is solved on them (``sir_moments``); the mean is
    taken from the released slice sums (free). ``algorithm="onepass"``: the paper's B.1 initializer on half
    the rows plus Algorithm 2 (noisy mini-batch gradient steps) on the other half (the default with
    ``mode="paper"``, which reproduces its printed calibration). ``center``: ``None`` (certified: centre at a DP mean -- free for
    ``moments``, a charged ``mean`` node for ``onepass``; paper mode assumes centred data), ``"none"``, or
    a public vector subtracted before clipping.

    ``DPSIR(n_directions=1, bound=1.0, cut_points=[...] | y_grid=[...], budget=Budget(1, 1e-5))``;
    ``n_directions="bic"`` selects K on the DP eigenvalues (spec §4.6). After ``fit``:
    ``directions_`` (p x K, orthonormal), ``eigenvalues_`` (DP), ``n_directions_``, ``center_``,
    ``cut_points_``, ``privacy_report_``, ``eigengap_`` (relative gap (lambda_K - lambda_K+1) / lambda_K;
    a ``NotIdentifiedWarning`` when it is ~0); ``moments``: ``noise_error_`` (parametric bootstrap of the
    noise: the error it alone induces; skipped with ``diagnose_noise=False``) and ``random_error_`` (a
    random subspace's), with a ``NoiseDominatesWarning`` when the first is over half the second;
    ``onepass``: ``init_directions_`` (B.1), ``hyperparameters_``, ``step_choice_`` (certified).
    ``sampler="secure"``: exact discrete Gaussian/Laplace noise (CSPRNG) instead of numpy's floating-point noise,
    priced by its own bound (the report says which sampler ran; docs/accounting.md).
    """

    def __init__(
        self,
        n_directions: int | str = 1,
        *,
        algorithm: str | None = None,
        bound: float | None = None,
        center: Any = None,
        n_slices: int = 4,
        cut_points: Any = None,
        y_grid: Any = None,
        slicing: str | None = None,
        mode: str = "certified",
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        n_iter: int | None = None,
        eta: float | None = None,
        lambda_pen: float | None = None,
        radius: float | None = None,
        tau: float | None = None,
        init_fraction: float = 0.5,
        quantile_fraction: float = 0.1,
        tight: bool = True,
        random_state: Any = None,
        allow_uncertified: bool = False,
        diagnose_noise: bool = True,
        sampler: str = "numpy",
    ) -> None:
        super().__init__(
            n_directions, bound=bound, n_slices=n_slices, cut_points=cut_points, y_grid=y_grid, slicing=slicing, mode=mode,
            budget=budget, ledger=ledger, accountant=accountant, n_iter=n_iter, eta=eta, lambda_pen=lambda_pen, radius=radius,
            tau=tau, init_fraction=init_fraction, quantile_fraction=quantile_fraction, tight=tight, random_state=random_state,
            allow_uncertified=allow_uncertified, sampler=sampler,
        )
        self.algorithm = algorithm
        self.center = center
        self.diagnose_noise = diagnose_noise

    def _fit_released(self, run: Run, plan: CalibratedPlan, rows: ClippedRows, H: int,
                      init_idx: np.ndarray, batch_idx: list[np.ndarray], c: dict[str, Any], n: int, budget: Budget) -> None:
        p = rows.p
        X1, labels1 = rows.take(init_idx)
        B_all, eigenvalues = self._init_release(run, X1, labels1, H, plan, init_idx)
        self._init_rows = len(init_idx)
        K, penalty = choose_k(eigenvalues, self.n_directions, H, len(init_idx), p, budget)
        if penalty is not None:
            self.bic_penalty_ = penalty
        self.eigengap_ = warn_if_not_identified(eigenvalues, K, "DPSIR initializer (B.1)")
        B0 = B_all[:, :K]
        m = min(len(b) for b in batch_idx)
        z = plan.specs["step_0"].noise_multiplier

        def noise_per_eta(L: float, lambda_pen: float) -> float:  # E||W||_F at eta = 1
            return z * sir_step_sensitivity(p, K, rows.bound, L, 1.0, lambda_pen, m, "l2") * math.sqrt(p * K)

        start, lambda_pen = stationary_start(B0, eigenvalues, eigenvalues[K - 1], self.lambda_pen)
        eta = self.eta
        choice = None
        if eta is None and self.mode == "certified" and z > 0:
            choice = self._choose_step(plan, K, len(batch_idx), m, p, rows.bound)
            eta = choice.eta
        hyper = default_hyperparameters(eigenvalues[K - 1], start, n, eta, lambda_pen, self.radius, self.tau, noise_per_eta)
        B = self._refine(run, rows, batch_idx, start, H, hyper, n) if hyper["eta"] > 0 else start
        self.init_directions_ = core.orthonormalize(B0)
        self.directions_ = core.orthonormalize(B)
        self.eigenvalues_ = eigenvalues[: max(H - 1, 1)]
        self.n_directions_ = K
        self.hyperparameters_ = hyper
        if choice is not None:
            self.step_choice_ = choice
            self.noise_error_ = choice.predicted_final_error
            self.random_error_ = sir_moments.random_subspace_error(p, K)

    def _choose_step(self, plan: CalibratedPlan, K: int, T: int, m: int, p: int, bound: Any) -> Any:
        """Algorithm 2's step size by the plug-in simulation of ``sir_refine`` (B.1 outputs and public scales only)."""
        from .sir_refine import choose_step_size

        kernel, sigma, floor = self._b1_release
        z = plan.specs["step_0"].noise_multiplier

        def step_noise_sd(eta: float, L: float, lambda_pen: float) -> float:
            return z * sir_step_sensitivity(p, K, bound, L, eta, lambda_pen, m, "l2")

        seed = self.random_state.integers(2**63) if isinstance(self.random_state, np.random.Generator) else self.random_state
        rng = np.random.default_rng(None if seed is None else np.random.SeedSequence(int(seed)).spawn(3)[2])
        return choose_step_size(kernel, sigma, plan.specs["init_kernel"].scale, plan.specs["init_sigma"].scale, floor, K, T,
                                self.lambda_pen, self.radius, self.tau, step_noise_sd, m, self._init_rows, rng)


@model_class
class SparseDPSIR(SIRForecastMixin, _SlicedDP):
    """Differentially private sparse SIR for p >> n (DP-SIR Algorithms B.2 + 3).

    ``sparsity`` = s, the number of nonzero rows kept by peeling (required); ``screen_size`` =
    s_init of B.2 (default s). ``directions_`` has at most s nonzero rows.
    """

    sparse = True
    name = "sparse_dpsir"
    model_attributes = _SlicedDP.model_attributes + ("support_", "screened_")

    def __init__(
        self,
        n_directions: int | str = 1,
        *,
        sparsity: int | None = None,
        screen_size: int | None = None,
        bound: float | None = None,
        n_slices: int = 4,
        cut_points: Any = None,
        y_grid: Any = None,
        slicing: str | None = None,
        mode: str = "certified",
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        n_iter: int | None = None,
        eta: float | None = None,
        lambda_pen: float | None = None,
        radius: float | None = None,
        tau: float | None = None,
        init_fraction: float = 0.5,
        quantile_fraction: float = 0.1,
        tight: bool = True,
        random_state: Any = None,
        allow_uncertified: bool = False,
        sampler: str = "numpy",
        algorithm: str | None = None,
        diagnose_noise: bool = True,
    ) -> None:  # every parameter named (scikit-learn's get_params reads the signature)
        super().__init__(
            n_directions, bound=bound, n_slices=n_slices, cut_points=cut_points, y_grid=y_grid, slicing=slicing, mode=mode,
            budget=budget, ledger=ledger, accountant=accountant, n_iter=n_iter, eta=eta, lambda_pen=lambda_pen, radius=radius,
            tau=tau, init_fraction=init_fraction, quantile_fraction=quantile_fraction, tight=tight, random_state=random_state,
            allow_uncertified=allow_uncertified, sampler=sampler,
        )
        self.sparsity = sparsity
        self.screen_size = screen_size
        self.algorithm = algorithm
        self.diagnose_noise = diagnose_noise

    def _checked(self) -> dict[str, Any]:
        c = super()._checked()
        if self.sparsity is None:
            raise ValidationError("sparsity (s, the number of nonzero rows to keep) is required")
        c["s"] = check_int(self.sparsity, "sparsity", 1)
        c["s_init"] = check_int(self.screen_size if self.screen_size is not None else c["s"], "screen_size", 1)
        return c

    def _extra_public(self) -> dict[str, Any]:
        return {"sparsity": self.sparsity, "screen_size": self.screen_size if self.screen_size is not None else self.sparsity}

    def _init_dims(self, p: int) -> int:
        return check_int(self.screen_size if self.screen_size is not None else self.sparsity, "screen_size", 1)

    def _add_init_nodes(self, plan: Plan, scope: Any, n1: int, bounds: np.ndarray, H: int, budget: Budget, paper: bool) -> None:
        p = len(bounds)
        s_init = self._init_dims(p)
        if s_init > p:
            raise ValidationError(f"screen_size {s_init} exceeds p = {p}")
        _, c2 = square_mass(bounds, 1)  # max_j c_j^2
        kw = self._init_budget(budget, paper, weight=0.5)
        kw.pop("calibration")
        plan.add("screen", "peeling", Sensitivity(6.0 * c2 / n1, "linf", RELATION, "diag(M)_j changes by <= 6 c_j^2 / n1 <= 6 max_j c_j^2 / n1"),
                 scope=scope, parents=self._init_parents(plan), params={"s": s_init, "d": 1, "delta": max(budget.delta / 2, 1e-300) if not budget.is_infinite else 0.5},
                 description="B.2: private screening of diag(M) (peeling; the noisy values are discarded)", **kw)
        k, c2 = square_mass(bounds, s_init)  # k c2 = the s_init largest c_j^2: any screened set
        for name, sens, derivation, what in (
            ("init_sigma", gram.xtx(math.sqrt(k * c2), RELATION, n1, k * c2).value,
             "Gram block X_S^T X_S / n1, ||x_S||^2 <= the sum of the s_init largest c_j^2 (privsdr.released.gram)",
             "Sigma on the screened coordinates"),
            ("init_kernel", 6.0 * k * c2 / n1, "6 (sum of the s_init largest c_j^2) / n1 (= 6 s_init c_X^2 / n1, spec §5.2)",
             "SIR kernel on the screened coordinates"),
        ):
            node_kw = self._init_budget(budget, paper, weight=0.25)
            plan.add(name, "symmetric_gaussian", Sensitivity(sens, "l2", RELATION, derivation), scope=scope,
                     parents=("screen",), description=f"B.2: {what}", **node_kw)

    def _add_step_node(self, plan: Plan, t: int, scope: Any, parents: tuple[str, ...], T: int, n: int, budget: Budget, paper: bool) -> None:
        c = self._checked()
        delta_it = budget.delta if not budget.is_infinite and budget.delta > 0 else 1e-5
        params = {"s": c["s"], "d": c["K"] if c["K"] != "bic" else 1, "delta": delta_it}
        if paper and not budget.is_infinite:
            # Lemma 5 as printed: (eps, delta) per peeling call with a 1/n (not 1/m_t) sensitivity, i.e.
            # T times too little noise: the published claim, not a certified guarantee (spec §10 P3)
            kw: dict[str, Any] = {"share": Budget(budget.epsilon, budget.delta), "status": "claimed"}
            derivation = "paper Lemma 5: 2 eta c_X L [6 + lambda_pen (2 + 4 K L^2)] / n (should be / m_t)"
        else:
            kw = {"weight": 1.0}
            derivation = "2 eta c_X L [6 + lambda_pen (2 + 4 K L^2)] / m_t, entry-wise (spec §5.2)"
        plan.add(f"step_{t}", "peeling", Sensitivity(1.0, "linf", RELATION, derivation), scope=scope, parents=parents,
                 adaptive=True, params=params, description=f"Algorithm 3 step {t}: gradient update + peeling on batch {t}", **kw)

    def build_plan(self, n_samples: int, n_features: int, budget: Budget) -> Plan:
        if self.n_directions == "bic":
            raise ValidationError("SparseDPSIR needs n_directions given (the peeling size of each step depends on it)")
        return super().build_plan(n_samples, n_features, budget)

    def _released_row_count(self) -> int | None:
        """n (``SIRForecastMixin``), for the certified moments design only."""
        self._check_fitted("plan_")
        if self.mode != "certified" or self._checked()["algorithm"] != "moments":
            raise ValidationError("the accuracy forecast exists for the certified moments design only")
        return super()._released_row_count()

    # -- algorithm="moments" (certified default, issue 26): one selection, one moments release (``sparse_sir``) ----------
    def _build_moments_plan(self, c: dict[str, Any], n: int, p: int, bounds: np.ndarray, budget: Budget) -> Plan:
        H, K, s, screen = c["H"], c["K"], c["s"], c["s_init"]
        if screen > p:
            raise ValidationError(f"screen_size {screen} exceeds p = {p}")
        if s > screen:
            raise ValidationError(f"sparsity {s} exceeds screen_size {screen} (the coordinates kept come from those selected)")
        if K > s:
            raise ValidationError(f"n_directions {K} exceeds sparsity {s}")
        plan = Plan(self.name, RELATION, {
            "mode": self.mode, "algorithm": "moments", "bound": public_bound(c["bound"]), "n_slices": H, "n_directions": K,
            "slicing": c["slicing"], "n_samples": n, "n_features": p, "center": self._center_description(c), **self._extra_public(),
            **({"cut_points": list(map(float, c["cuts"]))} if c["cuts"] is not None else {}),
        })
        self._add_slicing_nodes(plan, c, H, budget)
        delta = max(budget.delta / 2, 1e-300) if not budget.is_infinite else 0.5
        sparse_sir.add_selection_node(plan, n, screen, delta, parents=tuple(plan.nodes))
        k, c2 = square_mass(bounds, screen)  # k c2 = the sum of the screen largest c_j^2: any selected set
        sir_moments.add_moment_nodes(plan, n, screen, bounds, parents=("support",), row_bound=math.sqrt(k * c2))
        return plan

    def _release_moments(self, run: Run, calibrated: CalibratedPlan, X: np.ndarray, labels: np.ndarray, H: int, center: np.ndarray,
                         bounds: np.ndarray) -> Any:
        """The selection on all rows, then the moments of the selected columns (``sparse_sir``)."""
        scores = sparse_sir.selection_scores(X, labels, H, center, bounds)
        selected = np.sort(np.asarray(run.release("support", scores), dtype=int))
        return sir_moments.release_moments(run, calibrated, X[:, selected], labels, H, center[selected], bounds[selected])

    def _solve_moments(self, run: Run, release: Any, c: dict[str, Any], cuts: np.ndarray, n: int, p: int, center: np.ndarray,
                       bounds: np.ndarray, budget: Budget, ledger: Ledger, source: str = "in memory") -> _SlicedDP:
        if c["algorithm"] != "moments":
            return super()._solve_moments(run, release, c, cuts, n, p, center, bounds, budget, ledger, source)
        released = from_run(run, list(run.outputs), n=n, source=source)
        fitted = sparse_sir_from_released(released, n_directions=int(c["K"]), sparsity=int(c["s"]), n_features=p, cut_points=cuts,
                                          center=center, bounds=bounds,
                                          rng=diagnostic_rng(self.random_state) if self.diagnose_noise else None)
        self._store_fit(run, p, bounds, ledger)
        self.privacy_report_ = fitted.apply(self, run.report, stacklevel=5)
        return self

    def _fit_released(self, run: Run, plan: CalibratedPlan, rows: ClippedRows, H: int,
                      init_idx: np.ndarray, batch_idx: list[np.ndarray], c: dict[str, Any], n: int, budget: Budget) -> None:
        p = rows.p
        X1, labels1 = rows.take(init_idx)
        _, selected = run.release("screen", core.kernel_diagonal(X1, labels1, H)[None, :], rows=init_idx)
        selected = np.sort(selected)
        B_sel, eigenvalues = self._init_release(run, X1[:, selected], labels1, H, plan, init_idx)
        K = int(self.n_directions)
        self.eigengap_ = warn_if_not_identified(eigenvalues, K, "SparseDPSIR initializer (B.2)")
        B0 = np.zeros((p, K))
        B0[selected] = B_sel[:, :K]
        s = check_int(self.sparsity, "sparsity", 1)
        m = n if self.mode == "paper" else min(len(b) for b in batch_idx)
        z = plan.specs["step_0"].noise_multiplier  # Laplace scale per unit of entry-wise sensitivity

        def noise_per_eta(L: float, lambda_pen: float) -> float:  # E||noise on the s kept rows||_F at eta = 1
            return z * sir_step_sensitivity(p, K, rows.bound, L, 1.0, lambda_pen, m, "linf") * math.sqrt(2.0 * s * K)

        start, lambda_pen = stationary_start(B0, eigenvalues, eigenvalues[K - 1], self.lambda_pen)
        hyper = default_hyperparameters(eigenvalues[K - 1], start, n, self.eta, lambda_pen, self.radius, self.tau, noise_per_eta)
        C, L = hyper["radius"], hyper["tau"] * hyper["radius"]
        B = core.project_columns(start, C)
        support = selected
        for t, idx in enumerate(batch_idx):
            Xb, labels_b = rows.take(idx)
            kern, A, G = core.batch_terms(Xb, labels_b, B, L, H)
            U = core.sir_update(B, kern, A, G, hyper["eta"], hyper["lambda_pen"])
            m = n if self.mode == "paper" else len(idx)  # paper: Lemma 5's 1/n (spec §10 P3)
            lam = sir_step_sensitivity(p, K, rows.bound, L, hyper["eta"], hyper["lambda_pen"], m, "linf")
            A_hat, support = run.release(f"step_{t}", U.T, sensitivity=lam, rows=idx)
            B = core.project_columns(A_hat.T, C)
        self.init_directions_ = core.orthonormalize(B0)
        self.directions_ = core.orthonormalize(B)
        self.support_ = np.sort(np.asarray(support))
        self.screened_ = selected
        self.eigenvalues_ = eigenvalues[: max(H - 1, 1)]
        self.n_directions_ = K
        self.hyperparameters_ = hyper
