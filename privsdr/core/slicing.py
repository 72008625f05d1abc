"""Slicing the response for SIR (Li 1991): categorical classes, public cut points, equal-count slices.

Slice h is ``I_h = (q_{h-1}, q_h]`` with ``q_0 = -inf`` and ``q_H = +inf``.
"""
from __future__ import annotations

import numpy as np

from .arrays import FloatArray, IntArray


def slice_by_cut_points(y: FloatArray, cut_points: FloatArray) -> IntArray:
    """Labels 0..H-1 for public, sorted cut points q_1 < ... < q_{H-1}: label = #{q_j < y}."""
    cuts = np.asarray(cut_points, dtype=float)
    if cuts.ndim != 1 or np.any(np.diff(cuts) <= 0):
        raise ValueError("cut points must be a strictly increasing 1-D sequence")
    return np.searchsorted(cuts, np.asarray(y, dtype=float), side="left")


def slice_by_category(y: np.ndarray) -> tuple[IntArray, np.ndarray]:
    """Labels 0..H-1 for the distinct values of a categorical response, and those values."""
    classes, labels = np.unique(np.asarray(y), return_inverse=True)
    return labels, classes


def equal_count_cut_points(y: FloatArray, n_slices: int) -> FloatArray:
    """Cut points of R dr's equal-count slices (``dr.slice2``, Weisberg 2002), never separating ties.

    With n sorted values, m = floor(n / H) and r = n - m H: each slice takes m values, the first r
    slices one more, and a slice is extended while its last value equals the next one (ties stay
    together). Slicing stops once fewer than m values remain after a boundary; the last slice takes the
    rest, and a last slice of a single value is merged into the one before. Cut points sit at the last
    value of each slice, so ``slice_by_cut_points`` reproduces the slices. Data-dependent: not private
    (use public cut points or a DP quantile release in certified runs).
    """
    v = np.sort(np.asarray(y, dtype=float))
    n = v.size
    m = n // n_slices
    extra = n - m * n_slices
    ends: list[int] = []  # 1-based index of each slice's last value
    start = 0
    while start + m < n:
        if extra > 0:
            start += 1
            extra -= 1
        while start + m < n and v[start + m - 1] == v[start + m]:
            start += 1
        ends.append(start + m)
        start = ends[-1]
    if ends and ends[-1] >= n - 1:  # the last slice would hold at most one value: merge it
        ends.pop()
    return np.asarray([v[e - 1] for e in ends if e < n])


def slice_sums(X: FloatArray, labels: IntArray, n_slices: int) -> tuple[FloatArray, FloatArray]:
    """``(S, counts)``: S[:, h] = sum of the rows of X in slice h (p x H), counts[h] = n_h."""
    counts = np.bincount(labels, minlength=n_slices).astype(float)
    indicator = np.zeros((X.shape[0], n_slices))
    indicator[np.arange(X.shape[0]), labels] = 1.0
    return X.T @ indicator, counts  # one BLAS call; np.add.at is orders of magnitude slower
