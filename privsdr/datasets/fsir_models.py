"""The simulation models of FSIR (He, Zhang & Chen; spec fsir_000.md §7.1).

    I   X ~ N(0, I_p),    Y ~ Bernoulli(1 / (1 + exp(-b1^T X)))             (d = 1, binary, H = 2)
    II  X ~ N(0, S_AR),   Y = 1 / (0.5 + (b1^T X + 1)^2) + e                 (d = 1)
    III X ~ N(0, I_p),    Y = b1^T X / ((b2^T X)^3 + 1) + e                  (d = 2)
    IV  X ~ N(0, S_AR),   Y = sin(b1^T X) exp(b2^T X + e)                    (d = 2)
    V   X = G f(Y) + e,   f(Y) = (Y, Y^2), Y ~ N(0, 1), e ~ N(0, I_p)         (d = 2)

S_AR = 0.5^|i-j|. Low dimension (s = p): b1 ~ Unif(0.4, 0.8)^p normalised for I/II; b1 = 1_{1..5}/sqrt 5,
b2 = 1_{6..10}/sqrt 5 for III-V. High dimension: s = 5 (p <= 500) or 10, s0 = ceil(s/2),
b1 = 1_{1..s0}, b2 = 1_{s0+1..s} (the spec's fix of the overlapping printed supports), normalised.
"""
from __future__ import annotations

import math

import numpy as np

FSIR_MODELS = ("I", "II", "III", "IV", "V")
FSIR_D = {"I": 1, "II": 1, "III": 2, "IV": 2, "V": 2}


def fsir_coefficients(model: str, p: int, rng: np.random.Generator) -> np.ndarray:
    """The true basis (p x d) for a model; redrawn per call for I/II (spec §10: per replication)."""
    if model not in FSIR_MODELS:
        raise ValueError(f"unknown FSIR model {model!r}; expected one of {FSIR_MODELS}")
    s = p if p <= 10 else (5 if p <= 500 else 10)
    if model in ("I", "II"):
        b = np.zeros((p, 1))
        b[:s, 0] = rng.uniform(0.4, 0.8, size=s)
        return b / np.linalg.norm(b)
    s0 = math.ceil(s / 2) if p > 10 else 5
    B = np.zeros((p, 2))
    B[:s0, 0] = 1.0
    B[s0 : (s if p > 10 else 10), 1] = 1.0
    return B / np.linalg.norm(B, axis=0)


def _ar_gaussian(n: int, p: int, rng: np.random.Generator, rho: float = 0.5) -> np.ndarray:
    """N(0, rho^|i-j|) in O(np): an AR(1) recursion across the coordinates."""
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    scale = math.sqrt(1.0 - rho * rho)
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + scale * Z[:, j]
    return X


def fsir_model(model: str, n: int, p: int, *, seed: int | np.random.Generator = 0, B: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, B)`` for FSIR model I..V (one client's data, or a pooled sample)."""
    rng = np.random.default_rng(seed)
    B = fsir_coefficients(model, p, rng) if B is None else B
    if model == "V":
        y = rng.standard_normal(n)
        F = np.column_stack([y, y * y])
        X = F @ B.T + rng.standard_normal((n, p))
        return X, y, B
    X = _ar_gaussian(n, p, rng) if model in ("II", "IV") else rng.standard_normal((n, p))
    e = rng.standard_normal(n)
    u = X @ B[:, 0]
    if model == "I":
        y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-u))).astype(float)
    elif model == "II":
        y = 1.0 / (0.5 + (u + 1.0) ** 2) + e
    elif model == "III":
        y = u / ((X @ B[:, 1]) ** 3 + 1.0) + e
    else:
        y = np.sin(u) * np.exp(np.clip(X @ B[:, 1] + e, -50, 50))
    return X, y, B
