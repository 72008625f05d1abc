"""Who holds what: parties with column blocks of the same N aligned rows.

``Party`` is one party's *private* data (a column block X_i of the N rows, optionally the label y);
``Layout`` is the *public* description every party may know (N, the parties' names, column counts,
column names and who holds a label). Rows are aligned beforehand (record linkage is out of scope).
``check_parties`` validates a set of parties before anything is spent.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .._validation import check_matrix, warn_column_vector
from ..errors import ValidationError


@attrs.frozen(eq=False)
class Party:
    """One party's private data: ``X`` (N x m_i) and, for a label holder, ``y`` (N)."""

    name: str
    X: np.ndarray = attrs.field(repr=lambda a: f"array{np.shape(a)}")
    y: np.ndarray | None = attrs.field(default=None, repr=lambda a: "None" if a is None else f"array{np.shape(a)}")
    columns: tuple[str, ...] | None = attrs.field(default=None, converter=lambda c: None if c is None else tuple(str(x) for x in c))

    @property
    def holds_label(self) -> bool:
        return self.y is not None

    def info(self) -> PartyInfo:
        return PartyInfo(self.name, int(np.shape(self.X)[1]), self.holds_label, self.columns)


@attrs.frozen
class PartyInfo:
    """What the other parties may know about one party."""

    name: str
    n_columns: int
    holds_label: bool = False
    columns: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "n_columns": self.n_columns, "holds_label": self.holds_label,
                "columns": None if self.columns is None else list(self.columns)}


@attrs.frozen
class Layout:
    """The public layout of one protocol run: N and the parties in protocol order."""

    n_rows: int
    parties: tuple[PartyInfo, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parties)

    @property
    def label_holders(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parties if p.holds_label)

    def party(self, name: str) -> PartyInfo:
        for p in self.parties:
            if p.name == name:
                return p
        raise KeyError(name)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def to_dict(self) -> dict[str, Any]:
        return {"n_rows": self.n_rows, "parties": [p.to_dict() for p in self.parties]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Layout:
        return cls(int(data["n_rows"]), tuple(PartyInfo(p["name"], int(p["n_columns"]), bool(p["holds_label"]),
                                                        None if p.get("columns") is None else tuple(p["columns"]))
                                              for p in data["parties"]))

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def is_block_list(X: Any) -> bool:
    """A list of parties' column blocks (Party objects or 2-D arrays), as opposed to a pooled X given as
    rows (a list of lists, as scikit-learn's tools sometimes pass it)."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and all(isinstance(b, Party) or np.asarray(b).ndim == 2 for b in X)


def pooled_label(y: Any) -> Any:
    """y for a pooled fit: a column vector (n, 1) flattened with scikit-learn's DataConversionWarning."""
    if y is None:
        return y
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        warn_column_vector(arr)
        return arr[:, 0]
    return y


def check_party(party: Party, min_rows: int = 2) -> Party:
    """A party with a finite 2-D block (and a finite label of matching length), as floats."""
    if not isinstance(party, Party):
        raise ValidationError(f"expected a privsdr.vertical.Party, got {type(party).__name__}")
    if not isinstance(party.name, str) or not party.name or "/" in party.name or party.name != party.name.strip():
        raise ValidationError(f"party names must be non-empty strings without '/' or surrounding spaces, got {party.name!r}")
    X = check_matrix(party.X, f"party {party.name!r}: X", min_rows=min_rows)
    y = None
    if party.y is not None:
        y = np.asarray(party.y, dtype=float)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValidationError(f"party {party.name!r}: y must be 1-D with one value per row of X ({X.shape[0]}), got shape {y.shape}")
        if not np.all(np.isfinite(y)):
            raise ValidationError(f"party {party.name!r}: y contains NaN or inf")
    if party.columns is not None and len(party.columns) != X.shape[1]:
        raise ValidationError(f"party {party.name!r}: {len(party.columns)} column names for {X.shape[1]} columns")
    return Party(party.name, X, y, party.columns)


def check_parties(parties: Sequence[Party], min_rows: int = 2) -> tuple[tuple[Party, ...], Layout]:
    """Validated parties (float arrays) and their public layout; ValidationError before any spending."""
    if isinstance(parties, Party) or not isinstance(parties, (list, tuple)) or not parties:
        raise ValidationError("give a non-empty list of privsdr.vertical.Party objects")
    checked = tuple(check_party(p, min_rows) for p in parties)
    names = [p.name for p in checked]
    if len(set(names)) != len(names):
        raise ValidationError(f"party names must be distinct, got {names}")
    rows = {p.name: p.X.shape[0] for p in checked}
    if len(set(rows.values())) != 1:
        raise ValidationError(f"the parties must hold the same N aligned rows; row counts differ: {rows}")
    layout = Layout(next(iter(rows.values())), tuple(p.info() for p in checked))
    return checked, layout
