"""Certified DP-BCD's post-processing of each step (issue 24: never worse than the trivial model).

Every input is a released value or a public noise scale, so all of this is free: the increment of a step is shrunk by
the share of its predicted change that its noise explains, a step of noise alone is dropped by a pre-test, and the
label holder's DP mean is kept as released: it is the fallback (issue 33: never a public centre; docs/algorithms/dpbcd.md).
"""
from __future__ import annotations

import attrs
import numpy as np

from ..released.regression import PRETEST_LEVEL, shrinkage_factor


def dp_label_mean(noisy_sum: float, n_rows: int, label_bound: float) -> float:
    """The DP mean of the clipped, centred labels: the released sum over the public N, clamped into [-C_y, C_y]. It is
    the trivial model's prediction (offset from the public centre) and is never shrunk towards the public centre
    (issue 33: a fit whose steps all fall back predicts this DP mean, not the centre)."""
    return float(np.clip(noisy_sum / n_rows, -label_bound, label_bound))


def certified_increment(G: np.ndarray, statistic: np.ndarray, beta: np.ndarray, ridge: float, bound: float,
                        noise: StepNoise | None = None, shrink: bool = True, n_steps: int = 1) -> tuple[np.ndarray, StepShrinkage]:
    """d~ = alpha (G~ + lam I)^-1 (s~ - lam beta), projected on the public ball ||d~|| <= B (post-processing).

    alpha is the positive-part James-Stein factor (James & Stein 1961; Baranchik 1964) in the metric of the
    predictions, ||X_i d||^2 ~ d^T G~ d: with A = G~ + lam I, the released noise e ~ N(0, sigma_s^2 I) of s~ and the
    noise w ~ N(0, sd_acc^2 I_N) the incoming public remainder carries (X_i^T w ~ N(0, sd_acc^2 G)),

        E = sigma_s^2 tr(A^-1 G~ A^-1) + sd_acc^2 tr((A^-1 G~)^2),     alpha = max(0, 1 - E / d^T G~ d),

    the share of the step's predicted change that the noise alone explains, removed. Every input is released or
    public; with no noise (or ``noise=None``) alpha = 1; ``shrink=False`` keeps alpha = 1 and still measures E."""
    A = G + ridge * np.eye(G.shape[0]) if ridge else G
    try:
        d = np.linalg.solve(A, statistic - ridge * beta)
    except np.linalg.LinAlgError:
        d = np.linalg.lstsq(A, statistic - ridge * beta, rcond=None)[0]
    shrinkage = step_shrinkage(G, A, d, noise, n_steps)
    if not shrink:
        shrinkage = attrs.evolve(shrinkage, factor=1.0)
    d = shrinkage.factor * d
    norm = float(np.linalg.norm(d))
    return (d * (bound / norm) if norm > bound else d), shrinkage


@attrs.frozen
class StepNoise:
    """The public noise of one certified step: sd of the released statistic, sd per entry of the incoming remainder."""

    statistic_sd: float
    remainder_sd: float = 0.0


@attrs.frozen
class StepShrinkage:
    """What the step kept: the James-Stein factor, and the predicted-change energies d^T G~ d (before shrinking)
    and E (the noise's expected share of it)."""

    factor: float = 1.0
    energy: float = 0.0
    noise_energy: float = 0.0


def step_shrinkage(G: np.ndarray, A: np.ndarray, d: np.ndarray, noise: StepNoise | None, n_steps: int = 1) -> StepShrinkage:
    """The factor of ``certified_increment`` (its docstring has the formula): with the noise's covariance in the
    metric of the predictions, K = A^-1 (sigma_s^2 I + sd_acc^2 G~) A^-1 G~, E = tr K and tr K^2 give the pre-test."""
    energy = max(float(d @ G @ d), 0.0)
    if noise is None or (noise.statistic_sd == 0.0 and noise.remainder_sd == 0.0):
        return StepShrinkage(1.0, energy, 0.0)
    m = G.shape[0]
    try:
        A_inv = np.linalg.inv(A)
    except np.linalg.LinAlgError:
        A_inv = np.linalg.pinv(A)
    K = A_inv @ (noise.statistic_sd**2 * np.eye(m) + noise.remainder_sd**2 * G) @ A_inv @ G
    expected = max(float(np.trace(K)), 0.0)
    spread = max(float(np.trace(K @ K)), 0.0)
    # a fit of T k steps tests each at PRETEST_LEVEL / (T k): it keeps a step of pure noise with probability at most
    # PRETEST_LEVEL, where the plain positive-part factor would keep part of one about half the time
    return StepShrinkage(shrinkage_factor(energy, expected, spread, PRETEST_LEVEL / n_steps), energy, expected)


def unabsorbed_variance(accumulated: float, seen_before: float, unabsorbed_before: float, factor_before: float) -> float:
    """The variance per entry of the remainder noise that still reaches this party's statistic: the noise added since
    its last step (``accumulated - seen_before``: the public accumulated variances) and the share (1 - alpha)^2 of
    what reached it then that its last step, of factor alpha, did not take out (a full step removes the noise's
    projection on the party's columns from the remainder it sends on). All public."""
    return max(accumulated - seen_before, 0.0) + (1.0 - factor_before) ** 2 * unabsorbed_before
