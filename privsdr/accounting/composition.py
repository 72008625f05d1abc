"""Parallel composition over disjoint data scopes.

A record lies in exactly one cell of every partition, so the releases that can see it are those
whose scope constraints it satisfies. The cost of a set of charges is therefore the worst case,
over the possible positions ("atoms") of one record, of the sequential composition of the releases
that see it. Identical atoms are composed once.
"""
from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Iterator, Sequence

from .charge import Charge
from .events import Event, NonPrivateEvent

#: Above this many candidate atoms we fall back to sequential composition of everything (valid,
#: conservative): a record is then treated as if it were seen by every release.
MAX_ATOMS = 20_000


def atoms(charges: Sequence[Charge]) -> list[list[Event]]:
    """Distinct event multisets that one record can be exposed to (non-private events dropped)."""
    groups: dict[frozenset, list[Event]] = defaultdict(list)
    cells: dict[str, set[str]] = defaultdict(set)
    for charge in charges:
        key = frozenset(charge.scope.constraints)
        groups[key].extend(e for e in charge.events if not isinstance(e, NonPrivateEvent))
        for partition, cell in charge.scope.constraints:
            cells[partition].add(cell)
    if not cells:
        return [groups.get(frozenset(), [])]
    names = sorted(cells)
    n_atoms = 1
    for name in names:
        n_atoms *= len(cells[name])
    if n_atoms > MAX_ATOMS or len(names) > 12:
        return [[e for events in groups.values() for e in events]]
    seen: set[frozenset] = set()
    result: list[list[Event]] = []
    for assignment in _assignments(names, cells):
        events: list[Event] = []
        for r in range(len(assignment) + 1):
            for subset in itertools.combinations(assignment, r):
                events.extend(groups.get(frozenset(subset), ()))
        signature = frozenset(Counter(events).items())
        if signature not in seen:
            seen.add(signature)
            result.append(events)
    return result


def _assignments(names: list[str], cells: dict[str, set[str]]) -> Iterator[tuple[tuple[str, str], ...]]:
    for combo in itertools.product(*(sorted(cells[n]) for n in names)):
        yield tuple(zip(names, combo))
