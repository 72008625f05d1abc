"""Slicing the response for SIR (Li 1991): categorical classes, public cut points, equal-count slices.

Slice h is ``I_h = (q_{h-1}, q_h]`` with ``q_0 = -inf`` and ``q_H = +inf``.
"""
from __future__ import annotations

import numpy as np


def slice_by_cut_points(y: np.ndarray, cut_points: np.ndarray) -> np.ndarray:
    """Labels 0..H-1 for public, sorted cut points q_1 < ... < q_{H-1}: label = #{q_j < y}."""
    cuts = np.asarray(cut_points, dtype=float)
    if cuts.ndim != 1 or np.any(np.diff(cuts) <= 0):
        raise ValueError("cut points must be a strictly increasing 1-D sequence")
    return np.searchsorted(cuts, np.asarray(y, dtype=float), side="left")


def slice_by_category(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels 0..H-1 for the distinct values of a categorical response, and those values."""
    classes, labels = np.unique(np.asarray(y), return_inverse=True)
    return labels, classes


def equal_count_cut_points(y: np.ndarray, n_slices: int) -> np.ndarray:
    """Cut points giving slices of about n/H records each, never separating tied values.

    As in the classical references (dr::dr.slices): walk the sorted distinct values and close a
    slice once it holds at least its share of the records that remain. Cut points sit at the last
    value of each slice, so ``slice_by_cut_points`` reproduces the slices. Data-dependent: not
    private (use public cut points or a DP quantile release in certified runs).
    """
    y = np.asarray(y, dtype=float)
    values, counts = np.unique(y, return_counts=True)
    cuts: list[float] = []
    left, slices_left, running = y.size, n_slices, 0
    for i, count in enumerate(counts[:-1]):
        running += count
        if slices_left > 1 and running >= left / slices_left:
            cuts.append(float(values[i]))
            left -= running
            slices_left -= 1
            running = 0
    return np.asarray(cuts)


def slice_sums(X: np.ndarray, labels: np.ndarray, n_slices: int) -> tuple[np.ndarray, np.ndarray]:
    """``(S, counts)``: S[:, h] = sum of the rows of X in slice h (p x H), counts[h] = n_h."""
    counts = np.bincount(labels, minlength=n_slices).astype(float)
    indicator = np.zeros((X.shape[0], n_slices))
    indicator[np.arange(X.shape[0]), labels] = 1.0
    return X.T @ indicator, counts  # one BLAS call; np.add.at is orders of magnitude slower
