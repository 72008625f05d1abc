"""Ridge regression on a party's local design [X_k, Z] and its cross-validation paths (numerics only).

Objective (spec pride_004.md Eq. 1, half squared loss, G1): min_b (1/n) sum_i (1/2)(y_i - x_i^T b)^2
+ (lam/2)||b||^2, so b = (X^T X + alpha I)^-1 X^T y with alpha = n lam (``loss_scale="half"``), or
alpha = n lam / 2 for the paper's Eq. (1) with the full squared loss (``"paper_eq1"``). scikit-learn's
``Ridge(alpha)`` solves the same system. Every solve uses the smaller of the primal (d x d) and
dual (n x n) systems: b = X^T (X X^T + alpha I)^-1 y.

PRIDE's local estimator (A4): on Xbar = [X_k, Z] (raw block, then the other parties' released
sketches), b = (Xbar^T Xbar + alpha I)^-1 Xbar^T y; party k keeps the first tau entries (its raw
features). Oracles: Z with no columns gives the naive block ridge (NB); Z = noise-free sketches gives
DUAL-LOCO; with full-width SRHTs (tau_subs = tau') it equals ridge on the pooled X (spec oracle 9).

Errors-in-variables correction (A9.2, beyond the paper; Loh & Wainwright 2012): Z = X_o Pi + W with
W ~ N(0, s^2) entrywise gives E[Z^T Z] = Pi^T X_o^T X_o Pi + n s^2 I, so the corrected estimator
uses Gamma = Xbar^T Xbar - n diag(0_tau, s^2) projected onto the PSD cone (eigenvalues clipped at 0),
b = (Gamma_+ + alpha I)^-1 Xbar^T y.

Cross-validation paths reuse one eigendecomposition per fold for the whole lambda grid and return
held-out predictions of the whole local design (local CV: post-processing of the party's view) and
of the raw block alone (the party's share of a global prediction, for global CV).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np
from scipy.linalg import cho_factor, cho_solve, eigh

from .arrays import FloatArray, IntArray

LOSS_SCALES = ("half", "paper_eq1")


def ridge_alpha(lam: float, n: int, loss_scale: str = "half") -> float:
    """alpha of (X^T X + alpha I) b = X^T y for lambda of Eq. (1): n lam (half loss) or n lam / 2."""
    if loss_scale not in LOSS_SCALES:
        raise ValueError(f"loss_scale must be one of {LOSS_SCALES}, got {loss_scale!r}")
    return n * lam if loss_scale == "half" else n * lam / 2.0


def _pos_solve(A: FloatArray, b: FloatArray) -> FloatArray:
    x: FloatArray = cho_solve(cho_factor(A, lower=True, check_finite=False), b, check_finite=False)
    return x


def ridge(X: FloatArray, y: FloatArray, alpha: float) -> FloatArray:
    """(X^T X + alpha I)^-1 X^T y (alpha > 0) by the smaller of the primal and dual systems."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if d == 0:
        return np.zeros(0)
    if d <= n:
        return _pos_solve(X.T @ X + alpha * np.eye(d), X.T @ y)
    return X.T @ _pos_solve(X @ X.T + alpha * np.eye(n), y)


def _corrected_gram(Xbar: FloatArray, n_raw: int, noise_var: FloatArray) -> tuple[FloatArray, FloatArray, int]:
    """Eigen-decomposition of Gamma = Xbar^T Xbar - n diag(0, s^2), eigenvalues clipped at 0."""
    G = Xbar.T @ Xbar
    idx = np.arange(n_raw, Xbar.shape[1])
    G[idx, idx] -= Xbar.shape[0] * noise_var
    e, U = eigh(G, check_finite=False)
    clipped = int(np.count_nonzero(e < 0))
    return np.maximum(e, 0.0), U, clipped


@attrs.frozen(eq=False)
class LocalFit:
    """One local fit: ``coef`` of the raw block, ``sketch_coef`` of the random features, and for the
    corrected estimator how many eigenvalues of the corrected Gram were clipped at 0."""

    coef: FloatArray
    sketch_coef: FloatArray
    alpha: float
    clipped_eigenvalues: int = 0


class LocalDesign:
    """A party's local design Xbar = [Xk, Z] with its kernels computed once (n x n, when the design is
    wider than tall) and shared by the CV path, the lambda grid's scale and the final fit."""

    def __init__(self, Xk: FloatArray, Z: FloatArray) -> None:
        self.Xk = np.asarray(Xk, dtype=float)
        n = self.Xk.shape[0]
        self.Z = np.asarray(Z, dtype=float).reshape(n, -1)
        self.Xbar = np.hstack([self.Xk, self.Z])
        self._kernels: tuple[FloatArray, FloatArray] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.Xbar.shape

    @property
    def n_raw(self) -> int:
        return int(self.Xk.shape[1])

    def kernels(self) -> tuple[FloatArray, FloatArray]:
        """(Xk Xk^T, Xbar Xbar^T)."""
        if self._kernels is None:
            K_raw = self.Xk @ self.Xk.T
            self._kernels = (K_raw, K_raw + self.Z @ self.Z.T)
        return self._kernels

    def fit(self, y: FloatArray, alpha: float, noise_var: FloatArray | None = None) -> LocalFit:
        """Ridge on Xbar; ``noise_var`` (one variance per column of Z) selects the corrected estimator."""
        y = np.asarray(y, dtype=float)
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        n, d = self.shape
        tau = self.n_raw
        clipped = 0
        if noise_var is not None and self.Z.shape[1] > 0:
            e, U, clipped = _corrected_gram(self.Xbar, tau, np.broadcast_to(np.asarray(noise_var, dtype=float), (self.Z.shape[1],)))
            b = U @ ((U.T @ (self.Xbar.T @ y)) / (e + alpha))
        elif d <= n:
            b = _pos_solve(self.Xbar.T @ self.Xbar + alpha * np.eye(d), self.Xbar.T @ y)
        else:
            a = _pos_solve(self.kernels()[1] + alpha * np.eye(n), y)
            b = self.Xbar.T @ a
        return LocalFit(b[:tau], b[tau:], float(alpha), clipped)

    def top_eigenvalue(self) -> float:
        """The largest eigenvalue of Xbar^T Xbar / n (Lanczos from a fixed start vector: deterministic)."""
        from scipy.sparse.linalg import eigsh

        n, d = self.shape
        G = self.Xbar.T @ self.Xbar if d <= n else self.kernels()[1]
        if G.shape[0] <= 2:
            return float(np.linalg.eigvalsh(G)[-1]) / n
        top = eigsh(G, k=1, which="LA", v0=np.ones(G.shape[0]), tol=1e-8, return_eigenvectors=False)
        return float(top[0]) / n

    def cv_path(self, y: FloatArray, lambdas: Sequence[float] | FloatArray, folds: Sequence[IntArray], loss_scale: str = "half",
                noise_var: FloatArray | None = None) -> CVPath:
        """Held-out predictions of the local ridge for every lambda (one eigh per fold).

        Each fold's fit uses alpha = ridge_alpha(lam, n_train). The dual (kernel) form is used when the
        local design is wider than the training fold and no correction is asked for; else the primal form.
        """
        n, d = self.shape
        tau = self.n_raw
        y = np.asarray(y, dtype=float)
        lams = np.asarray(lambdas, dtype=float)
        if lams.ndim != 1 or lams.size == 0 or not np.all(np.isfinite(lams)) or np.any(lams <= 0):
            raise ValueError("lambdas must be a non-empty 1-D array of positive numbers")
        full = np.empty((lams.size, n))
        raw = np.empty((lams.size, n))
        corrected = noise_var is not None and self.Z.shape[1] > 0
        dual = not corrected and d > n - min(len(f) for f in folds)
        for fold in folds:
            train = np.setdiff1d(np.arange(n), fold, assume_unique=True)
            alphas = np.array([ridge_alpha(lam, len(train), loss_scale) for lam in lams])
            if dual:
                K_raw, K = self.kernels()
                e, U = eigh(K[np.ix_(train, train)], check_finite=False)
                A = U @ ((U.T @ y[train])[:, None] / (np.maximum(e, 0.0)[:, None] + alphas[None, :]))  # dual coefficients per lambda
                full[:, fold] = (K[np.ix_(fold, train)] @ A).T
                raw[:, fold] = (K_raw[np.ix_(fold, train)] @ A).T
            else:
                Xt = self.Xbar[train]
                if corrected:
                    e, U, _ = _corrected_gram(Xt, tau, np.broadcast_to(np.asarray(noise_var, dtype=float), (self.Z.shape[1],)))
                else:
                    e, U = eigh(Xt.T @ Xt, check_finite=False)
                    e = np.maximum(e, 0.0)
                B = U @ ((U.T @ (Xt.T @ y[train]))[:, None] / (e[:, None] + alphas[None, :]))
                full[:, fold] = (self.Xbar[fold] @ B).T
                raw[:, fold] = (self.Xk[fold] @ B[:tau]).T
        return CVPath(lams, full, raw)


def local_ridge(Xk: FloatArray, Z: FloatArray, y: FloatArray, alpha: float, noise_var: FloatArray | None = None) -> LocalFit:
    """Ridge on Xbar = [Xk, Z]; ``noise_var`` (one variance per column of Z) selects the corrected estimator."""
    return LocalDesign(Xk, Z).fit(y, alpha, noise_var)


def kfold(n: int, n_folds: int, seed: int = 0) -> tuple[IntArray, ...]:
    """A public, data-independent split of range(n) into ``n_folds`` folds (a seeded permutation)."""
    if not 2 <= n_folds <= n:
        raise ValueError(f"need 2 <= n_folds <= n = {n}, got {n_folds}")
    order = np.random.default_rng(seed).permutation(n)
    return tuple(np.sort(part) for part in np.array_split(order, n_folds))


@attrs.frozen(eq=False)
class CVPath:
    """Held-out predictions over a lambda grid: ``full[l, i]`` = xbar_i^T b^(-fold(i))(lam_l) and
    ``raw[l, i]`` = x_{i,k}^T b_raw^(-fold(i))(lam_l)."""

    lambdas: FloatArray
    full: FloatArray
    raw: FloatArray

    def mse(self, y: FloatArray) -> FloatArray:
        per_lambda: FloatArray = np.mean((self.full - np.asarray(y)[None, :]) ** 2, axis=1)
        return per_lambda


def cv_path(Xk: FloatArray, Z: FloatArray, y: FloatArray, lambdas: Sequence[float] | FloatArray, folds: Sequence[IntArray],
            loss_scale: str = "half", noise_var: FloatArray | None = None) -> CVPath:
    """``LocalDesign(Xk, Z).cv_path(...)``."""
    return LocalDesign(Xk, Z).cv_path(y, lambdas, folds, loss_scale, noise_var)


def default_lambdas(scale: float, num: int = 31) -> FloatArray:
    """A log grid of ``num`` values over [1e-4, 1e2] x scale (spec A7: scale = the largest eigenvalue
    of Xbar^T Xbar / n, the natural ridge scale)."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"the grid's scale must be positive, got {scale}")
    return np.logspace(-4, 2, num) * scale


def top_eigenvalue(Xk: FloatArray, Z: FloatArray) -> float:
    """The largest eigenvalue of Xbar^T Xbar / n for Xbar = [Xk, Z]."""
    return LocalDesign(Xk, Z).top_eigenvalue()
