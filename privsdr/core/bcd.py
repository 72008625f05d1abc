"""Block coordinate descent for least squares on column blocks (numerics only).

Algorithm 1 of de Jong, Kamphorst & Kroes (2022; spec dpbcd_002.md §3.2), generalised to k blocks:
the remainder ``v = y - sum_i X_i beta_i`` passes from block to block; block i replaces its
coefficients by an exact block minimiser,

    beta~_i = (X_i^T X_i + lam I)^-1 (X_i^T v - lam beta_i),   beta_i += beta~_i,   v -= X_i beta~_i,

which is block Gauss-Seidel on the (ridge) normal equations: it converges to the pooled least
squares (or ridge) solution, per round at rate ~ rho^2 for two blocks (rho = largest canonical
correlation between their column spaces). The ``-lam beta_i`` term is what makes the ridge
version converge to (X^T X + lam I)^-1 X^T y (spec O-B5).

Also here: gamma_min of eq. (14) in closed form (spec §3.5), the utility bounds of §5, the abort
probability of §3.4, AAPD and R^2 (§7.2).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np

from .arrays import FloatArray


@attrs.frozen(eq=False)
class BCDResult:
    """Coefficients per block after ``n_rounds`` rounds, and the squared remainder after every step."""

    coef_blocks: tuple[FloatArray, ...]
    remainder: FloatArray
    sse_trace: FloatArray

    @property
    def coef(self) -> FloatArray:
        return np.concatenate(self.coef_blocks)


class BlockSolver:
    """One block's exact minimiser: thin QR for lam = 0 (spec §3.1: no explicit inverse), else a
    Cholesky factor of X^T X + lam I."""

    def __init__(self, X: FloatArray, ridge: float = 0.0) -> None:
        self.X = X
        self.ridge = float(ridge)
        if self.ridge == 0.0:
            self.Q, self.R = np.linalg.qr(X)
        else:
            self.chol = np.linalg.cholesky(X.T @ X + self.ridge * np.eye(X.shape[1]))

    def increment(self, v: FloatArray, beta: FloatArray) -> FloatArray:
        """argmin_d ||v - X d||^2 + lam ||beta + d||^2 (the block step in increment form)."""
        if self.ridge == 0.0:
            return solve_triangular(self.R, self.Q.T @ v)
        rhs = self.X.T @ v - self.ridge * beta
        return solve_cholesky(self.chol, rhs)


def solve_triangular(R: FloatArray, b: FloatArray) -> FloatArray:
    from scipy.linalg import solve_triangular as st

    x: FloatArray = st(R, b, lower=False)
    return x


def solve_cholesky(L: FloatArray, b: FloatArray) -> FloatArray:
    from scipy.linalg import solve_triangular as st

    x: FloatArray = st(L.T, st(L, b, lower=True), lower=False)
    return x


def bcd(blocks: Sequence[FloatArray], y: FloatArray, n_rounds: int, *, ridge: float = 0.0) -> BCDResult:
    """Algorithm 1 (remainder passing, block 0 first) for ``n_rounds`` rounds."""
    solvers = [BlockSolver(X, ridge) for X in blocks]
    betas = [np.zeros(X.shape[1]) for X in blocks]
    v = np.array(y, dtype=float, copy=True)
    trace = []
    for _ in range(n_rounds):
        for i, solver in enumerate(solvers):
            d = solver.increment(v, betas[i])
            betas[i] = betas[i] + d
            v = v - blocks[i] @ d
            trace.append(float(v @ v))
    return BCDResult(tuple(betas), v, np.asarray(trace))


def bcd_offset_form(blocks: Sequence[FloatArray], y: FloatArray, n_rounds: int, *, ridge: float = 0.0) -> FloatArray:
    """The same iteration written as the authors' code does (every block sees y): block i solves
    argmin ||(y - sum_{j != i} X_j beta_j) - X_i b||^2 + lam ||b||^2 (spec O-B6)."""
    betas: list[FloatArray] = [np.zeros(X.shape[1]) for X in blocks]
    for _ in range(n_rounds):
        for i, X in enumerate(blocks):
            target = y - sum(blocks[j] @ betas[j] for j in range(len(blocks)) if j != i)
            betas[i] = np.linalg.solve(X.T @ X + ridge * np.eye(X.shape[1]), X.T @ target)
    return np.concatenate(betas)


def local_residual(Q: FloatArray, v: FloatArray) -> FloatArray:
    """(I - P_X) v with P_X = Q Q^T (Q: orthonormal basis of col(X))."""
    return v - Q @ (Q.T @ v)


def gamma_min(X: FloatArray, v: FloatArray, *, zero_label: bool = False, tol: float = 1e-10) -> float:
    """Eq. (14) in closed form (spec §3.5): zero-filling row j of X (v kept) turns the fit into
    leave-one-out OLS with row j predicted as 0, so  SSE'_j = SSE - e_j^2/(1 - h_j) + v_j^2
    (``zero_label``: the remainder's row is zeroed too, drop the + v_j^2), and

        gamma_min = sqrt(max_j max(SSE'_j / SSE, SSE / SSE'_j))  over rows with h_j < 1.
    """
    Q, _ = np.linalg.qr(X)
    e = local_residual(Q, v)
    sse = float(e @ e)
    h = np.einsum("ij,ij->i", Q, Q)
    keep = h < 1.0 - tol  # rows whose zeroing drops the rank are skipped
    if not np.any(keep) or sse == 0.0:
        return math.inf if sse == 0.0 else 1.0
    loo = sse - e[keep] ** 2 / (1.0 - h[keep])
    sse_j = loo if zero_label else loo + v[keep] ** 2
    sse_j = np.maximum(sse_j, 0.0)
    with np.errstate(divide="ignore"):
        ratios = np.maximum(sse_j / sse, np.where(sse_j > 0, sse / sse_j, np.inf))
    return float(math.sqrt(max(1.0, float(ratios.max()))))


def largest_canonical_correlation(Xa: FloatArray, Xb: FloatArray) -> float:
    """rho: the cosine of the smallest principal angle between col(Xa) and col(Xb)."""
    Qa, _ = np.linalg.qr(Xa)
    Qb, _ = np.linalg.qr(Xb)
    return float(np.linalg.svd(Qa.T @ Qb, compute_uv=False).max())


def paper_utility_bound(gamma: float, n_parties: int, n_rounds: int, r2: float) -> float:
    """The paper's Theorem 1 bound 1 - gamma^(2kT) (1 - R^2): informational only, it is NOT a
    theorem (spec §5.3 gives a counterexample)."""
    return 1.0 - gamma ** (2 * n_parties * n_rounds) * (1.0 - r2)


def provable_sse_bound(gamma: float, n_steps: int, first_residual_sse: float) -> float:
    """What does hold without an abort (spec §5.3): ||v_final||^2 <= gamma^(2 kT) ||(I - P_1) y||^2."""
    return gamma ** (2 * n_steps) * first_residual_sse


def abort_probability(eps_step: float, gamma: float, m: int, n: int) -> float:
    """P(Z^2 B > eps_step (gamma^2 - 1) / gamma^2), Z ~ N(0,1), B ~ Beta(m/2, (n-m)/2) independent:
    the per-step abort probability of the post-check, the same for every data set (spec §3.4)."""
    from scipy import integrate, stats

    c = eps_step * (gamma * gamma - 1.0) / (gamma * gamma)
    beta = stats.beta(m / 2.0, (n - m) / 2.0)

    def integrand(b: float) -> float:
        return 2.0 * stats.norm.sf(math.sqrt(c / b)) * beta.pdf(b) if b > 0 else 0.0

    hi = min(1.0, beta.ppf(1 - 1e-14))
    value, _ = integrate.quad(integrand, 0.0, hi, limit=200, points=[beta.mean()])
    return float(value)


def aapd(estimate: FloatArray, reference: FloatArray) -> FloatArray:
    """Elementwise absolute proportional distance |b* - b| / |b| (spec §7.2, A13)."""
    return np.abs(np.asarray(estimate, dtype=float) - reference) / np.abs(reference)


def r_squared(y: FloatArray, prediction: FloatArray, kind: str = "ss") -> float:
    """``ss``: 1 - SS_res/SS_tot (default, A16); ``centered``: 1 - var(y - yhat)/var(y) (the
    synthetic experiments' code); ``var_ratio``: var(yhat)/var(y) (the repo's 'centralized R^2')."""
    y = np.asarray(y, dtype=float)
    prediction = np.asarray(prediction, dtype=float)
    if kind == "ss":
        return float(1.0 - np.sum((y - prediction) ** 2) / np.sum((y - y.mean()) ** 2))
    if kind == "centered":
        return float(1.0 - np.var(y - prediction) / np.var(y))
    if kind == "var_ratio":
        return float(np.var(prediction) / np.var(y))
    raise ValueError(f"unknown R^2 kind {kind!r}; expected ss, centered or var_ratio")
