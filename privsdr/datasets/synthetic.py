"""Built-in synthetic data: no download, deterministic given a seed."""
from __future__ import annotations

import numpy as np


def gaussian_rows(n: int = 20_000, p: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, mean, covariance)``: n rows of N(mean, covariance) in p dimensions, a known truth.

    The covariance has a decaying spectrum and random eigenvectors; most rows have L2 norm < 3.
    """
    rng = np.random.default_rng(seed)
    mean = rng.uniform(-0.5, 0.5, size=p)
    q, _ = np.linalg.qr(rng.standard_normal((p, p)))
    spectrum = 0.5 / np.arange(1, p + 1)
    cov = (q * spectrum) @ q.T
    X = rng.multivariate_normal(mean, cov, size=n)
    return X, mean, cov
