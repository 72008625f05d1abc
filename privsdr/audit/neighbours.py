"""Neighbouring-pair generators (spec/auditing.md §2.3). All are replace-one unless named otherwise."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


def clip_bound_pair(n: int, p: int, clip: float, *, index: int = 0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows inside the ball of radius clip/2; record ``index`` is clip*e1 in D and -clip*e1 in D'.

    The change of every linear or quadratic statistic of clipped rows is as large as the clip
    bound allows along e1: the worst case for means and second moments.
    """
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, p))
    base *= (clip / 2.0) / np.maximum(np.linalg.norm(base, axis=1, keepdims=True), 1e-12) * rng.uniform(0, 1, (n, 1))
    d0, d1 = base.copy(), base.copy()
    d0[index] = 0.0
    d1[index] = 0.0
    d0[index, 0], d1[index, 0] = clip, -clip
    return d0, d1


def canary_pair(X: np.ndarray, canary: Sequence[float], *, index: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """D = X, D' = X with row ``index`` replaced by the canary record."""
    d1 = np.array(X, dtype=float, copy=True)
    d1[index] = np.asarray(canary, dtype=float)
    return np.array(X, dtype=float, copy=True), d1


def label_flip_pair(X: np.ndarray, y: np.ndarray, *, index: int = 0, labels: Sequence[Any] | None = None) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((X, y), (X, y')) where y' changes the label of record ``index`` to another class."""
    y = np.asarray(y)
    classes = list(labels) if labels is not None else sorted(set(y.tolist()))
    if len(classes) < 2:
        raise ValueError("a label flip needs at least two classes")
    y1 = y.copy()
    current = classes.index(y[index])
    y1[index] = classes[(current + 1) % len(classes)]
    return (X, y), (X, y1)


def slice_change_pair(X: np.ndarray, y: np.ndarray, cut_points: Sequence[float], *, index: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((X, y), (X, y')) where y'[index] crosses the nearest public cut point into the next slice."""
    cuts = np.sort(np.asarray(cut_points, dtype=float))
    if cuts.size == 0:
        raise ValueError("need at least one cut point")
    y = np.asarray(y, dtype=float)
    y1 = y.copy()
    nearest = cuts[np.argmin(np.abs(cuts - y[index]))]
    gap = max(1e-6, abs(nearest - y[index]))
    y1[index] = nearest + gap if y[index] <= nearest else nearest - gap
    return (X, y), (X, y1)


def replacement_rows(p: int, clip: float, *, norm: str = "l2", data: np.ndarray | None = None) -> list[np.ndarray]:
    """Extreme records of the clipping domain: +-clip e_j, +-clip 1/sqrt(p) (l2) or +-clip 1 (linf),
    zero, the data's principal directions at the bound, and an outlier 10x outside (clipping must hold)."""
    rows: list[np.ndarray] = [np.zeros(p)]
    eye = np.eye(p)
    for j in range(p):
        rows += [clip * eye[j], -clip * eye[j]]
    diag = np.ones(p) * (clip / np.sqrt(p) if norm == "l2" else clip)
    rows += [diag, -diag]
    if data is not None and len(data) > 1:
        _, _, vt = np.linalg.svd(np.asarray(data, dtype=float) - np.mean(data, axis=0), full_matrices=False)
        for v in (vt[0], vt[-1]):
            rows += [clip * v, -clip * v]
    rows += [10.0 * clip * eye[0], -10.0 * clip * np.ones(p)]
    return rows


def adversarial_neighbours(X: np.ndarray, clip: float, *, indices: Sequence[int] = (0,), norm: str = "l2") -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs (D, D') for a sensitivity probe: every extreme row against every other, at each index."""
    X = np.asarray(X, dtype=float)
    rows = replacement_rows(X.shape[1], clip, norm=norm, data=X)
    for i in indices:
        for a in range(len(rows)):
            for b in range(a + 1, len(rows)):
                d0, d1 = X.copy(), X.copy()
                d0[i], d1[i] = rows[a], rows[b]
                yield d0, d1


def add_record_pair(X: np.ndarray, y: np.ndarray, record_x: Sequence[float] | np.ndarray, record_y: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Add/remove neighbours: ((X, y) plus the record appended, (X, y)). The edPLS canary audit uses
    a high-norm ``record_x`` with ``record_y`` = mean(y) (spec edpls_001.md §6.7)."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float).ravel()
    with_record = (np.vstack([X, np.asarray(record_x, dtype=float)[None, :]]), np.append(y, float(record_y)))
    return with_record, (X.copy(), y.copy())


def add_remove_neighbours(X: np.ndarray, y: np.ndarray, bound_x: float, bound_y: float) -> Iterator[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]]:
    """Pairs ((X, y) + one extreme record, (X, y)) for an add/remove sensitivity probe: every extreme
    row of ``replacement_rows`` (inside and 10x outside the bound) with y in {+-bound_y, 0, 10 bound_y}."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float).ravel()
    for row in replacement_rows(X.shape[1], bound_x, norm="l2", data=X):
        for value in (bound_y, -bound_y, 0.0, 10.0 * bound_y):
            yield add_record_pair(X, y, row, value)
