"""DUAL-LOCO and the naive block ridge: PRIDE's noise-free references (numerics only).

K parties hold column blocks X_1..X_K of the same n rows and all hold y. With sketches Z_j = X_j Pi_j
(``SRHT``; Pi_j drawn from ``party_sketch``), party k fits ridge on [X_k, Z_j (j != k)] and keeps its
raw coefficients (DUAL-LOCO, Heinze et al. 2016; PRIDE with sigma = 0, spec pride_004.md A5); the
naive block ridge fits ridge on X_k alone (NB, A6/G27). ``alpha`` is the ridge alpha of
``ridge.ridge`` (n lam for the half squared loss).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .arrays import FloatArray
from .ridge import local_ridge, ridge
from .sketch import SRHT


def party_sketch(n_features: int, sketch_dim: int, seed: int, index: int) -> SRHT:
    """Party ``index``'s SRHT from a public seed: ``SRHT.draw`` on SeedSequence([seed, index])."""
    return SRHT.draw(n_features, sketch_dim, np.random.default_rng(np.random.SeedSequence([int(seed), int(index)])))


def sketches(blocks: Sequence[FloatArray], sketch_dims: Sequence[int], seed: int) -> list[FloatArray]:
    """The noise-free sketches X_j Pi_j of every block."""
    return [party_sketch(b.shape[1], m, seed, j).apply(b) for j, (b, m) in enumerate(zip(blocks, sketch_dims, strict=True))]


def dual_loco(blocks: Sequence[FloatArray], y: FloatArray, alpha: float, sketched: Sequence[FloatArray]) -> list[FloatArray]:
    """Each party's raw coefficients from ridge on [X_k, the others' sketches] (the sketches may be noisy)."""
    out = []
    for k, Xk in enumerate(blocks):
        Z = np.hstack([sketched[j] for j in range(len(blocks)) if j != k]) if len(blocks) > 1 else np.zeros((len(y), 0))
        out.append(local_ridge(Xk, Z, y, alpha).coef)
    return out


def naive_block_ridge(blocks: Sequence[FloatArray], y: FloatArray, alpha: float) -> list[FloatArray]:
    """Each party's ridge on its own block only (NB)."""
    return [ridge(Xk, y, alpha) for Xk in blocks]


def split_columns(X: FloatArray, n_parties: int) -> list[FloatArray]:
    """Contiguous, nearly equal column blocks (the paper's tau = p / K)."""
    return [np.asarray(b) for b in np.array_split(np.asarray(X, dtype=float), n_parties, axis=1)]



def pride_error_bound(beta_norm: float, *, n_parties: int, sketch_dim: int, rank: int, sigma: float, d_min: float,
                      C: float, xi: float) -> tuple[float, float]:
    """Theorem 2's bound on ||beta_hat - beta*||_2, as (term i, term ii) (spec pride_004.md §5; informational only:
    the constants C and xi are not given in the paper and its assumptions fail on all three data sets, G15).

    rho = C sqrt(r log(2r/xi) / tau_K) with tau_K = (K - 1) tau_subs;
    (i) = sqrt(K) rho / (1 - 2 rho) ||beta*||;  (ii) = (i) (sigma / d_min) (2 + sigma (tau_K + tau_K^2) / d_min).
    Both are infinite when rho >= 1/2 (the bound says nothing there).
    """
    tau_k = (n_parties - 1) * sketch_dim
    if tau_k < 1 or rank < 1 or not (C > 0 and 0 < xi and d_min > 0 and sigma >= 0):
        raise ValueError("need (K - 1) tau_subs >= 1, rank >= 1, C > 0, xi > 0, d_min > 0, sigma >= 0")
    rho = C * np.sqrt(rank * np.log(2 * rank / xi) / tau_k)
    if rho >= 0.5:
        return float("inf"), float("inf")
    first = float(np.sqrt(n_parties) * rho / (1 - 2 * rho) * beta_norm)
    return first, float(first * (sigma / d_min) * (2 + sigma * (tau_k + tau_k**2) / d_min))
