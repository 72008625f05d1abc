"""The inputs that arrive chunk by chunk: ``Chunks`` and dask arrays (``privsdr.rows`` reduces them).

Apart from ``rows`` so that the input checks (``_validation``, which refuses them where the rows must be in memory)
and the reductions (``rows``, which reads them through those checks) each import it, and not each other.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .errors import InputTypeError, ValidationError


class Chunks:
    """Rows that arrive chunk by chunk (a file read in pieces, a database cursor, a generator).

    ``Chunks(source, n_rows=None, n_features=None)``

    * ``source``: an iterable of ``(X_chunk, y_chunk)`` pairs (``X_chunk`` arrays alone for estimators
      without y), or a zero-argument callable that returns a fresh such iterable. A fit that reads the
      rows twice (DPSIR with ``y_grid``: DP quantiles first, then the sums) needs the callable; a
      one-shot generator is read once and then refuses a second pass.
    * ``n_rows``: the number of rows, if known beforehand: a count that disagrees is refused.
    * ``n_features``: likewise for the number of columns.

    Only one chunk (and the running sums) is held in memory at a time.
    """

    def __init__(self, source: Any, *, n_rows: int | None = None, n_features: int | None = None) -> None:
        self.source = source
        self.n_rows = n_rows
        self.n_features = n_features
        self._passes = 0

    @property
    def reusable(self) -> bool:
        """Whether the rows can be read more than once (a callable, or a container that is not an iterator)."""
        return callable(self.source) or (isinstance(self.source, Iterable) and not isinstance(self.source, Iterator))

    def __iter__(self) -> Iterator[Any]:
        if self._passes and not self.reusable:
            raise ValidationError("these Chunks were already read once: give a callable that returns a fresh iterator "
                                  "(e.g. Chunks(lambda: read_chunks(path))) for a fit that reads the rows more than once")
        self._passes += 1
        source = self.source() if callable(self.source) else self.source
        if not isinstance(source, Iterable):
            raise InputTypeError(f"Chunks needs an iterable of chunks (or a callable returning one), got {type(source).__name__}")
        return iter(source)

    def __repr__(self) -> str:
        known = ", ".join(f"{k}={v}" for k, v in (("n_rows", self.n_rows), ("n_features", self.n_features)) if v is not None)
        return f"Chunks({type(self.source).__name__}{', ' + known if known else ''})"


def is_dask(obj: Any) -> bool:
    """A dask collection (checked without importing dask unless the object comes from it)."""
    if not type(obj).__module__.startswith("dask"):
        return False
    from dask import is_dask_collection

    return bool(is_dask_collection(obj))


def is_chunked(X: Any) -> bool:
    """Input that a sums-over-rows fit reduces chunk by chunk (``Chunks`` or a dask array)."""
    return isinstance(X, Chunks) or is_dask(X)
