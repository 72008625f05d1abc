"""Certified sparse SIR from one selection and one moments release on all n rows (``SparseDPSIR(algorithm="moments")``,
issue 26): the diagonal-thresholding design of DT-SIR (Lin, Zhao & Liu 2018, Ann. Statist. 46) made private.

1. **Selection** (``support``, mechanism ``noisy_top``): every row clipped to |x_j - center_j| <= c_j and sliced; the
   score of coordinate j is the between-slice spread of its slice sums, T_j = ||C s_j|| / c_j with s_j = (sum_{i in h}
   x_ij / n)_h and C = I - 11^T / H (the slices' contrast: the column mean drops out when the slices are about equal).
   A replaced record moves s_j by at most 2 c_j / n in L2 (within a slice; sqrt(2) c_j / n across two) and ||C|| = 1,
   so every T_j moves by at most 2 / n: an L-infinity sensitivity free of p. The s' = ``screen_size`` (default s)
   largest are chosen by s' rounds of report-noisy-max (Laplace, peeling's calibration with d = 1; Dwork, Su & Zhang
   2021; Cai, Wang & Zhang 2021): only the indices are released, so the budget pays for s' selections, not for p values.
2. **Moments** on the selected coordinates (``slice_sums``, ``slice_counts``, ``second_moment``, as DPSIR's
   ``released.moments``), all n rows again, with sensitivities from the s' largest public bounds (any selected set).
3. Post-processing: the SIR directions of the released moments (centred by their own mean), embedded in R^p, rows
   outside the s largest set to 0; ``noise_error_`` by the parametric bootstrap of the moments (given the support);
   ``support_signal_``: do the released slice means on the support stand above their noise (``stands_above_noise``)?

Budget (public rule): the selection node has weight 1, the moments DPSIR's (1, 0.2, 1); one tight factor under the
ledger's accountant. The selection and the moments read the same rows: they compose in sequence.
"""
from __future__ import annotations

import math

import numpy as np

from .. import core
from ..mechanisms import Sensitivity
from ..plan import Plan
from ..released.moments import MomentRelease
from ..released.regression import stands_above_noise

RELATION = "replace_one"
SELECTION_WEIGHT = 1.0


def selection_scores(X: np.ndarray, labels: np.ndarray, H: int, center: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """T_j = ||C s_j|| / c_j of the module docstring (``core.slice_spread_scores``)."""
    return core.slice_spread_scores(X, labels, H, center, bounds)


def add_selection_node(plan: Plan, n: int, screen: int, delta: float, parents: tuple[str, ...]) -> None:
    """The ``support`` node: ``screen`` rounds of report-noisy-max on the scores, L-infinity sensitivity 2 / n."""
    plan.add("support", "noisy_top",
             Sensitivity(2.0 / n, "linf", RELATION, "||C s_j|| / c_j moves by <= ||Delta s_j|| / c_j <= 2 / n for every j"),
             weight=SELECTION_WEIGHT, parents=parents, params={"s": screen, "delta": delta},
             description=f"the {screen} coordinates with the largest between-slice spread (indices only)")


def support_signal(release: MomentRelease) -> bool:
    """Do the released centred slice sums on the support stand above their own noise? (energy of the centred sums
    against sum_j lambda_j chi^2_1 of the noise alone; ``released.regression.stands_above_noise``)."""
    sums = release.slice_sums
    s, H = sums.shape
    centred = sums - sums.mean(axis=1, keepdims=True)
    # the noise of each row of C s is N(0, v C): H - 1 unit eigenvalues times v
    v = release.sums_scale**2
    if v == 0:
        return True
    dof = s * (H - 1)
    return stands_above_noise(float(np.sum(centred**2)), dof * v, dof * v**2)


def embedded(B_sel: np.ndarray, selected: np.ndarray, p: int, s: int) -> np.ndarray:
    """Directions on the selected coordinates placed in R^p; rows outside the s largest (by norm) set to 0."""
    B = np.zeros((p, B_sel.shape[1]))
    B[selected] = B_sel
    if len(selected) > s:
        keep = selected[np.argsort(-np.linalg.norm(B_sel, axis=1))[:s]]
        drop = np.setdiff1d(selected, keep)
        B[drop] = 0.0
    return core.orthonormalize(B)


def random_within(s: int, K: int) -> float:
    """The random level of a K-dimensional subspace within the s selected coordinates."""
    return math.sqrt(2.0 * K * (1.0 - K / s)) if s > K else 0.0


def support_message(signal: bool, screen: int, what: str = "the released slice means on") -> str:
    if signal:
        return f"{what} the {screen} selected coordinates stand above their noise"
    return (f"{what} the {screen} selected coordinates cannot be told from their noise (level 0.05): the selected "
            "support is no better than a random one; more data or more budget is needed")


#: warn when a column as strong as the weakest selected one loses a round of the selection with at least this chance
MISS_LEVEL = 0.05


def released_scores(release: MomentRelease, bounds: np.ndarray) -> np.ndarray:
    """The selection scores T_j = ||C s_j|| / c_j of the selected columns re-estimated from the released slice sums
    (the same s_j / n, noise N(0, v) per entry), debiased: sqrt(max(0, ||C s_hat_j||^2 - (H - 1) v)) / c_j."""
    sums = release.slice_sums
    centred = sums - sums.mean(axis=1, keepdims=True)
    energy = np.sum(centred**2, axis=1) - (sums.shape[1] - 1) * release.sums_scale**2
    return np.asarray(np.sqrt(np.maximum(energy, 0.0)) / bounds)


def miss_probability(score: float, b: float, others: int, null_level: float) -> float:
    """The chance that a column of selection score ``score`` loses one round of report-noisy-max (Laplace(b) on every
    score) to the best of ``others`` columns of score ``null_level``: 1 - E_L[F(score - null_level + L)^others], F the
    Laplace(b) cdf, L ~ Laplace(b) (numerical quadrature; post-processing of public numbers only)."""
    if others <= 0 or b <= 0:  # noise off: the selection is the exact top, no round is lost to noise
        return 0.0
    t = np.linspace(-40.0, 40.0, 8001)  # L / b
    density = 0.5 * np.exp(-np.abs(t))
    x = (score - null_level) / b + t
    cdf = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(x, 0.0)))
    from scipy.integrate import trapezoid  # np.trapezoid needs numpy 2; privsdr supports numpy >= 1.23

    return float(np.clip(1.0 - trapezoid(density * cdf**others, t), 0.0, 1.0))


def selection_margin(release: MomentRelease, bounds: np.ndarray, b: float, p: int, n: int) -> tuple[float, float]:
    """(the weakest selected column's released score, the chance a column that strong loses a round of the selection
    to the best of the p - s' unselected ones), the null columns' score taken at its public upper bound
    sqrt((H - 1) / (n H)) (slice sums of a column with no signal, |x_j - center_j| <= c_j). Above ``MISS_LEVEL`` a
    true column may have been missed: post-processing of the released sums and the selection's public Laplace scale b."""
    H = release.slice_sums.shape[1]
    weakest = float(np.min(released_scores(release, bounds)))
    return weakest, miss_probability(weakest, b, p - release.slice_sums.shape[0], math.sqrt((H - 1) / (n * H)))


def margin_message(weakest: float, miss: float, screen: int, p: int) -> str:
    if miss < MISS_LEVEL:
        return (f"the selection's margin: a column as strong as the weakest of the {screen} selected (released score "
                f"{weakest:.3g}) loses a round of the noisy selection to the {p - screen} others with chance {miss:.2g}")
    return (f"the selection's margin is thin: a column as strong as the weakest of the {screen} selected (released score "
            f"{weakest:.3g}) loses a round of the noisy selection to the {p - screen} others with chance {miss:.2g} "
            f"(>= {MISS_LEVEL:g}): a true column may have been missed; more data, more budget or a larger screen_size "
            "is needed")
