"""Random feature sketches: the subsampled randomized Hadamard transform (SRHT) and a fast
Walsh-Hadamard transform (numerics only).

PRIDE (Heinze-Deml, McWilliams & Meinshausen; spec pride_004.md A1) compresses a party's
n x tau block X to n x tau_subs random features X Pi with

    Pi_full = sqrt(tau'/tau_subs) D H S  in R^{tau' x tau_subs},   Pi = Pi_full[:tau],

where tau' = 2^ceil(log2 tau) (X is zero-padded to tau' columns), H is the Sylvester-Walsh-Hadamard
matrix of order tau' scaled by 1/sqrt(tau') (H H^T = I), D = diag(d) with Rademacher signs and S
selects tau_subs distinct columns uniformly at random. Contract (tested for every seed): every entry
of Pi is +-1/sqrt(tau_subs), so every row has L2 norm exactly 1, i.e. the L2 sensitivity
w2(Pi) = max_i ||Pi[i, :]|| = 1; Pi_full^T Pi_full = (tau'/tau_subs) I; ||Pi||_2 <= sqrt(tau'/tau_subs);
E[Pi Pi^T] = I_tau. ``SRHT.apply`` computes X Pi in O(n tau' log tau') with a pruned butterfly
transform (``fwht`` is the full one) and never forms Pi; ``SRHT.matrix`` forms it (for checks and the dense baseline).
Pi depends only on (tau, tau_subs, seed), never on data.
"""
from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from .arrays import FloatArray, IntArray


def next_power_of_two(m: int) -> int:
    """The smallest power of two >= m (m >= 1)."""
    if m < 1:
        raise ValueError(f"need m >= 1, got {m}")
    return 1 << (int(m) - 1).bit_length()


def _butterflies(Y: FloatArray, levels: int | None = None) -> None:
    """In place: the unnormalised Walsh-Hadamard transform of every column of the C-ordered m x c array Y
    (or its first ``levels`` butterfly levels: the transform of every block of 2^levels rows)."""
    m, c = Y.shape
    h = 1
    top_h = m if levels is None else 1 << levels
    while h < top_h:
        blocks = Y.reshape(m // (2 * h), 2, h * c)
        top, bottom = blocks[:, 0, :], blocks[:, 1, :]
        diff = top - bottom
        top += bottom
        bottom[...] = diff
        h *= 2


#: columns transformed together: about 4 MB of float64 per chunk keeps every butterfly level in cache
CHUNK_BYTES = 1 << 22


def fwht_columns(A: FloatArray) -> FloatArray:
    """The unnormalised Walsh-Hadamard transform of every column of ``A`` (m x n, m a power of two):
    H_m A with H_m the Sylvester Hadamard matrix (+-1 entries), in m log2 m butterflies per column.

    Columns are transformed in chunks copied to C order, so each butterfly level touches contiguous
    blocks that stay in cache (about 2x faster than one pass over the whole array at m = 4096).
    """
    A = np.asarray(A, dtype=float)
    if A.ndim == 1:
        A = A[:, None]
    m, n = A.shape
    if m < 1 or m & (m - 1):
        raise ValueError(f"the transform needs a power-of-two length, got {m}")
    out = np.empty((m, n))
    chunk = max(8, CHUNK_BYTES // (8 * m))
    for start in range(0, n, chunk):
        block = np.array(A[:, start:start + chunk], order="C", copy=True)
        _butterflies(block)
        out[:, start:start + chunk] = block
    return out


def fwht(X: FloatArray) -> FloatArray:
    """The unnormalised Walsh-Hadamard transform of every row of ``X`` (n x m, m a power of two): X H_m."""
    X = np.asarray(X, dtype=float)
    return fwht_columns(X.T).T


def row_norm_sensitivity(Pi: FloatArray) -> float:
    """w2(Pi): the largest L2 norm of a row of a realised projection (the L2 change of X Pi when
    one entry of X changes by 1). For any projection, not only SRHT."""
    Pi = np.asarray(Pi, dtype=float)
    return float(np.sqrt(np.max(np.sum(Pi * Pi, axis=1))))


def _generator(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


@attrs.frozen(eq=False)
class SRHT:
    """One SRHT Pi in R^{tau x tau_subs} (module docstring): Rademacher ``signs`` (length tau') and
    the selected ``columns`` (tau_subs distinct indices of [0, tau'))."""

    n_features: int
    sketch_dim: int
    signs: FloatArray = attrs.field(repr=False)
    columns: IntArray = attrs.field(repr=False)

    @classmethod
    def draw(cls, n_features: int, sketch_dim: int, seed: Any = None) -> SRHT:
        """A fresh SRHT for tau = ``n_features`` and tau_subs = ``sketch_dim`` (1 <= tau_subs <= tau')."""
        n_features, sketch_dim = int(n_features), int(sketch_dim)
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        padded = next_power_of_two(n_features)
        if not 1 <= sketch_dim <= padded:
            raise ValueError(f"sketch_dim must lie in [1, {padded}] (tau' = 2^ceil(log2 {n_features})), got {sketch_dim}")
        rng = _generator(seed)
        signs = rng.choice(np.array([-1.0, 1.0]), size=padded)
        columns = np.sort(rng.choice(padded, size=sketch_dim, replace=False))
        return cls(n_features, sketch_dim, signs, columns)

    @property
    def padded_dim(self) -> int:
        """tau' = 2^ceil(log2 tau)."""
        return next_power_of_two(self.n_features)

    @property
    def row_norm(self) -> float:
        """w2(Pi) = 1 exactly: tau_subs entries of size 1/sqrt(tau_subs) per row."""
        return 1.0

    @property
    def spectral_norm_bound(self) -> float:
        """||Pi||_2 <= ||Pi_full||_2 = sqrt(tau'/tau_subs) (orthogonal columns of that norm)."""
        return math.sqrt(self.padded_dim / self.sketch_dim)

    def _split(self) -> int:
        """a = 2^r of the pruned transform H_tau' = H_a (x) H_b: the first log2(b) butterfly levels run on
        every row, the last log2(a) only for the tau_subs selected outputs (a dense tau_subs x a block of
        H_a). r minimises 2 tau' log2(b) + tau_subs a, so the cost stays O(n tau' log tau')."""
        m, levels = self.padded_dim, self.padded_dim.bit_length() - 1
        return min(range(levels + 1), key=lambda r: 2 * m * (levels - r) + self.sketch_dim * (1 << r))

    def apply(self, X: FloatArray) -> FloatArray:
        """X Pi (n x tau_subs) without forming Pi: sqrt(tau'/tau_subs) (pad(X) D H / sqrt(tau'))[:, S], by the
        pruned fast transform (``_split``), column chunks of about 4 MB at a time."""
        from scipy.linalg import hadamard

        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have {self.n_features} columns, got shape {X.shape}")
        m, levels = self.padded_dim, self.padded_dim.bit_length() - 1
        r = self._split()
        a, b = 1 << r, m >> r
        outer, inner = self.columns // b, self.columns % b
        H_a = hadamard(a).astype(float)[outer] if a > 1 else np.ones((self.sketch_dim, 1))
        n = X.shape[0]
        out = np.empty((self.sketch_dim, n))
        chunk = max(8, CHUNK_BYTES // (8 * m))
        signs = self.signs[: self.n_features, None]
        for start in range(0, n, chunk):
            block = X[start:start + chunk]
            Y = np.zeros((m, block.shape[0]))
            Y[: self.n_features] = block.T * signs
            _butterflies(Y, levels - r)  # H_b on every block of b rows
            out[:, start:start + chunk] = np.einsum("sa,asc->sc", H_a, Y.reshape(a, b, -1)[:, inner, :])  # H_a, selected rows only
        return out.T / math.sqrt(self.sketch_dim)

    def full_matrix(self) -> FloatArray:
        """Pi_full (tau' x tau_subs), formed densely from scipy's Hadamard matrix (an independent path)."""
        from scipy.linalg import hadamard

        H: FloatArray = hadamard(self.padded_dim).astype(float)
        return self.signs[:, None] * H[:, self.columns] / math.sqrt(self.sketch_dim)

    def matrix(self) -> FloatArray:
        """Pi = Pi_full[:tau] (tau x tau_subs)."""
        return self.full_matrix()[: self.n_features]
