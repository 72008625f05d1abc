"""The noise diagnostic of a regression fitted from released sufficient statistics (Z^T Z and Z^T y).

The rule has the meaning of DPSIR's (``moments.NOISE_WARNING_SHARE``): the released statistics are re-noised at
their public scales (a parametric bootstrap, post-processing: no cost), the model is refitted on each draw, and the
change of the fitted slopes is measured in the metric S of the centred, released Gram the fit itself solves with
(AdaSSP: the Schur complement of the constant column in Z^T Z~ + lambda I, positive definite whenever the ridge
covers the Gram's noise, w.p. >= 1 - rho; DPPLS S2: its centred, ridged, PSD-repaired X^T X~):

    signal = b^T S b,        noise = median_r (b*_r - b)^T S (b*_r - b),        ratio = sqrt(noise / signal),

the root-mean-square change of the fitted predictions the noise alone induces, relative to the spread of the fitted
predictions themselves. When ratio > 1/2 the released statistics cannot tell the fitted model from the trivial one
(the constant prediction) reliably: the fit warns ``NoiseDominatesWarning`` and its report says so. Every quantity is
a released value or a public scale: no row count and no private data enter.

Never worse than the DP mean (issue 33, ``fallback_factor``): a certified regression scales its slopes by
max(0, 1 - ratio^2) and keeps its intercept at the DP means, so that a fit whose noise explains all of its spread is
the trivial model: the DP mean of y its own release carries (never a public centre).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import numpy as np

from .fitted import Diagnostic, with_noise_message  # noqa: F401 (with_noise_message: re-exported, its old home)
from .record import Released

#: warn when the noise alone moves the predictions by more than this share of their own spread
NOISE_WARNING_SHARE = 0.5


#: a fit keeps something fitted to noise alone with at most this probability: the level of its pre-tests together
#: (one test: this level; k tests, as DP-BCD's steps: this level / k each, Bonferroni)
PRETEST_LEVEL = 0.05


def stands_above_noise(energy: float, expected: float, spread: float, level: float = PRETEST_LEVEL) -> bool:
    """The pre-test of a noise-aware shrinkage (Sclove, Morris & Radhakrishnan 1972): is ``energy`` above the 1 - level
    quantile of the energy of noise alone, sum_j lambda_j chi^2_1 with sum lambda = ``expected`` and sum lambda^2 =
    ``spread``, approximated by (spread / expected) chi^2_nu, nu = expected^2 / spread (Satterthwaite 1946)?"""
    if expected <= 0.0:
        return energy > 0.0
    nu = expected**2 / spread if spread > 0 else 1.0
    threshold = spread / expected * chi2_quantile(1.0 - level, nu) if spread > 0 else expected
    return energy > max(threshold, expected)


def chi2_quantile(q: float, dof: float) -> float:
    """The q quantile of chi^2_dof, 2 P^-1(dof / 2, q) with P the regularized lower incomplete gamma function: what
    ``scipy.stats.chi2.ppf(q, dof)`` returns (bit for bit: it computes this), without its argument handling, which costs
    ~50x the quantile itself in the pre-tests that run once per step of every fit."""
    from scipy.special import gammaincinv

    return float(2.0 * gammaincinv(dof / 2.0, q))


def shrinkage_factor(energy: float, expected: float, spread: float | None = None, level: float = PRETEST_LEVEL) -> float:
    """The positive-part James-Stein factor max(0, 1 - expected / energy) (James & Stein 1961; Baranchik 1964): the
    share of an estimate's energy that its noise alone does not explain; 1 with no noise, 0 when the energy is not
    positive. With ``spread`` (sum lambda^2 of the noise energy) the estimate must also pass ``stands_above_noise`` at
    ``level``, else the factor is 0 (a pre-test estimator)."""
    if expected == 0.0:
        return 1.0
    if not energy > 0.0 or (spread is not None and not stands_above_noise(energy, expected, spread, level)):
        return 0.0
    return max(0.0, 1.0 - expected / energy)


def fallback_factor(ratio: float) -> float:
    """The certified regressions' one fallback rule (issue 33): the slopes are scaled by max(0, 1 - r^2), the share of
    the predictions' spread the noise does not explain (positive-part James-Stein on the predictions; James & Stein
    1961), so at r >= 1, and when the released signal is not positive (r = inf), the prediction is the DP mean of y
    the release carries. Post-processing of the noise ratio, itself a function of releases and public scales."""
    return shrinkage_factor(1.0, ratio**2) if math.isfinite(ratio) else 0.0


def towards_dp_mean(coef: np.ndarray, intercept: float, dp_x_mean: np.ndarray, ratio: float) -> tuple[np.ndarray, float, float]:
    """(coef, intercept, factor) of ``fallback_factor``'s rule: the slopes times f = max(0, 1 - ratio^2), the intercept
    moved by (1 - f) coef^T x_bar, so that a fit whose prediction at the DP mean x_bar of x (in the columns' own units)
    is the DP mean of y keeps it there and is that mean at f = 0 (issue 33). Post-processing only."""
    factor = fallback_factor(ratio)
    coef = np.asarray(coef, dtype=float)
    return factor * coef, float(intercept) + (1.0 - factor) * float(coef @ np.asarray(dp_x_mean, dtype=float)), factor


def signal_in(values: np.ndarray, variances: np.ndarray, level: float = PRETEST_LEVEL) -> bool:
    """Does a released vector stand above its own noise N(0, diag(variances))? ||values||^2 against
    sum_j v_j chi^2_1 (``stands_above_noise``); with no noise any vector does."""
    variances = np.broadcast_to(np.asarray(variances, dtype=float), np.shape(values))
    expected = float(np.sum(variances))
    return expected == 0.0 or stands_above_noise(float(values @ values), expected, float(np.sum(np.square(variances))), level)


def symmetric_noise(scale: float, size: int, rng: np.random.Generator, reps: int | None = None) -> np.ndarray:
    """One draw of a symmetric matrix Gaussian's noise (Analyze-Gauss): the upper triangle with the diagonal drawn at
    ``scale``, mirrored. For the parametric bootstraps of symmetric releases. ``reps``: that many draws, stacked on a
    leading axis (the same normals as ``reps`` single draws)."""
    return symmetric_from_normals(scale, rng.standard_normal((size, size) if reps is None else (reps, size, size)))


def symmetric_from_normals(scale: float, normals: np.ndarray) -> np.ndarray:
    """The symmetric noise of standard ``normals`` (..., p, p): their upper triangle with the diagonal at ``scale``,
    mirrored (``symmetric_noise`` draws them; a bootstrap that draws its normals in another order passes its own)."""
    upper = np.triu(scale * normals)
    noise: np.ndarray = upper + np.swapaxes(np.triu(upper, 1), -1, -2)
    return noise


def renoised(released: Released, rng: np.random.Generator, symmetric: Iterable[str] = ("xtx",)) -> Released:
    """The release with fresh noise at its public scales added to every array (one parametric-bootstrap draw);
    arrays named in ``symmetric`` get symmetric noise (upper triangle drawn, mirrored)."""
    return next(renoised_draws(released, rng, 1, symmetric))


#: the most bytes of bootstrap normals ``renoised_draws`` holds at once (draws are made in blocks of rows under it)
DRAW_BLOCK_BYTES = 1 << 24


def renoised_draws(released: Released, rng: np.random.Generator, reps: int, symmetric: Iterable[str] = ("xtx",)
                   ) -> Iterator[Released]:
    """``reps`` draws of ``renoised``, the same numbers as ``reps`` calls of it in a row, made in blocks of draws
    (``renoised_blocks``)."""
    for count, stacked in _counted_blocks(released, rng, reps, symmetric):
        for r in range(count):
            yield attrs.evolve(released, arrays={name: draws[r] for name, draws in stacked.items()})


def renoised_blocks(released: Released, rng: np.random.Generator, reps: int, symmetric: Iterable[str] = ("xtx",)
                    ) -> Iterator[dict[str, np.ndarray]]:
    """``renoised_draws``' arrays stacked on a leading axis of draws, a block of draws at a time (at most
    ``DRAW_BLOCK_BYTES`` of normals at a time, so that memory does not grow with ``reps``): one generator call per
    block (a generator fills an array in order, so the normals of draw r, array by array, are row r of the
    (reps, total) block, and blocks drawn in turn continue the same stream) and each array's noise computed for the
    block's draws at once."""
    for _, stacked in _counted_blocks(released, rng, reps, symmetric):
        yield stacked


def _counted_blocks(released: Released, rng: np.random.Generator, reps: int, symmetric: Iterable[str]
                    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    square = set(symmetric)
    items = list(released.arrays.items())
    sizes = [value.size for _, value in items]
    total = sum(sizes)
    per_block = max(1, DRAW_BLOCK_BYTES // max(8 * total, 1))
    for first in range(0, reps, per_block):
        count = min(per_block, reps - first)
        normals = rng.standard_normal((count, total))
        stacked = {}
        start = 0
        for (name, value), size in zip(items, sizes, strict=True):
            block = normals[:, start:start + size].reshape((count, *value.shape))
            start += size
            scale = released.scales.get(name, 0.0)
            noise = symmetric_from_normals(scale, block) if name in square and value.ndim == 2 else scale * block
            stacked[name] = value + noise
        yield count, stacked


def slope_gram(gram: np.ndarray, intercept: bool) -> np.ndarray:
    """The centred Gram of the slopes: the Schur complement of the last (constant) column when there is one."""
    if not intercept:
        return gram
    g, c = gram[:-1, -1], gram[-1, -1]
    return gram[:-1, :-1] - np.outer(g, g) / c if c > 0 else gram[:-1, :-1]


def dp_centred(gram: np.ndarray, xty: np.ndarray, constant: float, label_bound: float | None = None
               ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """(x_bar, y_bar, S, v) from a release whose last column is the constant c: the noisy count n~ = G_cc / c^2
    (at least 1) and sums give the DP means x_bar = G_xc / (c n~), y_bar = (Z^T y)_c / (c n~) (clamped into
    +-``label_bound``), and the centred statistics S = G_xx - n~ x_bar x_bar^T, v = (Z^T y)_x - n~ y_bar x_bar."""
    n_t = dp_count(gram, constant)
    x_bar = gram[:-1, -1] / constant / n_t
    y_bar = float(xty[-1]) / constant / n_t
    if label_bound is not None:
        y_bar = float(np.clip(y_bar, -label_bound, label_bound))
    return x_bar, y_bar, gram[:-1, :-1] - n_t * np.outer(x_bar, x_bar), xty[:-1] - n_t * y_bar * x_bar


def dp_count(gram: np.ndarray, constant: float) -> float:
    """The noisy row count a release with a constant column c carries: n~ = G_cc / c^2, at least 1."""
    return max(float(gram[-1, -1]) / constant**2, 1.0)


def centring_variance(sum_x_sd: float, sum_y_sd: float, x_bar: np.ndarray, y_bar: float, n: float) -> np.ndarray:
    """The noise variance per entry that centring at DP means adds to X^T y: u = X^T y - (sum y)(sum x) / n takes the
    noise of the released sums as y_bar e_sumx + x_bar e_sumy + e_sumx e_sumy / n, so
    (y_bar s_sumx)^2 + (x_bar_j s_sumy)^2 + (s_sumx s_sumy / n)^2 (to second order). For DPPLS's pre-test."""
    return (y_bar * sum_x_sd) ** 2 + (np.asarray(x_bar) * sum_y_sd) ** 2 + (sum_x_sd * sum_y_sd / n) ** 2


def noise_ratio(released: Released, slopes: Callable[[Released], np.ndarray], metric: np.ndarray, rng: np.random.Generator,
                reps: int = 30, symmetric: Iterable[str] = ("xtx",),
                stacked_slopes: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None) -> float:
    """sqrt(noise / signal) of the module docstring: ``slopes(release)`` refits the slopes from a release, ``metric``
    is S (0 with noise off; inf when the released signal b^T S b is not positive). ``stacked_slopes(arrays)``, when
    given, refits a block of draws at once (``renoised_blocks``' arrays, a leading axis of draws; one row of slopes
    per draw): the same draws and the same refits as ``slopes`` one draw at a time, up to the last bits of batched
    linear algebra."""
    if all(s == 0 for s in released.scales.values()):
        return 0.0
    b = slopes(released)
    signal = float(b @ metric @ b)
    if not signal > 0:
        return math.inf
    changes: list[float] = []
    if stacked_slopes is not None:
        for stacked in renoised_blocks(released, rng, reps, symmetric):
            deltas = stacked_slopes(stacked) - b
            changes.extend(np.maximum(np.einsum("ri,ij,rj->r", deltas, metric, deltas), 0.0).tolist())
        return math.sqrt(float(np.median(changes)) / signal)
    for draw in renoised_draws(released, rng, reps, symmetric):
        delta = slopes(draw) - b
        changes.append(max(float(delta @ metric @ delta), 0.0))
    return math.sqrt(float(np.median(changes)) / signal)


def noise_message(ratio: float) -> str:
    if not math.isfinite(ratio):
        return ("the released statistics give the fitted slopes no positive spread of predictions: the model cannot be "
                "told from the constant prediction")
    verdict = ("cannot be told reliably from the constant prediction: more data or more budget is needed"
               if ratio > NOISE_WARNING_SHARE else "is well above the noise")
    return (f"the noise alone moves the fitted predictions by about {ratio:.3g} times their own spread (parametric "
            f"bootstrap of the released statistics): the model {verdict}")


def with_diagnostics(report: Any, ratio: float) -> Any:
    """The run's report with the regression noise diagnostic attached (post-processing: no cost)."""
    return with_noise_message(report, noise_message(ratio), noise_ratio=ratio if math.isfinite(ratio) else None)


#: what a warned fit that applied ``fallback_factor`` says it did
FALLBACK_NOTE = "its slopes were shrunk by max(0, 1 - ratio^2) towards the DP mean of y"
#: what a warned fit that dropped every slope says it did (certified DP-BCD: its steps were shrunk already)
ZEROED_NOTE = "every coefficient was set to 0: the fit predicts the DP mean of y"


def noise_warning(ratio: float, fallback: str | None = None) -> str | None:
    """The ``NoiseDominatesWarning`` text when ratio > NOISE_WARNING_SHARE (else None); ``fallback``: what the fit did
    about it (``FALLBACK_NOTE``, ``ZEROED_NOTE``)."""
    if not ratio > NOISE_WARNING_SHARE:
        return None
    how = f"by {ratio:.3g} times" if math.isfinite(ratio) else "without bound against"
    return (f"the noise alone moves the fitted predictions {how} their own spread (over {NOISE_WARNING_SHARE:g}): at this "
            "budget and sample size the model cannot be told reliably from the constant prediction"
            + (f"; {fallback}" if fallback else ""))


def diagnostic(ratio: float) -> Diagnostic:
    """The regression noise diagnostic as a ``fitted.Diagnostic`` (what ``with_diagnostics`` attaches)."""
    return Diagnostic("noise", noise_message(ratio), {"noise_ratio": ratio if math.isfinite(ratio) else None})


def warned(ratio: float, fallback: str | None = None) -> tuple[tuple[type[Warning], str], ...]:
    """The warnings a ``fitted.Fitted`` carries for this noise ratio: ``NoiseDominatesWarning`` with ``noise_warning``'s
    text when the noise wins, else none."""
    from ..errors import NoiseDominatesWarning

    text = noise_warning(ratio, fallback)
    return () if text is None else ((NoiseDominatesWarning, text),)


def warn_if_noise_wins(ratio: float, stacklevel: int = 4, fallback: str | None = None) -> None:
    """``NoiseDominatesWarning`` when ratio > NOISE_WARNING_SHARE (``noise_warning``)."""
    import warnings

    from ..errors import NoiseDominatesWarning

    if (text := noise_warning(ratio, fallback)) is not None:
        warnings.warn(text, NoiseDominatesWarning, stacklevel=stacklevel)
