"""SIR from its sufficient statistics: slice sums, slice counts and the second moment (numerics only).

For rows x_i (already clipped and shifted by a public centre), slices h = 1..H with n_h members::

    s_h = (1/n) sum_{i in h} x_i   (p x H),   p_h = n_h / n,   S = (1/n) sum_i x_i x_i^T,
    mean  mu = sum_h s_h,
    M_c   = sum_h p_h (m_h - mu)(m_h - mu)^T = sum_h s_h s_h^T / p_h - mu mu^T     (m_h = s_h / p_h),
    Sigma = S - mu mu^T,

and SIR's directions are the top-K generalized eigenvectors of (M_c, Sigma) (Li 1991). Everything after
the three statistics is a function of them alone, so the statistics can be released once (with noise)
and the rest is post-processing. ``sir_from_moments`` takes the (possibly noisy) statistics and, for
noisy slice sums, removes the known bias E[s~ s~^T] = s s^T + v I of each slice's outer product.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .gradient import eigen_floor
from .gram_pass import RowParts, gram_sums
from .sir import whitened_eigen

#: rows per chunk when accumulating the statistics (bounds the memory of the clipped copy)
CHUNK_ROWS = 1 << 16


def iter_chunks(n: int, chunk_rows: int = CHUNK_ROWS) -> Iterator[slice]:
    for start in range(0, n, chunk_rows):
        yield slice(start, min(n, start + chunk_rows))


def clip_rows(X: np.ndarray, center: np.ndarray | float, bound: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A clipped copy of X - center: coordinate j in [-bound_j, bound_j] (into ``out`` when given)."""
    if out is None:
        out = np.empty(X.shape)
    if np.any(center):
        np.subtract(X, center, out=out)
        np.clip(out, -bound, bound, out=out)
    else:
        np.clip(X, -bound, bound, out=out)
    return out


def clipped_sufficient_sums(
    X: np.ndarray, labels: np.ndarray, n_slices: int, center: np.ndarray, bound: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slice sums p x H, counts H, X^T X) of the rows clipped to the box |x_j - center_j| <= bound_j, in one blocked
    pass (``gram_pass.gram_sums``: the blocks x_phi, phi_sum and xtx of z = [clip(x) | e_h | 1]; no full copy; X's
    finiteness is checked in the pass, ValueError; the pass sizes its blocks)."""
    parts = RowParts(shift=center, box=bound, phi="slices", n_slices=n_slices)
    sums = gram_sums(X, None, parts, ("xtx", "x_phi", "phi_sum"), labels=labels)
    return sums["x_phi"], sums["phi_sum"], sums["xtx"]


def kernel_from_moments(
    slice_sums: np.ndarray, proportions: np.ndarray, *, sums_noise_var: float = 0.0, min_proportion: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """(M_c, mu): the centred SIR kernel and the mean from slice sums s_h (p x H) and proportions p_h.

    Slices with p_h <= ``min_proportion`` are dropped (their means are noise). ``sums_noise_var`` v is
    the variance of independent noise on each entry of s_h; E[s~ s~^T] = s s^T + v I, so v I / p_h is
    subtracted per slice (an unbiased kernel). Stacks (..., p, H) and (..., H) give stacks of (M_c, mu).
    """
    s = np.asarray(slice_sums, dtype=float)
    w = np.asarray(proportions, dtype=float)
    mu = s.sum(axis=-1)
    keep = w > max(min_proportion, 0.0)
    weights = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)  # 1 / p_h on the kept slices, 0 elsewhere
    p = s.shape[-2]
    M = (s * weights[..., None, :]) @ np.swapaxes(s, -1, -2) - _outer(mu, mu)
    M -= (sums_noise_var * weights.sum(axis=-1))[..., None, None] * np.eye(p)
    return (M + np.swapaxes(M, -1, -2)) / 2.0, mu


def _outer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a b^T, for stacks of vectors too."""
    outer: np.ndarray = a[..., :, None] * b[..., None, :]
    return outer


def sir_from_moments(
    slice_sums: np.ndarray,
    proportions: np.ndarray,
    second_moment: np.ndarray,
    n_directions: int,
    *,
    centred: bool = True,
    sums_noise_var: float = 0.0,
    min_proportion: float = 0.0,
    floor: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B, eigenvalues, mu): SIR directions (B^T Sigma B = I_K), all generalized eigenvalues, the mean.

    ``centred=False`` skips the mean correction (data assumed centred at the public centre). ``floor``
    raises Sigma's eigenvalues to at least that value (PD repair, post-processing). Stacks of statistics
    (leading axes) give stacks of results, in batched eigendecompositions (the parametric bootstrap's re-estimates).
    """
    M, mu = kernel_from_moments(slice_sums, proportions, sums_noise_var=sums_noise_var, min_proportion=min_proportion)
    if not centred:
        M = M + _outer(mu, mu)
    S = np.asarray(second_moment, dtype=float)
    Sigma = (S + np.swapaxes(S, -1, -2)) / 2.0 - (_outer(mu, mu) if centred else 0.0)
    scale = np.maximum(np.trace(Sigma, axis1=-2, axis2=-1) / max(Sigma.shape[-1], 1), np.finfo(float).tiny)
    Sigma = eigen_floor(Sigma, np.maximum(floor, 1e-12 * scale))
    B, values = whitened_eigen(M, Sigma, n_directions)
    return B, values, (mu if centred else np.zeros_like(mu))


def slice_spread_scores(X: np.ndarray, labels: np.ndarray, H: int, center: np.ndarray | float, bounds: np.ndarray) -> np.ndarray:
    """Per column j, ||C s_j|| / c_j: the slice sums s_j = (sum_{i in h} x_ij / n)_h of the rows clipped to the box
    |x_j - center_j| <= c_j, centred over the slices (C = I - 11^T / H), over the column's bound. The screening score of
    the sparse moments designs (diagonal thresholding, Lin, Zhao & Liu 2018): a replaced row moves every score by at
    most 2 / n."""
    bounds = np.asarray(bounds, dtype=float)
    Xc = np.clip(np.asarray(X, dtype=float) - center, -bounds, bounds)
    n = Xc.shape[0]
    sums = np.zeros((Xc.shape[1], H))
    for h in range(H):
        sums[:, h] = Xc[labels == h].sum(axis=0) / n
    contrast = sums - sums.mean(axis=1, keepdims=True)
    scores: np.ndarray = np.linalg.norm(contrast, axis=1) / bounds
    return scores
