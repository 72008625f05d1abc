"""PLS1 numerics (privsdr.core.pls, core.spectra) and the corn data (spec edpls_001.md §3.1, §7: O-5, O-7,
O-8, O-11, O-21), plus the analytic Gaussian calibration the paper mode uses (O-1 ... O-4)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.cross_decomposition import PLSRegression

from privsdr import core
from privsdr.accounting.gaussian import gaussian_delta
from privsdr.core.pls import predict
from privsdr.datasets import load_corn
from privsdr.mechanisms import gaussian_noise_multiplier

HSET = settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def regression_data(n: int, m: int, seed: int, offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m)) @ np.diag(np.linspace(1.0, 0.2, m)) + offset
    y = X @ rng.standard_normal(m) + 0.3 * rng.standard_normal(n)
    return X, y


def sklearn_coef(X: np.ndarray, y: np.ndarray, A: int) -> tuple[np.ndarray, PLSRegression]:
    sk = PLSRegression(n_components=A, scale=False).fit(X, y)
    return np.asarray(sk.coef_).reshape(-1), sk


# ==================================================================================================
# Algorithm B (NIPALS) and the kernel form against scikit-learn (O-5, O-7)
# ==================================================================================================
@pytest.mark.parametrize("n, m, A", [(50, 20, 5), (40, 60, 8), (200, 10, 10), (30, 5, 1)])
def test_nipals_equals_sklearn_and_kernel_form(n, m, A):
    X, y = regression_data(n, m, seed=n + m)
    fit = core.nipals_pls1(X, y, A)
    coef, sk = sklearn_coef(X, y, A)
    assert np.max(np.abs(fit.coef - coef)) < 1e-10
    assert np.max(np.abs(predict(fit.coef, fit.x_mean, fit.y_mean, X) - sk.predict(X).ravel())) < 1e-10
    # W equals x_weights_ up to the sign of each column; sklearn's scores are not unit-norm
    signs = np.sign(np.sum(fit.weights * sk.x_weights_, axis=0))
    assert np.max(np.abs(fit.weights - sk.x_weights_ * signs)) < 1e-8
    norms = np.linalg.norm(sk.x_scores_, axis=0)
    assert np.max(np.abs(fit.loadings - sk.x_loadings_ * norms * signs)) < 1e-8
    # T^T T = I, W^T W = I, P^T W upper triangular with diag ||E_a w_a|| > 0
    assert np.allclose(fit.scores.T @ fit.scores, np.eye(A), atol=1e-10)
    assert np.allclose(fit.weights.T @ fit.weights, np.eye(A), atol=1e-10)
    PW = fit.loadings.T @ fit.weights
    assert np.max(np.abs(np.tril(PW, -1))) < 1e-10 and np.all(np.diag(PW) > 0)
    # the kernel form on X^T X and X^T y of the centred data gives the same model (the S2 core)
    S, u, x_mean, y_mean = core.centred_moments(X, y)
    kernel = core.kernel_pls1(S, u, A)
    assert kernel.n_components == A
    assert np.max(np.abs(kernel.coef - coef)) < 1e-10
    assert np.allclose(kernel.weights, fit.weights, atol=1e-8)
    assert np.allclose(kernel.loadings, fit.loadings, atol=1e-8)
    assert np.allclose(kernel.y_loadings, fit.y_loadings, atol=1e-8)
    for a in range(1, A + 1):  # the whole path: b with a components
        assert np.max(np.abs(kernel.coef_path[:, a - 1] - sklearn_coef(X, y, a)[0])) < 1e-10


def test_corn_with_ten_components_equals_sklearn():
    corn = load_corn()
    X, y = corn.X, corn.y
    coef, sk = sklearn_coef(X, y, 10)
    assert np.max(np.abs(core.nipals_pls1(X, y, 10).coef - coef)) < 1e-10
    S, u, _, _ = core.centred_moments(X, y)
    assert np.max(np.abs(core.kernel_pls1(S, u, 10).coef - coef)) < 1e-10


def test_all_components_is_ols_on_centred_data():
    X, y = regression_data(80, 6, seed=3)
    fit = core.nipals_pls1(X, y, 6)
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    ols = np.linalg.lstsq(Xc, yc, rcond=None)[0]
    assert np.max(np.abs(fit.coef - ols)) < 1e-10


def test_kernel_stops_when_no_variance_is_left():
    X, y = regression_data(40, 3, seed=4)
    S, u, _, _ = core.centred_moments(X, y)
    assert core.kernel_pls1(S, u, 3).n_components == 3
    assert core.kernel_pls1(S, u, 5).n_components == 3  # rank 3: nothing beyond
    assert core.kernel_pls1(-np.eye(3), u, 2).n_components == 0  # no positive variance at all


def test_regression_vector_survives_a_singular_system():
    W = np.eye(4)[:, :2]
    b, cond = core.regression_vector(W, np.zeros((4, 2)), np.ones(2))  # P^T W = 0: least squares
    assert np.all(np.isfinite(b)) and not np.isfinite(cond) or cond > 1e14


# ==================================================================================================
# O-8 invariances, O-11 sensitivity identity (hypothesis)
# ==================================================================================================
@HSET
@given(seed=st.integers(0, 10_000), a=st.floats(0.1, 10.0), n=st.integers(12, 40), m=st.integers(2, 8))
def test_invariances(seed, a, n, m):
    X, y = regression_data(n, m, seed)
    A = min(3, m)
    b = core.nipals_pls1(X, y, A).coef
    perm = np.random.default_rng(seed).permutation(n)
    assert np.allclose(core.nipals_pls1(X[perm], y[perm], A).coef, b, atol=1e-9 * (1 + np.abs(b).max()))
    assert np.allclose(core.nipals_pls1(X, a * y, A).coef, a * b, atol=1e-8 * (1 + np.abs(a * b).max()))
    assert np.allclose(core.nipals_pls1(a * X, y, A).coef, b / a, atol=1e-8 * (1 + np.abs(b / a).max()))
    # per-component sign flips of (w, p, c) leave b unchanged
    fit = core.nipals_pls1(X, y, A)
    flips = np.where(np.arange(A) % 2 == 0, -1.0, 1.0)
    b_flipped, _ = core.regression_vector(fit.weights * flips, fit.loadings * flips, fit.y_loadings * flips)
    assert np.allclose(b_flipped, b, atol=1e-9 * (1 + np.abs(b).max()))


@HSET
@given(seed=st.integers(0, 10_000), n=st.integers(3, 30), m=st.integers(1, 10))
def test_sensitivity_identity_add_remove_without_recentring(seed, n, m):
    """||X^T y - X_{-i}^T y_{-i}|| = |y_i| ||x_i|| exactly, and |x^T w| <= ||x|| for unit w (O-11)."""
    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((n, m)), rng.standard_normal(n)
    i = int(rng.integers(n))
    keep = np.arange(n) != i
    change = np.linalg.norm(X.T @ y - X[keep].T @ y[keep])
    assert change == pytest.approx(abs(y[i]) * np.linalg.norm(X[i]), rel=1e-9, abs=1e-12)
    w = rng.standard_normal(m)
    w /= np.linalg.norm(w)
    assert abs(X[i] @ w) <= np.linalg.norm(X[i]) * (1 + 1e-12)


def test_recentring_breaks_the_papers_bound():
    """With centring on the data mean, removing one row moves X_c^T y_c by more than |y_i| ||x_i - xbar||
    (documents spec §4.5-2: the appendix ignores that centring moves every row)."""
    X = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])
    y = np.array([1.0, -1.0, 0.0])

    def centred_xty(X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (X - X.mean(axis=0)).T @ (y - y.mean())

    i = 1
    keep = np.arange(3) != i
    change = np.linalg.norm(centred_xty(X, y) - centred_xty(X[keep], y[keep]))
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    claimed = abs(yc[i]) * np.linalg.norm(Xc[i])
    assert change > claimed * 1.2


# ==================================================================================================
# the analytic Gaussian calibration of the paper mode (O-1 ... O-4)
# ==================================================================================================
def test_calibration_values():
    import dp_accounting

    assert gaussian_noise_multiplier(1.0, 1e-5) == pytest.approx(3.7306316348, rel=1e-9)
    table = {(1.0, 0.01): 1.87788, (10.0, 0.01): 0.350097, (100.0, 0.01): 0.0828541, (0.1, 0.01): 9.54182,
             (1.0, 0.05): 1.33278, (5.0, 0.001): 0.689842}
    for (eps, delta), z in table.items():
        assert gaussian_noise_multiplier(eps, delta) == pytest.approx(z, rel=1e-5)
        assert gaussian_noise_multiplier(eps, delta) == pytest.approx(dp_accounting.get_sigma_gaussian(eps, delta), rel=1e-6)


def test_calibration_is_exact_monotone_and_survives_large_epsilon():
    for eps, delta in [(0.5, 1e-3), (1.0, 0.01), (10.0, 1e-5), (100.0, 0.01)]:
        z = gaussian_noise_multiplier(eps, delta)
        assert gaussian_delta(z, eps) <= delta  # O-2: delta(sigma*) <= delta
        assert gaussian_delta(0.999 * z, eps) > delta  # and it is the smallest such sigma
    zs = [gaussian_noise_multiplier(e, 0.01) for e in (0.5, 1, 2, 10, 100, 1000)]
    assert all(a > b for a, b in itertools.pairwise(zs))  # O-3: strictly decreasing in eps
    assert gaussian_noise_multiplier(1.0, 0.001) > gaussian_noise_multiplier(1.0, 0.01) > gaussian_noise_multiplier(1.0, 0.05)
    assert math.isfinite(gaussian_noise_multiplier(1000.0, 0.01))  # no e^eps overflow
    # O-4: the classical formula is larger for eps <= 1 but SMALLER (invalid) at eps = 10
    assert gaussian_noise_multiplier(1.0, 0.01, "classical") == pytest.approx(3.10751, rel=1e-5)
    assert gaussian_noise_multiplier(1.0, 0.01, "classical") > gaussian_noise_multiplier(1.0, 0.01)
    assert gaussian_noise_multiplier(10.0, 0.01, "classical") < gaussian_noise_multiplier(10.0, 0.01)


# ==================================================================================================
# preprocessing (row-local) and the corn data (O-21)
# ==================================================================================================
def test_corn_loader():
    corn = load_corn()
    assert corn.X.shape == (80, 700) and corn.y.shape == (80,)
    assert np.array_equal(corn.wavelengths, np.arange(1100, 2499, 2).astype(float))
    assert corn.y.mean() == pytest.approx(10.2335, abs=1e-4)
    assert corn.y.min() == pytest.approx(9.377) and corn.y.max() == pytest.approx(10.993)
    assert np.linalg.norm(corn.X - corn.X.mean(axis=0), axis=1).max() == pytest.approx(2.912, abs=1e-3)
    assert load_corn("starch").y.shape == (80,)
    with pytest.raises(ValueError):
        load_corn("gluten")


def test_corn_baseline_pls_accuracy():
    """O-21: non-private PLS, 10 LVs, raw m5/moisture: median RMSEP/sigma_y ~ 0.05 over 70/30 splits."""
    corn = load_corn()
    X, y = corn.X, corn.y
    errors = []
    for seed in range(10):
        idx = np.random.default_rng(seed).permutation(80)
        tr, te = idx[:56], idx[56:]
        fit = core.nipals_pls1(X[tr], y[tr], 10)
        errors.append(np.sqrt(np.mean((predict(fit.coef, fit.x_mean, fit.y_mean, X[te]) - y[te]) ** 2)) / y.std())
    assert 0.02 < np.median(errors) < 0.1


def test_row_local_preprocessing_only_reads_its_row():
    corn = load_corn()
    X = corn.X[:10]
    Y = X.copy()
    Y[3] = Y[3] ** 2 + 0.01 * np.sin(np.arange(700) / 7.0)  # change one row (not affinely: SNV/MSC ignore that)
    ref = corn.X[40:].mean(axis=0)  # a reference from other (public) rows
    for transform in (lambda Z: core.savgol(Z, 5, 2, 1), core.snv, lambda Z: core.msc(Z, ref), lambda Z: core.airpls(Z)):
        a, b = transform(X), transform(Y)
        same = np.arange(10) != 3
        assert np.allclose(a[same], b[same], atol=0, rtol=0)
        assert not np.allclose(a[3], b[3])


def test_preprocessing_values():
    x = np.linspace(0.0, 1.0, 50)
    X = np.vstack([2.0 * x + 1.0, x**2])
    d = core.savgol(X, 5, 2, 1)
    assert np.allclose(d[0], 2.0 / 49, atol=1e-12)  # derivative per channel of a line
    ref = np.sin(np.linspace(0, 3, 50)) + 2.0
    assert np.allclose(core.msc((3.0 * ref + 0.5)[None, :], ref), ref[None, :], atol=1e-12)
    assert np.allclose(core.snv(X).mean(axis=1), 0.0, atol=1e-12) and np.allclose(core.snv(X).std(axis=1), 1.0)
    # airPLS removes a smooth baseline under a narrow peak
    grid = np.arange(300.0)
    peak = np.exp(-((grid - 150) ** 2) / 20.0)
    baseline = 0.002 * grid + 0.5
    corrected = core.airpls((peak + baseline)[None, :], lam=1e4, order=2, max_iter=30)[0]
    assert np.abs(corrected - peak).max() < 0.05
    with pytest.raises(ValueError):
        core.savgol(X, 4, 2, 1)
    with pytest.raises(ValueError):
        core.msc(X, np.ones(50))
