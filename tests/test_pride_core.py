"""PRIDE numerics (spec pride_004.md §8): the SRHT (oracles 1, 2), the Kenthapadi calibration (3-5), the
local ridge and its references (9, 10, 12-14), the Theorem 2 bound's shape (17)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import hadamard
from sklearn.linear_model import Ridge

from privsdr.accounting import GaussianEvent, make_accountant
from privsdr.accounting.charge import Charge
from privsdr.accounting.gaussian import gaussian_delta_upper
from privsdr.core import (
    SRHT,
    LocalDesign,
    cv_path,
    dual_loco,
    fwht,
    kfold,
    local_ridge,
    naive_block_ridge,
    next_power_of_two,
    pride_error_bound,
    ridge,
    ridge_alpha,
    row_norm_sensitivity,
    sketches,
    split_columns,
)
from privsdr.mechanisms import gaussian_noise_multiplier

EPS_GRID = (0.1, 0.25, 0.5, 0.75, 1, 2, 5, 10, 20)
Z_TABLE = (21.9207, 9.0378, 4.7350, 3.2945, 2.5701, 1.4667, 0.7643, 0.4960, 0.3339)  # spec A2, delta = 0.05
TABLE_D2 = {  # spec §7.4, copied: max_k sigma_k at delta = 0.05, with max_k theta_k of Table 1
    7.41: (162.47, 66.99, 35.10, 24.42, 19.05, 10.87, 5.67, 3.68, 2.48),
    8.51: (186.59, 76.93, 40.30, 28.04, 21.88, 12.48, 6.51, 4.22, 2.84),
    10.92: (239.41, 98.71, 51.71, 35.98, 28.07, 16.02, 8.35, 5.42, 3.65),
}



@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Many small solves: on a loaded 2-core machine two BLAS threads make them 20-50x slower."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield

def kenthapadi(eps, delta):
    return gaussian_noise_multiplier(eps, delta, "kenthapadi")


# -- 1. the SRHT ------------------------------------------------------------------------------------
def test_fwht_is_the_sylvester_hadamard_product():
    X = np.random.default_rng(0).standard_normal((7, 64))
    assert np.allclose(fwht(X), X @ hadamard(64), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.ones((2, 12)))


@settings(max_examples=40, deadline=None)
@given(tau=st.integers(1, 300), frac=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1))
def test_oracle_1_srht_structure_for_any_width_and_sketch_dim(tau, frac, seed):
    padded = next_power_of_two(tau)
    tau_subs = 1 + int(frac * (padded - 1))
    s = SRHT.draw(tau, tau_subs, seed)
    P, P_full = s.matrix(), s.full_matrix()
    assert P.shape == (tau, tau_subs) and P_full.shape == (padded, tau_subs)
    assert np.allclose(np.abs(P), 1 / math.sqrt(tau_subs), rtol=1e-14, atol=0)  # every entry +-1/sqrt(tau_subs)
    assert row_norm_sensitivity(P) == pytest.approx(1.0, abs=1e-12) == s.row_norm  # w2(Pi) = 1
    assert np.allclose(P_full.T @ P_full, padded / tau_subs * np.eye(tau_subs), atol=1e-10)
    assert np.linalg.norm(P, 2) <= s.spectral_norm_bound * (1 + 1e-12)
    X = np.random.default_rng(seed % 1000).standard_normal((5, tau))
    assert np.allclose(s.apply(X), X @ P, rtol=0, atol=1e-10 * max(1.0, np.abs(X).sum()))  # fast == dense
    assert len(set(s.columns.tolist())) == tau_subs  # without replacement


def test_srht_refuses_a_sketch_wider_than_the_padded_block():
    with pytest.raises(ValueError, match=r"\[1, 8\]"):
        SRHT.draw(5, 9, 0)
    with pytest.raises(ValueError):
        SRHT.draw(5, 0, 0)
    assert SRHT.draw(5, 8, 0).matrix().shape == (5, 8)  # tau_subs = tau' is allowed (G25)


def test_oracle_2_srht_is_unbiased_and_the_sketch_kernel_gains_sigma2_tau_subs():
    tau, tau_subs, draws = 6, 3, 4000
    rng = np.random.default_rng(7)
    mean_ppt = np.zeros((tau, tau))
    for _ in range(draws):
        P = SRHT.draw(tau, tau_subs, rng).matrix()
        mean_ppt += P @ P.T / draws
    assert np.abs(mean_ppt - np.eye(tau)).max() < 0.08  # E[Pi Pi^T] = I (5 sd of a 4000-draw mean)
    X = np.random.default_rng(1).uniform(-1, 1, (4, tau))
    sigma = 0.7
    acc = np.zeros((4, 4))
    for _ in range(draws):
        Z = SRHT.draw(tau, tau_subs, rng).apply(X) + sigma * rng.standard_normal((4, tau_subs))
        acc += Z @ Z.T
    expected = X @ X.T + sigma**2 * tau_subs * np.eye(4)
    assert np.abs(acc / draws - expected).max() < 0.15 * np.abs(expected).max()


# -- 3-5. the calibration ----------------------------------------------------------------------------
def test_oracle_3_the_kenthapadi_multiplier_reproduces_table_d2_and_the_z_table():
    for eps, z in zip(EPS_GRID, Z_TABLE, strict=True):
        assert kenthapadi(eps, 0.05) == pytest.approx(z, abs=6e-5)
    for theta, sigmas in TABLE_D2.items():
        for eps, sigma in zip(EPS_GRID, sigmas, strict=True):
            assert theta * kenthapadi(eps, 0.05) == pytest.approx(sigma, rel=5e-3)


def test_oracle_4_sigma_is_linear_in_theta_and_w2_monotone_and_refuses_bad_parameters():
    from privsdr.vertical.pride_steps import entry_sensitivity

    z = kenthapadi(1.0, 0.05)
    lo, hi = np.zeros(3), np.array([1.0, 4.0, 2.0])
    assert entry_sensitivity(lo, hi) * z == pytest.approx(4.0 * z)
    assert entry_sensitivity(lo, 2 * hi) == pytest.approx(2 * entry_sensitivity(lo, hi))
    assert entry_sensitivity(lo, hi, w2=3.0) == pytest.approx(3 * entry_sensitivity(lo, hi))
    zs = [kenthapadi(e, 0.05) for e in EPS_GRID]
    assert all(a > b for a, b in itertools.pairwise(zs))
    assert kenthapadi(1.0, 1e-6) > kenthapadi(1.0, 1e-3) > kenthapadi(1.0, 0.05)
    for bad in ((1.0, 0.5), (1.0, 0.7), (0.0, 0.05), (-1.0, 0.05)):
        with pytest.raises(ValueError):
            kenthapadi(*bad)


def test_oracle_4_the_release_noise_does_not_depend_on_n_tau_or_tau_subs():
    from privsdr import Budget, PRIDERegressor

    sds = set()
    for n, widths, dim in ((40, (8, 5), 0.5), (90, (16, 3), 2), (60, (4, 4), "full")):
        est = PRIDERegressor("certified", budget=Budget(1.0, 1e-3), bounds=(-1, 1), calibration="kenthapadi", sketch_dim=dim, lam=1.0)
        plan = est.plan(n, widths)
        sds |= {round(spec.scale, 12) for spec in plan.specs.values()}
    assert sds == {round(2.0 * kenthapadi(1.0, 1e-3), 12)}


def test_oracle_5_kenthapadi_is_conservative_and_analytic_is_below_it():
    for log_delta in (-10, -5, -2, math.log10(0.05), math.log10(0.45)):
        delta = 10.0**log_delta
        for eps in (0.01, 0.1, 1.0, 5.0, 50.0):
            z = kenthapadi(eps, delta)
            assert gaussian_delta_upper(z, eps) <= delta
            assert gaussian_noise_multiplier(eps, delta, "analytic") <= z
    # dp-accounting RDP and PLD read at the target delta stay below the target eps (spec §4.3 table)
    expected = {1.0: (0.5008, 0.3303), 5.0: (3.0149, 2.3757), 20.0: (10.2567, 8.6225)}
    for eps, (rdp_eps, pld_eps) in expected.items():
        charge = [Charge("a", (GaussianEvent(kenthapadi(eps, 0.05), 0.05),), "replace_entry")]
        got_rdp = make_accountant("rdp", 0.05).cost(charge).epsilon
        got_pld = make_accountant("pld", 0.05).cost(charge).epsilon
        assert got_rdp == pytest.approx(rdp_eps, abs=2e-3) and got_rdp < eps
        assert got_pld == pytest.approx(pld_eps, abs=2e-3) and got_pld < eps
    ratios = [gaussian_noise_multiplier(e, 0.05, "analytic") / kenthapadi(e, 0.05) for e in EPS_GRID]
    assert ratios == pytest.approx([0.205, 0.329, 0.429, 0.484, 0.519, 0.583, 0.618, 0.614, 0.597], abs=2e-3)


# -- 9, 10, 12-14. the estimators ---------------------------------------------------------------------
def factor_design(n=60, p=24, rank=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, p)) + 0.3 * rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("n", [60, 12])  # primal (n > d) and dual (n < d) solves
def test_oracle_9_full_width_sketches_make_dual_loco_equal_pooled_ridge(n):
    X, y = factor_design(n=n, p=21)
    blocks = split_columns(X, 3)  # widths 7, 7, 7: tau' = 8, so tau_subs = 8 is the full SRHT
    alpha = 0.7
    Z = sketches(blocks, [8, 8, 8], seed=4)
    pooled = Ridge(alpha=alpha, fit_intercept=False, solver="cholesky").fit(X, y).coef_
    local = np.concatenate(dual_loco(blocks, y, alpha, Z))
    assert np.linalg.norm(local - pooled) < 1e-9 * np.linalg.norm(pooled)
    assert np.linalg.norm(ridge(X, y, alpha) - pooled) < 1e-9 * np.linalg.norm(pooled)


def test_oracle_10_one_party_is_ridge_and_no_random_features_is_the_naive_block_ridge():
    X, y = factor_design()
    assert np.allclose(local_ridge(X, np.zeros((60, 0)), y, 2.0).coef, Ridge(alpha=2.0, fit_intercept=False).fit(X, y).coef_, atol=1e-10)
    blocks = split_columns(X, 2)
    nb = naive_block_ridge(blocks, y, 2.0)
    for b, coef in zip(blocks, nb, strict=True):
        assert np.allclose(coef, local_ridge(b, np.zeros((60, 0)), y, 2.0).coef, atol=1e-12)
        assert np.allclose(coef, Ridge(alpha=2.0, fit_intercept=False).fit(b, y).coef_, atol=1e-10)


@pytest.mark.parametrize("n", [80, 10])
def test_oracle_12_primal_and_dual_solutions_agree_and_satisfy_the_dual_kkt(n):
    X, y = factor_design(n=n, p=30, seed=2)
    Xk, Z = X[:, :12], X[:, 12:] + np.random.default_rng(3).standard_normal((n, 18))
    lam = 0.05
    alpha = ridge_alpha(lam, n)
    Xbar = np.hstack([Xk, Z])
    primal = np.linalg.solve(Xbar.T @ Xbar + alpha * np.eye(30), Xbar.T @ y)
    dual_alpha = -alpha * np.linalg.solve(Xbar @ Xbar.T + alpha * np.eye(n), y)  # alpha~ = -n lam (K + n lam I)^-1 y
    assert np.allclose(dual_alpha, Xbar @ primal - y, atol=1e-9)  # KKT: alpha~ = Xbar b - y
    assert np.allclose(-Xbar.T @ dual_alpha / alpha, primal, atol=1e-9)
    fit = local_ridge(Xk, Z, y, alpha)
    assert np.allclose(fit.coef, -Xk.T @ dual_alpha / alpha, atol=1e-9) and np.allclose(fit.sketch_coef, primal[12:], atol=1e-9)


def test_oracle_13_the_order_of_the_sketch_blocks_does_not_matter():
    X, y = factor_design(p=30, seed=3)
    Xk, Z1, Z2 = X[:, :10], X[:, 10:20], X[:, 20:]
    a = local_ridge(Xk, np.hstack([Z1, Z2]), y, 3.0).coef
    b = local_ridge(Xk, np.hstack([Z2, Z1]), y, 3.0).coef
    assert np.allclose(a, b, atol=1e-11)


def test_oracle_14_appendix_c_noise_acts_as_a_ridge_on_the_random_features():
    rng = np.random.default_rng(5)
    n, m, sigma = 30, 4, 0.8
    A, Y, b = rng.standard_normal((n, m)), rng.standard_normal(n), rng.standard_normal(m)
    draws = [np.sum((Y - (A + sigma * rng.standard_normal((n, m))) @ b) ** 2) for _ in range(20000)]
    expected = np.sum((Y - A @ b) ** 2) + n * sigma**2 * np.sum(b**2)
    assert np.mean(draws) == pytest.approx(expected, rel=0.02)


def test_the_corrected_estimator_undoes_the_noise_ridge_on_average():
    rng = np.random.default_rng(8)
    n, tau, m, sigma = 2000, 6, 6, 1.5
    Xk, Xo = rng.standard_normal((n, tau)), rng.standard_normal((n, m))
    y = Xk @ np.ones(tau) + Xo @ np.full(m, 2.0) + 0.1 * rng.standard_normal(n)
    alpha = ridge_alpha(1e-4, n)
    clean = local_ridge(Xk, Xo, y, alpha).sketch_coef
    plain, corrected = [], []
    for _ in range(30):
        Z = Xo + sigma * rng.standard_normal((n, m))
        plain.append(local_ridge(Xk, Z, y, alpha).sketch_coef)
        corrected.append(local_ridge(Xk, Z, y, alpha, noise_var=np.full(m, sigma**2)).sketch_coef)
    shrink = np.median(plain, axis=0) / clean  # attenuation 1 / (1 + sigma^2) = 0.31
    assert np.all(shrink < 0.5)
    assert np.allclose(np.median(corrected, axis=0) / clean, 1.0, atol=0.1)  # consistent (heavy-tailed at small n: median)


def test_cv_path_matches_refitting_on_each_fold_in_both_forms():
    X, y = factor_design(n=40, p=30, seed=6)
    Xk, Z = X[:, :10], X[:, 10:]
    folds = kfold(40, 4, seed=1)
    lams = np.array([0.01, 0.3, 5.0])
    for Zb, noise in ((Z, None), (Z[:, :5], None), (Z[:, :5], np.full(5, 0.2))):  # dual, primal, corrected
        path = cv_path(Xk, Zb, y, lams, folds, "paper_eq1", noise)
        for fold in folds:
            train = np.setdiff1d(np.arange(40), fold)
            for l, lam in enumerate(lams):
                fit = local_ridge(Xk[train], Zb[train], y[train], ridge_alpha(lam, len(train), "paper_eq1"), noise)
                assert np.allclose(path.raw[l, fold], Xk[fold] @ fit.coef, atol=1e-8)
                assert np.allclose(path.full[l, fold], Xk[fold] @ fit.coef + Zb[fold] @ fit.sketch_coef, atol=1e-8)
    assert sorted(np.concatenate(folds).tolist()) == list(range(40))
    assert LocalDesign(Xk, Z).top_eigenvalue() == pytest.approx(np.linalg.eigvalsh(np.hstack([Xk, Z]).T @ np.hstack([Xk, Z]))[-1] / 40)


# -- 17. the Theorem 2 bound (a function; never asserted against data) ---------------------------------
def test_oracle_17_bound_shape():
    kw = dict(n_parties=4, rank=20, d_min=50.0, C=0.05, xi=0.1)
    first = [pride_error_bound(1.0, sketch_dim=m, sigma=0.0, **kw) for m in (50, 100, 200, 400)]
    assert all(a[0] > b[0] for a, b in itertools.pairwise(first)) and all(f[1] == 0 for f in first)
    rho = 0.05 * math.sqrt(20 * math.log(2 * 20 / 0.1) / (3 * 50))
    assert first[0][0] == pytest.approx(math.sqrt(4) * rho / (1 - 2 * rho))  # sigma = 0: sqrt(K) rho / (1 - 2 rho) ||beta*||
    second = [pride_error_bound(1.0, sketch_dim=m, sigma=s, **kw)[1] for s in (0.1, 1.0) for m in (50, 100, 200)]
    assert second[0] < second[1] < second[2] and second[3] < second[4] < second[5] and second[0] < second[3]
    assert pride_error_bound(1.0, sketch_dim=1, sigma=1.0, n_parties=2, rank=20, d_min=1.0, C=1.0, xi=0.1) == (math.inf, math.inf)
