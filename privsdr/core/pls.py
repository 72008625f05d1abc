"""PLS1 regression (one response): NIPALS on the data and the kernel form on X^T X and X^T y.

Conventions (edPLS spec ``edpls_001.md`` §3.1, Algorithm B): unit-norm weights ``w`` and unit-norm
scores ``t``, so per component a (E, f the deflated X, y)::

    w = E^T f / ||E^T f||,   t = E w / ||E w||,   p = E^T t,   c = f^T t,
    E <- E - t p^T,          f <- f - t c,        b = W (P^T W)^{-1} c.

``b`` equals scikit-learn's ``PLSRegression(scale=False).coef_``; its scores are not unit-norm, so
its ``x_loadings_[:, a] = p_a / ||E w_a||`` and ``y_loadings_[a] = c_a / ||E w_a||``.

The kernel form (Dayal & MacGregor 1997, algorithm 2; Lindgren et al. 1993) needs only
``S = X^T X`` and ``u = X^T y`` of the centred data: with rotations ``r_a = w_a - sum_{j<a}
(p_j^T w_a / ||t_j||) r_j`` (so that ``t_a = X r_a``), ``tt = r_a^T S r_a``, ``p_a = S r_a / sqrt(tt)``,
``c_a = r_a^T u / sqrt(tt)`` and the deflation ``u <- u - p_a c_a``; ``b = sum_a r_a c_a / sqrt(tt_a)``.
It costs one m x m matrix-vector product per component after the single pass that forms S.

Numerics only (numpy); no privacy code.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .arrays import FloatArray


class PLS1Fit(NamedTuple):
    """A fitted PLS1 model in the unit-score convention (W, T orthonormal; P^T W upper triangular)."""

    weights: FloatArray  #: W, m x A, unit columns
    scores: FloatArray  #: T, n x A, orthonormal columns
    loadings: FloatArray  #: P, m x A
    y_loadings: FloatArray  #: c, A
    coef: FloatArray  #: b = W (P^T W)^{-1} c, m
    x_mean: FloatArray  #: column means used for centring (zeros without centring)
    y_mean: float


class KernelPLS1(NamedTuple):
    """PLS1 from (X^T X, X^T y) in the unit-score convention, with the whole coefficient path."""

    weights: FloatArray  #: W, m x A'
    rotations: FloatArray  #: R, m x A' (non-unit scores T = X R)
    loadings: FloatArray  #: P, m x A'
    y_loadings: FloatArray  #: c, A'
    score_norms: FloatArray  #: ||E_a w_a|| = sqrt(r_a^T S r_a), A'
    coef_path: FloatArray  #: m x A': column a-1 is b with a components

    @property
    def n_components(self) -> int:
        """A' <= the requested A: the path stops where the statistics admit no further component."""
        return int(self.weights.shape[1])

    @property
    def coef(self) -> FloatArray:
        return self.coef_path[:, -1]


# -- the steps of one NIPALS component (shared with the private variants) ------------------------------
def pls1_weight(E: FloatArray, f: FloatArray) -> FloatArray:
    """Unit weight w = E^T f / ||E^T f|| (Algorithm B, step B2)."""
    v = E.T @ f
    return v / _norm_or_fail(v, "E^T f")


def pls1_score(E: FloatArray, w: FloatArray) -> FloatArray:
    """Unit score t = E w / ||E w|| (step B3)."""
    t = E @ w
    return t / _norm_or_fail(t, "E w")


def pls1_loadings(E: FloatArray, f: FloatArray, t: FloatArray) -> tuple[FloatArray, float]:
    """X- and y-loadings p = E^T t / (t^T t), c = f^T t / (t^T t) (steps B4, B5)."""
    tt = float(t @ t)
    return E.T @ t / tt, float(f @ t) / tt


def deflate(E: FloatArray, f: FloatArray, t: FloatArray, p: FloatArray, c: float) -> tuple[FloatArray, FloatArray]:
    """E - t p^T and f - t c (step B6)."""
    return E - np.outer(t, p), f - t * c


def regression_vector(W: FloatArray, P: FloatArray, c: FloatArray) -> tuple[FloatArray, float]:
    """b = W (P^T W)^{-1} c, and cond(P^T W). Falls back to least squares when P^T W is singular (spec A16)."""
    M = P.T @ W
    cond = float(np.linalg.cond(M)) if M.size else 1.0
    try:
        if not np.isfinite(cond) or cond > 1e14:
            raise np.linalg.LinAlgError("ill-conditioned")
        z = np.linalg.solve(M, c)
    except np.linalg.LinAlgError:
        z = np.linalg.lstsq(M, c, rcond=None)[0]
    return W @ z, cond


def _norm_or_fail(v: FloatArray, what: str) -> float:
    norm = float(np.linalg.norm(v))
    if not norm > 0:
        raise ValueError(f"{what} is zero: no further PLS component exists (too many components for this data)")
    return norm


# -- Algorithm B ---------------------------------------------------------------------------------------
def nipals_pls1(X: FloatArray, y: FloatArray, n_components: int, *, center: bool = True) -> PLS1Fit:
    """PLS1 by NIPALS with unit-norm scores (spec Algorithm B). ``X`` n x m, ``y`` length n."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    n, m = X.shape
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} values for {n} rows")
    x_mean = X.mean(axis=0) if center else np.zeros(m)
    y_mean = float(y.mean()) if center else 0.0
    E, f = X - x_mean, y - y_mean
    A = int(n_components)
    W, T, P, c = np.zeros((m, A)), np.zeros((n, A)), np.zeros((m, A)), np.zeros(A)
    for a in range(A):
        w = pls1_weight(E, f)
        t = pls1_score(E, w)
        p, ca = pls1_loadings(E, f, t)
        E, f = deflate(E, f, t, p, ca)
        W[:, a], T[:, a], P[:, a], c[a] = w, t, p, ca
    b, _ = regression_vector(W, P, c)
    return PLS1Fit(W, T, P, c, b, x_mean, y_mean)


def predict(coef: FloatArray, x_mean: FloatArray, y_mean: float, X: FloatArray) -> FloatArray:
    """y_hat = (x - x_mean)^T b + y_mean."""
    return (np.asarray(X, dtype=float) - x_mean) @ coef + y_mean


# -- kernel form ---------------------------------------------------------------------------------------
def kernel_pls1(XtX: FloatArray, Xty: FloatArray, n_components: int, *, rtol: float = 1e-12) -> KernelPLS1:
    """PLS1 from S = X^T X and u = X^T y of centred data (Dayal & MacGregor 1997, algorithm 2).

    Stops early (fewer columns than requested) when the remaining covariance ``u`` vanishes or
    ``r^T S r <= rtol * trace(S) * ||r||^2`` (no variance left along the next direction, e.g. a
    noisy S that is not positive definite there).
    """
    S = np.asarray(XtX, dtype=float)
    u = np.asarray(Xty, dtype=float).ravel().copy()
    m = S.shape[0]
    if S.shape != (m, m) or u.shape[0] != m:
        raise ValueError(f"need an m x m matrix and an m-vector, got {S.shape} and {u.shape}")
    A = int(n_components)
    scale = max(float(np.trace(S)), float(np.abs(S).max(initial=0.0)), 1e-300)
    u_scale = max(float(np.linalg.norm(u)), 1e-300)
    W, R, P = np.zeros((m, A)), np.zeros((m, A)), np.zeros((m, A))
    c, norms, path = np.zeros(A), np.zeros(A), np.zeros((m, A))
    b = np.zeros(m)
    done = 0
    for a in range(A):
        unorm = float(np.linalg.norm(u))
        if not unorm > rtol * u_scale:
            break
        w = u / unorm
        r = w.copy()
        for j in range(a):
            r -= (P[:, j] @ w) / norms[j] * R[:, j]
        Sr = S @ r
        tt = float(r @ Sr)
        if not tt > rtol * scale * float(r @ r):
            break
        tn = np.sqrt(tt)
        p = Sr / tn
        ca = float(r @ u) / tn
        u = u - p * ca
        b = b + r * (ca / tn)
        W[:, a], R[:, a], P[:, a], c[a], norms[a], path[:, a] = w, r, p, ca, tn, b
        done = a + 1
    return KernelPLS1(W[:, :done], R[:, :done], P[:, :done], c[:done], norms[:done], path[:, :done])


def centred_moments(X: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """(X_c^T X_c, X_c^T y_c, x_mean, y_mean) with column-mean centring: the kernel form's input."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    x_mean, y_mean = X.mean(axis=0), float(y.mean())
    Xc = X - x_mean
    S = Xc.T @ Xc
    return (S + S.T) / 2.0, Xc.T @ (y - y_mean), x_mean, y_mean
