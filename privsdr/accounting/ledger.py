"""The ledger: a total budget, an accountant, and the charges made against them.

* ``preflight(plan)`` prices a plan (itemised) and raises ``BudgetExceededError`` if it does not
  fit; it never spends anything.
* ``reserve(plan)`` does the same check and, atomically, reserves the plan's cost so that
  concurrent fits cannot overspend; ``Reservation.charge(label)`` then moves one node's cost to
  "spent" *before* its noise is drawn (write-ahead). Closing a reservation releases the nodes that
  were never charged (their noise was never drawn).
* Plans with ``claimed``/``none`` nodes are refused unless ``allow_uncertified=True``.
* All methods are thread-safe (one re-entrant lock).
"""
from __future__ import annotations

import itertools
import math
import threading
import uuid
from typing import Any, Iterable, Sequence

import attrs

from ..errors import BudgetExceededError, RelationMismatchError, UncertifiedPlanError
from .accountants import Accountant, BasicAccountant, make_accountant
from .budget import Budget, Cost, as_budget
from .charge import Chargeable, Charge
from .relation import Relation, Status


@attrs.frozen
class PreflightItem:
    label: str
    status: Status
    scope: str
    basic_cost: Cost


@attrs.frozen
class Preflight:
    """The itemised price of a plan against a ledger (nothing spent)."""

    plan: str
    accountant: str
    items: tuple[PreflightItem, ...]
    requested: Cost
    spent_before: Cost
    total_after: Cost
    remaining_after: Cost
    status: Status


def _remaining(budget: Budget, spent: Cost) -> Cost:
    if budget.is_infinite:
        return Cost(math.inf, max(0.0, budget.delta - spent.delta))
    return Cost(max(0.0, budget.epsilon - spent.epsilon), max(0.0, budget.delta - spent.delta))


class Ledger:
    """A privacy budget and the charges made against it.

    ``Ledger(Budget(1.0, 1e-6), accountant="best")``; ``spent`` and ``remaining`` are
    ``Cost(epsilon, delta)`` pairs under the ledger's accountant.
    """

    def __init__(
        self,
        budget: "Budget | tuple[float, float]",
        accountant: "str | Accountant" = "best",
        journal: "str | None" = None,
        relation: "Relation | str | None" = None,
    ) -> None:
        if journal is not None:
            raise NotImplementedError("persistent journals are not available in this version of privsdr")
        self.budget = as_budget(budget)
        self.accountant = make_accountant(accountant, self.budget.delta)
        self.relation = None if relation is None else Relation.parse(relation)
        self._lock = threading.RLock()
        self._spent: list[Charge] = []
        self._reserved: dict[str, list[Charge]] = {}
        self._spent_cost: Cost | None = Cost.zero()
        self.runs: list[dict[str, Any]] = []

    # -- state --------------------------------------------------------------------------------
    @property
    def charges(self) -> tuple[Charge, ...]:
        with self._lock:
            return tuple(self._spent)

    @property
    def spent(self) -> Cost:
        with self._lock:
            if self._spent_cost is None:
                self._spent_cost = self.cost_of(self._spent)
            return self._spent_cost

    @property
    def remaining(self) -> Cost:
        if not self._spent:
            return self.budget.as_cost()
        return _remaining(self.budget, self.spent)

    def cost_of(self, charges: Sequence[Charge]) -> Cost:
        return self.accountant.cost(charges) if charges else Cost.zero()

    # -- pricing --------------------------------------------------------------------------------
    def preflight(self, plan: Chargeable, *, allow_uncertified: bool = False) -> Preflight:
        """Price ``plan`` against this ledger; raise ``BudgetExceededError`` if it does not fit."""
        with self._lock:
            return self._check(plan, self._qualified(plan, "preflight"), allow_uncertified)

    def reserve(self, plan: Chargeable, *, allow_uncertified: bool = False, run_id: str | None = None) -> "Reservation":
        """Check ``plan`` and reserve its whole cost; charge nodes one by one through the result."""
        run_id = run_id or uuid.uuid4().hex[:12]
        with self._lock:
            charges = self._qualified(plan, run_id)
            preflight = self._check(plan, charges, allow_uncertified)
            if self.relation is None:
                self.relation = plan.relation
            self._reserved[run_id] = list(charges)
            self.runs.append({"run_id": run_id, "plan": plan.name, "labels": [c.label for c in charges]})
            return Reservation(self, run_id, charges, preflight)

    def _qualified(self, plan: Chargeable, run_id: str) -> list[Charge]:
        """Charges of ``plan`` with its run-local partitions renamed so they never align with others'."""
        local = set(getattr(plan, "local_partitions", ()))
        mapping = {name: f"{run_id}/{name}" for name in local}
        return [attrs.evolve(c, scope=c.scope.renamed(mapping)) if mapping else c for c in plan.charges()]

    def _check(self, plan: Chargeable, charges: Sequence[Charge], allow_uncertified: bool) -> Preflight:
        if self.relation is not None and plan.relation != self.relation:
            raise RelationMismatchError(
                f"plan {plan.name!r} uses the {plan.relation.value!r} relation but this ledger composes "
                f"{self.relation.value!r} charges; use a separate ledger"
            )
        for c in charges:
            if c.relation != plan.relation:
                raise RelationMismatchError(f"node {c.label!r} declares {c.relation.value!r} inside a {plan.relation.value!r} plan")
        status = Status.worst([c.status for c in charges])
        if status != Status.CERTIFIED and not allow_uncertified:
            bad = ", ".join(f"{c.label} ({c.status.value})" for c in charges if c.status != Status.CERTIFIED)
            raise UncertifiedPlanError(
                f"plan {plan.name!r} has nodes without a certified guarantee: {bad}. "
                "Pass allow_uncertified=True to run it anyway; its report will say so."
            )
        reserved = list(itertools.chain.from_iterable(self._reserved.values()))
        before = self.cost_of(self._spent + reserved)
        after = self.cost_of(self._spent + reserved + list(charges))
        requested = self.cost_of(list(charges))
        basic = BasicAccountant()
        items = tuple(
            PreflightItem(c.label, c.status, str(c.scope), basic.compose(list(c.events)) if c.events else Cost.zero())
            for c in charges
        )
        if not after.fits_within(self.budget):
            raise BudgetExceededError(
                plan.name,
                requested,
                _remaining(self.budget, before),
                [(i.label, i.basic_cost) for i in items],
                self.accountant.name,
                after,
            )
        return Preflight(plan.name, self.accountant.name, items, requested, before, after, _remaining(self.budget, after), status)

    # -- charging (used by Reservation) ---------------------------------------------------------
    def _charge(self, run_id: str, charge: Charge) -> None:
        with self._lock:
            pending = self._reserved[run_id]
            pending.remove(charge)
            self._spent.append(charge)
            self._spent_cost = None

    def _release(self, run_id: str) -> list[Charge]:
        with self._lock:
            return self._reserved.pop(run_id, [])

    def __repr__(self) -> str:
        eps, delta = self.spent
        return (
            f"Ledger(budget=({self.budget.epsilon:g}, {self.budget.delta:g}), accountant={self.accountant.name!r}, "
            f"spent=({eps:.6g}, {delta:.3g}), charges={len(self._spent)})"
        )


class Reservation:
    """The reserved cost of one run; ``charge(label)`` spends one node (call before drawing noise)."""

    def __init__(self, ledger: Ledger, run_id: str, charges: Iterable[Charge], preflight: Preflight) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.preflight = preflight
        self._pending = {c.label: c for c in charges}
        self.charged: list[Charge] = []
        self.closed = False

    def charge(self, label: str) -> Charge:
        if self.closed:
            raise RuntimeError(f"run {self.run_id} is closed")
        try:
            charge = self._pending.pop(label)
        except KeyError:
            raise KeyError(f"node {label!r} is not pending in run {self.run_id}") from None
        self.ledger._charge(self.run_id, charge)
        self.charged.append(charge)
        return charge

    @property
    def pending(self) -> list[str]:
        return list(self._pending)

    def close(self) -> None:
        if not self.closed:
            self.ledger._release(self.run_id)
            self._pending.clear()
            self.closed = True

    def __enter__(self) -> "Reservation":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
