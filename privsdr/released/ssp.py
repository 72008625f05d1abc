"""Post-processing of released sufficient statistics (X^T X, X^T y and the DP count and sums): AdaSSP's ridge
(Wang 2018; ``adassp_solution``, ``ridge_rule``) and DPPLS S2's kernel PLS1 (edPLS spec §3.2;
``ssp_postprocess``). They read the release and public parameters only, and import no scikit-learn: the estimators
(``algorithms.adassp``, ``algorithms.pls``) and a party process of a secure vertical run
(``vertical.secure_regression``) share them."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import core
from . import regression
from .record import Released


def dp_means(noisy: dict[str, np.ndarray], Cx: float, Cy: float) -> tuple[float, np.ndarray, float]:
    """(n, mean x - mu_x, mean y - mu_y) from the noisy count and sums; the means are projected onto
    the balls the clipped rows live in (||.|| <= C_x, |.| <= C_y): post-processing that can only help."""
    n_t = max(float(noisy["count"][0]), 1.0)
    x_shift = core.clip_rows_l2((noisy["x_sum"] / n_t)[None, :], Cx)[0]
    y_shift = float(np.clip(float(noisy["y_sum"][0]) / n_t, -Cy, Cy))
    return n_t, x_shift, y_shift



def adassp_solution(released: Released, failure_probability: float = 0.05, constant: float | None = None,
                    label_bound: float | None = None) -> tuple[np.ndarray, float, float]:
    """(theta, ridge lambda, lambda_lo) from a release with arrays ``lambda_min`` (optional), ``xtx``, ``xty`` and their
    noise sds (``algorithms.adassp``'s module docstring): post-processing of the release and its public scales only.

    Without a ``lambda_min`` release (the secure vertical Gram, where an eigenvalue inside the secure computation
    would cost more than it saves) the lower bound comes from the noisy Gram itself: with b = s_G sqrt(d log(2 d^2 /
    rho)) >= ||E||_2, lambda_lo = max(lambda_min(X^T X~) - b, 0) (Weyl), at no privacy cost.

    ``constant`` c: the last column of Z is the constant c (the intercept). Its row of the release carries the noisy
    count n~ = G_cc / c^2 and sums, i.e. DP means x_bar, y_bar (y_bar clamped into +-``label_bound``); the slopes are
    the ridge solution of the centred statistics S = G_xx - n~ x_bar x_bar^T, v = g_xy - n~ y_bar x_bar, and the
    intercept y_bar - x_bar^T beta is not shrunk: when the noise wins, the fit falls back to the DP mean of y, never
    to the public centre (lambda_lo of the full Gram bounds lambda_min(S) from below: S^-1 is a block of G^-1).
    theta is returned in Z's columns (theta_c = intercept / c)."""
    gram, xty = released["xtx"], released["xty"].ravel()
    if constant is not None:
        x_bar, y_bar, metric, target = regression.dp_centred(gram, xty, constant, label_bound)
    else:
        metric, target = gram, xty
    beta, ridge, lambda_lo = ridge_rule(released, metric, target, failure_probability)
    if constant is None:
        return beta, ridge, lambda_lo
    return np.append(beta, (y_bar - float(x_bar @ beta)) / constant), ridge, lambda_lo


def spectral_margin(xtx_scale: float, d: int, rho: float) -> float:
    """sigma sqrt(d log(2 d^2 / rho)): with probability >= 1 - rho the spectral norm of the noise a Gaussian release of
    the d x d X^T X with noise sd sigma adds stays below it (AdaSSP's bound, Wang 2018)."""
    return float(xtx_scale * math.sqrt(d * math.log(2.0 * d * d / rho)))


def lambda_min_margin(lambda_scale: float, rho: float) -> float:
    """sigma sqrt(2 log(3 / rho)): the margin below a released lambda_min (noise sd sigma) that holds with probability
    >= 1 - rho/3 (AdaSSP's lower bound on the smallest eigenvalue)."""
    return float(lambda_scale * math.sqrt(2.0 * math.log(3.0 / rho)))


def ridge_rule(released: Released, metric: np.ndarray, target: np.ndarray, failure_probability: float
               ) -> tuple[np.ndarray, float, float]:
    """(beta, lambda, lambda_lo): AdaSSP's ridge (``algorithms.adassp``'s module docstring) on the (possibly centred) Gram ``metric`` and
    target, with the noise sd of the released ``xtx`` and, when there is one, the released ``lambda_min``."""
    rho = float(failure_probability)
    d = metric.shape[0]
    spectral = spectral_margin(released.scales["xtx"], d, rho)
    if "lambda_min" in released.arrays:
        lambda_lo = max(float(released["lambda_min"].ravel()[0]) - lambda_min_margin(released.scales["lambda_min"], rho), 0.0)
    else:
        lambda_lo = max(float(np.linalg.eigvalsh((metric + metric.T) / 2.0)[0]) - spectral, 0.0)
    ridge = max(0.0, spectral - lambda_lo)
    # lstsq: the noisy Gram + ridge is positive definite with probability >= 1 - rho; on the rest it still returns
    # a (least-squares) answer instead of refusing on something one record can change
    beta = np.linalg.lstsq(metric + ridge * np.eye(d), target, rcond=None)[0]
    return beta, ridge, lambda_lo



def centred_slopes_stacked(arrays: dict[str, np.ndarray], scales: Any, failure_probability: float, bound_x: float,
                           bound_y: float) -> np.ndarray:
    """``algorithms.adassp.centred_solution``'s beta for a stack of releases (``arrays`` with a leading axis of draws: the parametric
    bootstrap's ``regression.renoised_blocks``), one row per draw: the same DP means, centring and ridge, with the
    linear algebra done for the whole stack at once (``ridge_rule_stacked``)."""
    n_t = np.maximum(arrays["count"][:, 0], 1.0)
    x_bar = core.clip_rows_l2(arrays["x_sum"] / n_t[:, None], bound_x)
    y_bar = np.clip(arrays["y_sum"][:, 0] / n_t, -bound_y, bound_y)
    metric = arrays["xtx"] - n_t[:, None, None] * (x_bar[:, :, None] * x_bar[:, None, :])
    target = arrays["xty"].reshape(len(n_t), -1) - (n_t * y_bar)[:, None] * x_bar
    return ridge_rule_stacked(arrays, scales, metric, target, failure_probability)


#: a stacked system this well conditioned (smallest singular value over the largest) is solved by LU with the others;
#: below it, one draw at a time by ``lstsq``, as ``ridge_rule`` does (the two agree to about cond x 1e-16)
STACKED_SOLVE_CONDITION = 1e-8


def ridge_rule_stacked(arrays: dict[str, np.ndarray], scales: Any, metric: np.ndarray, target: np.ndarray,
                       failure_probability: float) -> np.ndarray:
    """``ridge_rule``'s beta for each of a stack of (metric, target) pairs (leading axis: draws); ``arrays``: the
    stacked release (its ``lambda_min`` when there is one), ``scales``: its public noise sds."""
    rho = float(failure_probability)
    reps, d = metric.shape[0], metric.shape[-1]
    spectral = spectral_margin(scales["xtx"], d, rho)
    if "lambda_min" in arrays:
        lowered = arrays["lambda_min"].reshape(reps, -1)[:, 0] - lambda_min_margin(scales["lambda_min"], rho)
    else:
        lowered = np.linalg.eigvalsh((metric + np.swapaxes(metric, -1, -2)) / 2.0)[:, 0] - spectral
    ridge = np.maximum(0.0, spectral - np.maximum(lowered, 0.0))
    system = metric + ridge[:, None, None] * np.eye(d)
    singular = np.linalg.svd(system, compute_uv=False)
    solvable = singular[:, -1] > STACKED_SOLVE_CONDITION * singular[:, 0]
    beta = np.empty((reps, d))
    if solvable.any():
        beta[solvable] = np.linalg.solve(system[solvable], target[solvable][..., None])[..., 0]
    for r in np.flatnonzero(~solvable):
        beta[r] = np.linalg.lstsq(system[r], target[r], rcond=None)[0]
    return beta


def ssp_postprocess(noisy: dict[str, np.ndarray], sigma: float, c: dict[str, Any], scales: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
    """S2's post-processing of the released statistics (``sigma``: the public noise sd of X^T X; ``scales``: every
    released statistic's, for the pre-test, or ``u_variance``, u's noise variance per entry): centre at the DP means, ridge, PSD repair, kernel PLS1, the SNR-based
    choice of A. Reads nothing but its arguments.

    With ``c["shrinkage"] == "snr"`` (certified default; issue 24) A is a maximum: the leading components whose SNR
    exceeds 1 are kept (at least one), and none when the centred X^T y cannot be told from its noise
    (``signal_in_xty``): the fit is then the trivial model, the DP mean."""
    S, u = noisy["xtx"], noisy["xty"]
    x_shift, y_shift = np.zeros(S.shape[0]), 0.0
    scales = dict(scales or {})
    var_u: float | np.ndarray = scales.get("xty", 0.0) ** 2
    if "u_variance" in scales:  # a caller that centred the statistics itself gives u's noise variance per entry
        var_u = np.asarray(scales["u_variance"], dtype=float)
    if c["dp_centring"]:
        n_t, x_shift, y_shift = dp_means(noisy, c["bound_x"], c["bound_y"])
        S = S - n_t * np.outer(x_shift, x_shift)
        u = u - n_t * y_shift * x_shift
        var_u = var_u + regression.centring_variance(scales.get("x_sum", 0.0), scales.get("y_sum", 0.0), x_shift, y_shift, n_t)
    ridge = c["ridge"] if c["ridge"] != "noise" else sigma * math.sqrt(S.shape[0])
    if ridge > 0:
        S = S + ridge * np.eye(S.shape[0])
    if sigma > 0 and c["psd_repair"]:
        S = core.nearest_psd(S)
    kernel = core.kernel_pls1(S, u, c["A"])
    snr = component_snr(kernel, ridge, 2.0 * sigma * math.sqrt(S.shape[0]))
    keep = kernel.n_components
    if c["auto"] or c.get("shrinkage") == "snr":  # the leading components whose variance stands above the noise
        keep = max(1, int(np.argmin(np.append(snr, 0.0) > 1.0))) if kernel.n_components else 0
    if c.get("shrinkage") == "snr" and not signal_in_xty(u, np.broadcast_to(var_u, u.shape)):
        keep = 0
    return {
        "weights": kernel.weights[:, :keep], "loadings": kernel.loadings[:, :keep], "y_loadings": kernel.y_loadings[:keep],
        "coef_path": kernel.coef_path[:, :keep], "x_mean": c["x_center"] + x_shift, "y_mean": c["y_center"] + y_shift,
        "statistics": noisy, "snr": snr, "metric": S,
    }


def signal_in_xty(u: np.ndarray, variances: np.ndarray) -> bool:
    """Does the (centred) released X^T y stand above its own noise? ``released.regression.signal_in`` at the pre-test
    level, v_j the variance of u_j's noise (with DP centring, ``released.regression.centring_variance`` added). PLS1's
    first weight is u / ||u||, so when u is noise every component is fitted to noise."""
    return regression.signal_in(u, variances)


def component_snr(kernel: core.KernelPLS1, ridge: float, noise_norm: float) -> np.ndarray:
    """Variance of the noisy X^T X along each component's rotation r_a (ridge removed), over the
    typical spectral norm 2 sigma_S sqrt(m) of its noise: a component with SNR <= 1 is mostly noise."""
    if kernel.n_components == 0:
        return np.zeros(0)
    along = kernel.score_norms**2 / np.sum(kernel.rotations**2, axis=0) - ridge
    return along / noise_norm if noise_norm > 0 else np.full(kernel.n_components, np.inf)
