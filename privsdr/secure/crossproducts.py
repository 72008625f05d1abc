"""The public layout of a secure Gram of vertically partitioned columns (issues 23, 34): which party holds which
column groups of the augmented row, which blocks of its Gram are released, and the fixed-point grid.

The parties hold column groups of the same N aligned rows. Each group (``Group``) is a public name, a width, its
owner (a data party, or none for the public constant column) and the key of the owner's input that carries it
(``block``: a party's clipped, rounded columns; ``label``: the label holder's rounded label; ``slices``: its slice
indicators; ...). Every entry is an integer on the public grid 2^e (``party_block``, ``label_vector``: clipped so
that the rounded values stay within the public bounds), so the augmented row is z = [Q_1 ... Q_k ...] 2^e and
every block entry sum_i z_ir z_ic is an exact integer in units 2^(2e).

A release (``Block``) is declared by the groups on its two sides: ``Block("xtx", ("alice", "bob", "1"))`` is the
upper triangle (with diagonal) of Z^T Z over those groups, row-major; ``Block("xty", ("alice", "bob", "1"), ("y",))``
the rectangle Z_left^T Z_right, row-major. The engine knows no estimator: an estimator declares its groups and
blocks (``privsdr.vertical``) and reads the opened blocks back by name.

Who computes an entry (r, c): its owner alone when both columns are one party's or one of them is the public
constant (``local_statistics``: that party's own Gram and column sums, added as its own input); the constant against
itself (N c^2) is added by the first data party; an entry of two columns held by different parties is a product of
secret-shared matrices (``pairs``: S_g^T S_h of the two groups, computed on Shamir shares by MPyC), placed into the
released vector by a public 0/1 matrix (``scatter``). The noise shares are added before anything is opened
(``privsdr.secure.party``).

Grid (``grid_exponent``): the largest integers are N (M / 2^e)^2 with M the largest coordinate bound; with
``parties`` noise contributors the opened sum stays below 2^54 for every N <= ``max_rows`` (public), which leaves
room for the noise shares within the 62-bit field of ``job.field_bits`` and keeps the parties' own products exact
in int64.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from ..errors import ValidationError

#: the opened statistic (before noise) stays below 2^DATA_BITS for every N <= max_rows
DATA_BITS = 54
#: the default rows of each column group secret-shared at a time (``CrossProducts.share_rows``)
SHARE_ROWS = 8192


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


class ColumnStream:
    """One party's integer column group (``rows`` x ``width``, on the grid), read in consecutive row chunks each time
    it is streamed: ``read()`` yields the chunks (any number of rows each) of one pass. A party's process receives its
    rows ``share_rows`` at a time as its cross-products loop consumes them (``row_frames``, ``privsdr.secure.launch``),
    so neither the launcher nor the party holds the whole group. ``np.asarray`` of it reads one whole pass (for
    in-process stand-ins and small data only)."""

    def __init__(self, read: Callable[[], Iterable[np.ndarray]], rows: int, width: int) -> None:
        self.read, self.rows, self.width = read, int(rows), int(width)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.width)

    dtype = np.dtype(np.int64)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate([np.asarray(c).reshape(-1, self.width) for c in self.read()]).astype(np.int64, copy=False)
        return whole if dtype is None else whole.astype(dtype)


def row_frames(value: Any, size: int, width: int) -> Iterator[np.ndarray]:
    """The rows of ``value`` (an array, or a ``ColumnStream``'s one pass) as consecutive int64 frames of ``size`` rows
    (the last one shorter), each ``(rows, width)``. Chunks of any size are cut and joined; at most one frame and one
    chunk are held at a time."""
    parts: Iterable[Any] = value.read() if isinstance(value, ColumnStream) else (value,)
    held: list[np.ndarray] = []
    have = 0
    for part in parts:
        part = np.asarray(part)
        if part.dtype.kind not in "iu":
            raise ValidationError(f"a party's column group must hold integers on the grid, got {part.dtype}")
        part = part.reshape(-1, width)
        while part.shape[0]:
            take = min(size - have, part.shape[0])
            held.append(part[:take])
            part, have = part[take:], have + take
            if have == size:
                yield np.concatenate(held).astype(np.int64, copy=False)
                held, have = [], 0
    if have:
        yield np.concatenate(held).astype(np.int64, copy=False)


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


@attrs.frozen
class Group:
    """A public column group of the augmented row: ``width`` columns held by ``owner`` in its input ``key`` (an
    integer N x width matrix, or N numbers when width is 1), or, with ``owner`` "", the public constant ``value``
    (grid units). ``description`` names it in the trust model ("columns", "label", "slice indicators", ...)."""

    name: str
    width: int
    owner: str = ""
    key: str = "block"
    value: int = 0
    description: str = "columns"

    def __attrs_post_init__(self) -> None:
        if self.width < 1:
            raise ValidationError(f"group {self.name!r} needs at least one column")
        if not self.owner and (self.width != 1 or self.value <= 0):
            raise ValidationError(f"the constant group {self.name!r} is one column with a positive value in grid units")

    @property
    def constant(self) -> bool:
        return not self.owner


@attrs.frozen
class Block:
    """A released block of the Gram: ``left`` groups against ``right`` groups (row-major), or with ``right`` empty
    the upper triangle (with diagonal, row-major) of ``left`` against itself. ``description``: its name in the
    trust model ("X^T X", "the slice sums", ...)."""

    name: str
    left: tuple[str, ...] = attrs.field(converter=_names)
    right: tuple[str, ...] = attrs.field(default=(), converter=_names)
    description: str = ""

    @property
    def symmetric(self) -> bool:
        return not self.right


def _groups(value: Any) -> tuple[Group, ...]:
    return tuple(g if isinstance(g, Group) else Group(**g) for g in value)


def _declared(value: Any) -> tuple[Block, ...]:
    return tuple(b if isinstance(b, Block) else Block(**b) for b in value)


@attrs.frozen
class CrossProducts:
    """The public layout of one secure Gram (module docstring): N ``rows``, the column ``groups`` in order, the
    released ``blocks`` in order, and the grid exponent e. ``share_rows``: the rows of each group secret-shared at a
    time (``party._cross_products``), which bounds MPyC's copy of a party's columns."""

    rows: int
    groups: tuple[Group, ...] = attrs.field(converter=_groups)
    blocks: tuple[Block, ...] = attrs.field(converter=_declared)
    exponent: int
    share_rows: int = SHARE_ROWS

    def __attrs_post_init__(self) -> None:
        names = [g.name for g in self.groups]
        if self.rows < 1 or not self.groups or len(set(names)) != len(names) or not self.parties:
            raise ValidationError("a secure Gram needs N >= 1 rows, column groups with distinct names and at least one data party")
        keys = [(g.owner, g.key) for g in self.groups if not g.constant]
        if len(set(keys)) != len(keys):
            raise ValidationError("each input of a party carries one column group")
        if self.share_rows < 1:
            raise ValidationError("share_rows must be a positive number of rows")
        blocks = [b.name for b in self.blocks]
        if not self.blocks or len(set(blocks)) != len(blocks):
            raise ValidationError("a secure Gram releases at least one block, with distinct names")
        for b in self.blocks:
            unknown = [g for g in (*b.left, *b.right) if g not in names]
            if unknown or not b.left:
                raise ValidationError(f"block {b.name!r} names unknown groups {unknown}" if unknown else f"block {b.name!r} has no groups")
            if b.symmetric and all(self.group(g).constant for g in b.left) or (
                    not b.symmetric and all(self.group(g).constant for g in (*b.left, *b.right))):
                raise ValidationError(f"block {b.name!r} holds only public constants: nothing to release")

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    @property
    def parties(self) -> tuple[str, ...]:
        """The data parties, in the order of their first group."""
        return tuple(dict.fromkeys(g.owner for g in self.groups if not g.constant))

    @property
    def width(self) -> int:
        """Every group's columns: the width of the augmented row."""
        return sum(g.width for g in self.groups)

    def columns(self, group: str) -> slice:
        """The columns of ``group`` in the augmented row."""
        start = 0
        for g in self.groups:
            if g.name == group:
                return slice(start, start + g.width)
            start += g.width
        raise ValidationError(f"no column group {group!r}")

    def owned(self, party: str) -> list[Group]:
        """The groups ``party`` holds, in order."""
        return [g for g in self.groups if g.owner == party]

    def _span(self, groups: tuple[str, ...]) -> np.ndarray:
        return np.concatenate([np.arange(self.columns(g).start, self.columns(g).stop) for g in groups])

    def entries(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """The (row, column) of every entry of ``block`` in the augmented row's Gram, in release order."""
        left = self._span(block.left)
        if block.symmetric:
            i, j = np.triu_indices(left.size)
            return left[i], left[j]
        right = self._span(block.right)
        return np.repeat(left, right.size), np.tile(right, left.size)

    @property
    def dimensions(self) -> dict[str, int]:
        return {b.name: int(self.entries(b)[0].size) for b in self.blocks}

    def _owners(self) -> np.ndarray:
        return np.concatenate([[g.owner] * g.width for g in self.groups])

    def local_statistics(self, party: str, held: Mapping[str, np.ndarray] | None, rows: int | None = None) -> np.ndarray:
        """What ``party`` adds alone, every block concatenated, in grid units 2^(2e) (int64, exact): the entries of its
        own columns against each other and against the constants, and for the first data party the constants against
        each other. ``held``: its integer matrices by group name (``rows`` x width; default all N rows). A helper adds
        zeros. Additive over row chunks: the sum over consecutive chunks is that of all N rows."""
        rows = self.rows if rows is None else int(rows)
        W = self.width
        gram = np.zeros((W, W), dtype=np.int64)
        mine = self.owned(party)
        constants = [g for g in self.groups if g.constant]
        if mine:
            assert held is not None
            cols = self._span(tuple(g.name for g in mine))
            Q = np.column_stack([np.asarray(held[g.name], dtype=np.int64).reshape(rows, g.width) for g in mine])
            gram[np.ix_(cols, cols)] = Q.T @ Q
            sums = Q.sum(axis=0)
            for g in constants:
                at = self.columns(g.name).start
                gram[cols, at] = gram[at, cols] = g.value * sums
        if party == self.parties[0]:
            for g in constants:
                for h in constants:
                    gram[self.columns(g.name).start, self.columns(h.name).start] = rows * g.value * h.value
        return np.concatenate([gram[self.entries(b)] for b in self.blocks]).astype(np.int64)

    def pairs(self) -> list[tuple[str, str]]:
        """The secure products (g, h), g before h: groups of different parties with an entry in some block."""
        owners = self._owners()
        index = {g.name: i for i, g in enumerate(self.groups)}
        group_of = np.concatenate([[g.name] * g.width for g in self.groups])
        found = set()
        for b in self.blocks:
            r, c = self.entries(b)
            cross = (owners[r] != owners[c]) & (owners[r] != "") & (owners[c] != "")
            for g, h in zip(group_of[r[cross]], group_of[c[cross]], strict=True):
                found.add((g, h) if index[g] < index[h] else (h, g))
        return sorted(found, key=lambda gh: (index[gh[0]], index[gh[1]]))

    def scatter(self, g: str, h: str) -> np.ndarray:
        """The public 0/1 matrix that places the product S_g^T S_h (w_g x w_h, flattened row-major) into every entry of
        the concatenated released vector that it is."""
        cg, ch = self.columns(g), self.columns(h)
        wh = ch.stop - ch.start
        total = sum(self.dimensions.values())
        out = np.zeros((total, (cg.stop - cg.start) * wh), dtype=np.int64)
        at = 0
        for b in self.blocks:
            r, c = self.entries(b)
            for rr, cc in ((r, c), (c, r)):
                hit = (rr >= cg.start) & (rr < cg.stop) & (cc >= ch.start) & (cc < ch.stop)
                out[at + np.flatnonzero(hit), (rr[hit] - cg.start) * wh + (cc[hit] - ch.start)] = 1
            at += r.size
        return out

    def inputs(self, data: Mapping[str, Mapping[str, np.ndarray]], own: str | None = None) -> dict[str, dict[str, np.ndarray]]:
        """What each data party's process receives on its stdin: its arrays under its groups' keys (``own``: that
        party's only; a helper receives nothing). ``data``: party -> key -> integer array."""
        holders = self.parties if own is None else [own] if own in self.parties else []
        out: dict[str, dict[str, np.ndarray]] = {}
        for name in holders:
            given = data.get(name) or {}
            missing = [g.key for g in self.owned(name) if g.key not in given]
            if missing:
                raise ValidationError(f"party {name!r} has no {missing} for its column groups")
            out[name] = {g.key: given[g.key] for g in self.owned(name)}
        return out

    def plain(self, data: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The noise-free blocks in real units from every party's arrays (exact integers, then times 2^(2e); a symmetric
        block as its whole matrix): what a simulated fit's replay audit compares the opening with, never sent anywhere."""
        gram = np.zeros((self.width, self.width), dtype=np.int64)  # exact: every entry stays below 2^DATA_BITS
        size = 1 << 16  # row chunks: no second copy of every party's columns (a ColumnStream is read once more)
        frames = [row_frames(data[g.owner][g.key], size, g.width) for g in self.groups if not g.constant]
        for start in range(0, self.rows, size):
            stop = min(self.rows, start + size)
            chunk = iter([next(f) for f in frames])
            Z = np.column_stack([np.full(stop - start, g.value) if g.constant else next(chunk) for g in self.groups]).astype(np.int64)
            gram += Z.T @ Z
        scale = 2.0 ** (2 * self.exponent)
        return {b.name: np.array(gram[np.ix_(self._span(b.left), self._span(b.left))] if b.symmetric else gram[self.entries(b)],
                                 dtype=float) * scale for b in self.blocks}

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "groups": [attrs.asdict(g) for g in self.groups],
                "blocks": [{"name": b.name, "left": list(b.left), "right": list(b.right), "description": b.description}
                           for b in self.blocks],
                "exponent": self.exponent, "share_rows": self.share_rows}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrossProducts:
        return cls(int(data["rows"]), data["groups"], data["blocks"], int(data["exponent"]), int(data["share_rows"]))
