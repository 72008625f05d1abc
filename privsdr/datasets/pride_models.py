"""Data of the PRIDE paper (Heinze-Deml, McWilliams & Meinshausen; spec pride_004.md §7.3).

* ``pride_simulation``: §7.3 (a), the spec's reconstruction (G19, checked against Table 1): a stationary
  Gaussian random field with unit variance and Gaussian covariance exp(-d^2 / (2 l^2)), l = 8 grid
  units, on a 20 x 20 grid (one feature per grid point); block C = grid rows 0-9 (row-major), block X =
  rows 10-19; 20 confounding pairs (i_x, j_c), each index drawn without replacement, X^{i_x} += C^{j_c};
  a tiny i.i.d. nugget (variance 2e-13, the paper's d_min ~ 3.7e-6 suggests numerical jitter); every
  column standardised on all n rows; beta = V_20 c with V_20 the top-20 right singular vectors of the
  standardised [X, C] and c ~ N(0, I_20); y = [X, C] beta + eta with sd(eta) set so that
  SNR = ||[X, C] beta||^2 / ||eta||^2 = 0.75; a random split into n_train = 800 and n_test = 200.
* ``climate_standin``: NOT the climate data (CMIP5 GISS control runs, not obtainable here): a synthetic
  stand-in of the same shape, n = 849 + 213 rows, p = 10,368 = 72 x 144 grid points, K = 4 blocks of
  2,592 columns: a mixture of two separable Gaussian-covariance fields on the 72 x 144 grid (weights
  0.6 at l = 40 and 0.398 at l = 6) plus white noise (0.002), standardised, beta along the top 20 PCs,
  SNR 0.75. The weights were chosen so that its Table 1 statistics come near the climate row (ours at
  seed 0: max theta 8.1, d_min 3.6, r_eff 3.6, J_80 32, J_90 64; the paper: 8.51, 3.32, 4.03, 29, 54).
  For scaling measurements only.

The Gaussian kernel on a grid is separable, K = K_rows (x) K_cols, so a field is A_r G A_c^T with
A = K^(1/2) and G i.i.d. N(0, 1): no p x p factorisation is needed.
"""
from __future__ import annotations

import attrs
import numpy as np


@attrs.frozen(eq=False)
class PRIDEData:
    """Train/test design (standardised columns), response, the true coefficients and the blocks."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    beta: np.ndarray
    block_names: tuple[str, ...]
    widths: tuple[int, ...]
    noise_sd: float

    def blocks(self, X: np.ndarray) -> list[np.ndarray]:
        """``X`` split into the parties' column blocks."""
        return np.split(X, np.cumsum(self.widths)[:-1], axis=1)

    def block_slices(self) -> dict[str, slice]:
        edges = np.concatenate([[0], np.cumsum(self.widths)])
        return {name: slice(int(a), int(b)) for name, a, b in zip(self.block_names, edges[:-1], edges[1:], strict=True)}


def _sqrt_psd(K: np.ndarray) -> np.ndarray:
    e, V = np.linalg.eigh(K)
    return (V * np.sqrt(np.clip(e, 0.0, None))) @ V.T


def gaussian_field(n: int, rows: int, cols: int, length_scale: float, rng: np.random.Generator) -> np.ndarray:
    """n realisations (n x rows*cols, row-major) of a unit-variance stationary field with covariance
    exp(-d^2 / (2 l^2)) on a rows x cols grid."""
    def factor(m: int) -> np.ndarray:
        d = np.arange(m)[:, None] - np.arange(m)[None, :]
        return _sqrt_psd(np.exp(-(d * d) / (2.0 * length_scale**2)))

    Ar, Ac = factor(rows), factor(cols)
    G = rng.standard_normal((n, rows, cols))
    return np.einsum("ij,njk,lk->nil", Ar, G, Ac, optimize=True).reshape(n, rows * cols)


def _signal(X: np.ndarray, n_pcs: int, snr: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    n, p = X.shape
    if p <= n:
        _, _, Vt = np.linalg.svd(X, full_matrices=False)
        V = Vt[:n_pcs].T
    else:  # through the n x n Gram: V = X^T U / s
        e, U = np.linalg.eigh(X @ X.T)
        top = np.argsort(e)[::-1][:n_pcs]
        V = X.T @ U[:, top] / np.sqrt(e[top])
    beta = V @ rng.standard_normal(n_pcs)
    mean = X @ beta
    sd = float(np.sqrt(np.sum(mean**2) / (snr * n)))
    return beta, mean + sd * rng.standard_normal(n), sd


def _standardise(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _split(X: np.ndarray, y: np.ndarray, n_train: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    order = rng.permutation(len(y))
    train, test = np.sort(order[:n_train]), np.sort(order[n_train:])
    return X[train], y[train], X[test], y[test]


def pride_simulation(seed: int = 0, *, n: int = 1000, n_train: int = 800, length_scale: float = 8.0, n_pairs: int = 20,
                     n_pcs: int = 20, snr: float = 0.75, nugget: float = 2e-13) -> PRIDEData:
    """One data set of §7.3 (a) (module docstring). Columns: block X (200), then block C (200)."""
    rng = np.random.default_rng(seed)
    field = gaussian_field(n, 20, 20, length_scale, rng)
    C, X = field[:, :200].copy(), field[:, 200:].copy()
    pairs_x = rng.choice(200, size=n_pairs, replace=False)
    pairs_c = rng.choice(200, size=n_pairs, replace=False)
    X[:, pairs_x] += C[:, pairs_c]
    D = np.hstack([X, C])
    if nugget > 0:
        D = D + np.sqrt(nugget) * rng.standard_normal(D.shape)
    D = _standardise(D)
    beta, y, sd = _signal(D, n_pcs, snr, rng)
    X_tr, y_tr, X_te, y_te = _split(D, y, n_train, rng)
    return PRIDEData(X_tr, y_tr, X_te, y_te, beta, ("X", "C"), (200, 200), sd)


def climate_standin(seed: int = 0, *, n: int = 1062, n_train: int = 849, grid: tuple[int, int] = (72, 144),
                    n_parties: int = 4, n_pcs: int = 20, snr: float = 0.75) -> PRIDEData:
    """A synthetic stand-in with the climate data's shape (module docstring; NOT the climate data)."""
    rng = np.random.default_rng(seed)
    rows, cols = grid
    field = (np.sqrt(0.6) * gaussian_field(n, rows, cols, 40.0, rng) + np.sqrt(0.398) * gaussian_field(n, rows, cols, 6.0, rng)
             + np.sqrt(0.002) * rng.standard_normal((n, rows * cols)))
    D = _standardise(field)
    beta, y, sd = _signal(D, n_pcs, snr, rng)
    X_tr, y_tr, X_te, y_te = _split(D, y, n_train, rng)
    p = D.shape[1]
    widths = tuple(int(b.shape[1]) for b in np.array_split(np.empty((0, p)), n_parties, axis=1))
    return PRIDEData(X_tr, y_tr, X_te, y_te, beta, tuple(f"party{k}" for k in range(n_parties)), widths, sd)


def design_statistics(X: np.ndarray, widths: tuple[int, ...]) -> dict[str, float]:
    """Table 1's statistics of a design: max_k theta_k (largest column range), d_min (smallest non-zero
    singular value), r_eff = tr(X^T X) / ||X||_2^2, J_80 and J_90 (PCs capturing 80 / 90 % of the variance)."""
    n, p = X.shape
    s = np.linalg.svd(X, compute_uv=False)
    tol = s.max() * max(n, p) * np.finfo(float).eps
    nonzero = s[s > tol]
    share = np.cumsum(s**2) / np.sum(s**2)
    theta = max(float(np.max(b.max(axis=0) - b.min(axis=0))) for b in np.split(X, np.cumsum(widths)[:-1], axis=1))
    return {"n_train": n, "p": p, "max_theta": theta, "d_min": float(nonzero.min()), "r_eff": float(np.sum(s**2) / s[0] ** 2),
            "J80": int(np.searchsorted(share, 0.8) + 1), "J90": int(np.searchsorted(share, 0.9) + 1)}
