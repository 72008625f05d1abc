"""Parallel composition over disjoint data scopes: what one record can be exposed to.

A record lies in exactly one cell of every partition, so the releases that can see it are those whose
scope constraints it satisfies. Partitions that never share a scope are independent (the run-local
batches of two different fits, say): a record's cell in one says nothing about its cell in the other.
``exposure(charges)`` therefore splits the charges into

* ``base``: events every record sees (charges on the whole data), and
* ``components``: for each group of partitions linked by shared scopes, the distinct event multisets
  one record can meet there (one per combination of cells), with multisets contained in another
  dropped (every accountant is monotone in the events, so they can never be the worst case).

A record's events are ``base`` plus one choice per component. When the number of such combinations is
small (``MAX_ATOMS``) the accountants take the worst over all of them exactly (``Exposure.atoms``);
beyond that, each accountant composes the components with a rule that stays exact or valid for it
(basic and RDP are additive, so per-component maxima add up; see ``accountants.py``) -- there is no
fixed number of partitions beyond which charges are silently summed.
"""
from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

import attrs

from .charge import Charge
from .events import Event, NonPrivateEvent

#: enumerate at most this many combinations of cells exactly (across components, and within one)
MAX_ATOMS = 20_000

EventSet = tuple[Event, ...]
#: a scope's constraints, (partition, cell) pairs
ScopeKey = frozenset[tuple[str, str]]


def _signature(events: Sequence[Event]) -> frozenset[tuple[Event, int]]:
    return frozenset(Counter(events).items())


def _contained(small: Counter[Event], big: Counter[Event]) -> bool:
    return all(big[k] >= v for k, v in small.items())


def _undominated(options: list[EventSet]) -> tuple[EventSet, ...]:
    """Distinct multisets, without those contained in another (never the worst case)."""
    unique: dict[frozenset[tuple[Event, int]], EventSet] = {}
    for events in options:
        unique.setdefault(_signature(events), events)
    if len(unique) > 2_000:  # pruning is quadratic; it only saves work, so skip it for huge components
        return tuple(unique.values())
    counters = [(events, Counter(events)) for events in unique.values()]
    return tuple(
        events for i, (events, counter) in enumerate(counters)
        if not any(j != i and _contained(counter, other) for j, (_, other) in enumerate(counters))
    )


@attrs.frozen
class Exposure:
    """The events of ``base`` plus one option of each component: all that one record can meet."""

    base: EventSet
    components: tuple[tuple[EventSet, ...], ...]

    @property
    def combinations(self) -> int:
        total = 1
        for options in self.components:
            total *= len(options)
        return total

    def atoms(self) -> list[list[Event]]:
        """Every combination, as one event list each (call when ``combinations <= MAX_ATOMS``)."""
        if not self.components:
            return [list(self.base)]
        return [list(self.base) + [e for option in choice for e in option] for choice in itertools.product(*self.components)]


def exposure(charges: Sequence[Charge]) -> Exposure:
    """Split charges into what every record sees and the independent components (non-private events dropped)."""
    groups: dict[ScopeKey, list[Event]] = defaultdict(list)
    for charge in charges:
        groups[frozenset(charge.scope.constraints)].extend(e for e in charge.events if not isinstance(e, NonPrivateEvent))
    base = tuple(groups.pop(frozenset(), ()))
    components = []
    for partitions in _linked_partitions(groups):
        cells: dict[str, set[str]] = defaultdict(set)
        mine = {key: events for key, events in groups.items() if {p for p, _ in key} <= partitions}
        for key in mine:
            for partition, cell in key:
                cells[partition].add(cell)
        options = _component_options(mine, cells)
        components.append(_undominated(options))
    return Exposure(base, tuple(c for c in components if c and any(c)))


def _linked_partitions(groups: dict[ScopeKey, list[Event]]) -> list[set[str]]:
    """Connected groups of partitions (two are linked when one scope constrains both)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key in groups:
        names = sorted({p for p, _ in key})
        for a, b in itertools.pairwise(names):
            parent[find(a)] = find(b)
        for name in names:
            find(name)
    linked: dict[str, set[str]] = defaultdict(set)
    for name in list(parent):
        linked[find(name)].add(name)
    return [linked[k] for k in sorted(linked)]


def _component_options(groups: dict[ScopeKey, list[Event]], cells: dict[str, set[str]]) -> list[EventSet]:
    names = sorted(cells)
    count = 1
    for name in names:
        count *= len(cells[name])
    if count > MAX_ATOMS:
        # one component with more cell combinations than we enumerate: a record is treated as seen by
        # all of its releases (valid, conservative); components this large do not arise from our plans
        return [tuple(e for events in groups.values() for e in events)]
    options = []
    for assignment in _assignments(names, cells):
        chosen = set(assignment)
        options.append(tuple(e for key, events in groups.items() if key <= chosen for e in events))
    return options


def _assignments(names: list[str], cells: dict[str, set[str]]) -> Iterator[tuple[tuple[str, str], ...]]:
    for combo in itertools.product(*(sorted(cells[n]) for n in names)):
        yield tuple(zip(names, combo, strict=True))


def atoms(charges: Sequence[Charge]) -> list[list[Event]]:
    """Every event list one record can be exposed to, when there are at most ``MAX_ATOMS`` (else ValueError)."""
    exp = exposure(charges)
    if exp.combinations > MAX_ATOMS:
        raise ValueError(f"{exp.combinations} combinations of cells: compose this exposure per component")
    return exp.atoms()
