"""Non-private BCD (Algorithm 1) and the DP-BCD numerics: spec dpbcd_002.md oracles O-B1..B6, O-D7, O-U1."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsdr.core import (
    abort_probability,
    bcd,
    bcd_offset_form,
    gamma_min,
    largest_canonical_correlation,
    paper_utility_bound,
    r_squared,
)
from privsdr.datasets import dpbcd_synthetic


def equicorrelated(n, p, c, seed):
    rng = np.random.default_rng(seed)
    L = np.linalg.cholesky(np.full((p, p), c) + (1 - c) * np.eye(p))
    return rng.standard_normal((n, p)) @ L.T, rng.standard_normal(n)


def test_o_b1_bcd_converges_to_lstsq():
    X, y = equicorrelated(500, 10, 0.3, 1)
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    coef = bcd([X[:, :5], X[:, 5:]], y, 100).coef
    assert np.linalg.norm(coef - ols) / np.linalg.norm(ols) < 1e-10


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 4), ridge=st.sampled_from([0.0, 0.5, 20.0]))
def test_o_b2_objective_never_increases(seed, k, ridge):
    X, y = equicorrelated(60, 8, 0.5, seed)
    blocks = np.array_split(X, k, axis=1)
    res = bcd(blocks, y, 6, ridge=ridge)
    if ridge == 0.0:
        trace = res.sse_trace
        assert np.all(np.diff(trace) <= 1e-12 * trace[:-1])
    # the ridge objective ||y - X beta||^2 + lam ||beta||^2 after each full run of r rounds is monotone in r
    coefs = [bcd(blocks, y, r, ridge=ridge).coef for r in range(1, 5)]
    objective = [float(np.sum((y - X @ c) ** 2) + ridge * np.sum(c**2)) for c in coefs]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(objective))


def test_o_b3_one_round_is_exact_for_one_block_and_orthogonal_blocks():
    X, y = equicorrelated(200, 6, 0.4, 2)
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.allclose(bcd([X], y, 1).coef, ols, rtol=1e-12, atol=1e-12)
    Q, _ = np.linalg.qr(X)  # orthonormal columns: blocks with orthogonal column spaces
    ols_q = np.linalg.lstsq(Q, y, rcond=None)[0]
    assert np.allclose(bcd([Q[:, :2], Q[:, 2:]], y, 1).coef, ols_q, rtol=1e-12, atol=1e-12)


def test_o_b4_error_shrinks_by_rho_squared_per_round():
    X, y = equicorrelated(2000, 10, 0.5, 3)
    Xa, Xb = X[:, :5], X[:, 5:]
    rho2 = largest_canonical_correlation(Xa, Xb) ** 2
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    errors = [np.linalg.norm(bcd([Xa, Xb], y, t).coef - ols) for t in range(1, 12)]
    ratios = np.array(errors[1:]) / np.array(errors[:-1])
    assert abs(ratios[-1] / rho2 - 1) < 0.1, (ratios, rho2)
    # the population value for a 5/5 split at c = 0.5: rho = 25c / (5 + 20c) (spec §3.2)
    assert abs(rho2 - (12.5 / 15) ** 2) < 0.05


def test_o_b5_ridge_converges_to_the_closed_form_and_needs_the_minus_lambda_beta_term():
    X, y = equicorrelated(300, 8, 0.3, 4)
    lam = 25.0
    ridge = np.linalg.solve(X.T @ X + lam * np.eye(8), X.T @ y)
    assert np.linalg.norm(bcd([X[:, :3], X[:, 3:]], y, 200, ridge=lam).coef - ridge) < 1e-10 * np.linalg.norm(ridge)

    # without the -lam beta_i term the increments shrink towards 0, not the coefficients: a different limit
    blocks, betas, v = [X[:, :3], X[:, 3:]], [np.zeros(3), np.zeros(5)], y.copy()
    for _ in range(200):
        for i, B in enumerate(blocks):
            d = np.linalg.solve(B.T @ B + lam * np.eye(B.shape[1]), B.T @ v)
            betas[i] += d
            v -= B @ d
    assert np.linalg.norm(np.concatenate(betas) - ridge) > 1e-3 * np.linalg.norm(ridge)


@pytest.mark.parametrize("ridge", [0.0, 3.0])
def test_o_b6_remainder_passing_equals_the_offset_form(ridge):
    X, y = equicorrelated(150, 9, 0.3, 5)
    blocks = [X[:, :2], X[:, 2:6], X[:, 6:]]
    assert np.allclose(bcd(blocks, y, 7, ridge=ridge).coef, bcd_offset_form(blocks, y, 7, ridge=ridge), rtol=1e-10, atol=1e-12)


def brute_gamma_min(X, v, zero_label=False):
    m = np.linalg.matrix_rank(X)
    beta = np.linalg.lstsq(X, v, rcond=None)[0]
    sse = np.sum((v - X @ beta) ** 2)
    best = 1.0
    for j in range(X.shape[0]):
        Xj, vj = X.copy(), v.copy()
        Xj[j] = 0.0
        if zero_label:
            vj[j] = 0.0
        if np.linalg.matrix_rank(Xj) < m:
            continue
        bj = np.linalg.lstsq(Xj, vj, rcond=None)[0]
        ssej = np.sum((vj - Xj @ bj) ** 2)
        best = max(best, ssej / sse, sse / ssej)
    return math.sqrt(best)


@pytest.mark.parametrize("zero_label", [False, True])
def test_o_d7_gamma_min_closed_form_equals_brute_force_row_zeroing(zero_label):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((40, 3))
    X[:, 2] = 0.0
    X[0, 2] = 1.0  # zeroing row 0 drops the rank: it must be skipped
    v = rng.standard_normal(40) + 3 * X[:, 0]
    closed = gamma_min(X, v, zero_label=zero_label)
    assert closed >= 1.0
    assert abs(closed - brute_gamma_min(X, v, zero_label)) < 1e-10 * closed


def test_o_u1_paper_bound_values():
    assert paper_utility_bound(3.0, 2, 5, 0.3) == pytest.approx(-2.44075e9, rel=1e-5)
    assert paper_utility_bound(1.2, 2, 5, 0.3) == pytest.approx(-25.836, abs=1e-3)


def test_abort_probability_quadrature_matches_the_spec_example():
    assert abort_probability(0.2, 1.2, 5, 1000) == pytest.approx(0.00342, abs=2e-5)


def test_r_squared_variants_and_synthetic_design():
    d = dpbcd_synthetic(20_000, 10, correlation=0.3, r2=0.3, seed=7)
    pred = d.X @ d.beta
    assert abs(r_squared(d.y, pred, "centered") - 0.3) < 0.02
    assert abs(r_squared(d.y, pred, "var_ratio") - 0.3) < 0.02
    assert [b.shape[1] for b in d.blocks] == [5, 5]
    c = np.corrcoef(d.X.T)[np.triu_indices(10, 1)].mean()
    assert abs(c - 0.3) < 0.02
