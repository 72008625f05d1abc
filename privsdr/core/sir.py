"""Sliced inverse regression: the kernel, the classical estimator, and subspace metrics.

* Kernel (uncentred form, data assumed centred):  M = (1/n) sum_h S_h S_h^T / n_h  (empty slices add 0).
* Classical SIR (Li 1991): centre X, Sigma = X^T X / n, and the top-K generalized eigenvectors of
  (M, Sigma), normalised so that B^T Sigma B = I_K.
* Distance of subspaces: ||P_A - P_B||_F with P_A = A (A^T A)^+ A^T (DP-SIR §2.5; FSIR §7.2).
"""
from __future__ import annotations

import numpy as np
from scipy import linalg

from .arrays import FloatArray, IntArray
from .slicing import slice_sums


def sir_kernel(X: FloatArray, labels: IntArray, n_slices: int) -> FloatArray:
    """M = sum_h p_h m_h m_h^T = (1/n) sum_h S_h S_h^T / n_h for (already centred) X."""
    S, counts = slice_sums(X, labels, n_slices)
    nonempty = counts > 0
    scaled = S[:, nonempty] / np.sqrt(counts[nonempty])
    n: int = X.shape[0]
    M = scaled @ scaled.T / n
    return (M + M.T) / 2.0


def kernel_diagonal(X: FloatArray, labels: IntArray, n_slices: int) -> FloatArray:
    """diag(M) = (1/n) sum_h S_{h,j}^2 / n_h, without forming M (for screening)."""
    S, counts = slice_sums(X, labels, n_slices)
    nonempty = counts > 0
    n: int = X.shape[0]
    diagonal: FloatArray = (S[:, nonempty] ** 2 / counts[nonempty]).sum(axis=1) / n
    return diagonal


def covariance_uncentred(X: FloatArray) -> FloatArray:
    n: int = X.shape[0]
    s = X.T @ X / n
    return (s + s.T) / 2.0


def generalized_eigen(M: FloatArray, Sigma: FloatArray, K: int) -> tuple[FloatArray, FloatArray]:
    """Top-K generalized eigenpairs of (M, Sigma): (B with B^T Sigma B = I_K, eigenvalues descending)."""
    values, vectors = linalg.eigh(M, Sigma)
    order = np.argsort(values)[::-1]
    return vectors[:, order[:K]], values[order]


def whitened_eigen(M: FloatArray, Sigma: FloatArray, K: int) -> tuple[FloatArray, FloatArray]:
    """Same as ``generalized_eigen`` through R = Sigma^{-1/2}: B = R U_K (DP-SIR B.1 step 5). Stacks (..., p, p) of
    (M, Sigma) give stacks of (B, eigenvalues), in batched eigendecompositions."""
    w, Q = np.linalg.eigh(Sigma)
    R = (Q / np.sqrt(w)[..., None, :]) @ np.swapaxes(Q, -1, -2)
    values, U = np.linalg.eigh(R @ M @ R)
    order = np.argsort(values, axis=-1)[..., ::-1]
    U = np.take_along_axis(U, order[..., None, :K], axis=-1)
    return R @ U, np.take_along_axis(values, order, axis=-1)


def classical_sir(X: FloatArray, labels: IntArray, n_slices: int, K: int) -> tuple[FloatArray, FloatArray]:
    """Li (1991): centre, then the top-K generalized eigenvectors of (M, Sigma). Returns (B, eigenvalues)."""
    Xc = X - X.mean(axis=0)
    return generalized_eigen(sir_kernel(Xc, labels, n_slices), covariance_uncentred(Xc), K)


def projector(B: FloatArray) -> FloatArray:
    """P_B = B (B^T B)^+ B^T, the orthogonal projector onto span(B) (of each basis of a stack (..., p, K))."""
    B = np.atleast_2d(np.asarray(B, dtype=float))
    if B.ndim == 2 and B.shape[0] == 1 and B.shape[1] > 1:
        B = B.T
    Bt = np.swapaxes(B, -1, -2)
    return B @ np.linalg.pinv(Bt @ B) @ Bt


def projection_distance(A: FloatArray, B: FloatArray) -> float:
    """||P_A - P_B||_F: 0 for equal spans; sqrt(2K) at most for two K-dimensional spans."""
    return float(np.linalg.norm(projector(A) - projector(B)))


def projection_distances(A: FloatArray, B: FloatArray) -> FloatArray:
    """``projection_distance`` of each basis of a stack A (r, p, K) to B (p, K), in batched pseudo-inverses."""
    distances: FloatArray = np.linalg.norm(projector(np.asarray(A, dtype=float)) - projector(B), axis=(-2, -1))
    return distances


def orthonormalize(B: FloatArray) -> FloatArray:
    """B (B^T B)^{-1/2}, computed as U V^T from the thin SVD (pseudo-inverse when rank-deficient)."""
    U, s, Vt = np.linalg.svd(B, full_matrices=False)
    keep = s > s.max(initial=0.0) * 1e-12
    orthonormal: FloatArray = U[:, keep] @ Vt[keep, :]
    return orthonormal
