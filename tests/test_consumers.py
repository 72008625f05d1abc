"""Each sufficient-statistics estimator's consumer (``<estimator>_from_released``) on a hand-built ``Released``.

Noise off (every scale 0): the fitted state equals an independent numpy reference on the rows the statistics were
built from. Noise on (hand-set public scales): the diagnostics are the closed forms of the public scales, so a
consumer that reads a wrong scale (another array's, or none) is caught. The replay harness (``tests/test_replay.py``
(e)) checks that each fit is its consumer on its own record.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from privsdr.errors import NoiseDominatesWarning
from privsdr.released import Released

RNG = np.random.default_rng(7)
N, P = 400, 4
X = RNG.uniform(-1.0, 1.0, (N, P)) @ np.diag([1.0, 0.8, 0.6, 0.4])  # ||x|| <= 1.64 < 2: no row is clipped
Y = X @ np.array([1.0, -0.5, 0.25, 0.0]) + 0.1 * RNG.standard_normal(N)  # |y| < 3: no label is clipped


def released(arrays, scales=None, n=N, relation="replace_one"):
    """A hand-built record (noise off unless ``scales`` is given)."""
    return Released(arrays, scales or dict.fromkeys(arrays, 0.0), n, relation, "hand-built")


def projector(B):
    Q = np.linalg.qr(B)[0]
    return Q @ Q.T


# -- DPMeanCovariance -----------------------------------------------------------------------------------------------
def test_mean_covariance_noise_off_is_the_empirical_mean_and_covariance():
    from privsdr.algorithms.mean_covariance import mean_covariance_from_released

    fitted = mean_covariance_from_released(released({"mean": X.mean(axis=0), "second_moment": X.T @ X / N}), 2.0, np.zeros(P))
    np.testing.assert_allclose(fitted["mean_"], X.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(fitted["covariance_"], np.cov(X.T, bias=True), atol=1e-10)
    assert fitted["noise_ratio_"] == 0.0 and not fitted.warnings


def test_mean_covariance_diagnostic_is_each_release_s_own_scale_over_its_public_bound():
    from privsdr.algorithms.mean_covariance import mean_covariance_from_released

    arrays = {"mean": X.mean(axis=0), "second_moment": X.T @ X / N}
    quiet = mean_covariance_from_released(released(arrays, {"mean": 0.3, "second_moment": 0.8}), 2.0)
    assert quiet.diagnostics[0].values["mean_noise_ratio"] == pytest.approx(0.3 / 2.0)
    assert quiet.diagnostics[0].values["covariance_noise_ratio"] == pytest.approx(0.8 / 4.0)
    assert quiet["noise_ratio_"] == pytest.approx(0.2) and not quiet.warnings
    loud = mean_covariance_from_released(released(arrays, {"mean": 0.1, "second_moment": 2.4}), 2.0)
    assert loud["noise_ratio_"] == pytest.approx(0.6) and loud.warnings[0][0] is NoiseDominatesWarning


# -- DPStandardScaler -----------------------------------------------------------------------------------------------
def test_standard_scaler_noise_off_is_the_column_mean_and_sd():
    from privsdr.preprocessing.standard import standard_scaler_from_released

    center, bounds = np.full(P, 0.1), np.full(P, 1.5)
    U = (X - center) / bounds  # within [-1, 1]: the clip does nothing
    fitted = standard_scaler_from_released(released({"mean": U.mean(axis=0), "second_moment": (U * U).mean(axis=0)}), bounds,
                                           center, 1e-3)
    np.testing.assert_allclose(fitted["mean_"], X.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(fitted["var_"], X.var(axis=0), atol=1e-12)
    np.testing.assert_allclose(fitted["scale_"], X.std(axis=0), atol=1e-12)
    assert fitted["n_samples_seen_"] == N


def test_standard_scaler_diagnostic_reads_both_scales():
    from privsdr.preprocessing.standard import standard_scaler_from_released

    arrays = {"mean": np.zeros(P), "second_moment": np.full(P, 0.3)}
    fitted = standard_scaler_from_released(released(arrays, {"mean": 0.2, "second_moment": 0.7}), np.ones(P), np.zeros(P), 1e-3)
    values = fitted.diagnostics[0].values
    assert (values["mean_noise_ratio"], values["second_moment_noise_ratio"], fitted["noise_ratio_"]) == (0.2, 0.7, 0.7)
    assert fitted.warnings and fitted.warnings[0][0] is NoiseDominatesWarning


# -- MSC ---------------------------------------------------------------------------------------------------------------
def test_msc_noise_off_reference_is_the_mean_spectrum():
    from privsdr.algorithms.spectral import msc_from_released

    center = np.full(P, 0.5)
    fitted = msc_from_released(released({"count": [float(N)], "sum": (X - center).sum(axis=0)}, n=0, relation="add_remove"),
                               center)
    np.testing.assert_allclose(fitted["reference_"], X.mean(axis=0), atol=1e-12)


# -- DPSparsePCA (moments) ----------------------------------------------------------------------------------------------
def test_sparse_pca_noise_off_is_the_top_eigenvectors_on_the_support():
    from privsdr.algorithms.sparse_pca import sparse_pca_from_released

    support = np.array([0, 2])
    XS = X[:, support]
    fitted = sparse_pca_from_released(released({"support": support, "sigma": XS.T @ XS / N}), P, 1, 2, np.random.default_rng(0))
    values, vectors = np.linalg.eigh(XS.T @ XS / N)
    expected = np.zeros((P, 1))
    expected[support, 0] = vectors[:, -1]
    np.testing.assert_allclose(projector(fitted["components_"]), projector(expected), atol=1e-10)
    np.testing.assert_array_equal(fitted["support_"], support)
    assert fitted["noise_error_"] == 0.0


def test_sparse_pca_co_variation_is_the_off_diagonal_energy_over_sigma_s_own_noise():
    from privsdr.algorithms.sparse_pca import sparse_pca_from_released

    sigma = np.array([[1.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 1.0]])
    record = released({"support": [0, 1, 3], "sigma": sigma}, {"support": 5.0, "sigma": 0.05})
    fitted = sparse_pca_from_released(record, P, 1, 3)
    energy = np.array([0.3**2, 0.3**2 + 0.1**2, 0.1**2])
    np.testing.assert_allclose(fitted["co_variation_"], energy / (2 * 0.05**2))
    assert "noise_error_" not in fitted.attributes  # no rng: no bootstrap


def test_a_consumer_raises_nothing_itself():
    """Warnings are part of the fitted state; the fit raises them (``Fitted.apply``)."""
    from privsdr.algorithms.mean_covariance import mean_covariance_from_released

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = mean_covariance_from_released(released({"mean": np.zeros(P), "second_moment": np.eye(P)},
                                                        {"mean": 5.0, "second_moment": 5.0}), 1.0)
    assert fitted.warnings

    class Target:
        pass

    with pytest.warns(NoiseDominatesWarning):
        fitted.apply(Target())


# -- AdaSSPRegression ---------------------------------------------------------------------------------------------------
def _ols(X, y):
    Z = np.column_stack([X, np.ones(len(y))])
    theta = np.linalg.lstsq(Z, y, rcond=None)[0]
    return theta[:-1], float(theta[-1])


def test_adassp_certified_default_noise_off_is_ols():
    from privsdr.algorithms.adassp import adassp_from_released

    arrays = {"count": [float(N)], "x_sum": X.sum(axis=0), "y_sum": [Y.sum()], "xtx": X.T @ X, "xty": X.T @ Y}
    fitted = adassp_from_released(released(arrays, n=0, relation="add_remove"), bound_x=2.0, bound_y=3.0, x_center=np.zeros(P))
    coef, intercept = _ols(X, Y)
    np.testing.assert_allclose(fitted["coef_"], coef, atol=1e-9)
    assert fitted["intercept_"] == pytest.approx(intercept, abs=1e-9)
    assert (fitted["ridge_"], fitted["noise_ratio_"], fitted["shrinkage_factor_"]) == (0.0, 0.0, 1.0)


def test_adassp_as_published_noise_off_is_ols_on_the_design_with_its_constant_column():
    from privsdr.algorithms.adassp import adassp_from_released

    Z = np.column_stack([X, np.full(N, 2.0)])
    arrays = {"lambda_min": [np.linalg.eigvalsh(Z.T @ Z)[0]], "xtx": Z.T @ Z, "xty": Z.T @ Y}
    fitted = adassp_from_released(released(arrays, n=0, relation="add_remove"), bound_x=2.0, bound_y=3.0, x_center=np.zeros(P),
                                  shrinkage="none")
    coef, intercept = _ols(X, Y)
    np.testing.assert_allclose(fitted["coef_"], coef, atol=1e-9)
    assert fitted["intercept_"] == pytest.approx(intercept, abs=1e-9)


def test_adassp_ridge_reads_the_gram_s_and_the_eigenvalue_s_own_scales():
    """lambda_lo = lambda_min~ - s_lambda sqrt(2 log(3 / rho)), ridge = s_G sqrt(d log(2 d^2 / rho)) - lambda_lo (Wang 2018)."""
    from privsdr.algorithms.adassp import adassp_from_released

    arrays = {"lambda_min": [40.0], "xtx": X.T @ X, "xty": X.T @ Y}
    record = released(arrays, {"lambda_min": 3.0, "xtx": 10.0, "xty": 1.0}, n=0, relation="add_remove")
    fitted = adassp_from_released(record, bound_x=2.0, bound_y=3.0, x_center=np.zeros(P), fit_intercept=False,
                                  shrinkage="none", diagnose_noise=False)
    rho = 0.05
    lambda_lo = 40.0 - 3.0 * np.sqrt(2.0 * np.log(3.0 / rho))
    assert fitted["lambda_lower_"] == pytest.approx(lambda_lo)
    assert fitted["ridge_"] == pytest.approx(10.0 * np.sqrt(P * np.log(2.0 * P * P / rho)) - lambda_lo)
    np.testing.assert_allclose(fitted["coef_"], np.linalg.solve(X.T @ X + fitted["ridge_"] * np.eye(P), X.T @ Y))


# -- DPPLS certified (S2) -------------------------------------------------------------------------------------------------
S2 = {"count": [float(N)], "x_sum": X.sum(axis=0), "y_sum": [Y.sum()], "xtx": X.T @ X, "xty": X.T @ Y}


def test_pls_s2_noise_off_with_every_component_is_ols():
    from privsdr.algorithms.pls import pls_from_released

    fitted = pls_from_released(released(S2, n=0, relation="add_remove"), n_components=P, bound_x=2.0, bound_y=3.0,
                               x_center=np.zeros(P))
    coef, intercept = _ols(X, Y)
    np.testing.assert_allclose(fitted["coef_"], coef, atol=1e-8)
    assert fitted["intercept_"] == pytest.approx(intercept, abs=1e-8)
    np.testing.assert_allclose(fitted["x_mean_"], X.mean(axis=0), atol=1e-12)
    assert (fitted["n_components_"], fitted["noise_ratio_"]) == (P, 0.0)


def test_pls_s2_one_component_is_the_first_pls_direction():
    """One component: the weight is the centred X^T y / ||.|| and the slope its least-squares fit (PLS1, Wold)."""
    from privsdr.algorithms.pls import pls_from_released

    fitted = pls_from_released(released(S2, n=0, relation="add_remove"), n_components=1, bound_x=2.0, bound_y=3.0,
                               x_center=np.zeros(P))
    Xc, yc = X - X.mean(axis=0), Y - Y.mean()
    w = Xc.T @ yc / np.linalg.norm(Xc.T @ yc)
    t = Xc @ w
    np.testing.assert_allclose(fitted["coef_"], w * (t @ yc) / (t @ t), atol=1e-9)


def test_pls_s2_pre_test_reads_the_released_xty_s_own_scale():
    """The same arrays: a centred X^T y far above its noise keeps its components, one buried under it (the record's
    scale of xty) gives the trivial model; the other scales are equal in both."""
    from privsdr.algorithms.pls import pls_from_released

    u = np.linalg.norm(X.T @ Y - X.sum(axis=0) * Y.sum() / N)
    kw = {"n_components": 1, "bound_x": 2.0, "bound_y": 3.0, "x_center": np.zeros(P), "diagnose_noise": False}
    low = dict.fromkeys(S2, 1e-6)
    kept = pls_from_released(released(S2, low, n=0, relation="add_remove"), **kw)
    dropped = pls_from_released(released(S2, {**low, "xty": 10.0 * u}, n=0, relation="add_remove"), **kw)
    assert kept["n_components_"] == 1 and dropped["n_components_"] == 0
    assert np.all(dropped["coef_"] == 0.0)


# -- DPSIR and SparseDPSIR (moments) ---------------------------------------------------------------------------------------
CUTS = np.quantile(Y, [1 / 3, 2 / 3])


def _moments(cols):
    labels = np.searchsorted(CUTS, Y, side="right")
    Xs = X[:, cols]
    sums = np.stack([Xs[labels == h].sum(axis=0) for h in range(3)], axis=1) / N
    return {"slice_sums": sums, "slice_counts": np.bincount(labels, minlength=3) / N, "second_moment": Xs.T @ Xs / N}, labels


def _sir_reference(Xs, labels, K):
    """SIR (Li 1991): the top generalized eigenvectors of (sum_h p_h (m_h - m)(m_h - m)^T, Cov(x))."""
    from scipy.linalg import eigh

    m = Xs.mean(axis=0)
    M = sum(np.mean(labels == h) * np.outer(Xs[labels == h].mean(axis=0) - m, Xs[labels == h].mean(axis=0) - m) for h in range(3))
    values, vectors = eigh(M, np.cov(Xs.T, bias=True))
    return vectors[:, ::-1][:, :K], values[::-1]


def test_sir_noise_off_is_li_s_sir():
    from privsdr.algorithms.dpsir import sir_from_released

    arrays, labels = _moments(np.arange(P))
    fitted = sir_from_released(released(arrays), n_directions=1, cut_points=CUTS, center=np.zeros(P), rng=np.random.default_rng(0))
    B, values = _sir_reference(X, labels, 1)
    np.testing.assert_allclose(projector(fitted["directions_"]), projector(B), atol=1e-8)
    np.testing.assert_allclose(fitted["eigenvalues_"], values[:2], atol=1e-8)
    np.testing.assert_allclose(fitted["center_"], X.mean(axis=0), atol=1e-12)
    assert fitted["noise_error_"] == 0.0


def test_sparse_sir_noise_off_is_li_s_sir_on_the_support():
    from privsdr.algorithms.dpsir import sparse_sir_from_released

    support = np.array([0, 1, 3])
    arrays, labels = _moments(support)
    fitted = sparse_sir_from_released(released({**arrays, "support": support}), n_directions=1, sparsity=3, n_features=P,
                                      cut_points=CUTS, center=np.zeros(P), bounds=np.ones(P))
    B, _ = _sir_reference(X[:, support], labels, 1)
    expected = np.zeros((P, 1))
    expected[support] = B
    np.testing.assert_allclose(projector(fitted["directions_"]), projector(expected), atol=1e-8)
    np.testing.assert_array_equal(fitted["screened_"], support)


def test_sparse_sir_selection_margin_reads_the_support_s_own_scale():
    """The chance that a column as strong as the weakest selected one loses a round grows with the selection's noise
    (the record's scale of ``support``), and with no other scale changed."""
    from privsdr.algorithms.dpsir import sparse_sir_from_released

    support = np.array([0, 1])
    arrays, _ = _moments(support)
    kw = {"n_directions": 1, "sparsity": 2, "n_features": P, "cut_points": CUTS, "center": np.zeros(P), "bounds": np.ones(P)}
    scales = {"slice_sums": 1e-4, "slice_counts": 1e-4, "second_moment": 1e-4}
    quiet = sparse_sir_from_released(released({**arrays, "support": support}, {**scales, "support": 1e-4}), **kw)
    loud = sparse_sir_from_released(released({**arrays, "support": support}, {**scales, "support": 0.5}), **kw)
    assert quiet["miss_probability_"] < 0.05 <= loud["miss_probability_"]


# -- the FSIR merge ----------------------------------------------------------------------------------------------------------
def _client(rows):
    labels = np.searchsorted(CUTS, Y[rows], side="right")
    Xk, n = X[rows], len(rows)
    arrays = {"slice_means": np.stack([Xk[labels == h].sum(axis=0) for h in range(3)], axis=1) / n,
              "second_moment": Xk.T @ Xk / n, "proportions": np.bincount(labels, minlength=3) / n}
    return released(arrays, n=n)


def test_fsir_merge_noise_off_is_the_pooled_estimate():
    """Three clients of unequal sizes: the merged record's estimate is Sigma^-1 u_1 of the pooled rows (u_1 the top left
    singular vector of the centred, proportion-weighted slice means), the pooled mean its centre."""
    from privsdr.federated.server import fsir_from_released, merged_released

    parts = [np.arange(0, 50), np.arange(50, 210), np.arange(210, N)]
    fitted = fsir_from_released(merged_released([_client(r) for r in parts]), n_directions=1, centred=True, center=np.zeros(P))
    labels = np.searchsorted(CUTS, Y, side="right")
    mu = X.mean(axis=0)
    Mc = np.stack([np.mean(labels == h) * (X[labels == h].mean(axis=0) - mu) for h in range(3)], axis=1)
    beta = np.linalg.solve(np.cov(X.T, bias=True), np.linalg.svd(Mc)[0][:, :1])
    np.testing.assert_allclose(projector(fitted["directions_"]), projector(beta), atol=1e-9)
    np.testing.assert_allclose(fitted["center_"], mu, atol=1e-12)


def test_fsir_merged_noise_sd_weighs_each_client_s_own_scale():
    from privsdr.federated.server import merged_released

    a, b = _client(np.arange(0, 100)), _client(np.arange(100, N))
    a = Released(a.arrays, {"slice_means": 0.2, "second_moment": 0.1, "proportions": 0.05}, a.n, a.relation, a.source)
    b = Released(b.arrays, {"slice_means": 0.4, "second_moment": 0.3, "proportions": 0.0}, b.n, b.relation, b.source)
    merged = merged_released([a, b])
    assert merged.n == N
    for name in ("slice_means", "second_moment", "proportions"):
        assert merged.scales[name] == pytest.approx(np.hypot(100 * a.scales[name], 300 * b.scales[name]) / N)


def test_sir_noise_error_grows_with_the_record_s_scales():
    """The parametric bootstrap re-noises the record at its own scales: none, none; ten times larger, larger."""
    from privsdr.algorithms.dpsir import sir_from_released

    arrays, _ = _moments(np.arange(P))
    kw = {"n_directions": 1, "cut_points": CUTS, "center": np.zeros(P)}
    small = {"slice_sums": 1e-3, "slice_counts": 1e-3, "second_moment": 1e-3}
    errors = [sir_from_released(released(arrays, {k: f * v for k, v in small.items()}), rng=np.random.default_rng(5), **kw)
              ["noise_error_"] for f in (0.0, 1.0, 10.0)]
    assert errors[0] == 0.0 < errors[1] < errors[2]
