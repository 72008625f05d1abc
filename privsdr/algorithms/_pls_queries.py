"""The queries the private PLS1 modes release, each a sum of row-local terms (edPLS spec §4.6).

Under add/remove-one, a sum over rows changes by one row's term, so its sensitivity is the largest
norm one term can have. Rows are clipped first, which is what makes these bounds true:
x <- (x - mu_x) min(1, C_x / ||x - mu_x||), y <- clip(y - mu_y, -C_y, C_y).

=========  ==================  ======================================================
query      term of one row     L2 sensitivity (add/remove)
=========  ==================  ======================================================
count      1                   1
x_sum      x                   C_x
y_sum      y                   C_y
xtx        x x^T (upper tri.)  ||x x^T||_F = ||x||^2 <= C_x^2 (the upper triangle is less)
xty        x y                 C_x C_y
u (S1)     e f                 C_x C_y
g (S1)     e (e^T w)           ||e||^2 ||w|| <= C_x^2  (w unit, released earlier)
h (S1)     (e^T w)^2           C_x^2
r (S1)     f (e^T w)           C_y C_x
=========  ==================  ======================================================

``ssp_statistics`` works through the rows in blocks (``core.gram_pass``), so a fit on n x m data needs one pass over
X and O(block x m) extra memory besides the m x m result.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import core
from ..core.gram_pass import RowParts, gram_sums


def clip_y(y: np.ndarray, center: float, bound: float) -> np.ndarray:
    return np.clip(np.asarray(y, dtype=float) - center, -bound, bound)


def clip_x(X: np.ndarray, center: np.ndarray, bound: float) -> np.ndarray:
    """(X - center) with every row scaled down to L2 norm at most ``bound`` (a new array)."""
    return core.clip_rows_l2(np.asarray(X, dtype=float) - center, bound)


def ssp_statistics(X: np.ndarray, y: np.ndarray, x_center: np.ndarray, y_center: float, bound_x: float,
                   bound_y: float) -> dict[str, np.ndarray]:
    """count, x_sum, y_sum, xtx = sum x x^T, xty = sum x y of the clipped rows: the blocks of z = [x | y | 1] in one
    blocked pass (``core.gram_pass``; X's and y's finiteness checked in the pass, ValueError)."""
    parts = RowParts(shift=x_center, l2=bound_x, phi="label",
                                    y_shift=y_center, y_bound=bound_y)
    s = gram_sums(X, y, parts, ("count", "x_sum", "xtx", "x_phi", "phi_sum"))
    return {"count": np.array([float(s["count"])]), "x_sum": s["x_sum"], "y_sum": s["phi_sum"], "xtx": s["xtx"],
            "xty": s["x_phi"][:, 0]}


def chunk_ssp(X: np.ndarray, y: np.ndarray, *, x_center: Any, y_center: float, bound_x: float, bound_y: float) -> dict[str, Any]:
    """One row chunk's S2 statistics (``privsdr.rows``: chunks add up; nothing else of the rows
    leaves the chunk). ``x_center``: the public centre as given (None, a number or one value per column)."""
    m = X.shape[1]
    center = np.zeros(m) if x_center is None else np.asarray(x_center, dtype=float).ravel()
    if center.size not in (1, m):
        from ..errors import ValidationError

        raise ValidationError(f"x_center must be a number or a vector of {m} values")
    stats: dict[str, Any] = dict(ssp_statistics(X, y, np.broadcast_to(center, (m,)), y_center, bound_x, bound_y))
    return stats


def weight_statistic(E: np.ndarray, f: np.ndarray) -> np.ndarray:
    """S1's first release of a component: u = E^T f (its direction is the weight)."""
    return E.T @ f


def iterative_statistics(E: np.ndarray, f: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """S1's releases after the weight: g = E^T s, h = s^T s, r = f^T s with s = E w (w public, unit)."""
    s = E @ w
    return {"g": E.T @ s, "h": np.array([float(s @ s)]), "r": np.array([float(f @ s)])}


def iterative_deflate(E: np.ndarray, f: np.ndarray, w: np.ndarray, p: np.ndarray, c: float, bound_x: float,
                      bound_y: float) -> tuple[np.ndarray, np.ndarray]:
    """Row-local deflation with released p, c, then re-clipping (so the next sensitivities hold)."""
    s = E @ w
    return core.clip_rows_l2(E - np.outer(s, p), bound_x), np.clip(f - s * c, -bound_y, bound_y)
