"""Numerical core of sliced inverse regression (privsdr.core) and the DP-SIR simulation models.

Oracles are from spec dpsir_003.md §9 (numbers in the test names): classical SIR against an
independent textbook implementation, slicing, subspace metrics (8, 6), the fixed point of the
gradient update (2), clipping inactive (5), the column ball (11), and the simulation models (§8.1).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privsdr import core
from privsdr.core import (
    batch_terms,
    batches,
    classical_sir,
    covariance_uncentred,
    equal_count_cut_points,
    generalized_eigen,
    kernel_diagonal,
    orthonormalize,
    pca_update,
    project_columns,
    projection_distance,
    projector,
    sir_kernel,
    sir_update,
    slice_by_category,
    slice_by_cut_points,
    whitened_eigen,
)
from privsdr.datasets import sir_model
from privsdr.datasets.sir_models import TRUE_K, band_covariance

HSET = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SMALL = settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------------------
# independent references (plain numpy loops, no privsdr code)
# --------------------------------------------------------------------------------------------------
def textbook_sir(X: np.ndarray, y_labels: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Li (1991) written out: centre, Sigma = cov, M = sum_h p_h m_h m_h^T, eig of Sigma^-1/2 M Sigma^-1/2."""
    n, p = X.shape
    Xc = X - X.mean(axis=0)
    sigma = np.zeros((p, p))
    for row in Xc:
        sigma += np.outer(row, row)
    sigma /= n
    M = np.zeros((p, p))
    for h in np.unique(y_labels):
        members = Xc[y_labels == h]
        m_h = members.mean(axis=0)
        M += (len(members) / n) * np.outer(m_h, m_h)
    w, Q = np.linalg.eigh(sigma)
    inv_sqrt = Q @ np.diag(1.0 / np.sqrt(w)) @ Q.T
    vals, U = np.linalg.eigh(inv_sqrt @ M @ inv_sqrt)
    order = np.argsort(vals)[::-1]
    return inv_sqrt @ U[:, order[:K]], vals[order]


def loop_labels(y: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Slice h = (q_h, q_{h+1}] with q_0 = -inf, q_H = +inf, by a python loop."""
    out = np.empty(len(y), dtype=int)
    for i, v in enumerate(y):
        h = 0
        while h < len(cuts) and v > cuts[h]:
            h += 1
        out[i] = h
    return out


def sir_data(seed: int, n: int, p: int, K: int = 1, H: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Strong-signal single/multi-index data and equal-count labels (clear eigengap)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) @ (np.eye(p) + 0.3 * rng.standard_normal((p, p)))
    if K == 1:
        y = X[:, 0] + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    else:
        y = X[:, 0] + 3.0 * np.tanh(X[:, 1]) * (X[:, 1] > 0) + 0.05 * rng.standard_normal(n)
    labels = slice_by_cut_points(y, equal_count_cut_points(y, H, rule="arc"))  # Arc's rule: never more than H slices
    return X, labels


def rand_basis(rng: np.random.Generator, p: int, K: int) -> np.ndarray:
    return rng.standard_normal((p, K))


# --------------------------------------------------------------------------------------------------
# 1. classical SIR versus the textbook estimator (oracle 1)
# --------------------------------------------------------------------------------------------------
@HSET
@given(seed=st.integers(0, 10_000), n=st.integers(60, 300), p=st.integers(3, 6), K=st.integers(1, 2))
def test_classical_sir_equals_textbook(seed, n, p, K):
    X, labels = sir_data(seed, n, p, K)
    B, vals = classical_sir(X, labels, 5, K)
    ref, ref_vals = textbook_sir(X, labels, K)
    gap = ref_vals[K - 1] - ref_vals[K]
    assert gap > 1e-3, "test data must have an eigengap"
    assert projection_distance(B, ref) < 1e-10 / min(1.0, gap)
    assert np.allclose(vals, ref_vals, atol=1e-12, rtol=1e-10)
    # B^T Sigma B = I_K for the centred covariance
    Xc = X - X.mean(axis=0)
    assert np.allclose(B.T @ (Xc.T @ Xc / n) @ B, np.eye(K), atol=1e-9)


@HSET
@given(seed=st.integers(0, 10_000), n=st.integers(40, 200), p=st.integers(2, 6), K=st.integers(1, 3))
def test_generalized_eigen_equals_whitened_eigen(seed, n, p, K):
    K = min(K, p)
    X, labels = sir_data(seed, n, p, 1, H=max(4, K + 1))
    Xc = X - X.mean(axis=0)
    M, S = sir_kernel(Xc, labels, max(4, K + 1)), covariance_uncentred(Xc)
    B1, v1 = generalized_eigen(M, S, K)
    B2, v2 = whitened_eigen(M, S, K)
    assert np.allclose(v1, v2, atol=1e-10)
    vals = np.sort(v1)[::-1]
    gap = vals[K - 1] - vals[K] if K < p else 1.0
    if gap > 1e-6:
        assert projection_distance(B1, B2) < 1e-9 / min(1.0, gap)
    assert np.allclose(B1.T @ S @ B1, np.eye(K), atol=1e-8)
    assert np.allclose(B2.T @ S @ B2, np.eye(K), atol=1e-8)


def test_uncentred_kernel_matches_centred_textbook_on_centred_data():
    X, labels = sir_data(3, 200, 4)
    Xc = X - X.mean(axis=0)
    n = len(Xc)
    M = np.zeros((4, 4))
    for h in range(5):
        m_h = Xc[labels == h].mean(axis=0)
        M += (np.sum(labels == h) / n) * np.outer(m_h, m_h)
    assert np.allclose(sir_kernel(Xc, labels, 5), M, atol=1e-14)
    assert np.allclose(kernel_diagonal(Xc, labels, 5), np.diag(M), atol=1e-14)
    assert np.allclose(covariance_uncentred(Xc), np.cov(Xc, rowvar=False, bias=True), atol=1e-14)


def test_empty_slice_contributes_zero_to_the_kernel():
    X, labels = sir_data(4, 80, 3, H=3)
    # declare 5 slices: slices 3 and 4 are empty and must add nothing (no NaN)
    M5 = sir_kernel(X, labels, 5)
    M3 = sir_kernel(X, labels, 3)
    assert np.all(np.isfinite(M5))
    assert np.allclose(M5, M3, atol=1e-15)
    assert np.allclose(kernel_diagonal(X, labels, 5), np.diag(M3), atol=1e-15)


# --------------------------------------------------------------------------------------------------
# slicing
# --------------------------------------------------------------------------------------------------
@HSET
@given(
    y=st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=60),
    cuts=st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=6, unique=True),
)
def test_slice_by_cut_points_matches_loop(y, cuts):
    cuts = np.sort(np.asarray(cuts))
    y = np.asarray(y)
    labels = slice_by_cut_points(y, cuts)
    assert np.array_equal(labels, loop_labels(y, cuts))
    assert labels.min() >= 0 and labels.max() <= len(cuts)


def test_slice_by_cut_points_boundaries_and_errors():
    # slice h is (q_{h-1}, q_h]: a value equal to a cut point stays in the lower slice
    assert slice_by_cut_points(np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), [0.0, 1.0]).tolist() == [0, 0, 1, 1, 2]
    with pytest.raises(ValueError):
        slice_by_cut_points(np.zeros(3), [1.0, 0.0])
    with pytest.raises(ValueError):
        slice_by_cut_points(np.zeros(3), [0.0, 0.0])


@HSET
@given(
    y=st.lists(st.integers(-5, 5), min_size=2, max_size=80).map(lambda v: np.asarray(v, dtype=float)),
    H=st.integers(2, 8),
)
def test_equal_count_slices_never_split_ties(y, H):
    for rule in ("dr", "arc"):
        cuts = equal_count_cut_points(y, H, rule=rule)
        assert np.all(np.diff(cuts) > 0)
        labels = slice_by_cut_points(y, cuts)
        for value in np.unique(y):
            assert len(np.unique(labels[y == value])) == 1, f"{rule}: value {value} appears in two slices"
        sizes = np.bincount(labels)
        assert np.all(sizes > 0), "no empty slice"
        if rule == "arc":
            assert len(cuts) <= H - 1
        elif np.unique(y).size <= H:  # dr.slices: one slice per distinct value
            assert sizes.tolist() == np.unique(y, return_counts=True)[1].tolist()
        elif len(sizes) > 1:  # every slice holds at least m values but the last, which holds at least 3
            assert sizes[:-1].min() >= y.size // H and sizes[-1] >= 3


@HSET
@given(n=st.integers(2, 200), H=st.integers(2, 10), seed=st.integers(0, 1000))
def test_equal_count_slices_balanced_without_ties(n, H, seed):
    y = np.random.default_rng(seed).permutation(n).astype(float) * 0.37 - 3.0  # distinct values
    cuts = equal_count_cut_points(y, H, rule="arc")
    labels = slice_by_cut_points(y, cuts)
    sizes = np.bincount(labels)
    assert sizes.sum() == n and sizes.min() >= 1 and len(sizes) <= H
    if n // H >= 2:  # m >= 2 (the estimators require n >= 2H): exactly H slices of m or m + 1 values
        assert len(sizes) == H and sizes.max() - sizes.min() <= 1
    # cut points are data values (the last value of each slice)
    assert set(cuts.tolist()) <= set(y.tolist())
    # dr.slices: one slice per value when n <= H; otherwise J - 1 slices of m and the rest in the last, where
    # J = ceil((n - 2) / m) is the first multiple of m to reach n - 2 (at least one slice)
    sizes = np.bincount(slice_by_cut_points(y, equal_count_cut_points(y, H)))
    m = n // H
    J = max(1, -(-(n - 2) // m)) if n > H else n
    expected = [1] * n if n <= H else [m] * (J - 1) + [n - (J - 1) * m]
    assert sizes.tolist() == expected


def test_equal_count_cut_points_rejects_a_bad_rule_or_slice_count():
    with pytest.raises(ValueError, match="rule"):
        equal_count_cut_points(np.arange(10.0), 3, rule="dr2002")
    with pytest.raises(ValueError, match="n_slices"):
        equal_count_cut_points(np.arange(10.0), 0)


def test_slice_by_category():
    y = np.array(["b", "a", "c", "a", "b", "b"])
    labels, classes = slice_by_category(y)
    assert classes.tolist() == ["a", "b", "c"]
    assert labels.tolist() == [1, 0, 2, 0, 1, 1]
    labels, classes = slice_by_category(np.array([3, 7, 3, 3]))
    assert classes.tolist() == [3, 7] and labels.tolist() == [0, 1, 0, 0]
    # classical SIR with categorical slices equals the textbook version
    X = np.random.default_rng(0).standard_normal((60, 3))
    cls = np.where(X[:, 0] + 0.2 * X[:, 2] > 0.3, "hi", np.where(X[:, 0] < -0.3, "lo", "mid"))
    lab, _ = slice_by_category(cls)
    assert projection_distance(classical_sir(X, lab, 3, 1)[0], textbook_sir(X, lab, 1)[0]) < 1e-10


# --------------------------------------------------------------------------------------------------
# 2. subspace metrics and orthonormalisation (oracles 6, 8)
# --------------------------------------------------------------------------------------------------
@HSET
@given(seed=st.integers(0, 10_000), p=st.integers(2, 8), K=st.integers(1, 3))
def test_projection_distance_properties(seed, p, K):
    K = min(K, p)
    rng = np.random.default_rng(seed)
    A, B = rand_basis(rng, p, K), rand_basis(rng, p, K)
    Q = rng.standard_normal((K, K)) + 3.0 * np.eye(K)  # invertible
    d = projection_distance(A, B)
    assert abs(projection_distance(A @ Q, B) - d) < 1e-9
    assert abs(projection_distance(A, B @ Q) - d) < 1e-9
    assert abs(projection_distance(B, A) - d) < 1e-12
    assert -1e-12 <= d <= math.sqrt(2 * K) + 1e-12
    assert projection_distance(A, A @ Q) < 1e-9
    # squared distance = 2K - 2 tr(P_A P_B) for rank-K bases
    PA, PB = projector(A), projector(B)
    assert abs(d * d - (2 * K - 2 * np.trace(PA @ PB))) < 1e-9
    assert np.allclose(PA @ PA, PA, atol=1e-10) and np.allclose(PA, PA.T, atol=1e-12)
    assert abs(np.trace(PA) - K) < 1e-9


def test_projection_distance_extremes():
    e = np.eye(4)
    assert projection_distance(e[:, :2], e[:, 2:]) == pytest.approx(2.0, abs=1e-12)  # sqrt(2K), K = 2
    assert projection_distance(e[:, :1], e[:, 1:2]) == pytest.approx(math.sqrt(2), abs=1e-12)
    # M3/M4: P_B = diag(1, 1, 0, ...)
    assert np.allclose(projector(e[:, :2] @ np.array([[2.0, 1.0], [0.5, -1.0]])), np.diag([1, 1, 0, 0]), atol=1e-12)
    # a 1-D row vector is read as a column
    assert np.allclose(projector(np.array([[1.0, 0.0, 0.0, 0.0]])), np.diag([1, 0, 0, 0]))


@HSET
@given(seed=st.integers(0, 10_000), p=st.integers(3, 8))
def test_rank_mismatch_distance_in_1_sqrt3(seed, p):
    rng = np.random.default_rng(seed)
    u, B = rand_basis(rng, p, 1), rand_basis(rng, p, 2)
    d = projection_distance(u, B)
    assert 1.0 - 1e-12 <= d <= math.sqrt(3) + 1e-12
    # u inside span(B): exactly 1; u orthogonal to span(B): exactly sqrt(3)
    assert projection_distance(B @ rng.standard_normal((2, 1)), B) == pytest.approx(1.0, abs=1e-9)
    Qfull, _ = np.linalg.qr(np.hstack([B, rng.standard_normal((p, 1))]))
    assert projection_distance(Qfull[:, 2:3], B) == pytest.approx(math.sqrt(3), abs=1e-9)


@HSET
@given(seed=st.integers(0, 10_000), p=st.integers(1, 8), K=st.integers(1, 4))
def test_orthonormalize(seed, p, K):
    K = min(K, p)
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((p, K)) * rng.uniform(0.01, 100, size=K)
    Q = orthonormalize(B)
    assert Q.shape == (p, K)
    assert np.allclose(Q.T @ Q, np.eye(K), atol=1e-10)
    assert projection_distance(Q, B) < 1e-9
    # B (B^T B)^{-1/2}: the polar factor, not just any basis
    w, V = np.linalg.eigh(B.T @ B)
    assert np.allclose(Q, B @ V @ np.diag(w ** -0.5) @ V.T, atol=1e-8)


def test_orthonormalize_rank_deficient_uses_pseudo_inverse():
    B = np.array([[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]])  # rank 1
    Q = orthonormalize(B)
    assert Q.shape == (3, 2) and np.all(np.isfinite(Q))
    # B (B^T B)^{+1/2}: Q^T Q is the projector onto the row space of B, and span(Q) = span(B)
    row = np.array([[1.0], [2.0]]) / math.sqrt(5)
    assert np.allclose(Q.T @ Q, row @ row.T, atol=1e-12)
    assert projection_distance(Q, B[:, :1]) < 1e-12
    assert np.allclose(orthonormalize(np.zeros((3, 2))), 0.0)


# --------------------------------------------------------------------------------------------------
# 3. gradient step: clipping inactive (oracle 5), fixed point and convergence (oracle 2), Pi_C (11)
# --------------------------------------------------------------------------------------------------
def direct_update(X, labels, B, eta, lam, H):
    """B + 2 eta M B - 2 eta lam Sigma B (B^T Sigma B - I) with the uncentred batch formulas, by loops."""
    m, p = X.shape
    M = np.zeros((p, p))
    for h in range(H):
        members = X[labels == h]
        if len(members):
            S = members.sum(axis=0)
            M += np.outer(S, S) / len(members)
    M /= m
    Sig = sum(np.outer(x, x) for x in X) / m
    K = B.shape[1]
    return B + 2 * eta * M @ B - 2 * eta * lam * Sig @ B @ (B.T @ Sig @ B - np.eye(K)), M, Sig


@HSET
@given(
    seed=st.integers(0, 10_000), m=st.integers(2, 40), p=st.integers(1, 6), K=st.integers(1, 3), H=st.integers(2, 5),
    eta=st.floats(1e-3, 1.0), lam=st.floats(0.0, 5.0),
)
def test_update_equals_direct_formula_when_clipping_inactive(seed, m, p, K, H, eta, lam):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (m, p))
    labels = rng.integers(0, H, m)
    B = rng.standard_normal((p, K))
    L = float(np.abs(X @ B).max()) + 1.0  # no projection is clipped
    U = sir_update(B, *batch_terms(X, labels, B, L, H), eta, lam)
    ref, M, Sig = direct_update(X, labels, B, eta, lam, H)
    assert np.allclose(U, ref, atol=1e-10, rtol=0)
    kern, A, G = batch_terms(X, labels, B, L, H)
    assert np.allclose(kern, M @ B, atol=1e-12)
    assert np.allclose(A, Sig @ B, atol=1e-12)
    assert np.allclose(G, B.T @ Sig @ B - np.eye(K), atol=1e-12)


def test_update_clips_projections_coordinatewise():
    rng = np.random.default_rng(1)
    X, labels = rng.uniform(-1, 1, (20, 3)), rng.integers(0, 3, 20)
    B = 5.0 * rng.standard_normal((3, 2))
    L = 0.7
    kern, A, G = batch_terms(X, labels, B, L, 3)
    pi = np.clip(X @ B, -L, L)
    assert np.abs(X @ B).max() > L  # clipping is active
    assert np.allclose(A, X.T @ pi / 20)
    assert np.allclose(G, pi.T @ pi / 20 - np.eye(2))
    S, counts = core.slice_sums(X, labels, 3)
    R, _ = core.slice_sums(pi, labels, 3)
    assert np.allclose(kern, sum(np.outer(S[:, h] / counts[h], R[:, h]) for h in range(3) if counts[h]) / 20)


@SMALL
@given(seed=st.integers(0, 1000), K=st.integers(1, 2), lam_scale=st.floats(0.5, 4.0))
def test_fixed_point_of_the_update(seed, K, lam_scale):
    """Oracle 2: B = V (I + Lambda / lambda_pen)^{1/2} is a stationary point of the update."""
    X, labels = sir_data(seed, 300, 4, K)
    Xc = X - X.mean(axis=0)
    V, vals = generalized_eigen(sir_kernel(Xc, labels, 5), covariance_uncentred(Xc), K)
    lam = lam_scale * vals[0]
    B = V @ np.diag(np.sqrt(1.0 + vals[:K] / lam))
    L = float(np.abs(Xc @ B).max()) + 1.0
    U = sir_update(B, *batch_terms(Xc, labels, B, L, 5), 0.3, lam)
    assert np.allclose(U, B, atol=1e-10)


@pytest.mark.parametrize("K", [1, 2])
def test_full_batch_iterations_converge_to_the_sir_span(K):
    """Oracle 2, second form: repeated full-batch, noise-free steps from a nearby start reach the SIR span."""
    X, labels = sir_data(11, 400, 4, K)
    M, S = sir_kernel(X, labels, 5), covariance_uncentred(X)  # uncentred: the update's own target
    V, vals = generalized_eigen(M, S, K)
    rng = np.random.default_rng(0)
    B = V * 1.2 + 0.1 * rng.standard_normal(V.shape)
    assert projection_distance(B, V) > 1e-2
    lam = 2.0 * vals[K - 1]
    # a step well inside the stability region of the penalty term (its curvature scales with lam ||Sigma||)
    eta = 0.1 / (lam * np.linalg.eigvalsh(S).max())
    for _ in range(5000):
        B = sir_update(B, *batch_terms(X, labels, B, 1e9, 5), eta, lam)
        if projection_distance(B, V) < 1e-8:
            break
    assert projection_distance(B, V) < 1e-6
    # the limit is the stationary point V (I + Lambda/lambda_pen)^{1/2} Q: B^T S B = I + Lambda/lam (up to rotation)
    assert np.allclose(np.sort(np.linalg.eigvalsh(B.T @ S @ B)), np.sort(1.0 + vals[:K] / lam), atol=1e-5)


@HSET
@given(seed=st.integers(0, 10_000), m=st.integers(1, 30), p=st.integers(1, 5), K=st.integers(1, 3),
       eta=st.floats(1e-3, 1.0), lam=st.floats(0.0, 3.0))
def test_pca_update_direct_formula(seed, m, p, K, eta, lam):
    rng = np.random.default_rng(seed)
    X, B = rng.uniform(-1, 1, (m, p)), rng.standard_normal((p, K))
    L = float(np.abs(X @ B).max()) + 1.0
    ref = B + 2 * eta * (X.T @ X / m) @ B - 2 * eta * lam * B @ (B.T @ B - np.eye(K))
    assert np.allclose(pca_update(X, B, L, eta, lam), ref, atol=1e-11)


@HSET
@given(seed=st.integers(0, 10_000), p=st.integers(1, 6), K=st.integers(1, 4), C=st.floats(0.01, 10.0))
def test_project_columns_ball(seed, p, K, C):
    """Oracle 11: columns end in the L2 ball of radius C; columns already inside are unchanged."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((p, K)) * rng.uniform(0.0, 3.0 * C, size=K)
    P = project_columns(B, C)
    norms = np.linalg.norm(B, axis=0)
    assert np.all(np.linalg.norm(P, axis=0) <= C * (1 + 1e-12))
    for k in range(K):
        if norms[k] <= C:
            assert np.array_equal(P[:, k], B[:, k])
        else:
            assert np.linalg.norm(P[:, k]) == pytest.approx(C, rel=1e-12)
            assert np.allclose(P[:, k] * norms[k] / C, B[:, k], atol=1e-12)  # same direction


@HSET
@given(n=st.integers(1, 500), T=st.integers(1, 20), seed=st.integers(0, 100))
def test_batches_partition(n, T, seed):
    T = min(T, n)
    parts = batches(n, T, np.random.default_rng(seed))
    assert len(parts) == T
    joined = np.sort(np.concatenate(parts))
    assert np.array_equal(joined, np.arange(n))
    sizes = [len(b) for b in parts]
    assert set(sizes) <= {n // T, -(-n // T)}


# --------------------------------------------------------------------------------------------------
# 4. simulation models (spec §8.1)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["M1", "M2", "M3", "M4"])
def test_sir_model_shapes_clipping_and_reproducibility(model):
    X, y, B = sir_model(model, 500, 7, seed=3)
    K = TRUE_K[model]
    assert X.shape == (500, 7) and y.shape == (500,) and B.shape == (7, K)
    assert np.abs(X).max() <= 1.0 and np.abs(X).max() == 1.0  # clipped, and clipping happened
    assert np.all(np.isfinite(y))
    assert np.all(B[2:] == 0) and np.linalg.matrix_rank(B[:2]) == K  # row support {0, 1}
    X2, y2, B2 = sir_model(model, 500, 7, seed=3)
    assert np.array_equal(X, X2) and np.array_equal(y, y2) and np.array_equal(B, B2)
    X3, y3, _ = sir_model(model, 500, 7, seed=4)
    assert not np.array_equal(X, X3) and not np.array_equal(y, y3)
    Xc, _, _ = sir_model(model, 500, 7, seed=3, clip=0.5)
    assert np.abs(Xc).max() <= 0.5


def test_sir_model_design_and_response():
    X, y, B = sir_model("M1", 40_000, 4, seed=0)
    # X = clip(N(0, band), -1, 1): clipping at 2 sd shrinks the variances by about 8%; same with numpy
    ref = np.clip(np.random.default_rng(5).multivariate_normal(np.zeros(4), band_covariance(4), 40_000), -1, 1)
    assert np.allclose(np.cov(X, rowvar=False), np.cov(ref, rowvar=False), atol=0.01)
    assert abs(np.cov(X, rowvar=False)[0, 3]) < 0.01  # band: zero beyond lag 2
    assert band_covariance(5)[0].tolist() == [0.25, 0.125, 0.0625, 0.0, 0.0]
    # M1 is linear in X^T b1 with N(0, 1) errors
    resid = y - X @ B[:, 0]
    assert abs(resid.mean()) < 0.03 and abs(resid.std() - 1.0) < 0.03
    # M3: e1, e2 span the truth, and classical SIR finds it
    X3, y3, B3 = sir_model("M3", 20_000, 6, seed=1)
    assert np.allclose(projector(B3), np.diag([1, 1, 0, 0, 0, 0]), atol=1e-12)
    lab = slice_by_cut_points(y3, equal_count_cut_points(y3, 8))
    assert projection_distance(classical_sir(X3, lab, 8, 2)[0], B3) < 0.3


def test_sir_model_rejects_bad_arguments():
    with pytest.raises(ValueError):
        sir_model("M5", 10, 3)
    with pytest.raises(ValueError):
        sir_model("M1", 10, 1)


# -- R dr's slicing, against dr's published output on a real data set ----------------------------------
def _ais():
    from pathlib import Path

    d = np.loadtxt(Path(__file__).parent / "data" / "ais.txt", skiprows=1)
    return d[:, 3], np.column_stack([d[:, 1], d[:, 2], np.log(d[:, 4]), d[:, 5]])  # LBM; Ht, Wt, log(RCC), WCC


def test_arc_rule_reproduces_dr_2002_on_the_ais_data():
    """Weisberg (2002, J. Stat. Softw. 7), `dr(LBM ~ Ht + Wt + log(RCC) + WCC, method="sir", nslices=8)`, the slicing
    dr had then (``dr.slices.arc`` today): slice sizes 26 26 25 25 25 27 30 18, eigenvalues 0.87789585 0.15017504
    0.03972711 0.01737281, first direction (0.01054752, 0.02374812, 0.99960915, -0.01031144). dr standardises with the
    n-1 covariance and weights slices by n_h / n, which gives SIR's eigenvalues exactly (the scalings cancel)."""
    y, X = _ais()
    labels = slice_by_cut_points(y, equal_count_cut_points(y, 8, rule="arc"))
    assert np.bincount(labels).tolist() == [26, 26, 25, 25, 25, 27, 30, 18]
    B, values = classical_sir(X, labels, 8, 4)
    assert np.allclose(values[:4], [0.87789585, 0.15017504, 0.03972711, 0.01737281], atol=5e-9)
    b = B[:, 0] / np.linalg.norm(B[:, 0])
    assert np.allclose(b * np.sign(b[2]), [0.01054752, 0.02374812, 0.99960915, -0.01031144], atol=5e-9)


# dr 3.0.11 (CRAN, 2025; its R/dr.R) on its own `ais` (whose LBM equals tests/data/ais.txt's), run with R 4.2.2:
# dr.slices(ais$LBM, H)$slice.sizes, and dr(LBM ~ Ht + Wt + log(RCC) + WCC, data = ais, method = "sir",
# nslices = H): $evalues and $evectors[, 1] (sign flipped to a positive log(RCC) entry).
DR_3_0_AIS = {
    8: ([25, 25, 25, 25, 27, 27, 30, 18], [0.87739988102, 0.16137570511, 0.04243854708, 0.01312556965],
        [0.01052807709, 0.02382991846, 0.99960044476, -0.01096564679]),
    11: ([18, 18, 18, 18, 18, 19, 18, 19, 23, 18, 15], [0.89484040209, 0.19394199482, 0.06578534354, 0.03228004125],
         [0.01016428897, 0.02212147922, 0.99964733281, -0.01060836429]),
}


@pytest.mark.parametrize("H", sorted(DR_3_0_AIS))
def test_default_rule_reproduces_current_dr_on_the_ais_data(H):
    """Current dr (3.0.x, ``dr.slices``) slices by cumulative counts of tied values. By hand for H = 8 (m = 25, sorted
    LBM): ends 25, 50, 75, 100 (no tie crosses them); 125 falls in the tie at 68.00 (positions 122-127) -> 127;
    127 + 25 = 152 in the tie at 75.00 (152-154) -> 154; 154 + 25 = 179 in the tie at 82.00 (178-184) -> 184;
    184 < n - 2 = 200, so one more: 209 -> the last value, 202, and the last slice runs to n: 25 25 25 25 27 27 30
    18, the sizes dr 3.0.11 prints (``DR_3_0_AIS``). The 2002 rule gives the first two slices one more value each
    (n - 8m = 2), which moves every later boundary. H = 11 is the partition quoted in issue 25."""
    y, X = _ais()
    sizes, values, direction = DR_3_0_AIS[H]
    cuts = equal_count_cut_points(y, H)
    labels = slice_by_cut_points(y, cuts)
    assert np.bincount(labels).tolist() == sizes
    assert np.bincount(slice_by_cut_points(y, equal_count_cut_points(y, H, rule="arc"))).tolist() != sizes
    B, got = classical_sir(X, labels, len(cuts) + 1, 4)
    assert np.allclose(got[:4], values, atol=5e-9)
    b = B[:, 0] / np.linalg.norm(B[:, 0])
    assert np.allclose(b * np.sign(b[2]), direction, atol=5e-9)


def test_default_rule_may_give_more_slices_than_asked_as_dr_does():
    # ais, H = 9: m = 22 and 9 m = 198 < n - 2, so dr.slices makes a tenth slice of the last 3 values (dr 3.0.11:
    # 22 22 22 22 22 23 22 22 22 3, "nslices 10"); the 2002 rule never exceeds H
    y, _ = _ais()
    assert np.bincount(slice_by_cut_points(y, equal_count_cut_points(y, 9))).tolist() == [22] * 5 + [23] + [22] * 3 + [3]
    assert len(equal_count_cut_points(y, 9, rule="arc")) == 8


def test_dr_slicing_keeps_ties_together_and_merges_a_single_last_value():
    # the 2002 rule (Arc)
    y = np.array([1, 1, 1, 2, 2, 3, 4, 5, 6, 7], dtype=float)  # n = 10, H = 3: m = 3, one extra
    labels = slice_by_cut_points(y, equal_count_cut_points(y, 3, rule="arc"))
    assert np.bincount(labels).tolist() == [5, 3, 2]  # 4 values, extended over the tied 2s
    z = np.arange(7, dtype=float)  # H = 3: m = 2, one extra: 3, 2, 2
    assert np.bincount(slice_by_cut_points(z, equal_count_cut_points(z, 3, rule="arc"))).tolist() == [3, 2, 2]
    w = np.array([0, 0, 0, 0, 0, 0, 1, 2], dtype=float)  # ties swallow the middle: 6 then a last pair
    assert np.bincount(slice_by_cut_points(w, equal_count_cut_points(w, 4, rule="arc"))).tolist() == [6, 2]
    # current dr by hand: y's cumulative counts 3 5 6 7 8 9 10, m = 3: ends 3, 6 (the first >= 3 + 3), 9 >= n - 2 = 8,
    # the last runs to 10
    assert np.bincount(slice_by_cut_points(y, equal_count_cut_points(y, 3))).tolist() == [3, 3, 4]
    assert np.bincount(slice_by_cut_points(z, equal_count_cut_points(z, 3))).tolist() == [2, 2, 3]  # 6 >= n - 2 = 5
    assert np.bincount(slice_by_cut_points(w, equal_count_cut_points(w, 4))).tolist() == [6, 1, 1]  # 3 values <= H
