"""Clipping and moments (numerics only)."""
from __future__ import annotations

import numpy as np

from .arrays import FloatArray


def clip_rows_l2(X: FloatArray, bound: float) -> FloatArray:
    """Scale each row down to L2 norm at most ``bound``: x * min(1, bound / ||x||)."""
    norms: FloatArray = np.linalg.norm(X, axis=1)
    factor = np.ones_like(norms)
    over = norms > bound
    factor[over] = bound / norms[over]
    return X * factor[:, None]


def mean(X: FloatArray) -> FloatArray:
    mu: FloatArray = X.mean(axis=0)
    return mu


def second_moment(X: FloatArray) -> FloatArray:
    """(1/n) X^T X, symmetrised."""
    n: int = X.shape[0]
    s = X.T @ X / n
    return (s + s.T) / 2.0


def nearest_psd(S: FloatArray) -> FloatArray:
    """Project a symmetric matrix onto the PSD cone (eigenvalues clipped at 0).

    A matrix that is positive definite already is its own projection: a Cholesky factorisation (several times
    cheaper than ``eigh``) that succeeds says so, and the symmetrised matrix is returned as it is (the eigenvector
    reconstruction would give it back up to rounding in the last bits)."""
    sym: FloatArray = (S + S.T) / 2.0
    try:
        if not np.isfinite(sym).all():  # LAPACK's Cholesky need not stop on a NaN: the eigh path as before
            raise np.linalg.LinAlgError
        np.linalg.cholesky(sym)
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(sym)
        psd: FloatArray = (V * np.maximum(w, 0.0)) @ V.T
        return psd
    return sym
