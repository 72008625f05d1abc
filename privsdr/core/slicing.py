"""Slicing the response for SIR (Li 1991): categorical classes, public cut points, equal-count slices.

Slice h is ``I_h = (q_{h-1}, q_h]`` with ``q_0 = -inf`` and ``q_H = +inf``.
"""
from __future__ import annotations

import numpy as np

from .arrays import FloatArray, IntArray

#: ``equal_count_cut_points`` rules: current R dr (``dr.slices``) and Arc / dr before 3.0 (``dr.slices.arc``)
SLICING_RULES = ("dr", "arc")


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


def equal_count_cut_points(y: FloatArray, n_slices: int, rule: str = "dr") -> FloatArray:
    """Cut points of R dr's equal-count slices, never separating tied values (Weisberg 2002; dr 3.0.x).

    With the n values sorted, m = floor(n / H) and a slice ending at the last value of a tie group:

    * ``rule="dr"`` (default): current R ``dr`` (S. Weisberg, 3.0.x, ``dr.slices`` in its R/dr.R). With
      at most H distinct values, one slice per distinct value. Otherwise, with c_1 < c_2 < ... the
      cumulative counts of the tied groups (c_k = #{y <= k-th distinct value}), each slice ends at the
      first c_k >= (previous end) + m; this stops once the end reaches n - 2, and the slice found last is
      extended to n (so the last slice has at least 3 values). It may give a number of slices other than
      H (more when n - mH > 2): ais, LBM, H = 11 gives 18 18 18 18 18 19 18 19 23 18 15 and H = 9 gives
      ten slices.
    * ``rule="arc"``: the rule of Arc and of dr before 3.0 (``dr.slices.arc`` since), the one printed in
      Weisberg (2002), "Dimension Reduction Regression in R", J. Stat. Softw. 7: each slice takes m
      values, the first n - mH one more, and is extended while its last value equals the next one;
      slicing stops once fewer than m values remain after a boundary, the last slice takes the rest, and
      a last slice of a single value is merged into the one before. Never more than H slices.

    Cut points sit at the last value of each slice but the last, so ``slice_by_cut_points`` reproduces
    the slices; the number of slices is ``len(cuts) + 1``. Where dr stops with an error (one slice, e.g.
    H = 1) the result is one slice. Data-dependent: not private (use public cut points or a DP quantile
    release in certified runs).
    """
    if isinstance(n_slices, bool) or not isinstance(n_slices, (int, np.integer)) or n_slices < 1:
        raise ValueError(f"n_slices must be an integer >= 1, got {n_slices!r}")
    v = np.sort(np.asarray(y, dtype=float).ravel())
    if rule == "dr":
        ends = _dr_slice_ends(v, int(n_slices))
    elif rule == "arc":
        ends = _arc_slice_ends(v, int(n_slices))
    else:
        raise ValueError(f"rule must be one of {SLICING_RULES}, got {rule!r}")
    return np.asarray([v[e - 1] for e in ends if e < v.size])


def _dr_slice_ends(v: FloatArray, H: int) -> list[int]:
    """1-based index of each slice's last value under current dr (``dr.slices``), sorted v."""
    n = v.size
    _, counts = np.unique(v, return_counts=True)
    cum = np.cumsum(counts)
    if cum.size <= H:
        return [int(c) for c in cum]
    m = n // H
    ends: list[int] = []
    end = 0
    while end < n - 2:
        k = min(int(np.searchsorted(cum, end + m, side="left")), cum.size - 1)  # first tie group reaching end + m
        end = int(cum[k])
        ends.append(end)
    if not ends:
        return [n]
    ends[-1] = n
    return ends


def _arc_slice_ends(v: FloatArray, H: int) -> list[int]:
    """1-based index of each slice's last value under Arc's rule (``dr.slices.arc``), sorted v."""
    n = v.size
    m = n // H
    extra = n - m * H
    ends: list[int] = []
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
    return ends


def slice_sums(X: FloatArray, labels: IntArray, n_slices: int) -> tuple[FloatArray, FloatArray]:
    """``(S, counts)``: S[:, h] = sum of the rows of X in slice h (p x H), counts[h] = n_h."""
    counts = np.bincount(labels, minlength=n_slices).astype(float)
    indicator = np.zeros((X.shape[0], n_slices))
    indicator[np.arange(X.shape[0]), labels] = 1.0
    return X.T @ indicator, counts  # one BLAS call; np.add.at is orders of magnitude slower
