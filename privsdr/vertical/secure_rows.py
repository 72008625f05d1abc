"""A data party's rows for a secure vertical Gram, from an array or read as ``Chunks`` (issue 34: memory flat in N).

``checked_parties`` checks the parties and their public layout before anything is agreed or charged; a party whose X
is ``Chunks`` (with its public ``n_rows`` and ``n_features``) is checked there on a zero-stride stand-in of its
public shape (no N x p block is allocated) and its chunks are checked by ``read_block``'s first pass. ``read_block``
gives the party's integer block, (x - center) s clipped to ||.|| <= bound and rounded to the grid 2^e
(``crossproducts.party_block``): the whole int64 block from an array; from ``Chunks``, a
``crossproducts.ColumnStream`` that reads the chunks again, clipping and rounding each, as the party's process
consumes its rows, so only a chunk or two are in memory at a time, in the launcher and in the party's process.
Used by every secure vertical estimator (``SecureVerticalRegression``, ``SecureVerticalSIR``,
``SecureVerticalMeanCovariance``).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np

from .._validation import check_matrix
from ..errors import ValidationError
from ..parties.layout import Layout, Party, check_parties
from ..secure import crossproducts


def checked_parties(parties: Sequence[Party], min_rows: int) -> tuple[list[Party], Layout]:
    """The parties (``check_parties``) and their public layout; a ``Chunks`` party keeps its ``Chunks``, checked on
    its public shape here and read later (``read_block``)."""
    from .._chunked import Chunks

    if isinstance(parties, Party) or not isinstance(parties, (list, tuple)) or not parties:
        raise ValidationError("give a non-empty list of privsdr.vertical.Party objects")
    chunked: dict[str, Any] = {p.name: p.X for p in parties if isinstance(p, Party) and isinstance(p.X, Chunks)}
    shapes: dict[str, tuple[int, int]] = {}
    for name, chunks in chunked.items():
        if chunks.n_rows is None or chunks.n_features is None:
            raise ValidationError(f"party {name!r}: Chunks need their public n_rows and n_features for a secure Gram")
        shapes[name] = (int(chunks.n_rows), int(chunks.n_features))
    stand_ins = [Party(p.name, np.broadcast_to(np.float64(0.0), shapes[p.name]), p.y, p.columns)
                 if isinstance(p, Party) and p.name in shapes else p for p in parties]
    checked, layout = check_parties(stand_ins, min_rows=min_rows)
    return [attrs.evolve(p, X=chunked[p.name]) if p.name in chunked else p for p in checked], layout


def read_block(X: Any, center: np.ndarray, scale: float, bound: float, exponent: int) -> Any:
    """One party's integer block (module docstring). From ``Chunks``: a first pass checks every chunk (finite, its
    width) and counts the rows against ``n_rows``, before anything is agreed or charged; the ``ColumnStream``
    returned reads them again."""
    from ..rows import is_chunked

    if not is_chunked(X):
        return crossproducts.party_block((np.asarray(X, dtype=float) - center) * scale, bound, exponent)
    rows = 0
    for chunk in _checked_chunks(X, center.size):
        rows += chunk.shape[0]
    if rows != X.n_rows:
        raise ValidationError(f"the chunks held {rows} rows, the party declared n_rows = {X.n_rows}")

    def read() -> Iterator[np.ndarray]:
        for chunk in _checked_chunks(X, center.size):
            yield crossproducts.party_block((chunk - center) * scale, bound, exponent)

    return crossproducts.ColumnStream(read, rows, center.size)


def _checked_chunks(X: Any, width: int) -> Iterator[np.ndarray]:
    for chunk in X:
        chunk = check_matrix(chunk[0] if isinstance(chunk, tuple) else chunk, "a chunk of X", min_rows=1)
        if chunk.shape[1] != width:
            raise ValidationError(f"a chunk has {chunk.shape[1]} columns, the party declared {width}")
        yield chunk
