"""The public layout of a secure Gram of vertically partitioned columns (issue 23): who holds which columns,
the fixed-point grid, and which products must be computed inside the secure computation.

Parties hold column blocks of the same N aligned rows; one of them (``label``) also holds y. Each data party clips
its own rows to its public bound C_i and rounds them to the public grid 2^e (``party_block``: clipped to
C_i - sqrt(w_i) 2^e / 2 first, so that the rounded block still has row norms <= C_i), giving an integer matrix
Q_i with Z = [Q_1 ... Q_k (c)] 2^e, where c is the intercept's constant column. The two releases are

    xtx = Z^T Z   (upper triangle with diagonal, P x P)      xty = Z^T y   (P)

in units of 2^(2e), exact integers. What a party can compute alone (its diagonal block Q_i^T Q_i, its columns
against the public constant, and, for the label holder, Q_L^T y, c sum y and N c^2) it adds as its own input;
the cross-blocks Q_a^T Q_b (a != b) and Q_a^T y (a != label) are products of secret-shared matrices
(``products``), computed on Shamir shares by MPyC and placed into the released vectors by public 0/1 matrices
(``scatter``). The noise shares are added before anything is opened (``privsdr.secure.party``).

Grid (``grid_exponent``): the largest integers are N (M / 2^e)^2 with M the largest coordinate bound; with
``parties`` noise contributors the opened sum stays below 2^54 for every N <= ``max_rows`` (public), which leaves
room for the noise shares within the 62-bit field of ``job.field_bits`` and keeps the parties' own products exact
in int64.
"""
from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from ..errors import ValidationError

#: the opened statistic (before noise) stays below 2^DATA_BITS for every N <= max_rows
DATA_BITS = 54


def grid_exponent(max_rows: int, coordinate_bound: float, parties: int) -> int:
    """The finest power-of-two grid 2^e with parties * max_rows * (M / 2^e)^2 <= 2^DATA_BITS (module docstring)."""
    if max_rows < 1 or not (coordinate_bound > 0 and math.isfinite(coordinate_bound)) or parties < 1:
        raise ValidationError("need max_rows >= 1, a positive finite coordinate bound and at least one party")
    return math.ceil(math.log2(coordinate_bound * math.sqrt(parties * max_rows)) - DATA_BITS / 2)


def party_block(X: np.ndarray, bound: float, exponent: int) -> np.ndarray:
    """One party's rows, centred already, clipped to ||x|| <= bound - sqrt(w) 2^e / 2 and rounded to the grid 2^e:
    the integer matrix Q_i (its rows, times 2^e, have norm <= bound)."""
    from ..core import clip_rows_l2  # here, not at the top: a party process imports this module and never clips

    X = np.asarray(X, dtype=float)
    gamma = 2.0**exponent
    room = bound - math.sqrt(X.shape[1]) * gamma / 2.0
    if room <= 0:
        raise ValidationError(f"the bound {bound:g} is below the grid's resolution {gamma:g}")
    return np.rint(clip_rows_l2(X, room) / gamma).astype(np.int64)


def label_vector(y: np.ndarray, bound: float, exponent: int) -> np.ndarray:
    """The label, centred already, clipped to |y| <= bound - 2^e / 2 and rounded to the grid (|y_q 2^e| <= bound)."""
    gamma = 2.0**exponent
    room = bound - gamma / 2.0
    if room <= 0:
        raise ValidationError(f"the label bound {bound:g} is below the grid's resolution {gamma:g}")
    return np.rint(np.clip(np.asarray(y, dtype=float), -room, room) / gamma).astype(np.int64)


def _blocks(value: Any) -> tuple[tuple[str, int], ...]:
    return tuple((str(name), int(width)) for name, width in value)


@attrs.frozen
class CrossProducts:
    """The public layout of one secure Gram (module docstring). ``intercept``: the constant column in grid units
    (0: no intercept column)."""

    rows: int
    blocks: tuple[tuple[str, int], ...] = attrs.field(converter=_blocks)
    label: str
    exponent: int
    intercept: int = 0

    def __attrs_post_init__(self) -> None:
        names = [name for name, _ in self.blocks]
        if self.rows < 1 or not self.blocks or len(set(names)) != len(names) or any(w < 1 for _, w in self.blocks):
            raise ValidationError("a secure Gram needs N >= 1 rows and parties with distinct names and at least one column each")
        if self.label not in names:
            raise ValidationError(f"the label holder {self.label!r} is not one of the data parties {names}")
        if self.intercept < 0:
            raise ValidationError("the intercept's constant must be >= 0 grid steps")

    @property
    def parties(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.blocks)

    @property
    def width(self) -> int:
        """P: every party's columns, plus the intercept's."""
        return sum(w for _, w in self.blocks) + (1 if self.intercept else 0)

    @property
    def dimensions(self) -> dict[str, int]:
        P = self.width
        return {"xtx": P * (P + 1) // 2, "xty": P}

    def columns(self, party: str) -> slice:
        start = 0
        for name, width in self.blocks:
            if name == party:
                return slice(start, start + width)
            start += width
        raise ValidationError(f"{party!r} holds no columns")

    def width_of(self, party: str) -> int:
        return dict(self.blocks)[party]

    def upper_index(self) -> np.ndarray:
        """P x P: the position of entry (r, c), r <= c, in the row-major upper triangle (-1 below the diagonal)."""
        P = self.width
        index = -np.ones((P, P), dtype=np.int64)
        rows, cols = np.triu_indices(P)
        index[rows, cols] = np.arange(rows.size)
        return index

    def local_statistics(self, party: str, Q: np.ndarray | None, y: np.ndarray | None) -> dict[str, np.ndarray]:
        """What ``party`` adds alone, in grid units 2^(2e) (int64, exact): its diagonal block, its columns against the
        constant, and for the label holder Q_L^T y, c sum(y) and N c^2. A party without columns (a helper) adds zeros."""
        P = self.width
        gram = np.zeros((P, P), dtype=np.int64)
        xty = np.zeros(P, dtype=np.int64)
        if party in self.parties:
            Q = np.asarray(Q, dtype=np.int64)
            cols = self.columns(party)
            if Q.shape != (self.rows, self.width_of(party)):
                raise ValidationError(f"{party!r} must hold a {self.rows} x {self.width_of(party)} block, got {Q.shape}")
            gram[cols, cols] = Q.T @ Q
            if self.intercept:
                gram[cols, P - 1] = self.intercept * Q.sum(axis=0)
            if party == self.label:
                y = np.asarray(y, dtype=np.int64)
                if y.shape != (self.rows,):
                    raise ValidationError(f"the label must hold {self.rows} values, got {y.shape}")
                xty[cols] = Q.T @ y
                if self.intercept:
                    gram[P - 1, P - 1] = self.rows * self.intercept * self.intercept
                    xty[P - 1] = self.intercept * int(y.sum())
        rows, cols_ = np.triu_indices(P)
        return {"xtx": gram[rows, cols_], "xty": xty}

    def products(self) -> list[tuple[str, str, str]]:
        """The secure products, in a fixed order: ("xtx", a, b) for a before b, ("xty", a, label) for a != label."""
        names = self.parties
        out = [("xtx", a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        return out + [("xty", a, self.label) for a in names if a != self.label]

    def scatter(self, node: str, a: str, b: str) -> np.ndarray:
        """The public 0/1 matrix that places the product (flattened row-major: Q_a^T Q_b, w_a x w_b; or Q_a^T y,
        w_a) into the concatenated released vector [xtx, xty]."""
        dims = self.dimensions
        total = dims["xtx"] + dims["xty"]
        ca = self.columns(a)
        if node == "xtx":
            cb = self.columns(b)
            index = self.upper_index()
            targets = [index[r, c] for r in range(ca.start, ca.stop) for c in range(cb.start, cb.stop)]
        else:
            targets = [dims["xtx"] + r for r in range(ca.start, ca.stop)]
        out = np.zeros((total, len(targets)), dtype=np.int64)
        out[targets, np.arange(len(targets))] = 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "blocks": [list(b) for b in self.blocks], "label": self.label, "exponent": self.exponent,
                "intercept": self.intercept}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrossProducts:
        return cls(int(data["rows"]), data["blocks"], str(data["label"]), int(data["exponent"]), int(data["intercept"]))
