"""What the process's tracking ledger records of a fit given a fresh budget (``default``), apart from ``default`` so that
the ledger, which enters its runs there, imports it without importing ``default`` (which imports the ledger)."""
from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from ..errors import FreshBudgetWarning
from .budget import Cost
from .charge import Charge
from .events import ApproxEvent, NonPrivateEvent
from .relation import Relation, Status

if TYPE_CHECKING:
    from .ledger import Ledger


@attrs.frozen
class FitEntry:
    """One fit as the tracking ledger records it: a single opaque ``(eps, delta)`` node under replace-one."""

    name: str
    cost: Cost
    source: Relation
    status: Status

    @property
    def relation(self) -> Relation:
        return Relation.REPLACE_ONE

    def charges(self) -> Sequence[Charge]:
        if self.status == Status.NONE or self.source not in (Relation.REPLACE_ONE, Relation.ADD_REMOVE):
            # no guarantee, or one about a smaller unit (a cell, a zero-filled row) that says nothing about a row
            events: tuple[ApproxEvent | NonPrivateEvent, ...] = (NonPrivateEvent(),)
        else:
            eps, delta = self.cost
            if self.source == Relation.ADD_REMOVE:  # group privacy, two changes: (2 eps, (1 + e^eps) delta)
                eps, delta = 2.0 * eps, (min(1.0, (1.0 + math.exp(eps)) * delta) if eps <= 700.0 else 1.0) if delta > 0 else 0.0
            events = (ApproxEvent(eps, delta),)
        return [Charge("fit", events, Relation.REPLACE_ONE, status=self.status)]


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside privsdr and the libraries that call ``fit`` for the user
    (scikit-learn, joblib): the user's line, so a loop warns once per line."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in ("privsdr", "sklearn", "joblib"):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def warn_if_earlier_fits(tracker: Ledger, who: str) -> None:
    """``FreshBudgetWarning`` when this process's tracking ledger holds fits that released something."""
    earlier = tracker.tracked_fits
    if earlier:
        eps, delta = tracker.spent
        warnings.warn(
            f"{who} was given a fresh budget (no ledger=): it is fit number {earlier + 1} in this process charged that way, "
            f"and together they have spent epsilon = {eps:.4g}, delta = {delta:.3g} before it (basic composition). To give "
            "them one budget, pass ledger= or set privsdr.set_default_ledger(Ledger(Budget(epsilon, delta)))",
            FreshBudgetWarning, stacklevel=_caller_stacklevel())
