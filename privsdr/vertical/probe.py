"""Probing and auditing one protocol action through its production code.

``capture_releases`` runs ``protocol.act`` with recording tickets: each node's query value and the
sensitivity the action declares for it are captured, and the node's output is either the value
itself or a *fixed* public output given by the caller. Fixing the outputs of a step's earlier nodes
is exactly the conditioning of adaptive composition (later releases may use them as public), so a
sensitivity probe of node B given a fixed output of node A compares B's values on neighbouring
data with A held fixed. ``noisy_release`` runs the action with real noise from a calibrated plan's
spec (for audits), optionally with the noise multiplier scaled (mutants).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from ..parties.engine import Action, VerticalProtocol
from ..parties.layout import Party
from ..parties.messages import PartyMessage
from ..plan import CalibratedPlan, NoiseTicket


@attrs.define
class RecordingTicket:
    """Looks like a ``NoiseTicket``: records (value, declared sensitivity); releases a fixed output or the value."""

    node: str
    spec: Any
    fixed: Any = None
    value: Any = None
    sensitivity: float | None = None

    def release(self, value: Any, *, sensitivity: float | None = None, **options: Any) -> tuple[Any, Any]:
        self.value = value(np.random.default_rng(0)) if callable(value) else value
        self.sensitivity = sensitivity
        out = self.fixed if self.fixed is not None else self.value
        spec = self.spec if sensitivity is None else attrs.evolve(self.spec, sensitivity=attrs.evolve(self.spec.sensitivity, value=sensitivity))
        return out, spec


def capture_releases(protocol: VerticalProtocol, plan: CalibratedPlan, action: Action, party: Party, state: Any,
                     inbox: Mapping[str, PartyMessage], fixed: Mapping[str, Any] | None = None) -> dict[str, tuple[Any, float]]:
    """``{node: (query value, declared sensitivity)}`` of one action (fixed public outputs where given)."""
    fixed = dict(fixed or {})
    tickets = {n: RecordingTicket(n, plan.specs[n], fixed.get(n)) for n in action.nodes}
    protocol.act(action, party, state, inbox, tickets)  # type: ignore[arg-type]
    return {n: (t.value, t.sensitivity if t.sensitivity is not None else plan.specs[n].sensitivity.value) for n, t in tickets.items()}


def noisy_release(protocol: VerticalProtocol, plan: CalibratedPlan, action: Action, party: Party, state: Any,
                  inbox: Mapping[str, PartyMessage], node: str, rng: np.random.Generator, *,
                  fixed: Mapping[str, Any] | None = None, noise_scale: float = 1.0) -> Any:
    """The released output of ``node`` with real noise (other nodes of the action: fixed outputs)."""
    fixed = dict(fixed or {})
    tickets: dict[str, Any] = {}
    for n in action.nodes:
        if n == node:
            spec = plan.specs[n] if noise_scale == 1.0 else attrs.evolve(plan.specs[n], noise_multiplier=plan.specs[n].noise_multiplier * noise_scale)
            tickets[n] = NoiseTicket(n, spec, plan.nodes[n].adaptive, rng)
        else:
            tickets[n] = RecordingTicket(n, plan.specs[n], fixed.get(n))
    result = protocol.act(action, party, state, inbox, tickets)
    return result.released[node][0]
