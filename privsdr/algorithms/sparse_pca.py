"""DP sparse PCA: the special case of DP-SIR with M -> Sigma and Sigma -> I (spec dpsir_003.md §4.8,
reconstructed: the paper's appendix is missing).

``algorithm="moments"`` (the certified default, issue 26): on all n rows, the s coordinates with the largest
d_j = mean(x_ij^2) / c_j^2 are selected by s rounds of report-noisy-max (mechanism ``noisy_top``; every d_j moves by at
most 1 / n when a record is replaced: an L-infinity sensitivity free of p), then Sigma restricted to them is released
once (Analyze-Gauss, sqrt(2) (sum of the s largest c_j^2) / n) and its top-K eigenvectors are the components (diagonal
thresholding, Johnstone & Lu 2009, made private). ``noise_error_``: the parametric bootstrap of that release.

``algorithm="onepass"``: the reconstruction below.

Initializer on one part of the data: peeling screens diag(Sigma) (entry-wise sensitivity c_X^2/n1),
Analyze-Gauss noise on Sigma restricted to the screened coordinates (Frobenius sqrt(2) s c_X^2/n1),
top-K eigenvectors embedded. Refinement on the other part, one batch per step:

    B <- B + 2 eta (1/m) sum_i x_i pi_i^T - 2 eta lambda_pen B (B^T B - I),   pi_i = clip(B^T x_i, -L, L)

then peeling (entry-wise sensitivity 4 eta c_X L / m: the penalty is data-independent) and the
column ball. ``directions_`` (p x K, at most s nonzero rows, orthonormal).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from .. import core
from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ..mechanisms import Sensitivity
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram
from ..released.fitted import Diagnostic, Fitted
from ._base import (
    ClippedRows,
    PrivateEstimator,
    check_bound,
    check_matrix,
    check_positive,
    check_random_state,
    column_bounds,
    diagnostic_rng,
    project_rows,
    public_bound,
    public_split,
    split_cells,
    square_mass,
    uniform_bound,
)
from ._sir_common import check_flag, check_fraction, check_int, default_hyperparameters, stationary_start
from .sir_moments import random_subspace_error

RELATION = "replace_one"


def moments_plan(n: int, p: int, bounds: np.ndarray, K: int, s: int, budget: Budget, bound_text: Any) -> Plan:
    """``algorithm="moments"`` (module docstring): the selection, then Sigma on the selected coordinates."""
    k_s, c2_s = square_mass(bounds, s)
    delta = max(budget.delta / 2, 1e-300) if not budget.is_infinite else 0.5
    plan = Plan("dp_sparse_pca", RELATION, {"algorithm": "moments", "bound": bound_text, "n_components": K, "sparsity": s,
                                            "n_samples": n, "n_features": p})
    plan.add("support", "noisy_top", Sensitivity(1.0 / n, "linf", RELATION, "d_j = mean(x_ij^2) / c_j^2 in [0, 1] moves by <= 1 / n"),
             weight=0.5, params={"s": s, "delta": delta}, description=f"the {s} coordinates of largest mean(x_j^2) / c_j^2 (indices only)")
    plan.add("sigma", "symmetric_gaussian",
             gram.xtx(math.sqrt(k_s * c2_s), RELATION, n, k_s * c2_s),  # ||x_S||^2 <= the sum of the s largest c_j^2
             weight=1.0, parents=("support",), calibration="analytic", description="Analyze-Gauss on X_S^T X_S / n of the selected S")
    return plan


def support_correlated(sigma: np.ndarray, scale: float) -> bool:
    """Do the selected coordinates co-vary beyond the release's noise? A spike makes them correlate; coordinates
    chosen by noise do not: the off-diagonal entries of the released Sigma (noise N(0, scale^2) each) against their
    noise alone (``released.regression.signal_in`` at 0.05)."""
    from ..released.regression import signal_in

    upper = sigma[np.triu_indices(sigma.shape[0], 1)]
    return bool(upper.size == 0 or signal_in(upper, np.full(upper.size, scale**2)))


def co_variation(sigma: np.ndarray, scale: float) -> np.ndarray:
    """Per selected coordinate j, the energy of its released covariances with the other selected ones over what their
    noise alone gives, ||Sigma_j,-j||^2 / ((s - 1) scale^2) (inf with no noise): about 1 for a coordinate that co-varies
    with none of the others (post-processing of the release)."""
    s = sigma.shape[0]
    energy = np.array([float(np.sum(np.delete(sigma[j], j) ** 2)) for j in range(s)])
    return energy / ((s - 1) * scale**2) if scale > 0 and s > 1 else np.full(s, np.inf)


def lonely_columns(ratios: np.ndarray) -> np.ndarray:
    """The selected coordinates whose ``co_variation`` does not pass the pre-test of ``released.regression.signal_in``
    (chi^2 with s - 1 degrees of freedom at 0.05): a spike's coordinates co-vary with the rest of the spike, so such a
    coordinate may stand where a spiked one was missed (issue 33)."""
    from ..released.regression import PRETEST_LEVEL, chi2_quantile

    dof = max(ratios.size - 1, 1)
    threshold = max(chi2_quantile(1.0 - PRETEST_LEVEL, dof) / dof, 1.0)
    return np.flatnonzero(ratios <= threshold) if ratios.size > 1 else np.zeros(0, dtype=int)


def lonely_message(lonely: np.ndarray, selected: np.ndarray) -> str:
    if lonely.size == 0:
        return f"each of the {selected.size} selected coordinates co-varies with the others beyond the release's noise"
    return (f"selected coordinate(s) {', '.join(map(str, selected[lonely]))} co-vary with no other selected coordinate beyond "
            "the release's noise: if the spike has as many coordinates as were selected, a spiked one may have been missed; "
            "more data or more budget is needed")


def top_eigenvectors(sigma: np.ndarray, K: int) -> np.ndarray:
    """The top-K eigenvectors of a symmetric matrix (of each matrix of a stack (..., p, p))."""
    values, vectors = np.linalg.eigh(sigma)
    order = np.argsort(values, axis=-1)[..., ::-1][..., None, :K]
    return np.asarray(np.take_along_axis(vectors, order, axis=-1))


def sigma_noise_error(sigma: np.ndarray, B: np.ndarray, K: int, scale: float, rng: np.random.Generator, reps: int = 30) -> float:
    """Median ||P_B - P_B*|| over re-noisings of the released Sigma at its public scale (parametric bootstrap; free),
    the ``reps`` re-noisings solved as one stack."""
    if scale == 0:
        return 0.0
    from ..released.regression import symmetric_noise

    draws = top_eigenvectors(sigma + symmetric_noise(scale, sigma.shape[0], rng, reps=reps), K)
    return float(np.median(core.projection_distances(draws, B)))


def sparse_pca_from_released(released: Released, p: int, K: int, s: int, rng: np.random.Generator | None = None) -> Fitted:
    """DPSparsePCA (``algorithm="moments"``) from a ``Released`` with arrays ``support`` (the selected indices) and
    ``sigma`` (X_S^T X_S / n on them, noise sd ``scales["sigma"]``): the top-K eigenvectors of Sigma placed on the
    support, the support's pre-test and co-variation margin, and (``rng`` given) the parametric-bootstrap noise
    error. Post-processing only (module docstring); ``p``, ``K``, ``s`` are public."""
    from ..errors import NoiseDominatesWarning
    from ..released.moments import noise_message, noise_warning
    from .sparse_sir import support_message

    selected = np.sort(released["support"].ravel().astype(int))
    sigma, scale = released["sigma"], float(released.scales["sigma"])
    B_sel = top_eigenvectors(sigma, K)
    components = np.zeros((p, K))
    components[selected] = B_sel
    signal = support_correlated(sigma, scale)
    ratios = co_variation(sigma, scale)
    lonely = lonely_columns(ratios)
    margin = lonely_message(lonely, selected)
    random = random_subspace_error(p, K)
    attributes = {"components_": components, "init_components_": components.copy(), "support_": selected, "hyperparameters_": {},
                  "random_error_": random, "support_signal_": signal, "co_variation_": ratios, "lonely_support_": selected[lonely],
                  "released_": released}
    warned: list[tuple[type[Warning], str]] = []
    if signal and lonely.size:  # a support with no signal at all has its own warning
        warned.append((NoiseDominatesWarning, margin))
    diagnostics = []
    what = "the released covariances between"
    if rng is not None:
        noise = sigma_noise_error(sigma, B_sel, K, scale, rng)
        attributes["noise_error_"] = noise
        diagnostics += [Diagnostic("noise", noise_message(noise, random, K, s) + " (given the selected support)",
                                   {"noise_error": noise, "random_subspace_error": random}),
                        Diagnostic("support", support_message(signal, s, what), {"support_signal": signal})]
        if not signal:
            warned.append((NoiseDominatesWarning, support_message(signal, s, what)))
        elif (text := noise_warning(noise, random)) is not None:
            warned.append((NoiseDominatesWarning, text))
    diagnostics.append(Diagnostic("selection_margin", margin, {"lonely_support": [int(j) for j in selected[lonely]],
                                                                "co_variation": [float(r) for r in ratios]}))
    return Fitted(attributes, tuple(diagnostics), tuple(warned))


@model_class
class DPSparsePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, PrivateEstimator):
    """Differentially private sparse PCA (top-K eigenvectors with at most ``sparsity`` nonzero rows).

    ``bound``: a public bound c_X on |x_ij|, or one bound c_j per column (then c_X^2 becomes
    max_j c_j^2 in the screening, the sum of the s largest c_j^2 in Sigma's, and max_j c_j in the steps).
    """

    model_attributes = ("components_", "init_components_", "support_", "hyperparameters_", "n_features_in_", "bounds_", "noise_error_",
                        "random_error_", "support_signal_")
    model_required = ("components_", "bounds_")

    def __init__(
        self,
        n_components: int = 1,
        *,
        sparsity: int | None = None,
        bound: float | None = None,
        budget: Budget | tuple[float, float] | None = None,
        ledger: Ledger | None = None,
        accountant: str = "best",
        n_iter: int | None = None,
        eta: float | None = None,
        lambda_pen: float | None = None,
        radius: float | None = None,
        tau: float | None = None,
        init_fraction: float = 0.5,
        tight: bool = True,
        random_state: Any = None,
        sampler: str = "numpy",
        algorithm: str = "moments",
        diagnose_noise: bool = True,
    ) -> None:
        self.n_components = n_components
        self.sparsity = sparsity
        self.bound = bound
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.n_iter = n_iter
        self.eta = eta
        self.lambda_pen = lambda_pen
        self.radius = radius
        self.tau = tau
        self.init_fraction = init_fraction
        self.tight = tight
        self.random_state = random_state
        self.sampler = sampler
        self.algorithm = algorithm
        self.diagnose_noise = diagnose_noise

    def _checked(self, p: int) -> tuple[np.ndarray, int, int]:
        bounds = column_bounds(check_bound(self.bound), p)
        if self.sparsity is None:
            raise ValidationError("sparsity (s, the number of nonzero rows to keep) is required")
        K = check_int(self.n_components, "n_components", 1)
        s = check_int(self.sparsity, "sparsity", K)
        if s > p:
            raise ValidationError(f"sparsity {s} exceeds the number of features {p}")
        check_fraction(self.init_fraction, "init_fraction", 0.05, 0.95)
        check_flag(self.tight, "tight")
        check_random_state(self.random_state)
        for name in ("eta", "lambda_pen", "radius", "tau"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        if self.algorithm not in ("moments", "onepass"):
            raise ValidationError(f"algorithm must be 'moments' or 'onepass', got {self.algorithm!r}")
        return bounds, K, s

    def build_plan(self, n_samples: int, n_features: int, budget: Budget) -> Plan:
        n, p = check_int(n_samples, "n_samples", 4), check_int(n_features, "n_features", 1)
        bounds, K, s = self._checked(p)
        if self.algorithm == "moments":
            return moments_plan(n, p, bounds, K, s, budget, public_bound(self.bound))
        u = uniform_bound(bounds)
        c = u if u is not None else float(bounds.max())  # max_j c_j (entry-wise bounds)
        k_s, c2_s = square_mass(bounds, s)
        n1 = int(round(n * float(self.init_fraction)))
        T = check_int(self.n_iter, "n_iter", 1) if self.n_iter is not None else max(1, math.ceil(math.log(n)))
        if n - n1 < T or n1 < 2:
            raise ValidationError(f"{n} rows are too few for the split and {T} batches")
        delta = budget.delta if not budget.is_infinite and budget.delta > 0 else 1e-5
        plan = Plan("dp_sparse_pca", RELATION, {"bound": public_bound(self.bound), "n_components": K, "sparsity": s, "n_samples": n,
                                                  "n_features": p, "init_rows": n1, "n_iter": T})
        init_scope, refine_scope = plan.partition("part", ["init", "refine"], rows=True)
        batch_scopes = plan.partition("batch", range(T), within=refine_scope, rows=True)
        plan.add("screen", "peeling", Sensitivity(c * c / n1, "linf", RELATION, "diag(Sigma)_j changes by <= c_j^2 / n1 <= max_j c_j^2 / n1"),
                 weight=0.5, scope=init_scope, params={"s": s, "d": 1, "delta": delta / 2},
                 description="private screening of diag(Sigma) (noisy values discarded)")
        plan.add("init_sigma", "symmetric_gaussian",
                 gram.xtx(math.sqrt(s * c * c), RELATION, n1, s * c * c) if u is not None  # = sqrt(2) s c_X^2 / n1
                 else gram.xtx(math.sqrt(k_s * c2_s), RELATION, n1, k_s * c2_s),  # the s largest c_j^2 on the screened block
                 weight=0.5, scope=init_scope, parents=("screen",), calibration="analytic",
                 description="Analyze-Gauss on Sigma restricted to the screened coordinates")
        for t in range(T):
            plan.add(f"step_{t}", "peeling", Sensitivity(1.0, "linf", RELATION, "4 eta max_j c_j L / m_t entry-wise"), weight=1.0,
                     scope=batch_scopes[t], parents=("init_sigma",) + ((f"step_{t - 1}",) if t else ()), adaptive=True,
                     params={"s": s, "d": K, "delta": delta}, description=f"power-type step {t} + peeling on batch {t}")
        return plan

    def plan(self, n_samples: int, n_features: int) -> CalibratedPlan:
        budget, ledger = self._resolve_budget()
        return self.build_plan(n_samples, n_features, budget).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())

    def fit(self, X: Any, y: Any = None) -> DPSparsePCA:
        X_raw, X = X, check_matrix(X, "X", min_rows=4)
        n, p = X.shape
        bounds, K, s = self._checked(p)
        c = float(bounds.max())
        budget, ledger = self._resolve_budget()
        calibrated = self.build_plan(n, p, budget).allocate(budget, accountant=ledger.accountant, tight=self.tight, sampler=self._sampler())
        if self.algorithm == "moments":
            return self._fit_moments(X, X_raw, bounds, K, s, calibrated, ledger)
        T = calibrated.plan.public_params["n_iter"]
        n1 = calibrated.plan.public_params["init_rows"]
        init_idx, batch_idx = public_split(self.random_state, n, n1, T)
        rows = ClippedRows(X, bounds)
        X1 = rows.take(init_idx)
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=X.shape, algorithm="DPSparsePCA",
                 row_cells=split_cells(init_idx, batch_idx)) as run:
            _, selected = run.release("screen", np.mean(X1 * X1, axis=0)[None, :], rows=init_idx)
            selected = np.sort(selected)
            sigma = run.release("init_sigma", core.covariance_uncentred(X1[:, selected]), rows=init_idx)
            values, vectors = np.linalg.eigh(sigma)
            order_ev = np.argsort(values)[::-1]
            B0 = np.zeros((p, K))
            B0[selected] = vectors[:, order_ev[:K]]
            gap = values[order_ev[K - 1]] - (values[order_ev[K]] if K < len(values) else 0.0)
            m = min(len(b) for b in batch_idx)
            z = calibrated.specs["step_0"].noise_multiplier
            start, lambda_pen = stationary_start(B0, values[order_ev], gap, self.lambda_pen)
            hyper = default_hyperparameters(gap, start, n, self.eta, lambda_pen, self.radius, self.tau,
                                            lambda L, lp: z * 4.0 * c * L / m * math.sqrt(2.0 * s * K))
            C, L = hyper["radius"], hyper["tau"] * hyper["radius"]
            B = core.project_columns(start, C)
            support = selected
            for t, idx in enumerate(batch_idx):
                U = core.pca_update(rows.take(idx), B, L, hyper["eta"], hyper["lambda_pen"])
                A_hat, support = run.release(f"step_{t}", U.T, sensitivity=4.0 * hyper["eta"] * c * L / len(idx), rows=idx)
                B = core.project_columns(A_hat.T, C)
        self.init_components_ = core.orthonormalize(B0)
        self.components_ = core.orthonormalize(B)
        self.support_ = np.sort(np.asarray(support))
        self.hyperparameters_ = hyper
        self._record_features(X_raw, p)
        self.bounds_ = bounds
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = run.report
        return self

    def _fit_moments(self, X: np.ndarray, X_raw: Any, bounds: np.ndarray, K: int, s: int, calibrated: CalibratedPlan,
                     ledger: Ledger) -> DPSparsePCA:
        n, p = X.shape
        Xc = np.clip(X, -bounds, bounds)
        with Run(calibrated, ledger, random_state=self.random_state, data_shape=X.shape, algorithm="DPSparsePCA") as run:
            selected = np.sort(np.asarray(run.release("support", np.mean(Xc * Xc, axis=0) / bounds**2), dtype=int))
            run.release("sigma", core.covariance_uncentred(Xc[:, selected]))
        released = from_run(run, ("support", "sigma"), n=n, source="in memory")
        fitted = sparse_pca_from_released(released, p, K, s, diagnostic_rng(self.random_state) if self.diagnose_noise else None)
        self._record_features(X_raw, p)
        self.bounds_ = bounds
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.privacy_report_ = fitted.apply(self, run.report, stacklevel=4)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project rows, clipped to the public bounds, on the components."""
        self._check_fitted("bounds_", "components_")
        return project_rows(self, X, self.components_)

    @property
    def _n_features_out(self) -> int:
        """Output columns of ``transform`` (``get_feature_names_out``: dpsparsepca0, ...)."""
        return int(self.components_.shape[1])
