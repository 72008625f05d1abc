"""Plans: the DAG of release nodes of one algorithm, built from public parameters only.

A node names its mechanism, declared sensitivity, budget share (a relative ``weight``, an absolute
``share``, or a ``noise_multiplier``), the data scope it reads, its parents (earlier outputs it may
use) and its guarantee status. ``Plan.allocate(budget)`` turns weights into noise, so the total cost
is known before any data is read; ``tight=True`` then rescales all weighted noise by one global
factor so that the composed cost under the chosen accountant meets the budget.

A ``data_dependent`` node (status ``none``) draws real noise whose scale a published method reads
off the private data (e.g. edPLS's per-iteration row norms): no DP guarantee holds, but it is
charged the events of its published calibration, so the ledger and the report show what the
published claim would cost if it held (a ``non_private`` node, by contrast, is charged nothing).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..accounting import Accountant, BasicAccountant, Budget, Charge, Cost, Relation, Scope, Status, make_accountant
from ..accounting.budget import as_budget
from ..accounting.events import ApproxEvent, Event, NonPrivateEvent, PureEvent
from ..accounting.rounding import sum_up
from ..errors import PlanError, ValidationError
from ..mechanisms import Mechanism, NoiseSpec, Sensitivity, get_mechanism
from ..mechanisms.search import smallest_fitting_factor
from ..mechanisms.secure import check_sampler


@attrs.frozen
class Partition:
    """A public, data-independent partition of the records into named cells.

    ``stable=True`` means the same name denotes the same cells in every run on this ledger
    (e.g. federated sites); otherwise the ledger treats each run's partition as new.
    ``rows=True``: the cells are sets of row indices of the data a run reads (an init part, batches);
    the run is given them (``Run(row_cells=...)``) and a node charged to a cell must say which rows its
    value reads (``release(..., rows=idx)``): rows outside the cell it is charged to are refused.
    """

    name: str
    cells: tuple[str, ...]
    stable: bool = False
    rows: bool = False

    def public_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        if not self.rows:
            del data["rows"]  # plans without row partitions keep their hashes
        return data


@attrs.frozen
class Node:
    name: str
    mechanism: str
    sensitivity: Sensitivity
    weight: float | None = None
    share: Budget | None = None
    noise_multiplier: float | None = None
    delta: float | None = None
    calibration: str | None = None
    scope: Scope = attrs.field(factory=Scope.whole)
    parents: tuple[str, ...] = ()
    status: Status = Status.CERTIFIED
    params: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    description: str = ""
    adaptive: bool = False
    data_dependent: bool = False

    def public_dict(self) -> dict[str, Any]:
        extra = {"data_dependent": True} if self.data_dependent else {}  # keeps other plans' hashes unchanged
        return {**extra,
            "name": self.name,
            "mechanism": self.mechanism,
            "sensitivity": self.sensitivity.to_dict(),
            "weight": self.weight,
            "share": None if self.share is None else list(self.share),
            "noise_multiplier": self.noise_multiplier,
            "delta": self.delta,
            "calibration": self.calibration,
            "scope": self.scope.to_list(),
            "parents": list(self.parents),
            "status": self.status.value,
            "params": {k: v for k, v in self.params.items()},
            "adaptive": self.adaptive,
        }


#: what a converted plan's public parameters say (``Plan.converted``)
CONVERSION = "add_remove -> replace_one: every sensitivity x 2 (a replacement is a removal and an addition)"


class Plan:
    """A DAG of release nodes; build it from public parameters, then ``allocate`` a budget."""

    def __init__(self, name: str, relation: Relation | str = Relation.REPLACE_ONE, public_params: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.relation = Relation.parse(relation)
        self.public_params = dict(public_params or {})
        self.nodes: dict[str, Node] = {}
        self.partitions: dict[str, Partition] = {}
        #: (name, relation, params JSON), nodes, partitions, hash: ``plan_hash``'s memo
        self._hash_memo: tuple[tuple[str, Relation, str], tuple[Node, ...], tuple[Partition, ...], str] | None = None

    def partition(self, name: str, cells: Iterable[object], *, stable: bool = False, within: Scope | None = None,
                  rows: bool = False) -> list[Scope]:
        """Declare a public partition and return the scope of each cell (inside ``within``). ``rows=True``: a
        partition of the data's rows by index, whose cells each run is given (see ``Partition``)."""
        names = tuple(str(c) for c in cells)
        if not names or len(set(names)) != len(names):
            raise PlanError(f"partition {name!r} needs distinct cells")
        if name in self.partitions:
            raise PlanError(f"partition {name!r} declared twice")
        self.partitions[name] = Partition(name, names, stable, rows)
        base = within or Scope.whole()
        return [base.cell(name, c) for c in names]

    def add(
        self,
        name: str,
        mechanism: str,
        sensitivity: Sensitivity,
        *,
        weight: float | None = None,
        share: Budget | tuple[float, float] | None = None,
        noise_multiplier: float | None = None,
        delta: float | None = None,
        calibration: str | None = None,
        scope: Scope | None = None,
        parents: Sequence[str] = (),
        status: Status | str = Status.CERTIFIED,
        params: Mapping[str, Any] | None = None,
        description: str = "",
        adaptive: bool = False,
        data_dependent: bool = False,
    ) -> Node:
        """Add a release node. Exactly one of ``weight`` (default 1), ``share`` or ``noise_multiplier``.

        ``adaptive=True``: the sensitivity *value* is computed at release time from public
        parameters and parent outputs (``run.release(name, value, sensitivity=...)``); the declared
        ``sensitivity`` gives its norm, relation and derivation. The node's privacy cost depends only
        on its noise multiplier, which the plan fixes, so adaptive composition still applies.

        ``data_dependent=True`` (status ``none``, implies ``adaptive``): the sensitivity value given
        at release is read off the private data, as a published method does; no guarantee holds,
        and the node is charged its published calibration's events (see the module docstring).
        """
        if name in self.nodes:
            raise PlanError(f"node {name!r} already in plan {self.name!r}")
        mech = get_mechanism(mechanism)
        mech.check_sensitivity(sensitivity)
        if sensitivity.relation != self.relation:
            raise PlanError(f"node {name!r} declares a {sensitivity.relation.value!r} sensitivity in a {self.relation.value!r} plan")
        given = [x is not None for x in (weight, share, noise_multiplier)]
        if sum(given) > 1:
            raise PlanError(f"node {name!r}: give one of weight, share, noise_multiplier")
        if not any(given) and mechanism != "non_private":
            weight = 1.0
        if weight is not None and not (math.isfinite(weight) and weight > 0):
            raise PlanError(f"node {name!r}: weight must be positive and finite")
        status = Status(status)
        if status == Status.CERTIFIED and not self.relation.standard:
            raise PlanError(f"node {name!r}: the {self.relation.value!r} relation is not standard DP; its nodes can only be claimed")
        if status == Status.CLAIMED and share is None:
            raise PlanError(f"claimed node {name!r} needs the published (epsilon, delta) as its share")
        if data_dependent:
            if status != Status.NONE or mechanism == "non_private":
                raise PlanError(f"data-dependent node {name!r} must have status 'none' and a noise mechanism")
            adaptive = True
        elif (status == Status.NONE) != (mechanism == "non_private"):
            raise PlanError(f"node {name!r}: status 'none' goes with mechanism 'non_private' (or data_dependent=True) and only with it")
        unknown = [p for p in parents if p not in self.nodes]
        if unknown:
            raise PlanError(f"node {name!r} has unknown parents {unknown} (add parents first: the plan is a DAG)")
        scope = scope or Scope.whole()
        for partition, cell in scope.constraints:
            if partition not in self.partitions or cell not in self.partitions[partition].cells:
                raise PlanError(f"node {name!r} reads {partition}[{cell}], which no declared partition has")
        if adaptive and (calibration == "modsulq" or mechanism in ("opaque", "non_private")):
            raise PlanError(f"node {name!r}: adaptive sensitivities need a calibration that does not depend on the value")
        node = Node(
            name, mechanism, sensitivity, weight, None if share is None else as_budget(share), noise_multiplier, delta,
            calibration, scope, tuple(parents), status, dict(params or {}), description, adaptive, data_dependent,
        )
        self.nodes[name] = node
        return node

    def public_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "relation": self.relation.value,
            "public_params": self.public_params,
            "partitions": [p.public_dict() for p in self.partitions.values()],
            "nodes": [n.public_dict() for n in self.nodes.values()],
        }

    def plan_hash(self) -> str:
        """sha256 of the plan's public JSON (sorted keys), first 16 hex digits. Every run prices, journals and reports it
        several times, so it is memoised on what it reads: the name, the relation, the public parameters (their JSON,
        recomputed each call: they may hold mutable lists) and the node and partition objects themselves (frozen; a node
        replaced in ``nodes`` is another object, so the hash is computed again)."""
        params = json.dumps(self.public_params, sort_keys=True, default=str)
        nodes, partitions = tuple(self.nodes.values()), tuple(self.partitions.values())
        memo: tuple[tuple[str, Relation, str], tuple[Node, ...], tuple[Partition, ...], str] | None = getattr(
            self, "_hash_memo", None)  # (a plan pickled before the memo existed has none)
        if (memo is not None and memo[0] == (self.name, self.relation, params) and _same_objects(memo[1], nodes)
                and _same_objects(memo[2], partitions)):
            return memo[3]
        text = json.dumps(self.public_dict(), sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        self._hash_memo = ((self.name, self.relation, params), nodes, partitions, digest)
        return digest

    # -- allocation ---------------------------------------------------------------------------------
    def converted(self, relation: Relation | str) -> Plan:
        """This plan under another neighbouring relation, where a sound conversion exists.

        add/remove -> replace-one: a replacement is a removal followed by an addition, so for any query
        ||f(D') - f(D)|| <= ||f(D') - f(D - x)|| + ||f(D - x) - f(D)|| <= 2 Delta (triangle inequality): every node's
        sensitivity is doubled and the plan then calibrates and composes under replace-one like any other (one journal
        for every method of a data set). The reverse needs n public and is refused, as are plans with row partitions
        (a replacement may move a record between cells) and data-dependent nodes (their sensitivity is read at run
        time)."""
        target = Relation.parse(relation)
        if target == self.relation:
            return self
        if not (self.relation == Relation.ADD_REMOVE and target == Relation.REPLACE_ONE):
            raise PlanError(f"plan {self.name!r} uses the {self.relation.value!r} relation and cannot be converted to "
                            f"{target.value!r}: only add/remove plans convert (to replace-one, sensitivities x 2)")
        if self.partitions or any(n.data_dependent or n.scope != Scope.whole() for n in self.nodes.values()):
            raise PlanError(f"plan {self.name!r} has partitioned or data-dependent nodes: it cannot be converted to "
                            f"{target.value!r}")
        out = Plan(self.name, target, {**self.public_params, "relation_conversion": CONVERSION})
        for name, node in self.nodes.items():
            s = node.sensitivity
            doubled = Sensitivity(2.0 * s.value, s.norm, target, f"{s.derivation}; x 2 under replace-one (a replacement is "
                                                                    "a removal and an addition)")
            out.nodes[name] = attrs.evolve(node, sensitivity=doubled)
        return out

    def allocate(self, budget: Budget | tuple[float, float], *, accountant: str | Accountant | None = None, tight: bool = False,
                 sampler: str = "numpy") -> CalibratedPlan:
        """Give every node its noise so that the plan costs at most ``budget``.

        Weighted nodes share what the fixed nodes (``share``/``noise_multiplier``) leave, in
        proportion to their weights along the worst path of one record (disjoint scopes each get
        the full share). With ``tight=True`` all weighted, scalable noise is then multiplied by the
        smallest common factor for which the plan still fits ``budget`` under ``accountant``.
        ``sampler="secure"``: every Gaussian/Laplace node draws exact discrete noise (``mechanisms.secure``)
        and is priced as such; other mechanisms keep numpy sampling (each node's spec says which ran).
        """
        budget = as_budget(budget)
        check_sampler(sampler)
        if not self.nodes:
            raise PlanError(f"plan {self.name!r} has no nodes")
        specs: dict[str, NoiseSpec] = {}
        fixed = [n for n in self.nodes.values() if n.weight is None]
        for node in fixed:
            specs[node.name] = self._fixed_spec(node, budget, sampler)
        weighted = [n for n in self.nodes.values() if n.weight is not None]
        if weighted:
            specs.update(self._weighted_specs(weighted, fixed, specs, budget, sampler))
        plan = CalibratedPlan(self, specs, budget, "shares", pricing=accountant)
        if tight and not budget.is_infinite and any(self._scalable(n) for n in weighted):
            # the plan alone must meet *its* budget, so the accountant reads at the plan's delta here
            plan = _tighten(plan, make_accountant(accountant or "best", budget.delta).retarget(budget.delta), budget)
        return plan

    @staticmethod
    def _scalable(node: Node) -> bool:
        return node.weight is not None and get_mechanism(node.mechanism).scalable and node.status == Status.CERTIFIED

    def _fixed_spec(self, node: Node, budget: Budget, sampler: str = "numpy") -> NoiseSpec:
        mech = get_mechanism(node.mechanism)
        if budget.is_infinite and node.mechanism != "non_private":
            return _calibrate(mech, sampler, node.sensitivity, Budget.infinite(), node.calibration, node.params)
        if node.share is not None:
            return _calibrate(mech, sampler, node.sensitivity, node.share, node.calibration, node.params)
        if node.noise_multiplier is not None:
            if sampler in mech.samplers and sampler != "numpy":
                return mech.from_noise_multiplier(node.sensitivity, node.noise_multiplier, node.delta or 0.0, node.params, sampler=sampler)
            return mech.from_noise_multiplier(node.sensitivity, node.noise_multiplier, node.delta or 0.0, node.params)
        return mech.calibrate(node.sensitivity, Budget.infinite(), node.calibration, node.params)  # non_private

    def _weighted_specs(self, weighted: list[Node], fixed: list[Node], fixed_specs: dict[str, NoiseSpec], budget: Budget,
                        sampler: str = "numpy") -> dict[str, NoiseSpec]:
        if budget.is_infinite:
            return {
                n.name: _calibrate(get_mechanism(n.mechanism), sampler, n.sensitivity, Budget.infinite(), n.calibration, n.params)
                for n in weighted
            }
        basic = BasicAccountant()
        fixed_cost = basic.cost([_charge(n, fixed_specs[n.name], self.relation) for n in fixed]) if fixed else Cost.zero()
        eps_left = budget.epsilon - fixed_cost.epsilon
        delta_left = budget.delta - fixed_cost.delta
        if not eps_left > 0:
            raise ValidationError(f"the fixed nodes of plan {self.name!r} already use the whole epsilon budget")
        # Normalisers: the largest total weight one record can be exposed to (disjoint scopes -> max).
        eps_norm = _worst_weight(weighted, self.relation, lambda n: True)
        delta_norm = _worst_weight(weighted, self.relation, lambda n: not get_mechanism(n.mechanism).pure)
        takes_delta = [not get_mechanism(n.mechanism).pure and delta_left > 0 for n in weighted]
        eps_shares = _shares_within(weighted, [eps_left * _weight(n) / eps_norm for n in weighted], eps_left, self.relation)
        delta_shares = _shares_within(
            weighted, [delta_left * _weight(n) / delta_norm if t else 0.0 for n, t in zip(weighted, takes_delta, strict=True)],
            max(delta_left, 0.0), self.relation,
        )
        return {
            n.name: _calibrate(get_mechanism(n.mechanism), sampler, n.sensitivity, Budget(e, d), n.calibration, n.params)
            for n, e, d in zip(weighted, eps_shares, delta_shares, strict=True)
        }


def _same_objects(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """The same objects in the same order (identity, not equality: a frozen node's hash is read once)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _weight(node: Node) -> float:
    """The weight of a node of the weighted group (it holds only nodes that have one)."""
    assert node.weight is not None
    return node.weight


def _calibrate(mech: Mechanism, sampler: str, sensitivity: Sensitivity, share: Budget, calibration: str | None,
               params: Mapping[str, Any]) -> NoiseSpec:
    """``mech.calibrate(...)`` with the sampler when the mechanism implements it (custom mechanisms
    that predate samplers are called as before and sample with numpy)."""
    if sampler != "numpy" and sampler in getattr(mech, "samplers", ()):
        return mech.calibrate(sensitivity, share, calibration, params, sampler=sampler)
    return mech.calibrate(sensitivity, share, calibration, params)


def _worst_path(nodes: list[Node], values: list[float], relation: Relation) -> float:
    """The largest exact sum (rounded up) of ``values`` over the nodes one record can meet: basic composition of pure
    events, each node's value its epsilon, across the plan's scopes. When every node reads every record, that is the
    exact sum of all of them (``rounding.sum_up``, what the basic accountant computes for one atom), with no charges."""
    if all(n.scope.is_whole for n in nodes):
        return sum_up([float(v) for v in values]) if values else 0.0
    charges = [Charge(n.name, (PureEvent(v),), relation, n.scope) for n, v in zip(nodes, values, strict=True)]
    return BasicAccountant().cost(charges).epsilon if charges else 0.0


def _shares_within(nodes: list[Node], shares: list[float], total: float, relation: Relation) -> list[float]:
    """Round the shares down together until, on every path of one record, their exact sum <= total."""
    def worst(values: list[float]) -> float:
        kept = [(n, v) for n, v in zip(nodes, values, strict=True) if v > 0]
        return _worst_path([n for n, _ in kept], [v for _, v in kept], relation)

    while worst(shares) > total:
        shares = [math.nextafter(v, 0.0) for v in shares]
    return shares


def _worst_weight(nodes: list[Node], relation: Relation, include: Callable[[Node], bool]) -> float:
    kept = [n for n in nodes if include(n)]
    return _worst_path(kept, [_weight(n) for n in kept], relation) if kept else 1.0


def _charge(node: Node, spec: NoiseSpec, relation: Relation) -> Charge:
    if node.status == Status.CLAIMED:
        assert node.share is not None
        events: tuple[Event, ...] = (ApproxEvent(*node.share),)
    elif node.status == Status.NONE and not node.data_dependent:
        events = (NonPrivateEvent(),)
    else:
        events = get_mechanism(node.mechanism).events(spec)
    return Charge(node.name, events, relation, node.scope, node.status)


@functools.lru_cache(maxsize=4096)
def _interned(charge: Charge) -> Charge:
    """The one object equal to ``charge`` that an earlier plan produced (the cache's key is equal, its value that
    object), or ``charge`` itself: fits of one plan shape then hold the same objects, so the accountants' memo, keyed
    by tuples of charges, compares them by identity instead of field by field (bounded, least recently used out)."""
    return charge


class CalibratedPlan:
    """A plan whose every node has its noise: it can be priced (``charges``) and executed."""

    def __init__(self, plan: Plan, specs: Mapping[str, NoiseSpec], budget: Budget, allocation: str,
                 pricing: str | Accountant | None = None) -> None:
        self.plan = plan
        self.specs = dict(specs)
        self._charges_memo: tuple[Relation, tuple[Node, ...], tuple[NoiseSpec, ...], list[Charge]] | None = None
        self.budget = budget
        self.allocation = allocation
        self.pricing = pricing  #: the accountant the plan was calibrated for (a ledger's, when allocated for one)
        #: set by an estimator whose accuracy can be forecast from public parameters (``forecast``)
        self.forecaster: Callable[..., Any] | None = None

    def forecast(self, **options: Any) -> Any:
        """The estimator's expected accuracy at this plan's public parameters, before any data is read (issue 24:
        ``privsdr.algorithms.forecast``); ``options`` go to the estimator's forecaster (e.g. ``signal``, ``reps``)."""
        if self.forecaster is None:
            from ..errors import ValidationError

            raise ValidationError(f"plan {self.name!r} has no accuracy forecast yet (the certified AdaSSPRegression, DPPLS, DPSIR, SparseDPSIR and DPBCDRegression have one)")
        return self.forecaster(**options)

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def relation(self) -> Relation:
        return self.plan.relation

    @property
    def nodes(self) -> dict[str, Node]:
        return self.plan.nodes

    @property
    def local_partitions(self) -> list[str]:
        return [p.name for p in self.plan.partitions.values() if not p.stable]

    @property
    def status(self) -> Status:
        return Status.worst([n.status for n in self.nodes.values()])

    @property
    def sampler(self) -> str:
        """``secure`` if any node draws exact discrete noise, else ``numpy``."""
        return "secure" if any(spec.secure for spec in self.specs.values()) else "numpy"

    def charges(self) -> list[Charge]:
        """Each node's charge (its mechanism's events for its spec). Memoised on the node and spec objects and the
        relation, so that a run's reservation, its report and the accountants' memo all see the same ``Charge`` objects."""
        nodes, specs = tuple(self.nodes.values()), tuple(self.specs.values())
        memo = getattr(self, "_charges_memo", None)  # (a plan pickled before the memo existed has none)
        if memo is None or memo[0] is not self.relation or not (_same_objects(memo[1], nodes) and _same_objects(memo[2], specs)):
            memo = (self.relation, nodes, specs, [_interned(_charge(n, self.specs[n.name], self.relation)) for n in nodes])
            self._charges_memo = memo
        return list(memo[3])

    def cost(self, accountant: str | Accountant | None = None) -> Cost:
        """What the plan alone costs (no ledger, nothing spent).

        Without an argument: under the accountant the plan was calibrated for -- for an estimator's
        ``plan(n, p)`` that is its ledger's, so this is exactly what the ledger will charge. A name prices
        it at the plan's own delta; an accountant instance (``ledger.accountant``) as that accountant does.
        """
        chosen = self.pricing if accountant is None else accountant
        return make_accountant(chosen or "best", self.budget.delta).cost(self.charges())

    def with_factor(self, factor: float) -> CalibratedPlan:
        specs = {
            name: spec.scaled(factor) if Plan._scalable(self.nodes[name]) else spec for name, spec in self.specs.items()
        }
        return CalibratedPlan(self.plan, specs, self.budget, f"tight(x{factor:.6g})", self.pricing)

    def __repr__(self) -> str:
        return f"CalibratedPlan({self.name!r}, nodes={list(self.nodes)}, allocation={self.allocation!r})"


_TIGHT_FACTORS: dict[tuple[Any, ...], float] = {}


def _tighten(plan: CalibratedPlan, accountant: Accountant, budget: Budget, rel_tol: float = 1e-4) -> CalibratedPlan:
    """Smallest common noise factor f with cost(f) within budget (bisection in log f, feasible end).

    The factor depends only on public quantities (the plan, the budget, the accountant), so it is
    memoised: repeated fits of one plan shape calibrate once.
    """
    from ..accounting.accountants import _memo_parameters  # the accountant's parameters as a tuple (cheaper than a repr)

    parameters = _memo_parameters(accountant)
    if parameters is None:  # not a built-in accountant: its answers may depend on anything it holds, so no memo
        return plan.with_factor(_bisect_factor(plan, accountant, budget, rel_tol))
    key = (plan.plan.plan_hash(), budget.epsilon, budget.delta, type(accountant).__name__, parameters,
           accountant.target_delta, plan.sampler)
    if key not in _TIGHT_FACTORS:
        _TIGHT_FACTORS[key] = _bisect_factor(plan, accountant, budget, rel_tol)
    return plan.with_factor(_TIGHT_FACTORS[key])


def _bisect_factor(plan: CalibratedPlan, accountant: Accountant, budget: Budget, rel_tol: float) -> float:
    """The smallest feasible factor to ``rel_tol``, by the one calibration search (``mechanisms.search``); a PLD
    composition of a mixed plan costs ~10-50 ms (a Gaussian's distribution on a 10^5-point grid), so each cost is
    computed once. The charges at f are ``plan.with_factor(f).charges()``, built without the intermediate plan."""
    cache: dict[float, Cost] = {}
    relation = plan.relation
    nodes = [(node, plan.specs[node.name], Plan._scalable(node)) for node in plan.nodes.values()]

    def cost(f: float) -> Cost:
        if f not in cache:
            cache[f] = accountant.cost([_charge(node, spec.scaled(f) if scalable else spec, relation) for node, spec, scalable in nodes])
        return cache[f]

    def fits(f: float) -> bool:
        return cost(f).fits_within(budget)

    def excess(f: float) -> float:
        """log(eps(f) / eps_B), +inf when the delta does not fit: negative exactly where f fits on epsilon."""
        c = cost(f)
        if c.delta > budget.delta or c.epsilon <= 0 or not math.isfinite(c.epsilon):
            return math.inf if c.delta > budget.delta or not math.isfinite(c.epsilon) else -math.inf
        return math.log(c.epsilon / budget.epsilon)

    factor = smallest_fitting_factor(fits, excess, rel_tol)
    if math.isinf(factor):
        raise ValidationError(f"plan {plan.name!r} cannot meet its budget under {accountant.name!r} at any noise level")
    return factor
