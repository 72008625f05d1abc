"""Choosing Algorithm 2's step size from DP outputs only, so that the refinement never makes B.1 worse.

Why the printed refinement loses to its own initializer (DP-SIR issue 11, measured in
``docs/algorithms/dpsir.md``): every step's noise is calibrated to a worst-case sensitivity
2 eta sqrt(pK) c_X L [6 + lambda_pen (2 + 4 K L^2)] / m_t that is proportional to eta, like the step's
signal, so a smaller or larger eta does not change a step's signal-to-noise ratio; the refinement only
pays when the B.1 error it contracts (by about 2 eta (lambda_1 - lambda_2) per step) exceeds the noise
the T steps add. With half the rows in T = ceil(ln n) batches that is rarely the case at the sizes of
the paper's tables.

The rule here is a plug-in simulation, all of it post-processing of the B.1 release: the released
(M~, Sigma~) are taken as the population, B.1 is re-run on re-noised copies (public noise scales), each
copy is refined with the population gradient plus step noise at the public scale for every eta of a
grid, and the eta with the smallest median final error is kept -- or eta = 0, which skips the steps
(their budget is then returned, never charged), when no eta beats the re-run initializer.
"""
from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from .. import core
from ._sir_common import CLIP_LEVEL, stationary_start

#: step sizes tried, in units of 1 / lambda_hat (the spec's default is 0.1 / lambda_hat)
ETA_GRID = (0.01, 0.03, 0.1, 0.3)
#: a step size must beat the re-run initializer by this share of its error to be used
MARGIN = 0.3
#: beyond this predicted initializer error (||P - P'||_F) the linearised simulation is not trusted: no steps
LINEAR_LIMIT = 0.5


@attrs.frozen
class RefinementChoice:
    eta: float
    predicted_init_error: float
    predicted_final_error: float
    grid: tuple[tuple[float, float], ...]


def _symmetric_noise(p: int, sd: float, rng: np.random.Generator) -> np.ndarray:
    upper = np.triu(sd * rng.standard_normal((p, p)))
    return upper + np.triu(upper, 1).T


def _sampling_noise(sd: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    Z = rng.standard_normal(sd.shape)
    return sd * (Z + Z.T) / np.sqrt(2.0)


def choose_step_size(
    kernel: np.ndarray,
    sigma: np.ndarray,
    sd_kernel: float,
    sd_sigma: float,
    floor: float,
    K: int,
    T: int,
    lambda_pen: float | None,
    radius: float | None,
    tau: float | None,
    step_noise_sd: Callable[[float, float, float], float],
    batch_size: int,
    init_rows: int,
    rng: np.random.Generator,
    reps: int = 12,
) -> RefinementChoice:
    """The step size for Algorithm 2 (see the module docstring). ``step_noise_sd(eta, L, lambda_pen)`` is
    the public noise sd per entry of one step. Each simulated step also carries the sampling noise of a
    batch of ``batch_size`` rows, approximated per entry by 2 eta sqrt(Sigma_jj (1 + lambda_pen^2) / m)
    (the gradient's terms x pi and lambda_pen x pi G have unit-scale projections pi). A step size is kept
    only when it beats the re-run initializer by ``MARGIN``; otherwise the steps are skipped. The re-run
    initializer carries, besides its DP noise, the sampling error of ``init_rows`` rows (entry sds
    sqrt((S_jj S_kk + S_jk^2) / n1) for Sigma and sqrt((M_jj S_kk + M_kk S_jj) / n1) for M), which the
    steps -- on fresh rows -- can reduce."""
    p = sigma.shape[0]
    truth, values = core.whitened_eigen(kernel, sigma, p)
    lam_hat = max(float(values[K - 1]), 1e-3)
    truth = truth[:, :K]
    diag = np.maximum(np.diag(sigma), 0.0)[:, None]
    kdiag = np.maximum(np.diag(kernel), 0.0)[:, None]
    samp_sigma = np.sqrt((diag @ diag.T + sigma**2) / init_rows)
    samp_kernel = np.sqrt((kdiag @ diag.T + diag @ kdiag.T) / init_rows)
    init_errors: list[float] = []
    finals: dict[float, list[float]] = {eta: [] for eta in ETA_GRID}
    for _ in range(reps):
        sig_r = core.eigen_floor(sigma + _symmetric_noise(p, sd_sigma, rng) + _sampling_noise(samp_sigma, rng), floor)
        B_r, val_r = core.whitened_eigen(kernel + _symmetric_noise(p, sd_kernel, rng) + _sampling_noise(samp_kernel, rng), sig_r, p)
        B0 = B_r[:, :K]
        init_errors.append(core.projection_distance(B0, truth))
        start, lp = stationary_start(B0, val_r, val_r[K - 1], lambda_pen)
        C = radius if radius is not None else (2.0 * float(np.linalg.norm(start, axis=0).max(initial=0.0)) or 1.0)
        L = (tau if tau is not None else CLIP_LEVEL / C) * C
        # every eta of the grid at once, as a stack (eta, p, K); the step noise drawn in the order of one eta after the other
        etas = np.array(ETA_GRID)[:, None, None] / lam_hat
        sd = np.sqrt(np.array([step_noise_sd(float(eta), L, lp) ** 2 for eta in etas.ravel()])[:, None, None]
                     + (2.0 * etas) ** 2 * diag * (1.0 + lp * lp) / batch_size)
        step_noise = rng.standard_normal((len(ETA_GRID), T, p, K))
        B = np.repeat(core.project_columns(start, C)[None], len(ETA_GRID), axis=0)
        for t in range(T):
            G = np.swapaxes(B, -1, -2) @ sigma @ B - np.eye(K)
            U = B + 2.0 * etas * (kernel @ B - lp * sigma @ B @ G)
            B = core.project_columns(U + sd * step_noise[:, t], C)
        for unit, B_unit in zip(ETA_GRID, B, strict=True):
            finals[unit].append(core.projection_distance(B_unit, truth))
    medians = {unit: float(np.median(v)) for unit, v in finals.items()}
    init = float(np.median(init_errors))
    best = min(medians, key=lambda unit: medians[unit])
    if medians[best] > (1.0 - MARGIN) * init or init > LINEAR_LIMIT:
        return RefinementChoice(0.0, init, init, tuple(medians.items()))
    return RefinementChoice(best / lam_hat, init, medians[best], tuple(medians.items()))
