"""DPSIR's producer of the SIR moments (``privsdr.released.moments`` declares them and post-processes them):
the slice sums, slice counts and second moment of the clipped rows, accumulated in memory or chunk by chunk
(``privsdr.rows``) and released once on all n rows, each node charged before its noise is drawn.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import core
from ..plan import CalibratedPlan, Run
from ..released.moments import (  # noqa: F401 (the declarations and post-processing DPSIR uses, re-exported)
    NOISE_WARNING_SHARE,
    RELATION,
    WEIGHTS,
    MomentRelease,
    add_moment_nodes,
    noise_error,
    noise_message,
    random_subspace_error,
)
from ..released.record import from_run


def release_moments(run: Run, plan: CalibratedPlan, X: np.ndarray, labels: np.ndarray, H: int,
                    center: np.ndarray, bound: np.ndarray) -> MomentRelease:
    """Accumulate the clipped statistics chunk by chunk and release them (each charged before its noise)."""
    sums, counts, xtx = core.clipped_sufficient_sums(X, labels, H, center, bound)
    return release_sums(run, plan, sums, counts, xtx, X.shape[0])


def chunk_sums(X: np.ndarray, y: np.ndarray, *, cuts: np.ndarray, bound: Any, center: Any) -> dict[str, Any]:
    """One row chunk's slice sums, slice counts and X^T X of its clipped rows (``privsdr.rows``: chunks add up).

    ``bound``: the public bound(s) as given; ``center``: None or the public centre as given (checked per chunk
    against its number of columns)."""
    from ._base import column_bounds, public_center

    p = X.shape[1]
    bounds = column_bounds(bound, p)
    shift = public_center(center, p)
    labels = core.slice_by_cut_points(y, cuts)
    sums, counts, xtx = core.clipped_sufficient_sums(X, labels, len(cuts) + 1, shift, bounds)
    return {"slice_sums": sums, "counts": counts, "xtx": xtx}


def chunk_grid_counts(X: np.ndarray, y: np.ndarray, *, grid: np.ndarray) -> dict[str, Any]:
    """One row chunk's #{y <= c} over the public grid (the first pass of DP quantile slicing)."""
    from ._sir_common import grid_counts

    return {"grid_counts": grid_counts(y, grid)}


MOMENT_NODES = ("slice_sums", "slice_counts", "second_moment")


def release_sums(run: Run, plan: CalibratedPlan, sums: np.ndarray, counts: np.ndarray, xtx: np.ndarray, n: int,
                 source: str = "in memory") -> MomentRelease:
    """Release the accumulated statistics of all n rows, each divided by n (each charged before its noise); the
    post-processing reads the ``Released`` record, as for every other path."""
    run.release("slice_sums", sums / n)
    run.release("slice_counts", counts / n)
    run.release("second_moment", xtx / n)
    return MomentRelease.from_released(from_run(run, MOMENT_NODES, n=n, source=source))


