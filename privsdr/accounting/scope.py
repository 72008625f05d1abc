"""Data scopes: which records a release reads.

A scope is a set of constraints ``(partition, cell)``: the release reads the records that lie in
``cell`` of every named partition (the empty scope reads every record). Partitions must be public
and data-independent (batches by index, federated clients, ...). Records in different cells of one
partition are disjoint, so releases on them compose in parallel (max), not in sequence (sum).
"""
from __future__ import annotations

from collections.abc import Iterable

import attrs


def _sorted_pairs(value: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    pairs = tuple(sorted((str(p), str(c)) for p, c in value))
    names = [p for p, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError(f"a scope can name each partition once, got {pairs}")
    return pairs


@attrs.frozen
class Scope:
    constraints: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_sorted_pairs)

    @classmethod
    def whole(cls) -> Scope:
        return cls(())

    def cell(self, partition: str, cell: object) -> Scope:
        """The sub-scope of this scope that lies in ``cell`` of ``partition``."""
        return Scope(self.constraints + ((partition, str(cell)),))

    def renamed(self, mapping: dict[str, str]) -> Scope:
        return Scope((mapping.get(p, p), c) for p, c in self.constraints)

    @property
    def is_whole(self) -> bool:
        return not self.constraints

    def __str__(self) -> str:
        if not self.constraints:
            return "all records"
        return " & ".join(f"{p}[{c}]" for p, c in self.constraints)

    def to_list(self) -> list[list[str]]:
        return [[p, c] for p, c in self.constraints]

    @classmethod
    def from_list(cls, data: Iterable[Iterable[str]]) -> Scope:
        return cls(tuple((p, c) for p, c in data))
