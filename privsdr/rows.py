"""Data larger than memory: sums over rows computed chunk by chunk, in this process or on a Dask cluster.

The certified sufficient-statistics estimators (``DPSIR(algorithm="moments")``, ``DPMeanCovariance``,
``DPPLS(mode="certified")``, ``MSC(reference="dp_mean")``) release noisy *sums over rows* (X^T X, slice
sums, X^T y, counts). A sum of per-row terms is a sum of per-chunk sums, so their ``fit`` also accepts

* ``fit(X, y)`` with ``X`` (and ``y``) a ``dask.array``: every row chunk is clipped and summed where it
  lives (a task per chunk, on whatever Dask scheduler is active: the threads of this process, or the
  ``distributed.Client`` the caller created, e.g. on a ``LocalCluster`` or a multi-machine cluster);
* ``fit(Chunks(...))``: an iterable of ``(X_chunk, y_chunk)`` pairs (or ``X_chunk`` arrays for the
  estimators without y) read one at a time in this process.

Contract: each chunk is validated (finite real numbers, matching lengths) and clipped **row by row inside
the chunk** (what makes the declared sensitivities true), then reduced to a few small arrays; only those
reach the driver, which adds them in chunk order, releases them with noise once (the estimator's plan,
charged to its ledger before the noise is drawn) and does the rest as post-processing. Nothing is
charged until every chunk has been read and validated, so bad data in any chunk is refused before any
budget is spent. With the noise off, the result equals the in-memory fit up to floating-point summation
order; the privacy report is the same (same plan, same data shape).

The number of rows n: under ``replace_one`` (DPSIR, DPMeanCovariance) n is public by definition of the
relation -- neighbouring data sets have the same n -- and the sensitivities divide by it, exactly as the
in-memory fit uses ``X.shape[0]``. It is counted in the pass; ``Chunks(..., n_rows=n)`` declares it
instead and the count must then agree. Under ``add_remove`` (DPPLS, MSC) n is private: those
estimators release a noisy count, as in memory.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._chunked import Chunks, is_chunked, is_dask
from ._progress import progress
from ._validation import check_matrix, check_vector, privsdr_errors
from .errors import InputTypeError, ValidationError

__all__ = ["Chunks", "Partial", "add_partials", "chunk_task", "is_chunked", "is_dask", "reduce_rows", "validated_chunk"]


Partial = dict[str, Any]  #: one chunk's reduction: named arrays/numbers, summed over chunks


def add_partials(a: Partial | None, b: Partial) -> Partial:
    """Two chunks' reductions added key by key (``p``, the width, must agree; ``*_min``/``*_max`` keep their extremum)."""
    if a is None:
        return dict(b)
    if a["p"] != b["p"]:
        raise ValidationError(f"the chunks have different numbers of columns ({a['p']} and {b['p']})")
    out = {}
    for key, value in b.items():
        if key == "p":
            out[key] = value
        elif key.endswith("_min"):
            out[key] = min(a[key], value)
        elif key.endswith("_max"):
            out[key] = max(a[key], value)
        else:
            out[key] = a[key] + value
    return out


def validated_chunk(X: Any, y: Any, with_y: bool, finite: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """One chunk checked like an in-memory X (and y): finite reals, 2-D, one y per row (``finite=False``: X's
    finiteness is left to the reduction's one pass over the chunk, ``core.gram_pass``)."""
    X = check_matrix(X, "X chunk", min_rows=0, finite=finite)
    if not with_y:
        if y is not None:
            raise ValidationError("this estimator takes X chunks only (no y)")
        return X, None
    if y is None:
        raise ValidationError("each chunk must be an (X_chunk, y_chunk) pair: this estimator requires y")
    y = check_vector(y, "y chunk")
    if y.size != X.shape[0]:
        raise ValidationError(f"a y chunk has {y.size} values for {X.shape[0]} rows of X")
    if not np.all(np.isfinite(y)):
        raise ValidationError("y contains NaN or inf")
    return X, y


def _split(item: Any, with_y: bool) -> tuple[Any, Any]:
    if with_y:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ValidationError("each chunk must be an (X_chunk, y_chunk) pair: this estimator requires y")
        return item[0], item[1]
    if isinstance(item, (tuple, list)) and len(item) == 2 and np.ndim(item[0]) == 2:
        return item[0], item[1]
    return item, None


def chunk_task(fn: Callable[[np.ndarray, np.ndarray | None], Partial], with_y: bool, X: Any, y: Any = None,
               fn_checks_finite: bool = False) -> Partial:
    """Validate one chunk and reduce it (runs wherever the chunk lives: this process or a Dask worker).
    ``fn_checks_finite``: ``fn`` is a one-pass reduction that refuses NaN and inf itself (``core.gram_pass``), so the
    chunk is not read a second time for it."""
    X, y = validated_chunk(X, y, with_y, finite=not fn_checks_finite)
    if fn_checks_finite:
        with privsdr_errors():
            out = fn(X, y)
    else:
        out = fn(X, y)
    out["n"] = X.shape[0]
    out["p"] = X.shape[1]
    return out


def reduce_rows(X: Any, y: Any, fn: Callable[[np.ndarray, np.ndarray | None], Partial], *, with_y: bool,
                desc: str = "chunks", fn_checks_finite: bool = False) -> Partial:
    """Sum ``fn(X_chunk, y_chunk)`` over the row chunks of ``Chunks`` or a dask array (plus ``n`` and the width ``p``).

    ``fn`` must be picklable (a module-level function or a ``functools.partial`` of one) for a Dask cluster.
    ``fn_checks_finite``: ``fn`` refuses NaN and inf in its own pass over the chunk (``chunk_task``).
    """
    if isinstance(X, Chunks):
        if y is not None:
            raise ValidationError("with Chunks, y comes in the chunks: fit(Chunks(...)) without y")
        total = _reduce_iterable(X, fn, with_y, desc, fn_checks_finite)
        expected = {"n_rows": X.n_rows, "n_features": X.n_features}
    elif is_dask(X):
        total = _reduce_dask(X, y, fn, with_y, desc, fn_checks_finite)
        expected = {}
    else:
        raise InputTypeError(f"expected Chunks or a dask array, got {type(X).__name__}")
    if total is None or total["n"] == 0:
        raise ValidationError("the chunks hold no rows")
    declared_rows, declared_features = expected.get("n_rows"), expected.get("n_features")
    if declared_rows is not None and int(declared_rows) != total["n"]:
        raise ValidationError(f"Chunks declared n_rows={declared_rows}, but the chunks hold {total['n']} rows")
    if declared_features is not None and int(declared_features) != total["p"]:
        raise ValidationError(f"Chunks declared n_features={declared_features}, but the chunks have {total['p']} columns")
    return total


def _reduce_iterable(chunks: Chunks, fn: Callable[..., Partial], with_y: bool, desc: str, checks: bool) -> Partial | None:
    total = None
    for item in progress(iter(chunks), None, desc):  # the chunk sizes are the caller's: a bar without a total
        Xc, yc = _split(item, with_y)
        total = add_partials(total, chunk_task(fn, with_y, Xc, yc, checks))
    return total


def _dask_blocks(X: Any, y: Any, with_y: bool) -> tuple[list[Any], list[Any] | None]:
    """Row blocks of X (whole rows: one column chunk) and, aligned with them, of y."""
    if X.ndim != 2:
        raise ValidationError(f"X must be a 2-D dask array (n_samples, n_features), got {X.ndim} dimensions")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValidationError("X has unknown chunk sizes (call X.compute_chunk_sizes() first)")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # a row must be whole inside its chunk to be clipped
    blocks = list(X.to_delayed().ravel())
    if not with_y:
        if y is not None:
            raise ValidationError("this estimator takes X only (no y)")
        return blocks, None
    if y is None:
        raise ValidationError("y is required: this estimator requires y to be passed, but the target y is None")
    if not is_dask(y):
        import dask.array as da

        y = da.from_array(np.asarray(y), chunks=(X.chunks[0],))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValidationError(f"y must be 1-D with one value per row of X ({X.shape[0]}), got shape {y.shape}")
    if y.chunks[0] != X.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    return blocks, list(y.to_delayed().ravel())


def _dask_client() -> Any:
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - dask without distributed
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _reduce_dask(X: Any, y: Any, fn: Callable[..., Partial], with_y: bool, desc: str, checks: bool) -> Partial | None:
    import dask

    xs, ys = _dask_blocks(X, y, with_y)
    task = dask.delayed(chunk_task, pure=True)
    tasks = [task(fn, with_y, xb, ys[i] if ys is not None else None, checks) for i, xb in enumerate(xs)]
    client = _dask_client()
    if client is not None:  # a distributed cluster: gather results as they finish (the bar counts chunks)
        from distributed import as_completed

        futures = client.compute(tasks)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[Partial | None] = [None] * len(futures)
        for future in progress(as_completed(futures), len(futures), desc, min_total=2):
            results[index[future.key]] = future.result()
    else:
        results = list(dask.compute(*tasks))
    total = None
    for part in results:  # in chunk order: the sum does not depend on which worker finished first
        assert part is not None
        total = add_partials(total, part)
    return total

