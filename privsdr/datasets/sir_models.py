"""The simulation models of DP-SIR (Xia, Zhang & Cai 2024, §5; spec dpsir_003.md §8.1).

    (M1) Y = b1^T X + e                  b1 = (mu1, mu2, 0, ...)
    (M2) Y = exp(b2^T X) + e             b2 = (mu3, mu4, 0, ...)
    (M3) Y = 25 (b3^T X) / (1 + (b4^T X + 1)^2) + 0.1 e
    (M4) Y = sin(b3^T X) exp(b4^T X + e)   b3 = (mu5, mu6, 0, ...), b4 = (mu7, mu8, 0, ...)

mu_1..mu_8 ~ Uniform(-10, 10), e ~ N(0, 1), X ~ N_p(0, Sigma) with Sigma_ii = 0.25,
Sigma_ij = 0.25 * 2^-|i-j| for |i-j| <= 2 (0 beyond), then clipped to [-1, 1] (spec §10 E2).
The true subspace is span(b1), span(b2), and span(e1, e2) for M3/M4 (K = 2).
"""
from __future__ import annotations

import functools

import numpy as np

MODELS = ("M1", "M2", "M3", "M4")
TRUE_K = {"M1": 1, "M2": 1, "M3": 2, "M4": 2}


def band_covariance(p: int) -> np.ndarray:
    lag = np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    return np.where(lag <= 2, 0.25 * 2.0 ** (-lag), 0.0)


@functools.lru_cache(maxsize=16)
def _band_cholesky(p: int) -> np.ndarray:
    """The 3 nonzero diagonals of the lower Cholesky factor of the band covariance (O(p))."""
    from scipy.linalg import cholesky_banded

    upper = np.zeros((3, p))
    upper[2] = 0.25
    upper[1, 1:] = 0.125
    upper[0, 2:] = 0.0625
    return cholesky_banded(upper, lower=False)  # rows: diagonal offsets 2, 1, 0 of U = L^T


def band_gaussian(n: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """n rows of N_p(0, band_covariance(p)) in O(np): X = Z L^T with L banded."""
    U = _band_cholesky(p)
    Z = rng.standard_normal((n, p))
    X = Z * U[2]
    X[:, 1:] += Z[:, :-1] * U[1, 1:]
    X[:, 2:] += Z[:, :-2] * U[0, 2:]
    return X


def sir_model(model: str, n: int, p: int, *, seed: int | np.random.Generator = 0, clip: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, B)`` for model M1..M4: X clipped to [-clip, clip], B a basis of the true subspace.

    mu is redrawn from the seed on every call (spec §10 E1: one draw per replication).
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {MODELS}")
    if p < 2:
        raise ValueError("the DP-SIR models need p >= 2")
    rng = np.random.default_rng(seed)
    mu = rng.uniform(-10.0, 10.0, size=8)
    X = np.clip(band_gaussian(n, p, rng), -clip, clip)
    e = rng.standard_normal(n)
    b = np.zeros((4, p))
    b[0, :2], b[1, :2], b[2, :2], b[3, :2] = mu[0:2], mu[2:4], mu[4:6], mu[6:8]
    if model == "M1":
        y, B = X @ b[0] + e, b[0][:, None]
    elif model == "M2":
        y, B = np.exp(np.clip(X @ b[1], -700, 700)) + e, b[1][:, None]
    elif model == "M3":
        y, B = 25.0 * (X @ b[2]) / (1.0 + (X @ b[3] + 1.0) ** 2) + 0.1 * e, b[2:4].T
    else:
        y, B = np.sin(X @ b[2]) * np.exp(np.clip(X @ b[3] + e, -700, 700)), b[2:4].T
    return X, y, B
