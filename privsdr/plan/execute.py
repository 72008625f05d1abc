"""Executing a calibrated plan against a ledger.

``Run`` reserves the whole plan on entry (preflight; nothing spent if it does not fit), then for
each ``release(name, value)``: validates the value, charges the node (write-ahead), and only then
draws the noise. Each node draws from its own generator spawned from one ``SeedSequence``, so the
noise does not depend on release order. On exit the nodes never released are returned to the
ledger and the run's ``PrivacyReport`` is built.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any, Callable, Mapping

import attrs
import numpy as np

from .._version import __version__
from ..accounting import Accountant, AdvancedAccountant, BasicAccountant, Charge, Cost, Ledger, PldAccountant, RdpAccountant, Status
from ..accounting.accountants import default_slack
from ..errors import PlanError
from ..mechanisms import Sensitivity, get_mechanism
from ..report import NodeReport, PrivacyReport
from .graph import CalibratedPlan


@attrs.frozen
class Release:
    """A query result plus release options (e.g. ``shape=`` for the shaped Gaussian)."""

    value: Any
    options: Mapping[str, Any] = attrs.field(factory=dict)


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
    ) -> None:
        self.plan = plan
        self.ledger = ledger
        self.random_state = random_state
        self.allow_uncertified = allow_uncertified
        self.data_shape = None if data_shape is None else [int(x) for x in data_shape]
        self.algorithm = algorithm or plan.name
        self.notes = list(notes or [])
        self.outputs: dict[str, Any] = {}
        self.runtime_specs: dict[str, Any] = {}
        self.report: PrivacyReport | None = None
        self._reservation = None
        self._rngs: dict[str, np.random.Generator] = {}

    def __enter__(self) -> "Run":
        # everything that can fail on the caller's input happens before the reservation
        self._rngs = dict(zip(self.plan.nodes, _spawn(self.random_state, len(self.plan.nodes))))
        self._before = self.ledger.remaining
        self._started = _utc_now()
        self._reservation = self.ledger.reserve(self.plan, allow_uncertified=self.allow_uncertified)
        return self

    def release(self, name: str, value: Any, **options: Any) -> Any:
        """Charge node ``name`` and release ``value`` with its noise."""
        if self._reservation is None or self._reservation.closed:
            raise PlanError("release() outside an open run (use `with Run(...) as run:`)")
        if name not in self.plan.nodes:
            raise PlanError(f"plan {self.plan.name!r} has no node {name!r}")
        if name in self.outputs:
            raise PlanError(f"node {name!r} was already released in this run")
        missing = [p for p in self.plan.nodes[name].parents if p not in self.outputs]
        if missing:
            raise PlanError(f"node {name!r} needs its parents released first: {missing}")
        spec = self._spec_for(name, options.pop("sensitivity", None))
        mech = get_mechanism(spec.mechanism)
        prepared = mech.prepare(value, spec, **options)
        self._reservation.charge(name)  # write-ahead: charged before the noise exists
        out = mech.sample(prepared, spec, self._rngs[name], **options)
        self.outputs[name] = out
        return out

    def _spec_for(self, name: str, sensitivity: float | None) -> Any:
        """The node's noise spec; for adaptive nodes, with the sensitivity value given at release."""
        spec, node = self.plan.specs[name], self.plan.nodes[name]
        if not node.adaptive:
            if sensitivity is not None:
                raise PlanError(f"node {name!r} has a fixed sensitivity; only adaptive nodes take sensitivity=")
            return spec
        if sensitivity is None:
            raise PlanError(f"adaptive node {name!r} needs sensitivity= at release")
        declared = spec.sensitivity
        runtime = attrs.evolve(spec, sensitivity=Sensitivity(float(sensitivity), declared.norm, declared.relation, declared.derivation))
        self.runtime_specs[name] = runtime
        return runtime

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._reservation is not None
        try:
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
            self._reservation.close(summary if self.report is not None else {"failed": True})


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
    slack = getattr(ledger.accountant, "slack", None)
    if slack is None:
        slack = default_slack(ledger.budget.delta)
    accountants: list[Accountant] = [BasicAccountant(), AdvancedAccountant(slack), RdpAccountant(), PldAccountant()]
    out: dict[str, dict[str, float] | None] = {}
    for acc in accountants:
        try:
            out[acc.name] = acc.cost(charges).to_dict() if charges else Cost.zero().to_dict()
        except Exception:  # an accountant that cannot compose these events is "not applicable"
            out[acc.name] = None
    return out


def _status_line(status: Status, spent: Cost, accountant: str, relation: str, infinite: bool, nodes: list[str],
                 data_dependent: list[str] | None = None) -> str:
    if infinite:
        return f"NON-PRIVATE BASELINE: budget epsilon = inf, noise switched off ({relation})"
    guarantee = f"(epsilon={spent.epsilon:.4g}, delta={spent.delta:.3g})-DP under the {accountant!r} accountant, {relation}"
    if status == Status.CERTIFIED:
        return f"CERTIFIED: {guarantee}"
    if status == Status.CLAIMED:
        return f"CLAIMED, NOT CERTIFIED: {guarantee} holds only if the published claims of {', '.join(nodes)} hold"
    if data_dependent:
        return (f"NOT PRIVATE: {_names(nodes)} release data without a DP guarantee ({_names(data_dependent)} scale "
                f"their noise by quantities read off the private data); the totals, {guarantee}, price the published "
                "per-release calibration as if it held: what the published claim costs, not a guarantee")
    return f"NOT PRIVATE: {', '.join(nodes)} release data without a DP guarantee; the totals cover the other nodes only"


def _names(names: list[str], shown: int = 6) -> str:
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[:shown])}, ... ({len(names)} nodes)"


def _adaptive_note(node: Any) -> str:
    if node.data_dependent:
        return " [sensitivity read off the PRIVATE data at release: no DP guarantee]"
    return " [sensitivity computed at release from public parameters and parent outputs]" if node.adaptive else ""


def build_report(run: Run) -> PrivacyReport:
    plan, ledger = run.plan, run.ledger
    assert run._reservation is not None
    charged = run._reservation.charged
    charged_names = {c.label for c in charged}
    spent = ledger.cost_of(charged)
    status = Status.worst([c.status for c in charged]) if charged else Status.CERTIFIED
    uncertified = [c.label for c in charged if c.status != Status.CERTIFIED]
    basic = BasicAccountant()
    nodes = []
    for charge in plan.charges():
        node = plan.nodes[charge.label]
        spec = run.runtime_specs.get(charge.label, plan.specs[charge.label])
        nodes.append(
            NodeReport(
                name=node.name,
                mechanism=node.mechanism,
                status=node.status.value,
                calibration=spec.calibration,
                sensitivity=spec.sensitivity.to_dict(),
                noise_multiplier=spec.noise_multiplier,
                noise_scale=spec.scale,
                cost=basic.compose(list(charge.events)).to_dict(),
                scope=str(node.scope),
                parents=list(node.parents),
                share=None if spec.share is None else {"epsilon": spec.share.epsilon, "delta": spec.share.delta},
                params=dict(spec.params),
                released=node.name in charged_names,
                description=node.description + _adaptive_note(node),
            )
        )
    versions = {"privsdr": __version__, "numpy": np.__version__}
    try:
        from importlib.metadata import version

        versions["dp-accounting"] = version("dp-accounting")
    except Exception:  # pragma: no cover - metadata missing in odd installs
        pass
    return PrivacyReport(
        status=status.value,
        status_line=_status_line(status, spent, ledger.accountant.name, plan.relation.value, plan.budget.is_infinite, uncertified,
                                 [c.label for c in charged if plan.nodes[c.label].data_dependent]),
        algorithm=run.algorithm,
        algorithm_version=__version__,
        run_id=run._reservation.run_id,
        plan_hash=plan.plan.plan_hash(),
        relation=plan.relation.value,
        public_parameters=dict(plan.plan.public_params),
        data_shape=run.data_shape,
        budget={
            "total": ledger.budget.as_cost().to_dict(),
            "requested": plan.budget.as_cost().to_dict(),
            "before": Cost(*run._before).to_dict(),
            "after": ledger.remaining.to_dict(),
            "spent_by_run": spent.to_dict(),
            "allocation": plan.allocation,
        },
        accountant=ledger.accountant.to_dict(),
        totals=_totals(charged, ledger),
        nodes=nodes,
        seed_policy=seed_policy(run.random_state),
        timestamps={"started": run._started, "finished": _utc_now()},
        library_versions=versions,
        notes=run.notes,
    )
