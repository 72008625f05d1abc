"""Spectral preprocessing, row by row (numerics only).

Every function here maps each spectrum (row) using that row and public constants only, so it can
run before a private fit without touching the privacy analysis (edPLS spec A12):

* ``savgol`` -- Savitzky-Golay smoothing/derivative along each row (scipy.signal.savgol_filter);
* ``msc`` -- multiplicative scatter correction against a GIVEN reference spectrum: each row is
  regressed on the reference, x ~ a + b r, and replaced by (x - a)/b. The usual reference, the mean
  spectrum of the data set, reads all rows: it must come from public data or a DP release;
* ``snv`` -- standard normal variate (row centring and scaling);
* ``airpls`` -- baseline removal by adaptive iteratively reweighted penalised least squares
  (Zhang, Chen & Liang 2010, Analyst 135:1138): a Whittaker smoother whose weights are set to 0
  where the row lies above the current baseline and grow exponentially with the depth below it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .arrays import FloatArray

if TYPE_CHECKING:  # scipy.signal costs ~1 s to import: loaded by the functions that need it
    from scipy import sparse


def _rows(X: FloatArray) -> FloatArray:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D array of spectra (one per row), got shape {X.shape}")
    return X


def savgol(X: FloatArray, window: int = 5, polyorder: int = 2, deriv: int = 1) -> FloatArray:
    """Savitzky-Golay filter of each row (``deriv=1``: first derivative, the edPLS paper's setting)."""
    X = _rows(X)
    if not (window % 2 == 1 and polyorder < window <= X.shape[1]):
        raise ValueError(f"need an odd window > polyorder and <= {X.shape[1]} channels, got window={window}, polyorder={polyorder}")
    from scipy.signal import savgol_filter

    filtered: FloatArray = savgol_filter(X, window, polyorder, deriv=deriv, axis=1)
    return filtered


def msc(X: FloatArray, reference: FloatArray) -> FloatArray:
    """Multiplicative scatter correction of each row against the public ``reference`` spectrum."""
    X = _rows(X)
    r = np.asarray(reference, dtype=float).ravel()
    if r.shape[0] != X.shape[1] or not np.all(np.isfinite(r)):
        raise ValueError(f"the reference must be a finite spectrum of {X.shape[1]} channels")
    rc = r - r.mean()
    denom = float(rc @ rc)
    if not denom > 0:
        raise ValueError("the MSC reference spectrum is constant")
    slope = (X - X.mean(axis=1, keepdims=True)) @ rc / denom
    intercept: FloatArray = X.mean(axis=1) - slope * r.mean()
    safe = np.where(np.abs(slope) > 1e-12, slope, 1.0)  # a row orthogonal to the reference is left unscaled
    return (X - intercept[:, None]) / safe[:, None]


def snv(X: FloatArray) -> FloatArray:
    """Standard normal variate: (x - mean(x)) / std(x) for each row (a constant row maps to zeros)."""
    X = _rows(X)
    sd: FloatArray = X.std(axis=1, keepdims=True)
    centred: FloatArray = X - X.mean(axis=1, keepdims=True)
    return centred / np.where(sd > 0, sd, 1.0)


def _difference_penalty(m: int, order: int) -> sparse.csc_matrix:
    from scipy import sparse

    D = sparse.eye(m, format="csc")
    for _ in range(order):
        D = D[1:] - D[:-1]
    return (D.T @ D).tocsc()


def whittaker_baseline(x: FloatArray, weights: FloatArray, lam: float, penalty: sparse.csc_matrix) -> FloatArray:
    """argmin_z sum_i w_i (x_i - z_i)^2 + lam ||D z||^2, i.e. (W + lam D^T D) z = W x."""
    from scipy import sparse
    from scipy.sparse.linalg import spsolve

    W = sparse.diags(weights, 0, format="csc")
    return np.asarray(spsolve((W + lam * penalty).tocsc(), weights * x)).ravel()


def airpls_baseline(x: FloatArray, lam: float = 100.0, order: int = 1, max_iter: int = 15) -> FloatArray:
    """The airPLS baseline of one spectrum ``x``."""
    x = np.asarray(x, dtype=float).ravel()
    m = x.shape[0]
    penalty = _difference_penalty(m, order)
    w = np.ones(m)
    z = x.copy()
    total = float(np.abs(x).sum())
    for it in range(1, max_iter + 1):
        z = whittaker_baseline(x, w, lam, penalty)
        d = x - z
        below = d < 0
        depth = float(-d[below].sum())
        if depth < 1e-3 * total or not below.any():
            break
        w = np.zeros(m)
        w[below] = np.exp(it * np.abs(d[below]) / depth)
        end = float(np.exp(it * np.abs(d[below]).max() / depth))
        w[0] = w[-1] = end  # keep the ends anchored (the paper's boundary rule)
    return z


def airpls(X: FloatArray, lam: float = 100.0, order: int = 1, max_iter: int = 15) -> FloatArray:
    """Each row minus its airPLS baseline (paper setting: lambda = 100, order 1, 15 iterations)."""
    X = _rows(X)
    if not (lam > 0 and order >= 1 and max_iter >= 1):
        raise ValueError("airPLS needs lam > 0, order >= 1 and max_iter >= 1")
    return np.vstack([row - airpls_baseline(row, lam, order, max_iter) for row in X]) if len(X) else X.copy()
