"""Clipping and moments (numerics only)."""
from __future__ import annotations

import numpy as np


def clip_rows_l2(X: np.ndarray, bound: float) -> np.ndarray:
    """Scale each row down to L2 norm at most ``bound``: x * min(1, bound / ||x||)."""
    norms = np.linalg.norm(X, axis=1)
    factor = np.ones_like(norms)
    over = norms > bound
    factor[over] = bound / norms[over]
    return X * factor[:, None]


def mean(X: np.ndarray) -> np.ndarray:
    return X.mean(axis=0)


def second_moment(X: np.ndarray) -> np.ndarray:
    """(1/n) X^T X, symmetrised."""
    s = X.T @ X / X.shape[0]
    return (s + s.T) / 2.0


def nearest_psd(S: np.ndarray) -> np.ndarray:
    """Project a symmetric matrix onto the PSD cone (eigenvalues clipped at 0)."""
    w, V = np.linalg.eigh((S + S.T) / 2.0)
    return (V * np.maximum(w, 0.0)) @ V.T
