"""Executing a calibrated plan against a ledger.

``Run`` reserves the whole plan on entry (preflight; nothing spent if it does not fit), then for
each ``release(name, value)``: validates the value, charges the node (write-ahead), and only then
draws the noise. Each node draws from its own generator spawned from one ``SeedSequence``, so the
noise does not depend on release order. On exit the run's ``PrivacyReport`` is built and the
reservation closed: a run that released nothing returns it; a run that released anything is charged
its whole plan (whether it stopped early may depend on its own outputs; ``accounting.ledger``).

Multi-party protocols draw a node's noise where the data lives (another thread, process or
machine) while the run and its ledger stay with the party's session: ``issue(names)`` charges the
nodes (write-ahead) and returns picklable ``NoiseTicket``s; ``ticket.release(value)`` validates
the value and adds the node's noise from the node's own generator; ``accept(name, output, spec)``
records the output. A value that fails validation there has already been charged (fail closed).
"""
from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from .._version import __version__
from ..accounting import (
    Accountant,
    AdvancedAccountant,
    BasicAccountant,
    Charge,
    Cost,
    Ledger,
    PldAccountant,
    RdpAccountant,
    Relation,
    Reservation,
    Status,
)
from ..accounting.accountants import default_slack
from ..accounting.filters import within_run
from ..accounting.ledger import basic_cost_alone
from ..errors import PlanError
from ..mechanisms import Sensitivity, get_mechanism
from ..report import NodeReport, PrivacyReport
from . import tap
from .graph import CalibratedPlan

DELEGATED = "delegated"  #: the output of a node charged here and released by another party


@attrs.frozen
class Release:
    """A query result plus release options (e.g. ``shape=`` for the shaped Gaussian)."""

    value: Any
    options: Mapping[str, Any] = attrs.field(factory=dict)


def _runtime_spec(name: str, spec: Any, adaptive: bool, sensitivity: float | None) -> Any:
    """The node's noise spec; for adaptive nodes, with the sensitivity value given at release."""
    if not adaptive:
        if sensitivity is not None:
            raise PlanError(f"node {name!r} has a fixed sensitivity; only adaptive nodes take sensitivity=")
        return spec
    if sensitivity is None:
        raise PlanError(f"adaptive node {name!r} needs sensitivity= at release")
    declared = spec.sensitivity
    return attrs.evolve(spec, sensitivity=Sensitivity(float(sensitivity), declared.norm, declared.relation, declared.derivation))


@attrs.frozen(eq=False)
class NoiseTicket:
    """One node, already charged by ``Run.issue``, whose noise is drawn where the data lives.

    Picklable (a frozen spec and the node's own generator). Use it once: ``release(value)``
    returns ``(output, spec)``; hand both back to ``Run.accept``. Custom mechanisms must be
    registered in the process that releases.
    """

    node: str
    spec: Any
    adaptive: bool
    rng: np.random.Generator
    label: str = ""  #: the issuing run's algorithm label (what a replay audit keys releases by)

    def release(self, value: Any, *, sensitivity: float | None = None, **options: Any) -> tuple[Any, Any]:
        spec = _runtime_spec(self.node, self.spec, self.adaptive, sensitivity)
        mech = get_mechanism(spec.mechanism)
        out = mech.sample(mech.prepare(value, spec, **options), spec, self.rng, **options)
        return tap.release_seen((self.label, self.node), value, out, spec), spec


def seed_policy(random_state: object) -> str:
    if random_state is None:
        return "fresh OS entropy (random_state=None); the seed is not recorded"
    if isinstance(random_state, np.random.Generator):
        return "caller-supplied numpy Generator; the seed is not recorded"
    return "caller-seeded (random_state given); the seed is not recorded, keep it secret"


def _spawn(random_state: object, count: int) -> list[np.random.Generator]:
    if isinstance(random_state, np.random.Generator):
        seq = np.random.SeedSequence(random_state.integers(0, 2**63, size=4).tolist())
    elif isinstance(random_state, np.random.SeedSequence):
        seq = random_state
    elif random_state is None or (isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)):
        seq = np.random.SeedSequence(None if random_state is None else int(random_state))
    else:
        raise TypeError(f"random_state must be None, an int, a SeedSequence or a Generator, got {type(random_state).__name__}")
    return [np.random.Generator(np.random.PCG64(s)) for s in seq.spawn(count)]


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _sorted_unique(rows: Any) -> np.ndarray:
    """``np.unique`` of row indices; an index array already strictly increasing (a public split's cells, a batch's
    rows) is returned as it is, which is what np.unique returns for it, without its hash and sort over n rows."""
    arr = np.asarray(rows, dtype=np.intp).ravel()
    if arr.size < 2 or bool(np.all(arr[1:] > arr[:-1])):
        return arr.copy()  # np.unique's answer is the caller's own array: not a view of it
    return np.unique(arr)


def _checked_row_cells(plan: CalibratedPlan, row_cells: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, np.ndarray]]:
    """The public row sets of every row partition of ``plan`` (``Partition.rows``): each cell's sorted indices,
    cells of one partition disjoint. A node charged to several cells (a batch within the refinement part)
    may read the rows they share (``Run.rows_of``)."""
    declared = {p.name: p for p in plan.plan.partitions.values() if p.rows}
    given = dict(row_cells or {})
    if set(given) != set(declared):
        raise PlanError(f"plan {plan.name!r} has row partitions {sorted(declared)}; the run was given {sorted(given)}")
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, part in declared.items():
        cells = {str(k): _sorted_unique(v) for k, v in given[name].items()}
        if set(cells) != set(part.cells):
            raise PlanError(f"row partition {name!r} has cells {list(part.cells)}; the run was given {sorted(cells)}")
        everything = np.concatenate(list(cells.values())) if cells else np.array([], dtype=np.intp)
        if _sorted_unique(everything).size != everything.size:
            raise PlanError(f"the cells of row partition {name!r} overlap: a record would be charged to one cell and read by two")
        out[name] = cells
    return out


class NoiseOffPlan:
    """A plan allocated at ``Budget.infinite()`` as the ledger sees it: every charge has status
    ``none`` (no noise is drawn, nothing is private), so neither the journal nor any report records
    such a run as certified. ``Budget.infinite()`` is itself the explicit opt-in: there is no other
    way to get an infinite budget."""

    def __init__(self, plan: CalibratedPlan) -> None:
        self._plan = plan

    def charges(self) -> list[Charge]:
        return [attrs.evolve(c, status=Status.NONE) for c in self._plan.charges()]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plan, name)


class Run:
    """One execution of ``plan`` against ``ledger`` (use as a context manager)."""

    def __init__(
        self,
        plan: CalibratedPlan,
        ledger: Ledger,
        *,
        random_state: object = None,
        allow_uncertified: bool = False,
        data_shape: tuple[int, ...] | None = None,
        algorithm: str | None = None,
        notes: list[str] | None = None,
        row_cells: Mapping[str, Mapping[str, Any]] | None = None,
        coverage: str | None = None,
    ) -> None:
        self.plan = plan
        self.ledger = ledger
        self.row_cells = _checked_row_cells(plan, row_cells)
        self.coverage = coverage  #: what the guarantee covers, when not every output (the report says it)
        #: set by a secure aggregation (``privsdr.secure``): who must not collude and what each party sees
        self.trust_model: dict[str, Any] | None = None
        self.random_state = random_state
        self.allow_uncertified = allow_uncertified
        self.data_shape = None if data_shape is None else [int(x) for x in data_shape]
        self.algorithm = algorithm or plan.name
        self.notes = list(notes or [])
        self.outputs: dict[str, Any] = {}
        self.runtime_specs: dict[str, Any] = {}
        self.report: PrivacyReport | None = None
        self._reservation: Reservation | None = None
        self._rngs: dict[str, np.random.Generator] = {}
        self._issued: set[str] = set()

    def __enter__(self) -> Run:
        # everything that can fail on the caller's input happens before the reservation
        self._rngs = dict(zip(self.plan.nodes, _spawn(self.random_state, len(self.plan.nodes)), strict=True))
        self._before = self.ledger.remaining
        self._started = _utc_now()
        if self.plan.budget.is_infinite:  # noise off: opted in by Budget.infinite(), unless nodes are uncertified by design
            allow = self.allow_uncertified or self.plan.status == Status.CERTIFIED
            self._reservation = self.ledger.reserve(NoiseOffPlan(self.plan), allow_uncertified=allow)
        else:
            self._reservation = self.ledger.reserve(self.plan, allow_uncertified=self.allow_uncertified)
        return self

    def _check_releasable(self, name: str, batch: tuple[str, ...] = ()) -> Reservation:
        """The open reservation, if node ``name`` may be released now (PlanError otherwise)."""
        if self._reservation is None or self._reservation.closed:
            raise PlanError("release() outside an open run (use `with Run(...) as run:`)")
        if name not in self.plan.nodes:
            raise PlanError(f"plan {self.plan.name!r} has no node {name!r}")
        if name in self.outputs or name in self._issued:
            raise PlanError(f"node {name!r} was already released in this run")
        done = set(self.outputs) | self._issued | set(batch)
        missing = [p for p in self.plan.nodes[name].parents if p not in done]
        if missing:
            raise PlanError(f"node {name!r} needs its parents released first: {missing}")
        return self._reservation

    def release(self, name: str, value: Any, *, rows: Any = None, **options: Any) -> Any:
        """Charge node ``name`` and release ``value`` with its noise. ``rows``: the row indices ``value`` reads,
        required for a node charged to a cell of a row partition and refused outside that cell."""
        reservation = self._check_releasable(name)
        read = self._check_rows(name, rows)
        spec = self._spec_for(name, options.pop("sensitivity", None))
        mech = get_mechanism(spec.mechanism)
        prepared = mech.prepare(value, spec, **options)
        reservation.charge(name)  # write-ahead: charged before the noise exists
        out = mech.sample(prepared, spec, self._rngs[name], **options)
        out = tap.release_seen((self.algorithm, name), value, out, spec, rows=read)  # the output itself unless an audit replays
        self.outputs[name] = out
        return out

    def rows_of(self, name: str) -> np.ndarray | None:
        """The rows node ``name`` is charged to (sorted indices), or None when its scope holds every row."""
        allowed: np.ndarray | None = None
        for partition, cell in self.plan.nodes[name].scope.constraints:
            part = self.plan.plan.partitions.get(partition)
            if part is None or not part.rows:
                continue
            cell_rows = self.row_cells[partition][cell]
            # both sorted and unique (``_sorted_unique``): the intersection needs no np.unique of either
            allowed = cell_rows if allowed is None else np.intersect1d(allowed, cell_rows, assume_unique=True)
        return allowed

    def _check_rows(self, name: str, rows: Any) -> np.ndarray | None:
        """The rows a release reads, checked against the cell it is charged to (PlanError outside it)."""
        allowed = self.rows_of(name)
        if rows is None:
            if allowed is not None:
                raise PlanError(f"node {name!r} is charged to {self.plan.nodes[name].scope}: release it with rows= (the rows its "
                                "value reads), which must lie in that cell")
            return None
        read = _sorted_unique(rows)
        if allowed is not None and not np.all(np.isin(read, allowed, assume_unique=True)):  # both sorted and unique
            outside = int(np.sum(~np.isin(read, allowed, assume_unique=True)))
            raise PlanError(f"node {name!r} is charged to {self.plan.nodes[name].scope} but reads {outside} rows outside it: "
                            "a release must be charged to every record it reads")
        return read

    def delegate(self, name: str) -> None:
        """Charge node ``name`` whose noise another party draws from its own records (a federated
        client computing its upload). Write-ahead still holds as long as that party starts only
        after this returns; a party that then fails leaves the charge spent (fail closed)."""
        if self._reservation is None or self._reservation.closed:
            raise PlanError("delegate() outside an open run (use `with Run(...) as run:`)")
        if name not in self.plan.nodes or name in self.outputs:
            raise PlanError(f"node {name!r} is not a pending node of plan {self.plan.name!r}")
        missing = [p for p in self.plan.nodes[name].parents if p not in self.outputs]
        if missing:
            raise PlanError(f"node {name!r} needs its parents charged first: {missing}")
        self._reservation.charge(name)
        self.outputs[name] = DELEGATED

    def _spec_for(self, name: str, sensitivity: float | None) -> Any:
        """The node's noise spec; for adaptive nodes, with the sensitivity value given at release."""
        spec = _runtime_spec(name, self.plan.specs[name], self.plan.nodes[name].adaptive, sensitivity)
        if self.plan.nodes[name].adaptive:
            self.runtime_specs[name] = spec
        return spec

    def issue(self, *names: str) -> dict[str, NoiseTicket]:
        """Charge nodes ``names`` now (write-ahead) and return a ``NoiseTicket`` for each.

        Parents must be released, issued earlier, or in the same call. The noise is drawn by
        ``ticket.release`` wherever the value is computed; ``accept`` records the output.
        """
        if len(set(names)) != len(names):
            raise PlanError(f"issue() got a node twice: {names}")
        for name in names:
            self._check_releasable(name, names)
        tickets: dict[str, NoiseTicket] = {}
        for name in names:
            assert self._reservation is not None
            self._reservation.charge(name)  # write-ahead: charged before the noise exists
            self._issued.add(name)
            node = self.plan.nodes[name]
            tickets[name] = NoiseTicket(name, self.plan.specs[name], node.adaptive, self._rngs[name], self.algorithm)
        return tickets

    def accept(self, name: str, output: Any, spec: Any = None) -> None:
        """Record the output of an issued node (``spec``: the one ``ticket.release`` returned)."""
        if name not in self._issued:
            raise PlanError(f"node {name!r} was not issued in this run (or was already accepted)")
        planned = self.plan.specs[name]
        if spec is not None:
            if (spec.mechanism, spec.noise_multiplier, spec.calibration, spec.sampler) != (planned.mechanism, planned.noise_multiplier, planned.calibration, planned.sampler):
                raise PlanError(f"node {name!r} came back with another noise spec than the plan's")
            if spec.sensitivity != planned.sensitivity:
                if not self.plan.nodes[name].adaptive:
                    raise PlanError(f"node {name!r} has a fixed sensitivity; it came back with another one")
                self.runtime_specs[name] = spec
        elif self.plan.nodes[name].adaptive:
            raise PlanError(f"adaptive node {name!r}: accept() needs the spec its ticket used")
        self._issued.discard(name)
        self.outputs[name] = output

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._reservation is not None
        try:
            self._reservation.charge_rest()  # released anything: the whole plan (an early stop may depend on the outputs)
            self.report = build_report(self)
            summary = {
                "algorithm": self.report.algorithm,
                "status": self.report.status,
                "status_line": self.report.status_line,
                "spent_by_run": self.report.budget["spent_by_run"],
                "finished": self.report.timestamps["finished"],
                "failed": exc_type is not None,
            }
        finally:
            why = {"why": f"{getattr(exc_type, '__name__', exc_type)}: {exc}"[:300]} if exc_type is not None else {}
            # a failed run is closed as failed (the journal says why): what it charged stays charged
            self._reservation.close({**summary, **why} if self.report is not None else {"failed": True, **why})


def execute(
    plan: CalibratedPlan,
    ledger: Ledger,
    queries: Mapping[str, Callable[[Mapping[str, Any]], Any]],
    **run_options: Any,
) -> tuple[dict[str, Any], PrivacyReport]:
    """Walk the DAG in order: ``queries[name](parent_outputs)`` gives each node's value or a ``Release``."""
    missing = [n for n in plan.nodes if n not in queries]
    if missing:
        raise PlanError(f"no query for nodes {missing}")
    with Run(plan, ledger, **run_options) as run:
        for name, node in plan.nodes.items():
            result = queries[name]({p: run.outputs[p] for p in node.parents})
            if isinstance(result, Release):
                run.release(name, result.value, **result.options)
            else:
                run.release(name, result)
    assert run.report is not None
    return run.outputs, run.report


# -- report ----------------------------------------------------------------------------------------
def _totals(charges: list[Charge], ledger: Ledger) -> dict[str, dict[str, float] | None]:
    """The run's charges under every accountant, each read at the ledger's delta (as the ledger reads them)."""
    slack = getattr(ledger.accountant, "slack", None)
    if slack is None:
        slack = default_slack(ledger.budget.delta)
    return {name: None if cost is None else dict(cost) for name, cost in _totals_memo(tuple(charges), slack, ledger.budget.delta)}


@functools.lru_cache(maxsize=1024)
def _totals_memo(charges: tuple[Charge, ...], slack: float, delta: float) -> tuple[tuple[str, tuple[tuple[str, float], ...] | None], ...]:
    """``_totals``' answer, memoised on what it reads (the four built-in accountants are pure functions of the charges,
    the slack and the delta): every fit of one plan shape reports the same totals, which cost four memo look-ups."""
    accountants: list[Accountant] = [BasicAccountant(), AdvancedAccountant(slack, delta), RdpAccountant(delta), PldAccountant(target_delta=delta)]
    out: list[tuple[str, tuple[tuple[str, float], ...] | None]] = []
    for acc in accountants:
        try:
            out.append((acc.name, tuple((acc.cost(list(charges)) if charges else Cost.zero()).to_dict().items())))
        except Exception:  # an accountant that cannot compose these events is "not applicable"
            out.append((acc.name, None))
    return tuple(out)


def _status_line(status: Status, spent: Cost, accountant: str, relation: str, infinite: bool, nodes: list[str],
                 data_dependent: list[str] | None = None, claimed: list[str] | None = None) -> str:
    """The report's first line. ``nodes``: the uncertified released nodes (for status none: the non-private
    ones); ``claimed``: in a status-none run, the nodes whose guarantee is claimed (named apart)."""
    if infinite:
        return f"NON-PRIVATE BASELINE: budget epsilon = inf, noise switched off ({relation})"
    standard = Relation.parse(relation).standard
    guarantee = f"(epsilon={spent.epsilon:.4g}, delta={spent.delta:.3g})-{'DP' if standard else 'LSDP'} under the {accountant!r} accountant, {relation}"
    if status == Status.CERTIFIED:
        return f"CERTIFIED: {guarantee}"
    if status == Status.CLAIMED:
        what = "" if standard else " (locally sensitive DP: eps-LSDP claimed, not standard DP)"
        return f"CLAIMED, NOT CERTIFIED: {guarantee}{what} holds only if the published claims of {', '.join(nodes)} hold"
    also = f"; {_names(claimed)} carry only claimed, not certified, guarantees" if claimed else ""
    if data_dependent:
        return (f"NOT PRIVATE: {_names(nodes)} release data without a DP guarantee ({_names(data_dependent)} scale "
                f"their noise by quantities read off the private data){also}; the totals, {guarantee}, price the published "
                "per-release calibration as if it held: what the published claim costs, not a guarantee")
    return f"NOT PRIVATE: {', '.join(nodes)} release data without a DP guarantee{also}; the totals cover the other nodes only"


def _names(names: list[str], shown: int = 6) -> str:
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[:shown])}, ... ({len(names)} nodes)"


def _public_shape(shape: list[int] | None, relation: Relation) -> list[int] | None:
    """The data's shape as the report may print it: under add/remove the number of rows is not public (adding or
    removing one record changes it), so the report does not record the shape (the width is a public parameter)."""
    return None if relation == Relation.ADD_REMOVE else shape


def _shape_notes(shape: list[int] | None, relation: Relation) -> list[str]:
    if shape is None or relation != Relation.ADD_REMOVE:
        return []
    return ["under add/remove the number of rows is not public: this report does not record the data's shape"]


def _sampler_notes(plan: CalibratedPlan) -> list[str]:
    """Which sampler drew the noise: a secure run names the nodes that still used numpy (selection)."""
    if plan.sampler != "secure":
        return []
    secure = [name for name, spec in plan.specs.items() if spec.secure]
    other = [name for name, spec in plan.specs.items() if not spec.secure and not spec.noise_off
             and plan.nodes[name].mechanism != "non_private"]
    note = (f"noise sampler: secure -- exact discrete Gaussian/Laplace on a public grid with CSPRNG randomness "
            f"(Canonne, Kamath & Steinke 2020) for {', '.join(secure)}")
    if other:
        note += f"; {', '.join(other)} used numpy floating-point sampling (no secure sampler for their mechanism)"
    return [note]


def _at_close_notes(names: list[str]) -> list[str]:
    if not names:
        return []
    return [f"charged at close without being released: {_names(names)} -- a run that releases anything is charged its "
            "whole plan, because whether it stopped early may depend on its own noisy outputs (the stopped run is "
            "post-processing of the full plan, which is what was priced)"]


def _adaptive_note(node: Any) -> str:
    if node.data_dependent:
        return " [sensitivity read off the PRIVATE data at release: no DP guarantee]"
    return " [sensitivity computed at release from public parameters and parent outputs]" if node.adaptive else ""


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    """The library versions a report records (read once: the package metadata does not change in a process)."""
    versions = {"privsdr": __version__, "numpy": np.__version__}
    try:
        from importlib.metadata import version

        versions["dp-accounting"] = version("dp-accounting")
    except Exception:  # pragma: no cover - metadata missing in odd installs
        pass
    return tuple(versions.items())


def _library_versions() -> dict[str, str]:
    return dict(_versions())


def build_report(run: Run) -> PrivacyReport:
    plan, ledger = run.plan, run.ledger
    assert run._reservation is not None
    spent_labels = {c.label for c in run._reservation.charged}  # released nodes, then (at exit) every other node if any was
    # released; priced in the plan's order (as the ledger does: the same charges find the reservation's price in the memo)
    spent_charges = [c for c in run._reservation.planned if c.label in spent_labels]
    at_close = [c.label for c in run._reservation.charged_at_close]
    charged = [c for c in run._reservation.charged if c.label not in at_close]  # what was released: the status describes it
    released_names = {c.label for c in charged}
    spent = ledger.cost_of(spent_charges)
    status = Status.worst([c.status for c in charged]) if charged else Status.CERTIFIED
    uncertified = [c.label for c in charged if c.status != Status.CERTIFIED]
    noise_off = plan.budget.is_infinite  # Budget.infinite(): charged as "none" (NoiseOffPlan), never "certified"
    nodes = []
    for charge in plan.charges():
        node = plan.nodes[charge.label]
        spec = run.runtime_specs.get(charge.label, plan.specs[charge.label])
        nodes.append(
            NodeReport(
                name=node.name,
                mechanism=node.mechanism,
                status=Status.NONE.value if noise_off else node.status.value,
                calibration=spec.calibration,
                sensitivity=spec.sensitivity.to_dict(),
                noise_multiplier=spec.noise_multiplier,
                noise_scale=spec.scale,
                cost=basic_cost_alone(charge).to_dict(),
                scope=str(node.scope),
                parents=list(node.parents),
                share=None if spec.share is None else {"epsilon": spec.share.epsilon, "delta": spec.share.delta},
                params=dict(spec.params),
                released=node.name in released_names,
                description=node.description + _adaptive_note(node),
                sampler=spec.sampler,
            )
        )
    versions = _library_versions()
    line = _status_line(status, spent, ledger.accountant.name, plan.relation.value, plan.budget.is_infinite,
                        [c.label for c in charged if c.status == Status.NONE] if status == Status.NONE else uncertified,
                        [c.label for c in charged if plan.nodes[c.label].data_dependent],
                        [c.label for c in charged if c.status == Status.CLAIMED] if status == Status.NONE else None)
    if run.coverage:
        line += f" -- it covers {run.coverage}"
    if run.trust_model and status == Status.CERTIFIED and line.startswith("CERTIFIED: "):
        line = f"CERTIFIED ({run.trust_model['status']}): " + line[len("CERTIFIED: "):]
    return PrivacyReport(
        status=status.value,
        status_line=line,
        coverage=run.coverage,
        trust_model=run.trust_model,
        algorithm=run.algorithm,
        algorithm_version=__version__,
        run_id=run._reservation.run_id,
        plan_hash=plan.plan.plan_hash(),
        relation=plan.relation.value,
        public_parameters=dict(plan.plan.public_params),
        data_shape=_public_shape(run.data_shape, plan.relation),
        budget={
            "total": ledger.budget.as_cost().to_dict(),
            "requested": plan.budget.as_cost().to_dict(),
            "before": Cost(*run._before).to_dict(),
            "after": ledger.remaining.to_dict(),
            "spent_by_run": spent.to_dict(),
            "allocation": plan.allocation,
            "run_composition": within_run(ledger.accountant.name),  # justifies spent_by_run
            "composition": ledger.composition,  # justifies "after": the ledger's whole history, this run included
        },
        accountant=ledger.accountant.to_dict(),
        totals=_totals(spent_charges, ledger),
        nodes=nodes,
        seed_policy=seed_policy(run.random_state) + ("; the secure sampler's noise comes from the operating system's CSPRNG "
                                                     "and no seed reproduces it" if plan.sampler == "secure" else ""),
        timestamps={"started": run._started, "finished": _utc_now()},
        library_versions=versions,
        notes=run.notes + _sampler_notes(plan) + _at_close_notes(at_close) + _shape_notes(run.data_shape, plan.relation),
    )
