"""Running a vertical protocol: parties, stages, sessions, executors (the party layer).

A protocol (``VerticalProtocol``) is public: from the layout and the budget it builds one global
plan whose node names are ``"<party>/<node>"`` (the party that releases it), and a schedule of
stages; each stage is a set of party actions that may run in parallel and read only messages of
earlier stages. ``run_protocol``:

1. validates the parties (same N, finite, protocol rules) -- nothing is spent on bad input;
2. allocates the global plan to the budget (one tight calibration over every party's nodes), splits
   it by party, and opens one ``Run`` per party on that party's own ledger (all reserved before
   any data is read; if one party cannot afford its part, nothing is spent anywhere);
3. for each stage, each acting party's session charges the action's nodes (write-ahead) and hands
   out noise tickets; the action runs on the executor (in process, any ``concurrent.futures``
   executor, or a Dask ``distributed.Client`` with ``pure=False``), computes its values from the
   party's own data and the messages it reads, draws the noise from the tickets (per-node
   generators spawned from the party's own ``SeedSequence`` child: results do not depend on the
   scheduler) and returns its outgoing messages; the session records the releases and stamps each
   message with the configuration digest and the sender's privacy report at the time of sending;
4. closes every run (a party that released anything is charged its whole part, one that released
   nothing gets its reservation back) and post-processes.

Everything a party sends is a plan node's release or post-processing of released values; the
``privacy`` summary lists what each party revealed to whom, each party's own cost (its ledger
composes its own nodes) and the per-record guarantee composed over every party's releases
(sequential under row-level relations, where a record spans all parties; parallel across party
scopes when the plan declares them, e.g. entry-level relations).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from ..accounting import Budget, Charge, Cost, Ledger, Status, make_accountant
from ..errors import PrivsdrError, ValidationError
from ..execution import client_seeds, run_clients
from ..plan import CalibratedPlan, NoiseTicket, Plan, Run, tap
from ..plan.execute import build_report
from ..report import PrivacyReport
from .layout import Layout, Party, check_parties
from .messages import PartyMessage, as_dict, as_names

ACCOUNTANTS = ("basic", "advanced", "rdp", "pld")


class ProtocolAbort(PrivsdrError):
    """Raised inside an action when the protocol's own rule stops the run (e.g. DP-BCD's abort)."""


class ProtocolAborted(PrivsdrError):
    """The run stopped at ``stage`` (``party``); charges already made stay on the ledgers, nothing
    is published. ``messages`` and ``reports`` hold what was sent and each party's report."""

    def __init__(self, message: str, *, stage: int, party: str, messages: tuple, reports: Mapping[str, PrivacyReport]) -> None:
        super().__init__(message)
        self.stage, self.party, self.messages, self.reports = stage, party, messages, dict(reports)


@attrs.frozen
class Action:
    """One party's move in a stage: the plan nodes it releases and the message ids it reads."""

    party: str
    step: str
    nodes: tuple[str, ...] = attrs.field(default=(), converter=as_names)
    reads: tuple[str, ...] = attrs.field(default=(), converter=as_names)


def _actions(actions: Iterable[Action]) -> tuple[Action, ...]:
    return tuple(actions)


@attrs.frozen
class Stage:
    index: int
    name: str
    actions: tuple[Action, ...] = attrs.field(converter=_actions)


@attrs.frozen(eq=False)
class Outgoing:
    """A message as an action returns it; the session adds sender, digest, stage and report."""

    kind: str
    recipients: tuple[str, ...] = attrs.field(converter=as_names)
    arrays: Mapping[str, Any] = attrs.field(factory=dict, converter=as_dict)
    meta: Mapping[str, Any] = attrs.field(factory=dict, converter=as_dict)
    nodes: tuple[str, ...] = attrs.field(default=(), converter=as_names)


def _outgoing(messages: Iterable[Outgoing]) -> tuple[Outgoing, ...]:
    return tuple(messages)


@attrs.frozen(eq=False)
class ActionResult:
    """What an action returns: the party's new private state, ``released[node] = (output, spec)``
    as ``NoiseTicket.release`` returned them, and the outgoing messages."""

    state: Any
    released: Mapping[str, tuple[Any, Any]] = attrs.field(factory=dict, converter=as_dict)
    outgoing: tuple[Outgoing, ...] = attrs.field(default=(), converter=_outgoing)


class VerticalProtocol:
    """What a protocol defines. Instances must be picklable (actions run on executors)."""

    name: ClassVar[str] = "abstract"
    version: ClassVar[int] = 1

    def digest(self, layout: Layout) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, parties: Sequence[Party], layout: Layout) -> None:
        """Protocol rules on the data, raised as ValidationError before anything is spent."""

    def prepare(self, party: Party) -> Party:
        """A party's data as its actions use it (e.g. clipped to public bounds once, up front).
        Actions must not rely on it: they get raw data when probed."""
        return party

    def build_plan(self, layout: Layout, budget: Budget) -> Plan:  # pragma: no cover - abstract
        raise NotImplementedError

    def allocation(self) -> dict[str, Any]:
        """Keyword arguments of ``Plan.allocate`` besides the budget (e.g. ``tight``)."""
        return {"tight": True}

    def schedule(self, layout: Layout) -> list[Stage]:  # pragma: no cover - abstract
        raise NotImplementedError

    def initial_state(self, party: str, layout: Layout) -> Any:
        return None

    def precheck(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage]) -> None:
        """Optional data-dependent check before the action's nodes are charged (raise ProtocolAbort)."""

    def has_precheck(self, action: Action) -> bool:
        return False

    def act(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
            tickets: Mapping[str, NoiseTicket]) -> ActionResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self, layout: Layout, states: Mapping[str, Any], messages: Sequence[PartyMessage]) -> Any:
        return dict(states)

    def final_reads(self, layout: Layout, party: str) -> tuple[str, ...]:
        """Messages a party fetches after its last action (e.g. everyone's published coefficients)."""
        return ()

    def notes(self, party: str) -> list[str]:
        return []

    def coverage(self) -> str | None:
        """What the guarantee covers when the published estimate is not a function of the releases alone (e.g.
        each party's coefficients computed from its own raw rows); None when it covers every output."""
        return None


def owner(node: str) -> str:
    """The party that releases ``node`` (global node names are ``"<party>/<node>"``)."""
    return node.split("/", 1)[0]


def split_plan(calibrated: CalibratedPlan, layout: Layout, accountant: Any) -> dict[str, CalibratedPlan]:
    """Each party's part of a calibrated global plan (same noise), priced under ``accountant``."""
    unknown = sorted({owner(n) for n in calibrated.nodes} - set(layout.names))
    if unknown:
        raise ValidationError(f"plan {calibrated.name!r} has nodes of unknown parties {unknown}")
    parts = {}
    for name in layout.names:
        sub = Plan(f"{calibrated.name}[{name}]", calibrated.relation, {**calibrated.plan.public_params, "party": name})
        sub.partitions = dict(calibrated.plan.partitions)
        for node_name, node in calibrated.nodes.items():
            if owner(node_name) == name:
                sub.nodes[node_name] = attrs.evolve(node, parents=tuple(p for p in node.parents if owner(p) == name))
        if not sub.nodes:
            continue
        specs = {n: calibrated.specs[n] for n in sub.nodes}
        part = CalibratedPlan(sub, specs, calibrated.budget, calibrated.allocation)
        if calibrated.budget.is_infinite:
            budget = Budget.infinite()
        else:
            eps, delta = make_accountant(accountant, calibrated.budget.delta).cost(part.charges())
            budget = Budget(eps, delta) if eps > 0 else calibrated.budget
        parts[name] = CalibratedPlan(sub, specs, budget, calibrated.allocation)
    return parts


class PartySession:
    """One party's side of a run: its Run on its own ledger, tickets out, releases in, messages stamped."""

    def __init__(self, name: str, plan: CalibratedPlan, ledger: Ledger, seed: Any, *, protocol: VerticalProtocol,
                 digest: str, data_shape: tuple[int, ...], allow_uncertified: bool, message_reports: bool,
                 project: Ledger | None = None) -> None:
        self.name, self.plan, self.ledger = name, plan, ledger
        self.protocol, self.digest, self.message_reports = protocol, digest, message_reports
        algorithm = f"{protocol.name} (party {name})"
        self.run = Run(plan, ledger, random_state=seed, data_shape=data_shape, allow_uncertified=allow_uncertified,
                       algorithm=algorithm, notes=protocol.notes(name), coverage=protocol.coverage())
        #: the same part charged to the project's per-record ledger (``run_protocol(project=...)``), if any
        self.project_run = None if project is None else Run(plan, project, random_state=0, data_shape=data_shape,
                                                            allow_uncertified=allow_uncertified, algorithm=algorithm,
                                                            coverage=protocol.coverage())

    def __enter__(self) -> PartySession:
        if self.project_run is not None:
            self.project_run.__enter__()
        try:
            self.run.__enter__()
        except BaseException as exc:
            if self.project_run is not None:
                self.project_run.__exit__(type(exc), exc, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.run.__exit__(*exc)
        finally:
            if self.project_run is not None:
                self.project_run.__exit__(*exc)

    def issue(self, action: Action) -> dict[str, NoiseTicket]:
        if not action.nodes:
            return {}
        if self.project_run is not None:  # write-ahead on the project's ledger too, before any noise is drawn
            for node in action.nodes:
                self.project_run.delegate(node)
        return self.run.issue(*action.nodes)

    def complete(self, action: Action, stage: int, result: ActionResult) -> list[PartyMessage]:
        missing = [n for n in action.nodes if n not in result.released]
        extra = [n for n in result.released if n not in action.nodes]
        if missing or extra:
            raise PrivsdrError(f"action {action.step} of {self.name}: released {sorted(result.released)}, planned {list(action.nodes)}")
        for node, (output, spec) in result.released.items():
            self.run.accept(node, output, spec)
        report = build_report(self.run).to_json() if self.message_reports and result.outgoing else ""  # none sent: none built
        for out in result.outgoing:
            tap.message_sent(self.name, out.kind, out.recipients, out.arrays, out.nodes, out.meta)
        return [PartyMessage(self.protocol.name, self.protocol.version, self.digest, self.name, out.recipients, out.kind, stage,
                             out.arrays, out.meta, out.nodes, report) for out in result.outgoing]

    @property
    def charged(self) -> list[str]:
        assert self.run._reservation is not None
        return [c.label for c in self.run._reservation.charged]


def _act(protocol: VerticalProtocol, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
         tickets: Mapping[str, NoiseTicket]) -> ActionResult:
    return protocol.act(action, party, state, inbox, tickets)


def _precheck(protocol: VerticalProtocol, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage]) -> None:
    protocol.precheck(action, party, state, inbox)


@attrs.frozen(eq=False)
class ProtocolRun:
    """The outcome: the protocol's result, every message in order, each party's report, the summary."""

    result: Any
    layout: Layout
    messages: tuple[PartyMessage, ...]
    reports: Mapping[str, PrivacyReport]
    privacy: dict[str, Any]
    plans: Mapping[str, CalibratedPlan]


def run_protocol(
    protocol: VerticalProtocol,
    parties: Sequence[Party],
    budget: Budget | tuple[float, float],
    *,
    ledgers: Mapping[str, Ledger] | None = None,
    accountant: str = "best",
    executor: Any = None,
    random_state: Any = None,
    allow_uncertified: bool = False,
    message_reports: bool = True,
    project: Ledger | None = None,
) -> ProtocolRun:
    """Run ``protocol`` among ``parties`` (see the module docstring). ``budget`` is the per-record
    total over every party's releases; ``ledgers`` maps party names to their own ledgers (a fresh
    ledger of exactly its part otherwise); ``project``: the project's per-record ledger, which every
    party's part is charged to as well (``commit_parts``; see ``check_ledger_reuse``)."""
    from ..accounting import as_budget

    budget = as_budget(budget)
    parties, layout = check_parties(parties)
    protocol.check(parties, layout)
    by_name = {p.name: protocol.prepare(p) for p in parties}
    ledgers = dict(ledgers or {})
    unknown = sorted(set(ledgers) - set(layout.names))
    if unknown:
        raise ValidationError(f"ledgers given for unknown parties {unknown}")
    for name, ledger in ledgers.items():
        if not isinstance(ledger, Ledger):
            raise ValidationError(f"ledger of {name!r} must be a privsdr.Ledger, got {type(ledger).__name__}")
    if project is not None and not isinstance(project, Ledger):
        raise ValidationError(f"the project ledger must be a privsdr.Ledger, got {type(project).__name__}")
    plan = protocol.build_plan(layout, budget)
    acct = make_accountant(accountant, budget.delta)  # one instance: parts are priced as their ledgers price them
    calibrated = plan.allocate(budget, accountant=acct, **protocol.allocation())
    parts = split_plan(calibrated, layout, acct)
    if not budget.is_infinite:  # safety net: what the parties will run composes within the budget
        together = acct.cost([c for part in parts.values() for c in part.charges()])
        if not together.fits_within(budget):
            raise ValidationError(f"the parties' parts compose to {together} under {acct.name!r}, beyond the budget {tuple(budget)}")
    if budget.is_infinite:
        project = None  # noise off: nothing to account (every report says NON-PRIVATE BASELINE)
    check_ledger_reuse(calibrated, ledgers, project)
    if project is not None:
        commit_parts(project, parts, allow_uncertified)
    digest = protocol.digest(layout)
    seeds = dict(zip(layout.names, client_seeds(random_state, len(layout.names)), strict=True))
    sessions: dict[str, PartySession] = {}
    for name, part in parts.items():
        ledger = ledgers.get(name) or Ledger(part.budget, accountant=acct, relation=part.relation)
        sessions[name] = PartySession(name, part, ledger, seeds[name], protocol=protocol, digest=digest,
                                      data_shape=by_name[name].X.shape, allow_uncertified=allow_uncertified,
                                      message_reports=message_reports, project=project)
    opened: list[PartySession] = []
    try:
        for session in sessions.values():  # every party reserves its whole part before any data is read
            opened.append(session.__enter__())
    except BaseException as exc:
        for session in opened:
            session.__exit__(type(exc), exc, None)
        raise
    states = {name: protocol.initial_state(name, layout) for name in layout.names}
    mailbox: dict[str, PartyMessage] = {}
    sent: list[PartyMessage] = []
    failure: BaseException | None = None
    stage_at, party_at = -1, ""
    try:
        for stage in protocol.schedule(layout):
            stage_at = stage.index
            inboxes = [_inbox(action, mailbox) for action in stage.actions]
            checks = [(a, box) for a, box in zip(stage.actions, inboxes, strict=True) if protocol.has_precheck(a)]
            if checks:
                run_clients(_precheck, [{"protocol": protocol, "action": a, "party": by_name[a.party], "state": states[a.party],
                                         "inbox": box} for a, box in checks], executor)
            tasks = []
            for action, box in zip(stage.actions, inboxes, strict=True):
                party_at = action.party
                tickets = sessions[action.party].issue(action) if action.party in sessions else {}
                if action.nodes and action.party not in sessions:
                    raise PrivsdrError(f"party {action.party!r} releases nodes but has no part of the plan")
                tasks.append({"protocol": protocol, "action": action, "party": by_name[action.party],
                              "state": states[action.party], "inbox": box, "tickets": tickets})
            results = run_clients(_act, tasks, executor)
            for action, result in zip(stage.actions, results, strict=True):
                states[action.party] = result.state
                if action.party in sessions:
                    messages = sessions[action.party].complete(action, stage.index, result)
                else:
                    for o in result.outgoing:
                        tap.message_sent(action.party, o.kind, o.recipients, o.arrays, o.nodes, o.meta)
                    messages = [PartyMessage(protocol.name, protocol.version, digest, action.party, o.recipients, o.kind, stage.index,
                                             o.arrays, o.meta, o.nodes) for o in result.outgoing]
                for message in messages:
                    if message.id in mailbox:
                        raise PrivsdrError(f"message {message.id} sent twice")
                    mailbox[message.id] = message
                    sent.append(message)
    except BaseException as exc:  # noqa: BLE001 - close every run (charged in full if it released anything), then re-raise
        failure = exc
    reports: dict[str, PrivacyReport] = {}
    for name, session in sessions.items():
        session.__exit__(type(failure) if failure else None, failure, None)
        assert session.run.report is not None
        reports[name] = session.run.report
    if isinstance(failure, ProtocolAbort):
        raise ProtocolAborted(f"{protocol.name} aborted at stage {stage_at} ({party_at}): {failure}; charges made stay on the "
                              "ledgers, nothing was published", stage=stage_at, party=party_at, messages=tuple(sent),
                              reports=reports) from failure
    if failure is not None:
        raise failure
    result = protocol.finish(layout, states, sent)
    privacy = privacy_summary(calibrated, parts, sessions, sent, reports, budget, protocol.coverage())
    return ProtocolRun(result, layout, tuple(sent), reports, privacy, parts)


def records_span_parties(calibrated: CalibratedPlan) -> bool:
    """Whether one record meets several parties' releases: true under a row-level relation, where every
    party's block holds part of the same person's row; false when each party's nodes read a cell of a party
    partition of their own (entry-level S-DP: a party's entries appear in that party's releases only)."""
    cells = {owner(name): node.scope for name, node in calibrated.nodes.items()}
    return any(scope.is_whole for scope in cells.values())


def check_ledger_reuse(calibrated: CalibratedPlan, ledgers: Mapping[str, Ledger], project: Ledger | None) -> None:
    """Refuse to compose a row-level run on party ledgers that already hold charges, unless a project ledger is
    given. A party's ledger composes only its own part; when a person's row spans every party, the per-record
    guarantee over several runs is the composition of every party's parts, which no party ledger sees. A
    project ledger (one account for the rows the parties share, e.g. a journal) composes them all."""
    if project is not None or not records_span_parties(calibrated) or calibrated.budget.is_infinite:
        return
    used = sorted(name for name, ledger in ledgers.items() if ledger.charges)
    if used:
        raise ValidationError(
            f"the ledgers of {', '.join(used)} already hold charges, and this run's releases read every party's part of the "
            "same rows: each party ledger would compose only its own part, not the per-record total over runs. Give a project "
            "ledger (ledger=Ledger(..., journal=...) on the estimator, project= to run_protocol) that every run on these rows "
            "is charged to, or fresh party ledgers for a one-off run (docs/algorithms/dpbcd.md, 'one budget for a vertical project')")


def commit_parts(project: Ledger, parts: Mapping[str, CalibratedPlan], allow_uncertified: bool = False) -> str:
    """Declare every party's part of one run on the project ledger as a batch (``Ledger.commit``): the parts
    compose non-adaptively there, as the plan was calibrated, and the whole run counts from now on. Refused
    before anything is read if the run does not fit what remains."""
    if not allow_uncertified:
        bad = [n for part in parts.values() for n, node in part.nodes.items() if node.status.value != "certified"]
        if bad:
            from ..errors import UncertifiedPlanError

            raise UncertifiedPlanError(f"nodes without a certified guarantee: {', '.join(bad)}; pass allow_uncertified=True")
    return project.commit(list(parts.values()))


def _inbox(action: Action, mailbox: Mapping[str, PartyMessage]) -> dict[str, PartyMessage]:
    box = {}
    for mid in action.reads:
        if mid not in mailbox:
            raise PrivsdrError(f"action {action.step} of {action.party!r} reads message {mid}, which was never sent")
        message = mailbox[mid]
        if action.party not in message.recipients:
            raise PrivsdrError(f"action {action.step} of {action.party!r} reads message {mid}, which was not sent to it")
        box[mid] = message
    return box


def compose(charges: Sequence[Charge], delta_cap: float) -> dict[str, dict[str, float] | None]:
    """The per-record cost of ``charges`` under each accountant (None where one does not apply)."""
    out: dict[str, dict[str, float] | None] = {}
    for name in ACCOUNTANTS:
        try:
            out[name] = make_accountant(name, delta_cap).cost(charges).to_dict() if charges else Cost.zero().to_dict()
        except Exception:  # noqa: BLE001 - an accountant that cannot compose these events is "not applicable"
            out[name] = None
    return out


def revealed_entry(m: PartyMessage, status: str) -> dict[str, Any]:
    """One row of "what each party revealed to whom": the message, its releases (nodes), ``status``, array shapes, bytes."""
    return {"stage": m.stage, "from": m.sender, "to": list(m.recipients), "kind": m.kind, "message": m.id,
            "nodes": list(m.nodes), "status": status, "arrays": {k: list(v.shape) for k, v in m.arrays.items()},
            "payload_bytes": m.payload_bytes}


def privacy_summary(calibrated: CalibratedPlan, parts: Mapping[str, CalibratedPlan], sessions: Mapping[str, PartySession],
                    messages: Sequence[PartyMessage], reports: Mapping[str, PrivacyReport], budget: Budget,
                    coverage: str | None = None) -> dict[str, Any]:
    """What each party revealed to whom, each party's cost, the per-record composition, and what it covers."""
    charged = {n for s in sessions.values() for n in s.charged}
    charges = [c for part in parts.values() for c in part.charges() if c.label in charged]  # what the parties ran
    statuses = [Status(r.status) for r in reports.values()]
    status = Status.worst(statuses).value if statuses else "certified"
    relation = calibrated.relation
    node_status = {n: node.status.value for n, node in calibrated.nodes.items()}
    revealed = [revealed_entry(m, m.meta.get("status") or (Status.worst([Status(node_status[n]) for n in m.nodes]).value
                                                           if m.nodes else "post-processing")) for m in messages]
    per_party = {}
    for name, report in reports.items():
        eps, delta = report.spent
        per_party[name] = {"epsilon": eps, "delta": delta, "status": report.status, "accountant": report.accountant.get("name"),
                           "nodes_released": [n.name for n in report.nodes if n.released],
                           "sent_bytes": sum(m.payload_bytes for m in messages if m.sender == name)}
    scoped = any(not c.scope.is_whole for c in charges)
    composition = ("parallel across the parties' disjoint scopes, sequential within a party" if scoped else
                   "sequential over every party's releases (a record's row spans all parties)")
    infinite = budget.is_infinite
    return {
        "status": status,
        "relation": relation.value,
        "standard_dp": relation.standard,
        "per_record": compose(charges, budget.delta if not infinite else 0.0) if not infinite else None,
        "budget": None if infinite else {"epsilon": budget.epsilon, "delta": budget.delta},
        "composition": composition,
        "per_party": per_party,
        "revealed": revealed,
        "coverage": coverage,
    }


def format_revealed(privacy: Mapping[str, Any]) -> str:
    """A Markdown table of what each party sent to whom."""
    lines = ["| stage | from | to | kind | releases (nodes) | status | arrays | bytes |", "|---|---|---|---|---|---|---|---|"]
    for r in privacy["revealed"]:
        arrays = ", ".join(f"{k} {tuple(v)}" for k, v in r["arrays"].items())
        nodes = ", ".join(r["nodes"]) or ("post-processing only" if r["status"] == "post-processing" else "—")
        lines.append(f"| {r['stage']} | {r['from']} | {', '.join(r['to'])} | {r['kind']} | {nodes} | {r['status']} | {arrays} | {r['payload_bytes']} |")
    return "\n".join(lines)


def per_record_line(privacy: Mapping[str, Any]) -> str:
    """One sentence: the per-record guarantee composed over every party (or why there is none)."""
    if privacy["per_record"] is None:
        return "noise off (budget epsilon = inf): no privacy guarantee"
    costs = {k: v for k, v in privacy["per_record"].items() if v is not None}
    name = min(costs, key=lambda k: costs[k]["epsilon"])
    best = costs[name]
    kind = "DP" if privacy["standard_dp"] else "LSDP (not standard DP)"
    eps = best["epsilon"]
    covers = f" -- it covers {privacy['coverage']}" if privacy.get("coverage") else ""
    return (f"{privacy['status'].upper()}: per record ({eps:.4g}, {best['delta']:.3g})-{kind} under {name!r}, "
            f"{privacy['relation']}; {privacy['composition']}{covers}" if math.isfinite(eps) else
            f"{privacy['status'].upper()}: no finite guarantee ({privacy['relation']})")
