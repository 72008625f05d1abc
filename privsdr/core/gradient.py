"""The numerics of one-pass mini-batch SIR (DP-SIR Algorithms 2 and 3) and of sparse PCA.

For a batch S_t of m records, with projections clipped coordinate-wise, pi_i = clip(B^T x_i, -L, L):

    Kern = (1/m) sum_h mean_h(x) (sum_{i in h} pi_i)^T        (~ M_t B)
    A    = (1/m) sum_i x_i pi_i^T                              (~ Sigma_t B)
    G    = (1/m) sum_i pi_i pi_i^T - I_K                       (~ B^T Sigma_t B - I)
    U    = B - 2 eta (-Kern + lambda_pen A G)

With L >= max |B^T x_i| this is exactly B + 2 eta M_t B - 2 eta lambda_pen Sigma_t B (B^T Sigma_t B - I).
"""
from __future__ import annotations

import numpy as np

from .arrays import FloatArray, IntArray
from .slicing import slice_sums


def batch_terms(X: FloatArray, labels: IntArray, B: FloatArray, L: float, n_slices: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(Kern, A, G) of one batch; see the module docstring."""
    m = X.shape[0]
    pi = np.clip(X @ B, -L, L)
    S, counts = slice_sums(X, labels, n_slices)
    R, _ = slice_sums(pi, labels, n_slices)
    nonempty = counts > 0
    kern = (S[:, nonempty] / counts[nonempty]) @ R[:, nonempty].T / m
    A = X.T @ pi / m
    G = pi.T @ pi / m - np.eye(B.shape[1])
    return kern, A, G


def sir_update(B: FloatArray, kern: FloatArray, A: FloatArray, G: FloatArray, eta: float, lambda_pen: float) -> FloatArray:
    """U = B - 2 eta (-Kern + lambda_pen A G) (the algorithm's form; DP-SIR spec §2.4)."""
    return B - 2.0 * eta * (-kern + lambda_pen * A @ G)


def pca_update(X: FloatArray, B: FloatArray, L: float, eta: float, lambda_pen: float) -> FloatArray:
    """Sparse-PCA step: B + 2 eta (1/m) sum x_i pi_i^T - 2 eta lambda_pen B (B^T B - I)."""
    pi = np.clip(X @ B, -L, L)
    n: int = X.shape[0]
    return B + 2.0 * eta * (X.T @ pi / n) - 2.0 * eta * lambda_pen * B @ (B.T @ B - np.eye(B.shape[1]))


def project_columns(B: FloatArray, C: float) -> FloatArray:
    """Each column onto the L2 ball of radius C: b_k * min(1, C / ||b_k||) (of each matrix of a stack (..., p, K))."""
    norms: FloatArray = np.linalg.norm(B, axis=-2, keepdims=True)
    factor = np.ones_like(norms)
    over = norms > C
    factor[over] = C / norms[over]
    return B * factor


def eigen_floor(S: FloatArray, floor: float | FloatArray) -> FloatArray:
    """Symmetric S with its eigenvalues raised to at least ``floor`` (PD repair; post-processing). A stack of
    matrices (..., p, p) is repaired matrix by matrix, in one batched eigendecomposition (``floor``: one per matrix)."""
    Qt = np.swapaxes
    w, Q = np.linalg.eigh((S + Qt(S, -1, -2)) / 2.0)
    repaired: FloatArray = (Q * np.maximum(w, np.asarray(floor)[..., None])[..., None, :]) @ Qt(Q, -1, -2)
    return repaired


def batches(n: int, T: int, rng: np.random.Generator) -> list[IntArray]:
    """A random partition of range(n) into T batches of sizes floor(n/T) or ceil(n/T).

    The permutation is drawn independently of the data, so under replace-one each record stays in
    exactly one batch (DP-SIR §4.0 item 4).
    """
    return np.array_split(rng.permutation(n), T)
