"""PRIDE's per-party queries and their sensitivities (spec pride_004.md A0, A2, A3, §4.2, A9.3).

A party's design is its block after the mode's preprocessing:

* certified: every column clipped to its public interval [lo_j, hi_j], then centred at the column's
  own mean (``center=True``). Centring is free under the entry relation: changing X_ij by Delta
  changes the centred column by Delta (e_i - 1/n), of norm |Delta| sqrt(1 - 1/n) <= |Delta|.
* paper / none: every column standardised with its own mean and standard deviation (the paper's
  "columns normalised to mean zero and unit variance"; G5 (a): the protected database is the
  standardised data), and theta_k = max_j (max_i X_ij - min_i X_ij) read off the result (G4: a
  data-derived sensitivity, so the release is ``claimed``).

The released query is the sketch X_k Pi_k (``core.SRHT``). L2 sensitivities (Frobenius norm of the
change of the n x tau_subs sketch):

* entry (one attribute value of one person; PRIDE's S-DP): only row i changes, by
  Delta_ij Pi[j, :] (times sqrt(1 - 1/n) <= 1 when centred), so Delta <= theta_k w2(Pi) with
  theta_k = max_j (hi_j - lo_j) and w2(SRHT) = 1.
* row (A9.3, one person's whole row in every block): row i changes by delta^T Pi with |delta_j| <=
  w_j = hi_j - lo_j, so Delta <= min(||w||_2 ||Pi||_2, ||w||_1 w2(Pi)) with ||Pi||_2 <= sqrt(tau'/tau_subs).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core import SRHT


def clip_columns(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each column clipped to its public interval."""
    return np.clip(np.asarray(X, dtype=float), lo[None, :], hi[None, :])


def column_scale(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations (ddof = 0) of a block."""
    X = np.asarray(X, dtype=float)
    return X.mean(axis=0), X.std(axis=0)


def design(X: np.ndarray, *, lo: np.ndarray | None, hi: np.ndarray | None, center: bool, standardize: bool) -> np.ndarray:
    """The party's design (module docstring): clip to [lo, hi] if given, then centre or standardise."""
    D = np.asarray(X, dtype=float)
    if lo is not None and hi is not None:
        D = clip_columns(D, lo, hi)
    if standardize:
        mean, sd = column_scale(D)
        return (D - mean) / sd
    if center:
        return D - D.mean(axis=0)
    return np.array(D, copy=True)


def data_theta(D: np.ndarray) -> float:
    """theta_k read off a design: the largest column range (the paper's data-derived bound; NOT public)."""
    D = np.asarray(D, dtype=float)
    return float(np.max(D.max(axis=0) - D.min(axis=0)))


def entry_sensitivity(lo: np.ndarray, hi: np.ndarray, w2: float = 1.0) -> float:
    """theta_k w2(Pi): one entry moves within its column's public interval."""
    return float(np.max(np.asarray(hi) - np.asarray(lo))) * w2


def row_sensitivity(lo: np.ndarray, hi: np.ndarray, sketch: SRHT | tuple[int, int]) -> float:
    """min(||w||_2 ||Pi||_2, ||w||_1 w2(Pi)) for widths w = hi - lo (one whole row of the block moves)."""
    widths = np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)
    if isinstance(sketch, SRHT):
        spectral, w2 = sketch.spectral_norm_bound, sketch.row_norm
    else:
        tau, tau_subs = sketch
        spectral, w2 = math.sqrt((1 << (int(tau) - 1).bit_length()) / tau_subs), 1.0
    return float(min(np.linalg.norm(widths) * spectral, widths.sum() * w2))


def sketch_dim_for(spec: Any, n_columns: int) -> int:
    """tau_subs of a party: ``"full"`` = tau'; a fraction f in (0, 1) -> round(f tau) (Table D.1), at least 1;
    an integer as given."""
    padded = 1 << (int(n_columns) - 1).bit_length()
    if spec == "full":
        return padded
    if isinstance(spec, float) and 0 < spec < 1:
        return max(1, int(math.floor(spec * n_columns + 0.5)))
    return int(spec)


#: a block whose held-out predictions improve on the constant by less than this share of var(y) is "no better than
#: the trivial model" for the warning (a public constant: 1 % of the variance of y)
NEGLIGIBLE_GAIN = 0.01


def held_out_test(y: np.ndarray, predictions: np.ndarray) -> tuple[float, float]:
    """Do a block's held-out predictions (of centred y) beat the constant? (p, gain): the one-sided paired test of
    d_i = (y_i - ybar)^2 - (y_i - ybar - yhat_i)^2, t = mean(d) sqrt(n) / sd(d), p = 1 - Phi(t) (normal: n rows), and
    the held-out gain mean(d) / mean((y - ybar)^2). The baseline is the mean of y over all rows, the fitted model's
    own intercept, so only the slopes are tested (each fold's training mean would be a worse constant than the one
    the model has). PRIDE's certified fallback (the party's own view: its coefficients are not covered)."""
    from scipy.special import ndtr  # 1 - Phi(t) = Phi(-t): what scipy.stats.norm.sf computes, without importing scipy.stats

    y = np.asarray(y, dtype=float)
    y = y - y.mean()
    d = y**2 - (y - np.asarray(predictions, dtype=float)) ** 2
    scale = float(np.mean(y**2))
    gain = float(d.mean()) / scale if scale > 0 else 0.0
    sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    if not sd > 0:
        return (0.0 if d.mean() > 0 else 1.0), gain
    return float(ndtr(-(d.mean() * math.sqrt(len(d)) / sd))), gain
