"""The ledger: a total budget, an accountant, and the charges made against them.

* ``preflight(plan)`` prices a plan (itemised) and raises ``BudgetExceededError`` if it does not
  fit; it never spends anything.
* ``reserve(plan)`` does the same check and, atomically, reserves the plan's cost so that
  concurrent fits cannot overspend; ``Reservation.charge(label)`` then moves one node's cost to
  "spent" *before* its noise is drawn (write-ahead). A run that released nothing returns its whole
  reservation when it closes. A run that released anything is charged its *whole* plan when it closes
  or its process dies: whether it stopped early may depend on its own noisy outputs, and the stopped run
  is post-processing of the full plan, whose non-adaptive composition the reservation priced (a cost
  read off the nodes that happened to be released would be a privacy odometer, which no accountant here
  is proved to be).
* ``commit(plans)`` declares a batch up front; from the commit on, the whole batch counts as spent
  (concurrent composition: the batch is one non-adaptive entry of the filter, whatever the analyst
  later runs or skips; Haney et al. 2023). A skipped committed plan is paid for.
* Plans with ``claimed``/``none`` nodes are refused unless ``allow_uncertified=True``.
* Thread-safe (one re-entrant lock). With ``journal=PATH`` every reserve/charge/close is an
  fsync'd, hash-chained record (``accounting.journal``) written under an inter-process file lock,
  so several processes share one budget and a killed process leaves every charge on record. The
  reservation of a process that died on this machine before its first charge is returned (no noise
  was drawn); once it charged anything its whole plan counts (above); a charge record whose noise was
  never drawn still counts (fail closed).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import itertools
import json
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs

from .._io import process_alive
from ..errors import (
    BudgetExceededError,
    DetachedLedgerError,
    PrivsdrError,
    RelationMismatchError,
    UncertifiedPlanError,
    ValidationError,
)
from . import filters
from .accountants import Accountant, BasicAccountant, accountant_from_dict, make_accountant
from .budget import Budget, Cost, as_budget
from .charge import Charge, Chargeable
from .journal import Journal, JournalError
from .relation import Relation, Status
from .rounding import ExactSum


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


@attrs.define
class RunRecord:
    """One run as the ledger knows it (from memory or from the journal)."""

    run_id: str
    plan: str
    charges: dict[str, Charge]
    pid: int
    host: str
    started: str
    charged: list[str] = attrs.field(factory=list)
    closed: bool = False
    summary: dict[str, Any] = attrs.field(factory=dict)
    batch: str | None = None  #: the batch of plans declared up front (``Ledger.commit``) this run belongs to
    plan_hash: str | None = None

    @property
    def uncharged(self) -> list[Charge]:
        return [c for label, c in self.charges.items() if label not in self.charged]

    def spent(self, ended: bool) -> list[Charge]:
        """What this run has spent: its charged nodes while it runs; once it has ``ended`` (closed, or its
        process died) having charged anything, its whole plan (the stop may depend on its own outputs)."""
        charged = [self.charges[label] for label in self.charged]
        return charged + self.uncharged if ended and charged else charged

    def priced(self, ended: bool) -> list[Charge]:
        """``spent`` in the plan's order, as the ledger prices it: composition does not depend on the order of release,
        and the accountants' memo then finds the price the reservation computed for the same charges."""
        spent = {c.label for c in self.spent(ended)}
        return [c for label, c in self.charges.items() if label in spent]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "plan": self.plan, "started": self.started, "closed": self.closed,
            "nodes": len(self.charges), "charged": len(self.charged), **self.summary,
        }


def _remaining(budget: Budget, spent: Cost, delta_shares: float) -> Cost:
    """What a next plan may be given: the epsilon left, and the delta its nodes may still take as shares.

    ``spent`` is a guarantee read at the budget's delta (rdp/pld/advanced/best report delta = the budget's
    once anything is charged), so its delta is not what is left for shares; ``delta_shares`` (the sum of
    the charged nodes' declared delta shares, worst over one record's positions) is.
    """
    eps = math.inf if budget.is_infinite else max(0.0, budget.epsilon - spent.epsilon)
    return Cost(eps, max(0.0, budget.delta - delta_shares))


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class Ledger:
    """A privacy budget and the charges made against it.

    ``Ledger(Budget(1.0, 1e-6), accountant="best")``; ``spent`` and ``remaining`` are
    ``Cost(epsilon, delta)`` pairs under the ledger's accountant. ``journal=PATH`` makes it
    persistent (created if missing; reopening checks that budget and accountant match).
    """

    def __init__(
        self,
        budget: Budget | tuple[float, float],
        accountant: str | Accountant = "best",
        journal: str | os.PathLike[str] | None = None,
        relation: Relation | str | None = None,
        journal_key: bytes | str | None | bool = None,
    ) -> None:
        self.budget = as_budget(budget)
        try:
            # every answer of the ledger's accountant is read at the budget's delta (see accountants.py)
            self.accountant = make_accountant(accountant, self.budget.delta).retarget(self.budget.delta)
            self.relation = None if relation is None else Relation.parse(relation)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, PrivsdrError):
                raise
            raise ValidationError(str(exc)) from None
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._batches: dict[str, _Batch] = {}  # batch id -> the plans declared up front, each run once
        self._applied = 0
        self._generation = 0  #: counts the records applied: what the memo of derived state (``_derived``) is keyed by
        self._memo: tuple[tuple[int, tuple[str, ...]], dict[str, Any]] | None = None
        self._journal: Journal | None = None
        self._detached: str | None = None  #: why this copy cannot spend (see "copies" below), None for a live account
        #: a ledger each run's guarantee is also entered in (``accounting.default``: the process's tracking ledger)
        self.report_to: Ledger | None = None
        self.report_as = ""  #: the estimator named in the entries and warnings of ``report_to``
        self.pid = os.getpid()  #: the process this account lives in (an in-memory account spends only there)
        self.tracking = False  #: the process's tracking ledger (``accounting.default``): no total, basic composition
        #: a tracking ledger's charged (eps, delta), summed exactly as they are charged (``_stepped_up`` reads them)
        self._tracked_total = (ExactSum(), ExactSum())
        self._tracked_fits = 0  #: a tracking ledger's runs that charged anything (``tracked_fits``)
        if journal is not None:
            self._attach(journal, journal_key)

    # -- copies ----------------------------------------------------------------------------------
    # A ledger is an account, not a value. A copy that could spend would be a second account holding
    # the same remaining budget: every fit charged to the copy would go unseen by the original, and the
    # total spent could reach twice the budget. So:
    # * ``copy.copy``/``copy.deepcopy`` return the ledger itself. scikit-learn's ``clone`` deep-copies
    #   every parameter that is not an estimator, so this is what keeps ``clone(est).ledger is
    #   est.ledger``: GridSearchCV and cross_validate charge every fit to the one account.
    # * Pickling (another process: joblib workers, Dask, a saved model) keeps the account only when
    #   it lives in a journal: the copy reattaches to the journal, whose file lock shares one budget
    #   between processes (the key is never pickled: a keyed journal is reopened with the key from
    #   the environment). An in-memory ledger, or a journal that cannot be reopened there, arrives
    #   as a detached copy: it reports what was spent, and refuses to reserve anything.
    def __copy__(self) -> Ledger:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Ledger:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        with self._lock:
            self._refresh()
            state = {
                "budget": self.budget, "accountant": self.accountant, "relation": self.relation,
                "runs": {k: attrs.evolve(r, charged=list(r.charged), summary=dict(r.summary)) for k, r in self._runs.items()},
                "batches": dict(self._batches),
                "journal": self.journal_path, "keyed": self._journal is not None and self._journal.keyed,
                "detached": self._detached,
            }
        return (_unpickle_ledger, (state,))

    @property
    def detached(self) -> str | None:
        """None for a live account; for a copy made by unpickling, why it cannot spend."""
        return self._detached

    def _check_attached(self) -> None:
        if self._journal is None and self._detached is None and self.pid != os.getpid():
            self._detached = ("it is an in-memory ledger copied into another process by fork (the account stays with the "
                              f"process {self.pid} that made it)")
        if self._detached is not None:
            raise DetachedLedgerError(
                f"this Ledger is a copy that cannot spend: {self._detached}. A copy that could spend would be a second "
                "account with the same budget. To share one budget between processes (joblib n_jobs > 1, Dask), use a "
                "journal-backed ledger: Ledger(budget, journal=PATH)"
            )

    # -- persistence -----------------------------------------------------------------------------
    @classmethod
    def open(cls, journal: str | os.PathLike[str], *, key: bytes | str | None | bool = None) -> Ledger:
        """Reopen a journal with the budget and accountant it was created with (``key``: see
        ``accounting.journal``; None reads ``PRIVSDR_JOURNAL_KEY``/``PRIVSDR_JOURNAL_KEY_FILE``)."""
        header = Journal.open(journal, key=key).header
        eps = float(header["budget"]["epsilon"])  # an unlimited budget is written "inf"
        budget = Budget(eps, header["budget"]["delta"], unlimited=math.isinf(eps))
        return cls(budget, accountant_from_dict(header["accountant"]), journal=journal, relation=header.get("relation"), journal_key=key)

    @classmethod
    def create(cls, journal: str | os.PathLike[str], budget: Budget | tuple[float, float], accountant: str | Accountant = "best",
               relation: Relation | str | None = None, *, key: bytes | str | None | bool = None) -> Ledger:
        """Create a new journal (refuses to overwrite one)."""
        if os.path.exists(journal) and os.path.getsize(journal) > 0:
            raise JournalError(f"journal {journal} already exists")
        return cls(budget, accountant, journal=journal, relation=relation, journal_key=key)

    def _header(self) -> dict[str, Any]:
        return {
            "budget": {"epsilon": self.budget.epsilon if math.isfinite(self.budget.epsilon) else "inf", "delta": self.budget.delta},
            "accountant": self.accountant.to_dict(),
            "relation": None if self.relation is None else self.relation.value,
            "created": _now(),
        }

    def _attach(self, path: str | os.PathLike[str], key: bytes | str | None | bool = None) -> None:
        mine = self._header()
        journal, created = Journal.open_or_create(path, mine, key=key)
        if not created:
            header = journal.header
            theirs_budget = {k: float(v) for k, v in header["budget"].items()}
            if theirs_budget != {k: float(v) for k, v in mine["budget"].items()}:
                raise JournalError(f"journal {path} was created with budget {header['budget']}, not {mine['budget']}")
            if header["accountant"] != mine["accountant"]:
                raise JournalError(f"journal {path} was created with accountant {header['accountant']}, not {mine['accountant']}")
        requested = self.relation
        self.relation = Relation.parse(journal.header["relation"]) if journal.header.get("relation") else None
        self._journal = journal
        self._applied = 1  # the header
        self._apply_new()  # the first reservation fixes the relation when the header does not
        if requested is not None:
            if self.relation is not None and self.relation != requested:
                raise JournalError(f"journal {path} composes {self.relation.value!r} charges, not {requested.value!r}")
            self.relation = requested

    @property
    def journal_path(self) -> str | None:
        return None if self._journal is None else str(self._journal.path)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """Thread lock, then (if persistent) the file lock with the journal brought up to date."""
        with self._lock:
            if self._journal is None:
                yield
                return
            with self._journal.locked():
                self._apply_new()
                yield

    def _commit(self, record: dict[str, Any], charges: Sequence[Charge] | None = None) -> None:
        """Write ``record`` (a journal's is read back and applied); an in-memory ledger applies it directly, a reservation
        with its ``charges`` themselves (what a journal stores as ``record["charges"]``, read back by ``Charge.from_dict``)."""
        if self._journal is not None:
            if charges is not None:
                record = {**record, "charges": [c.to_dict() for c in charges]}  # (in its place: the key is there)
            self._journal.append(record)
            self._apply_new()
        else:
            self._apply(record, charges)

    def _apply_new(self) -> None:
        assert self._journal is not None
        records = self._journal.records
        while self._applied < len(records):
            self._apply(records[self._applied])
            self._applied += 1

    def _apply(self, record: dict[str, Any], charges: Sequence[Charge] | None = None) -> None:
        kind = record["type"]
        if kind == "reserve":
            if charges is None:
                charges = [Charge.from_dict(c) for c in record["charges"]]
            self._runs[record["run_id"]] = RunRecord(
                record["run_id"], record["plan"], {c.label: c for c in charges},
                record["pid"], record["host"], record["time"], batch=record.get("batch"), plan_hash=record.get("plan_hash"),
            )
            if self.relation is None:
                self.relation = Relation.parse(record["relation"])
        elif kind == "charge":
            run = self._runs[record["run_id"]]
            run.charged.append(record["label"])
            if self.tracking:  # the running sums a tracking ledger reports (``_stepped_up``)
                for cost in (e.basic_cost() for e in run.charges[record["label"]].events):
                    self._tracked_total[0].add(cost.epsilon)
                    self._tracked_total[1].add(cost.delta)
                if len(run.charged) == 1:  # its first charge: one more fit that released something
                    self._tracked_fits += 1
        elif kind == "close":
            run = self._runs[record["run_id"]]
            run.closed = True
            run.summary = dict(record.get("summary", {}))
        elif kind == "commit":
            slots = record.get("charges")  # journals written before batches counted in full have no charges
            self._batches[record["batch"]] = _Batch(record["batch"], tuple(record["plans"]), None if slots is None else tuple(
                tuple(Charge.from_dict(c) for c in slot) for slot in slots))
        elif kind != "header":
            raise JournalError(f"unknown journal record type {kind!r}")
        self._generation += 1

    # -- state --------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._journal is not None:
            with self._transaction():
                pass

    def _ended(self, run: RunRecord) -> bool:
        """Closed, or its process died on this machine (it will never charge or close again)."""
        if run.closed:
            return True
        return run.host == socket.gethostname() and run.pid != os.getpid() and not process_alive(run.pid)

    def _run_spent(self, run: RunRecord) -> list[Charge]:
        return run.spent(self._ended(run))

    def _derived(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, memoised until the history changes: a record is applied, or a run ends without closing (its
        process died). A run prices the history several times (its reservation, the report's ``after`` and
        ``composition``), and each is a pure function of the records and of which runs have ended."""
        key = (self._generation, tuple(run.run_id for run in self._runs.values() if not run.closed and self._ended(run)))
        if self._memo is None or self._memo[0] != key:
            self._memo = (key, {})
        memo = self._memo[1]
        if name not in memo:
            memo[name] = compute()
        return memo[name]

    def _slot_holders(self) -> list[RunRecord]:
        """Runs that hold a committed plan's slot: open ones, and ended ones that charged something (a run of a
        committed plan that ended without releasing gives its slot back, so the declared cost counts again)."""
        return [run for run in self._runs.values() if run.charged or not self._ended(run)]

    def _spent_charges(self) -> list[Charge]:
        """Every charge that counts as spent: each run's (``RunRecord.spent``) and, for a committed batch,
        the declared plans no run has used yet (the batch counts in full from its commit)."""
        out = [c for run in self._runs.values() for c in self._run_spent(run)]
        for batch in self._batches.values():
            out.extend(c for slot in batch.unused_slots(self._slot_holders()) for c in slot)
        return out

    def _open_runs(self) -> dict[str, list[Charge]]:
        reserved = {}
        for run in self._runs.values():
            if self._ended(run):
                continue  # closed or dead: what it spent is in _spent_charges, the rest was never drawn
            if run.uncharged:
                reserved[run.run_id] = run.uncharged
        return reserved

    def _reserved_charges(self) -> list[Charge]:
        return [c for charges in self._open_runs().values() for c in charges]

    @property
    def reserved(self) -> dict[str, list[Charge]]:
        """Uncharged nodes of runs still open (per run id): counted against the budget, not spent."""
        with self._lock:
            self._refresh()
            return self._open_runs()

    @property
    def charges(self) -> tuple[Charge, ...]:
        with self._lock:
            self._refresh()
            return tuple(self._spent_charges())

    @property
    def runs(self) -> list[RunRecord]:
        with self._lock:
            self._refresh()
            return list(self._runs.values())

    @property
    def tracked_fits(self) -> int:
        """A tracking ledger's fits that released something (its runs with a charge), counted as they charge: the
        number ``tracking.warn_if_earlier_fits`` reports without walking every run of the process."""
        with self._lock:
            return self._tracked_fits

    @property
    def spent(self) -> Cost:
        """The guarantee of everything charged so far (see ``composition``)."""
        with self._lock:
            self._refresh()
            if self.tracking:
                return self._derived("spent", lambda: _stepped_up(self._tracked_total))  # type: ignore[no-any-return]
            return self._spent_history().cost

    @property
    def composition(self) -> dict[str, Any]:
        """Which theorem justifies ``spent``: non-adaptive composition (at most one run, or one batch of
        plans declared up front), or the privacy filter of the ledger's accountant across runs."""
        with self._lock:
            self._refresh()
            return self._spent_history().describe()

    def _spent_history(self) -> _History:
        """The composition of everything charged (``spent``, ``composition``), memoised (``_derived``)."""
        return self._derived("spent_history", lambda: self._history(self._groups(charged_only=True)))  # type: ignore[no-any-return]

    def _committed_history(self) -> _History:
        """The composition of everything charged or reserved (what a new plan is priced after), memoised."""
        return self._derived("committed_history", lambda: self._history(self._groups(charged_only=False)))  # type: ignore[no-any-return]

    # -- composition across runs ----------------------------------------------------------------------
    def _groups(self, charged_only: bool, extra: tuple[str | None, list[Charge], str | None] | None = None) -> list[_Group]:
        """The history as groups of charges composed non-adaptively (one run, or one committed batch), each
        with all its nodes (its delta share, fixed at reservation, is the sum of their shares: ``_history``). A
        committed batch's group holds its declared plans that no run has used yet: the batch counts in full."""
        open_runs = self._open_runs()
        groups: dict[str, tuple[list[Charge], list[Charge]]] = {}
        for run in self._runs.values():
            spent = run.priced(self._ended(run))
            if charged_only:
                members = spent
            else:
                members = spent + list(open_runs.get(run.run_id, []))
            key = f"batch:{run.batch}" if run.batch else f"run:{run.run_id}"
            used, allnodes = groups.setdefault(key, ([], []))
            used.extend(members)
            allnodes.extend(run.charges.values() if members else [])
        taking = (extra[0], extra[2]) if extra is not None else None  # a new run of a batch takes one of its free slots
        for batch_id, batch in self._batches.items():
            for slot in batch.unused_slots(self._slot_holders(), taking[1] if taking and taking[0] == batch_id else None):
                used, allnodes = groups.setdefault(f"batch:{batch_id}", ([], []))
                used.extend(slot)
                allnodes.extend(slot)
        if extra is not None:
            new_batch, charges, _ = extra
            key = f"batch:{new_batch}" if new_batch else "run:<new>"
            used, allnodes = groups.setdefault(key, ([], []))
            used.extend(charges)
            allnodes.extend(charges)
        return [(used, allnodes) for used, allnodes in groups.values() if used]

    def _history(self, groups: list[_Group]) -> _History:
        charges = [c for g, _ in groups for c in g]
        if self.tracking:  # no total to keep: the basic filter's answer (the sums), in one pass over the charges
            return _History(_tracked_sum([e.basic_cost() for c in charges for e in c.events]), "basic", filters.CITATIONS["basic"],
                            len(groups), {})
        within = self.cost_of(charges)  # composition as if everything had been fixed in advance
        if len(groups) <= 1:
            return _History(within, "non_adaptive", filters.CITATIONS["non_adaptive"], len(groups), {})
        # each group with its delta share: the sum of the shares of all its nodes (needed by the filters only)
        shared = [(used, BasicAccountant().cost(allnodes).delta) for used, allnodes in groups]
        rule = filters.filter_rule_for(self.accountant.name) or "basic"  # PLD has no filter: basic over per-run PLD costs
        worst: tuple[float, float, Any] | None = None
        # stable partitions (federated sites, ...) keep their cells across runs: a record in one cell meets only
        # the runs' releases on that cell, so the filter is applied per cell and the worst cell counts
        for visible in _per_stable_cell(shared):
            profiles = [filters.profile(g, d, self.accountant) for g, d in visible]
            # an unlimited (tracking) ledger caps no delta: its filter is read at the delta its runs took
            target = filters.basic_usage_delta(profiles) if self.budget.unlimited else self.budget.delta
            result = filters.usage(profiles, rule, target)
            delta = filters.basic_usage_delta(profiles) if rule == "basic" else self.budget.delta
            if worst is None or (result.epsilon, delta) > (worst[0], worst[1]):
                worst = (result.epsilon, delta, result)
        assert worst is not None
        eps, delta, result = worst
        # never below the non-adaptive composition of the same releases (valid: a weaker statement)
        cost = Cost(max(eps, within.epsilon), max(delta, within.delta))
        return _History(cost, result.rule, result.citation, len(groups), result.by_rule)

    def commit(self, plans: Sequence[Chargeable]) -> str:
        """Declare a fixed batch of plans up front (before any of them reads data): runs of these plans are
        composed non-adaptively with each other, under any accountant (PLD included); each plan runs once.
        Returns the batch id. The whole batch must fit what remains, and from now on it counts as spent in
        full: a committed plan that is never run is still paid for (the batch is one non-adaptive entry of
        the filter whatever is later run or skipped -- concurrent composition, Haney et al. 2023)."""
        plans = list(plans)
        if not plans:
            raise ValidationError("commit needs at least one plan")
        self._check_attached()
        hashes = [self._plan_hash(p) for p in plans]
        batch = uuid.uuid4().hex[:12]
        with self._transaction():
            for plan in plans:  # every plan under the ledger's relation (or, on a fresh ledger, the first plan's)
                self._check_relation(plan, plan.charges(), self.relation or plans[0].relation)
            groups = self._groups(charged_only=False)
            charges = [c for i, p in enumerate(plans) for c in self._qualified(p, f"{batch}/{i}")]
            after = self._history(groups + [(charges, charges)]).cost
            if not after.fits_within(self.budget):
                raise BudgetExceededError(f"batch of {len(plans)} plans", self.cost_of(charges), self.remaining, [],
                                          self.accountant.name, after)
            slots = [[c.to_dict() for c in self._qualified(p, f"{batch}/{i}")] for i, p in enumerate(plans)]
            self._commit({"type": "commit", "batch": batch, "plans": hashes, "charges": slots, "time": _now()})
        return batch

    @staticmethod
    def _plan_hash(plan: Chargeable) -> str:
        inner = getattr(plan, "plan", None)
        if inner is not None and hasattr(inner, "plan_hash"):
            return str(inner.plan_hash())
        return hashlib.sha256(json.dumps([c.to_dict() for c in plan.charges()], sort_keys=True).encode()).hexdigest()[:16]

    def _batch_for(self, plan: Chargeable, plan_hash: str | None = None) -> str | None:
        """The committed batch this plan belongs to (each committed plan runs once), if any (``plan_hash``: the plan's,
        when the caller has it)."""
        if not self._batches:
            return None
        h = plan_hash or self._plan_hash(plan)
        for batch_id, batch in self._batches.items():
            used = [r for r in self._runs.values() if r.batch == batch_id]
            if batch.plans.count(h) > sum(1 for r in used if r.plan_hash == h):
                return batch_id
        return None

    @property
    def remaining(self) -> Cost:
        """What a next plan may be given (see ``_remaining``): epsilon left, delta left for node shares."""
        with self._lock:
            spent = self.spent
            return self._derived("remaining", lambda: self._remaining_after(spent))  # type: ignore[no-any-return]

    def _remaining_after(self, spent: Cost) -> Cost:
        charges = self._spent_charges()
        if not charges:
            return self.budget.as_cost()
        return _remaining(self.budget, spent, BasicAccountant().cost(charges).delta)

    def cost_of(self, charges: Sequence[Charge]) -> Cost:
        """``accountant.cost(charges)`` (memoised there; under ``best`` each member's answer too, so the report's
        per-accountant totals find them)."""
        return self.accountant.cost(charges) if charges else Cost.zero()

    # -- pricing and reserving -------------------------------------------------------------------
    def preflight(self, plan: Chargeable, *, allow_uncertified: bool = False) -> Preflight:
        """Price ``plan`` against this ledger; raise ``BudgetExceededError`` if it does not fit."""
        with self._transaction():
            plan_hash = self._plan_hash(plan)
            return self._check(plan, self._qualified(plan, "preflight"), allow_uncertified, plan_hash, self._batch_for(plan, plan_hash))

    def reserve(self, plan: Chargeable, *, allow_uncertified: bool = False, run_id: str | None = None) -> Reservation:
        """Check ``plan`` and reserve its whole cost; charge nodes one by one through the result."""
        run_id = run_id or uuid.uuid4().hex[:16]
        self._check_attached()
        with self._transaction():
            charges = self._qualified(plan, run_id)
            plan_hash = self._plan_hash(plan)
            batch = self._batch_for(plan, plan_hash)
            preflight = self._check(plan, charges, allow_uncertified, plan_hash, batch)
            self._commit({  # "charges": written as dicts into a journal (``_commit``)
                "type": "reserve", "run_id": run_id, "plan": plan.name, "relation": plan.relation.value,
                "charges": None, "pid": os.getpid(), "host": socket.gethostname(), "time": _now(),
                **({"batch": batch} if batch else {}), "plan_hash": plan_hash,
            }, charges)
        entry = None
        if self.report_to is not None:
            from .tracking import FitEntry, warn_if_earlier_fits

            if self.report_to.tracking:
                warn_if_earlier_fits(self.report_to, self.report_as or plan.name)
            entry = self.report_to.reserve(FitEntry(self.report_as or plan.name, preflight.requested, plan.relation,
                                                    preflight.status), allow_uncertified=True, run_id=run_id)
        return Reservation(self, run_id, charges, preflight, entry)

    def _qualified(self, plan: Chargeable, run_id: str) -> list[Charge]:
        """Charges of ``plan`` with its run-local partitions renamed so they never align with others'."""
        local = set(getattr(plan, "local_partitions", ()))
        mapping = {name: f"{run_id}/{name}" for name in local}
        return [attrs.evolve(c, scope=c.scope.renamed(mapping)) if mapping else c for c in plan.charges()]

    def _check(self, plan: Chargeable, charges: Sequence[Charge], allow_uncertified: bool, plan_hash: str,
               batch: str | None) -> Preflight:
        self._check_relation(plan, charges)
        status = Status.worst([c.status for c in charges])
        if status != Status.CERTIFIED and not allow_uncertified:
            bad = ", ".join(f"{c.label} ({c.status.value})" for c in charges if c.status != Status.CERTIFIED)
            raise UncertifiedPlanError(
                f"plan {plan.name!r} has nodes without a certified guarantee: {bad}. "
                "Pass allow_uncertified=True to run it anyway; its report will say so."
            )
        return self._priced(plan, charges, status, plan_hash, batch)

    def _check_relation(self, plan: Chargeable, charges: Sequence[Charge], relation: Relation | None = None) -> None:
        """Refuse a plan whose relation is not the ledger's (``relation``: the one a batch being committed fixes)."""
        relation = relation or self.relation
        if relation is not None and plan.relation != relation:
            hint = ("a replace-one plan cannot be converted to add/remove (n would have to be public): give every method "
                    "of a data set one journal created with relation 'replace_one' (`privsdr ledger init --relation "
                    "replace_one`), to which add/remove plans are converted" if plan.relation == Relation.REPLACE_ONE
                    else "use a separate ledger")
            raise RelationMismatchError(
                f"plan {plan.name!r} uses the {plan.relation.value!r} relation but this ledger composes "
                f"{relation.value!r} charges; {hint}"
            )
        for c in charges:
            if c.relation != plan.relation:
                raise RelationMismatchError(f"node {c.label!r} declares {c.relation.value!r} inside a {plan.relation.value!r} plan")

    def _priced(self, plan: Chargeable, charges: Sequence[Charge], status: Status, plan_hash: str, batch: str | None) -> Preflight:
        items = tuple(PreflightItem(c.label, c.status, str(c.scope), basic_cost_alone(c)) for c in charges)
        if self.tracking:  # no total: nothing is refused, and the totals are sums (no filter over the whole history)
            requested = _tracked_sum([e.basic_cost() for c in charges for e in c.events])
            before = self.spent
            after = _stepped_up(self._tracked_total, requested)
            return Preflight(plan.name, self.accountant.name, items, requested, before, after, Cost(math.inf, 0.0), status)
        committed = self._spent_charges() + self._reserved_charges()
        before = self._committed_history().cost if committed else Cost.zero()
        after = self._history(self._groups(charged_only=False, extra=(batch, list(charges), plan_hash))).cost
        requested = self.cost_of(list(charges))
        basic_delta = BasicAccountant()
        if not self.budget.unlimited and not after.fits_within(self.budget):
            raise BudgetExceededError(
                plan.name, requested, _remaining(self.budget, before, basic_delta.cost(committed).delta if committed else 0.0),
                [(i.label, i.basic_cost) for i in items], self.accountant.name, after,
            )
        shares_after = basic_delta.cost(committed + list(charges)).delta
        return Preflight(plan.name, self.accountant.name, items, requested, before, after, _remaining(self.budget, after, shares_after), status)

    # -- charging (used by Reservation) ---------------------------------------------------------
    def _charge(self, run_id: str, label: str, at_close: bool = False) -> None:
        with self._transaction():
            self._commit({"type": "charge", "run_id": run_id, "label": label, "time": _now(), **({"at_close": True} if at_close else {})})

    def _close(self, run_id: str, summary: dict[str, Any] | None = None) -> None:
        with self._transaction():
            self._commit({"type": "close", "run_id": run_id, "time": _now(), "summary": summary or {}})

    def summary(self) -> dict[str, Any]:
        """Budget, accountant, spent, remaining and every run: what a ledger-level report shows."""
        with self._lock:
            spent, remaining = self.spent, self.remaining
            return {
                "journal": self.journal_path,
                "budget": self.budget.as_cost().to_dict(),
                "accountant": self.accountant.to_dict(),
                "relation": None if self.relation is None else self.relation.value,
                "spent": spent.to_dict(),
                "composition": self.composition,
                "remaining": remaining.to_dict(),
                "runs": [run.to_dict() for run in self._runs.values()],
                **({"tracking": True} if self.tracking else {}),
            }

    def __repr__(self) -> str:
        eps, delta = self.spent
        where = f", journal={self.journal_path!r}" if self._journal else (", detached copy" if self._detached else "")
        return (
            f"Ledger(budget=({self.budget.epsilon:g}, {self.budget.delta:g}), accountant={self.accountant.name!r}, "
            f"spent=({eps:.6g}, {delta:.3g}), runs={len(self._runs)}{where})"
        )


@functools.lru_cache(maxsize=4096)
def basic_cost_alone(charge: Charge) -> Cost:
    """The basic (sum) cost of one node's events on their own: a preflight's items, a report's nodes. Memoised per
    charge (bounded): plans of one shape hold the same charge objects (``plan.graph``), priced once."""
    return BasicAccountant().compose(list(charge.events)) if charge.events else Cost.zero()


def _stepped_up(totals: tuple[ExactSum, ExactSum], extra: Cost | None = None) -> Cost:
    """``_tracked_sum`` of a tracking ledger's entries (and ``extra``) from their exact running sums: the same doubles
    (``ExactSum.value`` is ``math.fsum`` of the terms) in O(1) instead of a pass over every fit of the process."""
    eps, delta = (t.value(x) for t, x in zip(totals, extra or (0.0, 0.0), strict=True))
    return _one_step_up(eps, delta)


def _tracked_sum(costs: Sequence[Cost]) -> Cost:
    """Basic composition of a tracking ledger's entries: the sums of their (eps, delta), one float pass (``math.fsum``,
    correctly rounded, then one step up so the total is never below the exact sum). A tracking ledger refuses nothing,
    so the exact rational sums the budget checks use (``rounding``) are not needed, and would cost a fit O(history)."""
    return _one_step_up(math.fsum(c.epsilon for c in costs), math.fsum(c.delta for c in costs))


def _one_step_up(eps: float, delta: float) -> Cost:
    """Correctly rounded sums one double up (zero stays zero): never below the exact sums."""
    return Cost(math.nextafter(eps, math.inf) if eps else 0.0, math.nextafter(delta, math.inf) if delta else 0.0)


def _unpickle_ledger(state: dict[str, Any]) -> Ledger:
    """A pickled ledger in this process: reattached to its journal (the same account), or a detached copy."""
    reason = state["detached"]
    if reason is None and state["journal"] is not None:
        try:  # open, never create: a new journal would be a fresh account with the whole budget
            ledger = Ledger.open(state["journal"], key=None if state["keyed"] else False)
            if ledger.budget != state["budget"] or ledger.accountant.to_dict() != state["accountant"].to_dict():
                raise JournalError(f"it holds another account (budget {ledger.budget}, accountant {ledger.accountant.name!r})")
            return ledger
        except (OSError, PrivsdrError) as exc:
            reason = f"its journal {state['journal']} could not be reopened here ({exc})"
    ledger = Ledger.__new__(Ledger)
    ledger.budget, ledger.accountant, ledger.relation = state["budget"], state["accountant"], state["relation"]
    ledger._lock = threading.RLock()
    ledger._runs, ledger._batches = state["runs"], state["batches"]
    ledger._applied, ledger._generation, ledger._memo, ledger._journal = 0, 0, None, None
    ledger.report_to, ledger.report_as, ledger.tracking, ledger.pid = None, "", False, os.getpid()
    ledger._tracked_total = (ExactSum(), ExactSum())
    ledger._tracked_fits = 0
    ledger._detached = reason or "it was unpickled from an in-memory ledger (the account stays with the original)"
    return ledger


def _per_stable_cell(groups: list[tuple[list[Charge], float]]) -> list[list[tuple[list[Charge], float]]]:
    """The groups as seen by a record in each combination of cells of the stable partitions (those not
    renamed per run: run-local partitions carry ``run_id/``). Without stable partitions: the groups."""
    cells: dict[str, set[str]] = {}
    for g, _ in groups:
        for c in g:
            for part, cell in c.scope.constraints:
                if "/" not in part:
                    cells.setdefault(part, set()).add(cell)
    if not cells:
        return [groups]
    names = sorted(cells)
    combos = list(itertools.product(*(sorted(cells[n]) for n in names)))
    if len(combos) > 10_000:  # valid, conservative: every run as if it touched every cell
        return [groups]
    out = []
    for combo in combos:
        where = dict(zip(names, combo, strict=True))
        out.append([
            ([c for c in g if all(where.get(p, cell) == cell for p, cell in c.scope.constraints if "/" not in p)], d)
            for g, d in groups
        ])
    return out


_Group = tuple[list[Charge], list[Charge]]  #: one group of the history: the charges that count, and all its nodes


@attrs.frozen
class _Batch:
    """A batch of plans declared up front (``Ledger.commit``): their hashes and each plan's charges."""

    batch_id: str
    plans: tuple[str, ...]
    slots: tuple[tuple[Charge, ...], ...] | None  #: None in journals written before batches counted in full

    def unused_slots(self, runs: Iterable[RunRecord], taking: str | None = None) -> list[tuple[Charge, ...]]:
        """The declared plans no run of this batch has taken yet (runs take the first free slot of their hash;
        ``taking``: the hash of a run about to be reserved, which takes one too)."""
        if self.slots is None:
            return []
        taken = [False] * len(self.plans)
        hashes = [run.plan_hash for run in runs if run.batch == self.batch_id] + ([taking] if taking else [])
        for h_run in hashes:
            for i, h in enumerate(self.plans):
                if not taken[i] and h == h_run:
                    taken[i] = True
                    break
        return [slot for slot, used in zip(self.slots, taken, strict=True) if not used]


@attrs.frozen
class _History:
    cost: Cost
    rule: str
    citation: str
    groups: int
    by_rule: dict[str, float]

    def describe(self) -> dict[str, Any]:
        kind = "non-adaptive" if self.rule == "non_adaptive" else "fully adaptive across runs (privacy filter)"
        return {"kind": kind, "rule": self.rule, "citation": self.citation, "groups": self.groups,
                **({"by_rule": self.by_rule} if self.by_rule else {})}


class Reservation:
    """The reserved cost of one run; ``charge(label)`` spends one node (call before drawing noise)."""

    def __init__(self, ledger: Ledger, run_id: str, charges: Iterable[Charge], preflight: Preflight,
                 entry: Reservation | None = None) -> None:
        self.ledger = ledger
        self._entry = entry  #: the run's entry in the ledger it reports to (``Ledger.report_to``), charged with it
        self.run_id = run_id
        self.preflight = preflight
        self._pending = {c.label: c for c in charges}
        self.planned: tuple[Charge, ...] = tuple(self._pending.values())  #: every node's charge, in the plan's order
        self.charged: list[Charge] = []
        self.charged_at_close: list[Charge] = []
        self.closed = False

    def charge(self, label: str) -> Charge:
        if self.closed:
            raise RuntimeError(f"run {self.run_id} is closed")
        if label not in self._pending:
            raise KeyError(f"node {label!r} is not pending in run {self.run_id}")
        self.ledger._charge(self.run_id, label)
        if self._entry is not None and not self._entry.charged:
            self._entry.charge("fit")
        charge = self._pending.pop(label)
        self.charged.append(charge)
        return charge

    @property
    def pending(self) -> list[str]:
        return list(self._pending)

    def charge_rest(self) -> list[Charge]:
        """Before closing a run that released anything: charge every node still pending (journal records
        with ``at_close``), so the run costs its whole plan (module docstring). Returns those charges."""
        if not self.charged or self.closed:
            return []
        rest = list(self._pending.values())
        for charge in rest:
            self.ledger._charge(self.run_id, charge.label, at_close=True)
            self._pending.pop(charge.label)
            self.charged.append(charge)
            self.charged_at_close.append(charge)
        return rest

    def close(self, summary: dict[str, Any] | None = None) -> None:
        """End the run: if it charged anything, the rest is charged first (``charge_rest``); a run that
        charged nothing returns its whole reservation."""
        if not self.closed:
            self.charge_rest()
            self.ledger._close(self.run_id, summary)
            if self._entry is not None:  # the entry is shown at the cost it was entered with (its relation may differ)
                entered = self._entry.ledger.cost_of(self._entry.charged).to_dict()
                self._entry.close({**(summary or {}), "spent_by_run": entered, "entered_from": self.preflight.requested.to_dict()})
            self._pending.clear()
            self.closed = True

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
