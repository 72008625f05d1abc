"""A charge: the privacy events of one release node, with its scope, status and relation."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import attrs

from .events import Event, event_from_dict, event_to_dict
from .relation import Relation, Status, parse_relation
from .scope import Scope


def _event_tuple(events: Iterable[Event]) -> tuple[Event, ...]:
    return tuple(events)


@attrs.frozen(cache_hash=True)  # a ledger's history keys the accountants' memo (``Accountant.cost``) at every price
class Charge:
    label: str
    events: tuple[Event, ...] = attrs.field(converter=_event_tuple)
    relation: Relation = attrs.field(converter=parse_relation)
    scope: Scope = attrs.field(factory=Scope.whole)
    status: Status = attrs.field(default=Status.CERTIFIED, converter=Status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "events": [event_to_dict(e) for e in self.events],
            "relation": self.relation.value,
            "scope": self.scope.to_list(),
            "status": self.status.value,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Charge:
        return cls(
            label=data["label"],
            events=tuple(event_from_dict(e) for e in data["events"]),
            relation=data["relation"],
            scope=Scope.from_list(data["scope"]),
            status=data["status"],
        )


class Chargeable(Protocol):
    """What a ledger can preflight: a named, relation-tagged list of charges (a calibrated plan)."""

    @property
    def name(self) -> str: ...

    @property
    def relation(self) -> Relation: ...

    def charges(self) -> Sequence[Charge]: ...
