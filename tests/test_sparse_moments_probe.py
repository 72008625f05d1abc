"""Sensitivity probes of the sparse moments designs through their production code (issue 33, item 7).

``SparseDPSIR(algorithm="moments")`` and ``DPSparsePCA(algorithm="moments")`` are fitted whole on extreme neighbours
(record 0 replaced by box corners, axis points and outliers 10x outside the public bounds, with a response in every
slice); ``privsdr.audit.probe_releases`` records every release's noise-free value through the release tap and probes it
against the sensitivity of the spec it was released with. The moments on the selected columns are probed given the
selection (pairs where both data sets selected the same columns), as adaptive composition prices them.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from privsdr import Budget, DPSparsePCA, SparseDPSIR
from privsdr.audit import probe_releases

C = np.array([0.5, 2.0, 1.0, 1.5, 1.0, 0.7])  # public per-column bounds
CUTS = [-0.5, 0.5]
N = 30
#: noise off: the selection is the exact top (the sensitivities and the specs are the certified plan's)
NOISE_OFF = Budget.infinite()


def _base(seed=0):
    """Columns 1 and 3 spread strongly across the slices (so most neighbours keep the same selection); the others not."""
    rng = np.random.default_rng(seed)
    y = np.repeat([-1.0, 0.0, 1.0], N // 3)
    X = rng.uniform(-0.3, 0.3, (N, C.size)) * C
    X[:, 1] += 0.6 * C[1] * y
    X[:, 3] -= 0.6 * C[3] * y
    return X, y


def _records():
    """Extreme records: the box's corners (three sign patterns), each column's ends, zero, and outliers 10x outside."""
    eye = np.eye(C.size)
    signs = np.where(np.arange(C.size) % 2 == 0, 1.0, -1.0)
    mixed = np.where(np.arange(C.size) == 3, -1.0, 1.0)  # the spread columns 1 and 3 of opposite signs
    rows = [np.zeros(C.size), C, -C, C * signs, C * mixed, 10.0 * C[0] * eye[0], -10.0 * C]
    rows += [C[j] * eye[j] for j in (0, 1, 5)] + [-C[j] * eye[j] for j in (1, 3)]
    return rows


def _datasets():
    X, y = _base()
    out = []
    for row, label in itertools.product(_records(), (-1.0, 0.0, 1.0)):
        X1, y1 = X.copy(), y.copy()
        X1[0], y1[0] = row, label
        out.append((X1, y1))
    return out


def _pairs(n):
    return [(a, b) for a in range(n) for b in range(a + 1, n)]


def _check(results, nodes, datasets, close):
    assert set(nodes) <= set(results), (nodes, sorted(results))
    for node in nodes:
        r = results[node]
        assert r.passed, (node, r.summary())
        assert r.pairs >= len(datasets), (node, r.pairs)  # enough pairs kept the selection to probe the moments
        assert r.max_change >= close * r.declared, (node, r.summary())  # the neighbours come close: not vacuous


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
def test_sparse_sir_moments_selection_and_moments_stay_within_their_declarations_on_extreme_neighbours():
    datasets = _datasets()

    def fit(D):
        return SparseDPSIR(1, algorithm="moments", sparsity=2, bound=C, cut_points=CUTS, n_slices=3, budget=NOISE_OFF,
                           diagnose_noise=False, random_state=0).fit(*D)

    results = probe_releases(fit, datasets, _pairs(len(datasets)), given=("support",))
    _check(results, ("support", "slice_sums", "slice_counts", "second_moment"), datasets, close=0.5)


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
def test_sparse_pca_moments_selection_and_sigma_stay_within_their_declarations_on_extreme_neighbours():
    datasets = _datasets()

    def fit(D):
        return DPSparsePCA(1, algorithm="moments", sparsity=2, bound=C, budget=NOISE_OFF, random_state=0).fit(D[0])

    results = probe_releases(fit, datasets, _pairs(len(datasets)), given=("support",))
    _check(results, ("support", "sigma"), datasets, close=0.5)
