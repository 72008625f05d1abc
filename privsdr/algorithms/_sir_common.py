"""What the DP-SIR family shares: input checks, slicing policies, sensitivities, hyperparameters, BIC."""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import core
from .._validation import privsdr_errors
from ..errors import InputTypeError, NotIdentifiedWarning, ValidationError
from ._base import check_matrix, check_vector

SLICINGS = ("public", "dp_quantile", "data_quantile")
MODES = ("certified", "paper")


def check_xy(X: Any, y: Any, n_slices: int, *, low_dimensional: bool, require_varying: bool = False,
             finite: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """X and y checked against the data domain (finite numbers, matching shapes: see docs/errors.md).

    ``require_varying`` refuses a constant y; only paper mode's data quantiles ask for it. A
    certified fit never refuses on a property that one record can change (a constant y and its
    neighbour with one different y would be told apart by the refusal alone)."""
    X = check_matrix(X, "X", min_rows=2, finite=finite)  # finite=False: the caller's one pass checks it (core.gram_pass)
    y = check_vector(y, "y")
    n, p = X.shape
    if y.size != n:
        raise ValidationError(f"y has {y.size} values for {n} rows of X")
    if not np.all(np.isfinite(y)):
        raise ValidationError("y contains NaN or inf")
    if require_varying and np.all(y == y[0]):
        raise ValidationError("y is constant: equal-count slices of the data need a response that varies")
    if n < 2 * n_slices:
        raise ValidationError(f"need at least {2 * n_slices} rows for {n_slices} slices, got {n}")
    if low_dimensional and p >= n // 2:
        raise ValidationError(f"DPSIR is the low-dimensional estimator (p < n/2); got p={p}, n={n}: use SparseDPSIR (`privsdr fit sparse-dpsir`)")
    return X, y


def check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValidationError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_slicing(slicing: str | None, mode: str, cut_points: Any, n_slices: int, y_grid: Any) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """Resolve the slicing policy. ``data_quantile`` (equal-count slices from the data) is what the
    paper presumably did; it is not private and only allowed in paper mode."""
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {MODES}, got {mode!r}")
    if cut_points is not None and y_grid is not None:
        raise ValidationError("give cut_points (public slice boundaries) or y_grid (a DP quantile release), not both")
    if slicing is None:
        slicing = "public" if cut_points is not None else ("dp_quantile" if y_grid is not None else ("data_quantile" if mode == "paper" else None))
    if slicing is None:
        raise ValidationError(
            "certified mode needs public slice boundaries: pass cut_points=[...] (H-1 values) or "
            "y_grid=[...] (public candidate cut points for a DP quantile release)"
        )
    if slicing not in SLICINGS:
        raise ValidationError(f"slicing must be one of {SLICINGS}, got {slicing!r}")
    cuts = grid = None
    if slicing == "public":
        if cut_points is None:
            raise ValidationError("slicing='public' needs cut_points")
        cuts = _real_vector(cut_points, "cut_points")
        if cuts.size != n_slices - 1 or not np.all(np.isfinite(cuts)) or np.any(np.diff(cuts) <= 0):
            raise ValidationError(f"cut_points must be {n_slices - 1} strictly increasing finite values")
    elif slicing == "dp_quantile":
        if y_grid is None:
            raise ValidationError("slicing='dp_quantile' needs y_grid, public candidate cut points")
        grid = np.unique(_real_vector(y_grid, "y_grid"))
        if grid.size < n_slices or not np.all(np.isfinite(grid)):
            raise ValidationError(f"y_grid needs at least {n_slices} distinct finite values")
    elif mode != "paper":
        raise ValidationError("slicing='data_quantile' reads slice boundaries off the data (not private): paper mode only")
    return slicing, cuts, grid


def _real_vector(value: Any, name: str) -> np.ndarray:
    with privsdr_errors():
        return core.as_real_array(value, name).ravel()


def check_fraction(value: Any, name: str, low: float, high: float, closed: bool = True) -> float:
    """A real number in [low, high] (``closed``) or (low, high)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputTypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    inside = low <= v <= high if closed else low < v < high
    if not (math.isfinite(v) and inside):
        raise ValidationError(f"{name} must be in {'[' if closed else '('}{low:g}, {high:g}{']' if closed else ')'}, got {value!r}")
    return v


def check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InputTypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def grid_counts(y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """#{y <= c} for every c of the public grid (a sum over rows: chunks add up)."""
    return np.searchsorted(np.sort(y), grid, side="right")


def quantile_scores(y: np.ndarray, grid: np.ndarray, level: float) -> np.ndarray:
    """Scores -|#{y <= c} - level * n| over a public grid: each changes by <= 1 under replace-one."""
    return scores_from_counts(grid_counts(y, grid), y.size, level)


def scores_from_counts(counts: np.ndarray, n: int, level: float) -> np.ndarray:
    """``quantile_scores`` from the grid counts of all n rows."""
    return -np.abs(counts - level * n)


def sir_step_sensitivity(p: int, K: int, bound: float | np.ndarray, L: float, eta: float, lambda_pen: float, m: int,
                         norm: str) -> float:
    """Sensitivity of U_t (DP-SIR spec §5.2, replace-one): Frobenius for Algorithm 2, entry-wise for 3.

        2 eta c_X L [6 + lambda_pen (2 + 4 K L^2)] / m_t   (x sqrt(pK) for the Frobenius norm)

    With per-column bounds c_j (``bound`` an array), row j of every data term scales with c_j (the
    X-factor of §5.2 is ||x||_2 <= ||c||_2, the pi-factor does not change): the entry-wise bound uses
    max_j c_j and the Frobenius bound ||c||_2 sqrt(K) in place of c_X sqrt(pK).
    """
    width = p
    if np.ndim(bound) == 0:
        c = float(bound)
    else:
        arr = np.asarray(bound, dtype=float)
        same = arr.size > 0 and bool(np.all(arr == arr[0]))
        if same:
            c = float(arr[0])
        elif norm == "l2":
            c, width = float(np.sqrt(np.sum(arr * arr))), 1
        else:
            c = float(arr.max())
    entry = 2.0 * eta * c * L * (6.0 + lambda_pen * (2.0 + 4.0 * K * L * L)) / m
    return entry * math.sqrt(width * K) if norm == "l2" else entry


TIE_TOLERANCE = 1e-8  #: relative eigengap below which the K-th direction is reported as not identified


def relative_eigengap(eigenvalues: Sequence[float] | np.ndarray, K: int) -> float:
    """(lambda_K - lambda_{K+1}) / max(|lambda_K|, tiny): how well the top-K eigenspace is determined."""
    lam = np.asarray(eigenvalues, dtype=float)
    if lam.size <= K:
        return math.inf
    return float((lam[K - 1] - lam[K]) / max(abs(lam[K - 1]), np.finfo(float).tiny))


def not_identified(eigenvalues: Sequence[float] | np.ndarray, K: int, what: str) -> tuple[float, str | None]:
    """(relative gap, the ``NotIdentifiedWarning`` text when lambda_K and lambda_{K+1} tie, else None)."""
    gap = relative_eigengap(eigenvalues, K)
    if gap < TIE_TOLERANCE:
        return gap, (f"{what}: eigenvalues {K} and {K + 1} tie ({float(eigenvalues[K - 1]):.6g} vs {float(eigenvalues[K]):.6g}); "
                     f"the top-{K} subspace is not identified by these data (the returned basis is arbitrary)")
    return gap, None


def warn_if_not_identified(eigenvalues: Sequence[float] | np.ndarray, K: int, what: str, stacklevel: int = 4) -> float:
    """Warn (``NotIdentifiedWarning``) when lambda_K and lambda_{K+1} tie: the span of the top K
    eigenvectors is then not a function of the data (any basis of the tied eigenspace is a solution),
    and which one the eigensolver returns depends on the BLAS kernel. Returns the relative gap."""
    gap, text = not_identified(eigenvalues, K, what)
    if text is not None:
        warnings.warn(text, NotIdentifiedWarning, stacklevel=stacklevel)
    return gap


NOISE_RATIO = 0.03  #: default step size keeps the expected step noise below this fraction of ||B0||_F
CLIP_LEVEL = 3.0   #: default L: B0 is Sigma-orthonormal, so the projections x^T b have unit scale


def default_hyperparameters(
    lam_hat: float, B0: np.ndarray, n: int, eta: float | None, lambda_pen: float | None, radius: float | None,
    tau: float | None, noise_per_eta: Callable[[float, float], float] | None = None,
) -> dict[str, float]:
    """Tuning from public parameters and the DP initial values only (post-processing).

    lambda_hat = max(lambda~_K, 1e-3); lambda_pen = 2 lambda_hat and C = 2 max_k ||b_k|| (spec §7);
    L = tau C with tau = CLIP_LEVEL / C unless given (the spec's 2 sqrt(ln n) makes the K L^3 term of
    the sensitivity swamp every step, spec §10 U1); eta = min(0.1 / lambda_hat, the step size at which
    the expected Frobenius norm of the step noise is NOISE_RATIO ||B0||_F). ``noise_per_eta(L,
    lambda_pen)`` is that expected norm per unit of eta (public: noise multiplier x sensitivity).
    """
    lam = max(float(lam_hat), 1e-3)
    C = radius if radius is not None else (2.0 * float(np.linalg.norm(B0, axis=0).max(initial=0.0)) or 1.0)
    lambda_pen = lambda_pen if lambda_pen is not None else 2.0 * lam
    tau = tau if tau is not None else CLIP_LEVEL / C
    chosen_eta = eta
    if chosen_eta == 0:
        return {"lambda_hat": lam, "eta": 0.0, "lambda_pen": float(lambda_pen), "radius": float(C), "tau": float(tau)}
    if chosen_eta is None:
        chosen_eta = 0.1 / lam
        per_eta = noise_per_eta(tau * C, lambda_pen) if noise_per_eta is not None else 0.0
        if per_eta > 0:
            chosen_eta = min(chosen_eta, NOISE_RATIO * float(np.linalg.norm(B0)) / per_eta)
    return {"lambda_hat": lam, "eta": float(chosen_eta), "lambda_pen": float(lambda_pen), "radius": float(C), "tau": float(tau)}


def stationary_start(B0: np.ndarray, eigenvalues: Sequence[float] | np.ndarray, lam_hat: float, lambda_pen: float | None) -> tuple[np.ndarray, float]:
    """Scale B0's columns to the stationary norm of the penalised objective, B = V (I + Lambda/lambda_pen)^{1/2}
    (spec §9 oracle 2), using the DP eigenvalues. Started at B0 itself, the norm's adjustment drags the
    direction through the low-variance directions of Sigma for many more steps than T = ceil(ln n)."""
    lambda_pen = lambda_pen if lambda_pen is not None else 2.0 * max(float(lam_hat), 1e-3)
    lam = np.maximum(np.asarray(eigenvalues[: B0.shape[1]], dtype=float), 0.0)
    return B0 * np.sqrt(1.0 + lam / lambda_pen), lambda_pen


def bic_dimension(eigenvalues: Sequence[float] | np.ndarray, n: int, p: int, epsilon: float, delta: float, max_k: int) -> tuple[int, float]:
    """K = argmax_k  n sum_{i<=k} l_i^2 / sum_{i<=H} l_i^2 - C_n k(k+1)/2 (DP-SIR §4.6), on DP eigenvalues.

    C_n = (p + p^3 ln(1/delta)/(n eps^2)) ln n, capped at n / ln n (warns when the cap binds).
    """
    lam = np.asarray(eigenvalues, dtype=float)[:max_k]
    lam2 = lam**2
    total = lam2.sum()
    if total <= 0:
        return 1, 0.0
    c_n = (p + p**3 * math.log(1.0 / delta) / (n * epsilon**2)) * math.log(n) if delta > 0 else p * math.log(n)
    cap = n / math.log(n)
    if c_n > cap:
        warnings.warn(f"BIC penalty C_n = {c_n:.3g} capped at n/ln n = {cap:.3g}: no consistent C_n exists at this n", stacklevel=3)
        c_n = cap
    ks = np.arange(1, lam.size + 1)
    G = n * np.cumsum(lam2) / total - c_n * ks * (ks + 1) / 2.0
    return int(ks[np.argmax(G)]), float(c_n)
