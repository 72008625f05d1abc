"""The releases of one DP-BCD party step: the paper's perturbed step, the certified step's queries
and their sensitivities (spec dpbcd_002.md §3.3-§3.4; derivations in docs/algorithms/dpbcd.md).

Paper mode (Algorithm 2, one party-step on the incoming remainder v):

    r = (I - P_X) v,   xi = gamma ||r||,   b = l s,  l = (xi / sqrt(eps_step)) |Z|,  s ~ Unif(S^{N-1}),
    beta~ = (X^T X)^-1 X^T (v - b),   v_out = v - X beta~ = r + P_X b,   abort if ||v_out|| > xi.

Certified mode (replace-one, rows of block i clipped to ||x|| <= C_i, |y| <= C_y, all in public):

    gram G~_i = X_i^T X_i + E            sensitivity sqrt(2) C_i^2 (upper triangle, Frobenius)
    label sum  t~ = sum_r clip(y_r - c) + e    (label holder, once; c the public y_center): 2 C_y; mu~ = t~ / N
    statistic s~ = X_i^T u + e          u = clip(clip(y - c) - mu~, C_y) at the label holder's first step: 2 C_i C_y;
                                         otherwise u = clip(v~, +-C_v) of the PUBLIC incoming
                                         remainder, C_v = C_y + sum_j C_j ||beta_j|| + kappa sd_acc
                                         (public: coefficients and noise scales are released): 2 C_i C_v
    increment d~ = Proj_{B_i}(alpha (G~_i + lam I)^-1 (s~ - lam beta_i))   post-processing (public; alpha:
                                         ``dpbcd_shrinkage``, issue 24)
    remainder v~' = u - X_i d~ + w      only row r changes: 2 (C_y + C_i ||d~||) at the label
                                         holder's first step, 2 C_i ||d~|| after it (d~ public)
"""
from __future__ import annotations

import math

import numpy as np

from ..core import BlockSolver, clip_rows_l2, eigen_floor, local_residual
from ..errors import ValidationError
from ..released import gram

#: a positive stand-in for a zero sensitivity (the release then equals public data: any noise is enough)
TINY = 1e-300


class DegenerateResidualError(ValidationError):
    """xi = 0: the remainder lies in the party's column space, so the paper's noise would be zero
    (spec A9). Raised unless a public ``xi_floor`` is given."""


class PaperAbort(Exception):
    """The post-check of Algorithm 2 failed: ||v_out|| > xi."""


# -- paper mode --------------------------------------------------------------------------------
def radial_half_normal(n: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """b = l s: l = scale |Z| (half-normal), s = g / ||g|| uniform on S^{n-1} (eq. 12, spec A2, A20)."""
    length = scale * abs(float(rng.standard_normal()))
    g = rng.standard_normal(n)
    return (length / float(np.linalg.norm(g))) * g


def isotropic_gaussian(n: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """The rejected alternative of Remark 1 (eq. 8): b ~ N(0, scale^2 I_n). Comparison only."""
    return scale * rng.standard_normal(n)


#: ||(I - P) v|| <= this times ||v|| counts as zero: the residual is rounding error, the noise would be too
DEGENERATE_RTOL = 1e-10


def paper_xi(solver: BlockSolver, v: np.ndarray, gamma: float, xi_floor: float | None) -> float:
    """xi = gamma ||(I - P_X) v|| (spec A3), or the public floor when that is (numerically) 0 (A9)."""
    residual = float(np.linalg.norm(local_residual(solver.Q, v)))
    xi = gamma * residual
    if residual <= DEGENERATE_RTOL * float(np.linalg.norm(v)):
        if xi_floor is None:
            raise DegenerateResidualError("the remainder lies in the party's column space (xi = 0): the paper's mechanism "
                                          "would release it without noise; pass a public xi_floor to continue (spec A9)")
        xi = float(xi_floor)
    return xi


def paper_step(solver: BlockSolver, v: np.ndarray, eps_step: float, gamma: float, xi: float, rng: np.random.Generator, *,
               post_check: bool = True, noise: str = "radial") -> tuple[np.ndarray, np.ndarray]:
    """One perturbed step: (increment beta~, outgoing remainder v_out). Raises PaperAbort on the post-check."""
    scale = 0.0 if math.isinf(eps_step) else xi / math.sqrt(eps_step)
    n = v.shape[0]
    if scale == 0.0:
        target = v
    else:
        b = radial_half_normal(n, scale, rng) if noise == "radial" else isotropic_gaussian(n, scale, rng)
        target = v - b
    increment = solver.increment(target, np.zeros(solver.X.shape[1]))
    v_out = v - solver.X @ increment
    if post_check and float(np.linalg.norm(v_out)) > xi:
        raise PaperAbort(f"||v_out|| = {np.linalg.norm(v_out):.6g} > xi = {xi:.6g} (Algorithm 2 post-check)")
    return increment, v_out


# -- certified mode: queries (what is released) -------------------------------------------------
#: rows within this relative distance of the bound count as clipped: scaling a row to the bound
#: leaves its norm within a few ulps of it, so clipping clipped data again would only copy
CLIP_RTOL = 1e-12


def clip_block(X: np.ndarray, bound: float) -> np.ndarray:
    """Rows scaled down to L2 norm <= bound (X itself, not a copy, when no row is over it)."""
    norms2 = np.einsum("ij,ij->i", X, X)
    if not np.any(norms2 > bound * bound * (1.0 + CLIP_RTOL)):
        return X
    return clip_rows_l2(X, bound)


def clip_label(y: np.ndarray, bound: float) -> np.ndarray:
    return np.clip(y, -bound, bound)


def gram_query(Xc: np.ndarray) -> np.ndarray:
    G = Xc.T @ Xc
    return (G + G.T) / 2.0


def statistic_query(Xc: np.ndarray, u: np.ndarray) -> np.ndarray:
    return Xc.T @ u


def remainder_query(u: np.ndarray, Xc: np.ndarray, increment: np.ndarray) -> np.ndarray:
    return u - Xc @ increment


# -- certified mode: sensitivities (public quantities only) -------------------------------------
def gram_sensitivity(row_bound: float) -> float:
    """||x x^T - x' x'^T||_F <= sqrt(2) C^2 for ||x||, ||x'|| <= C (the upper triangle is no larger)."""
    return gram.xtx(row_bound, "replace_one").value


def label_statistic_sensitivity(row_bound: float, label_bound: float) -> float:
    """||x y - x' y'|| <= 2 C_i C_y."""
    return gram.xty(row_bound, label_bound, "replace_one").value


def label_sum_sensitivity(label_bound: float) -> float:
    """|clip(y_r) - clip(y'_r)| <= 2 C_y: replacing one row moves the sum of the clipped labels by at most this."""
    return gram.label_sum(label_bound, "replace_one").value


def statistic_sensitivity(row_bound: float, remainder_bound: float) -> float:
    """||(x - x') u_r|| <= 2 C_i C_v for the public, clipped remainder u."""
    return max(2.0 * row_bound * remainder_bound, TINY)


def remainder_sensitivity(row_bound: float, increment_norm: float, label_bound: float | None = None) -> float:
    """Only row r changes: |x_r^T d - x'_r^T d| <= 2 C_i ||d||; at the label holder's first step the
    row also carries y_r: |(y_r - x_r^T d) - (y'_r - x'_r^T d)| <= 2 (C_y + C_i ||d||)."""
    value = 2.0 * row_bound * increment_norm + (0.0 if label_bound is None else 2.0 * label_bound)
    return max(value, TINY)


def remainder_bound(signal: float, kappa: float, accumulated_sd: float) -> float:
    """C_v = signal + kappa * sd of the noise accumulated in the public remainder, where the signal
    bound C_y + sum_j C_j ||beta_j|| covers the noise-free remainder's entries (all public)."""
    return signal + kappa * accumulated_sd


def floored_gram(G: np.ndarray, noise_scale: float) -> np.ndarray:
    """Post-processing: eigenvalues of the released Gram raised to 2 sqrt(m) sigma (PD repair)."""
    if noise_scale == 0.0:
        return G
    return eigen_floor(G, 2.0 * math.sqrt(G.shape[0]) * noise_scale)
