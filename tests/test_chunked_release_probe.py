"""The chunked certified fits probed through their release tap on extreme neighbours (issue 33, item 7).

A chunked fit clips every row inside its chunk (``privsdr.rows``); a chunk function that reads the rows or the labels
before clipping them releases sums whose change exceeds the plan's declaration. ``probe_releases`` fits on
``Chunks`` whole and probes every release's noise-free value against the spec it was released with.
"""
from __future__ import annotations

import numpy as np
import pytest

from privsdr import DPPLS, DPSIR, Budget, Chunks
from privsdr.audit import add_record_pair, probe_releases, replacement_rows

BX, BY = 1.0, 2.0
CUTS = [-0.5, 0.5]


def _chunked(X, y):
    half = len(y) // 2
    return Chunks([(X[:half], y[:half]), (X[half:], y[half:])])


def _check(results, nodes, close):
    for node in nodes:
        r = results[node]
        assert r.passed, (node, r.summary())
        assert r.max_change >= close * r.declared, (node, r.summary())  # the neighbours come close: not vacuous


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_chunked_dppls_sums_stay_within_their_add_remove_declarations():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-0.3, 0.3, (12, 3)), rng.uniform(-1, 1, 12)
    rows = [np.zeros(3), BX * np.eye(3)[0], -BX * np.ones(3) / np.sqrt(3), 10 * BX * np.eye(3)[2]]
    datasets = [(X, y)] + [add_record_pair(X, y, row, v)[0] for row in rows for v in (BY, -10 * BY)]  # the base, plus one record

    def fit(D):
        return DPPLS(1, bound_x=BX, bound_y=BY, budget=Budget.infinite(), random_state=0).fit(_chunked(*D))

    results = probe_releases(fit, datasets, [(0, i) for i in range(1, len(datasets))])
    assert {"xtx", "xty"} <= set(results), sorted(results)
    _check(results, ("xtx", "xty"), close=0.6)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_chunked_dpsir_moments_stay_within_their_replace_one_declarations():
    rng = np.random.default_rng(1)
    X, y = rng.uniform(-1, 1, (12, 3)), rng.choice([-1.0, 0.0, 1.0], 12)
    datasets = []
    for row in replacement_rows(3, 1.0, norm="linf") + [np.array([1.0, -1.0, -1.0])]:
        for label in (-1.0, 1.0):
            X1, y1 = X.copy(), y.copy()
            X1[0], y1[0] = row, label
            datasets.append((X1, y1))

    def fit(D):
        return DPSIR(1, bound=1.0, cut_points=CUTS, n_slices=3, budget=Budget.infinite(), random_state=0).fit(_chunked(*D))

    pairs = [(a, b) for a in range(len(datasets)) for b in range(a + 1, len(datasets))]
    results = probe_releases(fit, datasets, pairs)
    _check(results, ("slice_sums", "slice_counts", "second_moment"), close=0.6)
