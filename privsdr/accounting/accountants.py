"""Accountants: turn the events one record is exposed to into an (epsilon, delta) guarantee.

* ``basic``: sum of per-event (eps_i, delta_i), in exact rational arithmetic (pure eps is exact;
  dp-accounting answers eps = inf at delta = 0).
* ``advanced``: heterogeneous advanced composition with a declared slack delta' -- the better of
  Dwork-Rothblum-Vadhan (2010) and Kairouz-Oh-Viswanath (2015, Thm 3.5) -- or basic if smaller.
* ``rdp``: dp-accounting's RDP accountant (opaque (eps, delta) events added on top by basic
  composition).
* ``pld``: dp-accounting's privacy-loss-distribution accountant.
* ``best``: the minimum over the above (each is a valid upper bound).

Every accountant reports at the delta the charges themselves declare (the sum of their delta
shares), plus the slack for ``advanced``; RDP/PLD thus answer "same delta, smaller epsilon".
"""
from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from fractions import Fraction
from typing import Any, Callable, Sequence

from .budget import Cost
from .charge import Charge
from .composition import atoms
from .events import ApproxEvent, Event, GaussianEvent, LaplaceEvent, PureEvent
from .gaussian import gaussian_epsilon


def _frac_up(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _exact_sum(values: Sequence[float]) -> float:
    if any(math.isinf(v) for v in values):
        return math.inf
    return _frac_up(sum((Fraction(v) for v in values), Fraction(0)))


def _declared_delta(events: Sequence[Event]) -> float:
    return _exact_sum([e.delta for e in events if isinstance(e, (GaussianEvent, ApproxEvent))])


def _is_pure(events: Sequence[Event]) -> bool:
    return all(isinstance(e, (LaplaceEvent, PureEvent)) for e in events)


class Accountant:
    """Base class: ``cost(charges)`` = worst atom of ``compose(events)`` (parallel composition)."""

    name: str = "abstract"

    def compose(self, events: Sequence[Event]) -> Cost:  # pragma: no cover - abstract
        raise NotImplementedError

    def cost(self, charges: Sequence[Charge]) -> Cost:
        return self.cost_of_atoms(atoms(charges))

    def cost_of_atoms(self, event_sets: Sequence[Sequence[Event]]) -> Cost:
        """Componentwise worst, over the positions of one record, of the sequential composition."""
        worst_eps, worst_delta = 0.0, 0.0
        for events in event_sets:
            if not events:
                continue
            eps, delta = self.compose(events)
            worst_eps, worst_delta = max(worst_eps, eps), max(worst_delta, delta)
        return Cost(worst_eps, worst_delta)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "name")
        return f"{type(self).__name__}({params})"


class BasicAccountant(Accountant):
    name = "basic"

    def compose(self, events: Sequence[Event]) -> Cost:
        costs = [e.basic_cost() for e in events]
        return Cost(_exact_sum([c.epsilon for c in costs]), _exact_sum([c.delta for c in costs]))


def drv_epsilon(epsilons: Sequence[float], slack: float) -> float:
    """Dwork-Rothblum-Vadhan: sqrt(2 ln(1/d') sum eps_i^2) + sum eps_i (e^eps_i - 1)."""
    sq = math.fsum(e * e for e in epsilons)
    return math.sqrt(2.0 * math.log(1.0 / slack) * sq) + math.fsum(e * math.expm1(e) for e in epsilons)


def kov_epsilon(epsilons: Sequence[float], slack: float) -> float:
    """Kairouz-Oh-Viswanath (2015) Thm 3.5, heterogeneous: with t = sum eps_i tanh(eps_i/2),
    min( t + sqrt(2 S ln(e + sqrt(S)/d')),  t + sqrt(2 S ln(1/d')) ), S = sum eps_i^2."""
    sq = math.fsum(e * e for e in epsilons)
    t = math.fsum(e * math.tanh(e / 2.0) for e in epsilons)
    a = t + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / slack))
    b = t + math.sqrt(2.0 * sq * math.log(1.0 / slack))
    return min(a, b)


class AdvancedAccountant(Accountant):
    """Heterogeneous advanced composition with declared slack ``slack`` (delta').

    The advanced bound costs ``slack`` extra delta; it is used only when its total delta stays
    within ``delta_cap`` (a ledger sets the cap to its budget's delta) and its epsilon beats basic.
    """

    name = "advanced"

    def __init__(self, slack: float, delta_cap: float = math.inf) -> None:
        if not 0.0 <= slack < 1.0:
            raise ValueError(f"slack must satisfy 0 <= slack < 1, got {slack!r}")
        self.slack = float(slack)
        self.delta_cap = float(delta_cap)

    def compose(self, events: Sequence[Event]) -> Cost:
        basic = BasicAccountant().compose(events)
        if self.slack == 0.0 or math.isinf(basic.epsilon):
            return basic
        costs = [e.basic_cost() for e in events]
        eps = [c.epsilon for c in costs]
        if max(eps) > 50.0:  # e^eps overflows; advanced composition never beats basic there anyway
            return basic
        advanced = min(drv_epsilon(eps, self.slack), kov_epsilon(eps, self.slack))
        delta = _exact_sum([basic.delta, self.slack])
        if advanced >= basic.epsilon or delta > self.delta_cap:
            return basic
        return Cost(advanced, delta)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slack": self.slack, "delta_cap": self.delta_cap}


_CACHE: "OrderedDict[tuple, Cost]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4096


def merge_gaussians(events: Sequence[Event]) -> list[Event]:
    """Replace all Gaussian events by one with z = (sum z_i^-2)^(-1/2): exact, not a bound.

    The privacy loss of a Gaussian release with multiplier z is N(1/(2z^2), 1/z^2) (Balle & Wang
    2018), and independent normal losses add, so k Gaussian releases have exactly the privacy curve
    of one Gaussian with mu^2 = sum mu_i^2 (Dong, Roth & Su 2022, Cor. 3.3).
    """
    gaussians = [e for e in events if isinstance(e, GaussianEvent)]
    if len(gaussians) <= 1:
        return list(events)
    if any(g.noise_multiplier == 0 for g in gaussians):
        merged = GaussianEvent(0.0, _exact_sum([g.delta for g in gaussians]))
    else:
        mu2 = math.fsum(1.0 / (g.noise_multiplier * g.noise_multiplier) for g in gaussians)
        merged = GaussianEvent(1.0 / math.sqrt(mu2), _exact_sum([g.delta for g in gaussians]))
    return [merged] + [e for e in events if not isinstance(e, GaussianEvent)]


class _CurveAccountant(Accountant):
    """Shared logic of RDP/PLD: pure-only atoms at delta = 0 are composed exactly (basic).

    Results are memoised on the event multiset (events are frozen and hashable), so repeated fits
    of the same plan shape do not recompose their privacy-loss distributions.
    """

    def compose(self, events: Sequence[Event]) -> Cost:
        key = (repr(self.to_dict()), frozenset(Counter(events).items()))
        with _CACHE_LOCK:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                return _CACHE[key]
        cost = self._compose(events)
        with _CACHE_LOCK:
            _CACHE[key] = cost
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        return cost

    def _compose(self, events: Sequence[Event]) -> Cost:
        delta = _declared_delta(events)
        events = merge_gaussians(events)
        if any(math.isinf(e.basic_cost().epsilon) and not isinstance(e, GaussianEvent) for e in events):
            return Cost(math.inf, delta)
        if any(isinstance(e, GaussianEvent) and e.noise_multiplier == 0 for e in events):
            return Cost(math.inf, delta)
        if _is_pure(events) and delta == 0.0:
            return BasicAccountant().compose(events)
        return Cost(max(0.0, self._epsilon(events, delta)), delta)

    def _epsilon(self, events: Sequence[Event], delta: float) -> float:  # pragma: no cover
        raise NotImplementedError


class RdpAccountant(_CurveAccountant):
    name = "rdp"

    def _epsilon(self, events: Sequence[Event], delta: float) -> float:
        from dp_accounting import rdp

        opaque = [e for e in events if isinstance(e, ApproxEvent)]
        curve = [e for e in events if not isinstance(e, ApproxEvent)]
        curve_delta = delta - _exact_sum([e.delta for e in opaque])
        eps_opaque = _exact_sum([e.epsilon for e in opaque])
        if not curve:
            return eps_opaque
        if curve_delta <= 0.0:
            return math.inf
        accountant = rdp.RdpAccountant()
        for event, count in Counter(curve).items():
            accountant.compose(event.to_dp_event(), count)
        return float(accountant.get_epsilon(curve_delta)) + eps_opaque


class PldAccountant(_CurveAccountant):
    name = "pld"

    def __init__(self, value_discretization_interval: float = 1e-4) -> None:
        self.value_discretization_interval = float(value_discretization_interval)

    def _pld(self, event: Event, vdi: float) -> Any:
        from dp_accounting.pld import common, privacy_loss_distribution as pld

        if isinstance(event, GaussianEvent):
            return pld.from_gaussian_mechanism(event.noise_multiplier, sensitivity=1.0, value_discretization_interval=vdi)
        if isinstance(event, LaplaceEvent):
            return pld.from_laplace_mechanism(event.noise_multiplier, sensitivity=1.0, value_discretization_interval=vdi)
        eps, d = event.basic_cost()
        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, d), value_discretization_interval=vdi)

    def _epsilon(self, events: Sequence[Event], delta: float) -> float:
        if len(events) == 1 and isinstance(events[0], GaussianEvent):
            # one (merged) Gaussian: its privacy-loss distribution is known in closed form, so the
            # exact curve replaces the discretised one (which can only be more pessimistic)
            return gaussian_epsilon(events[0].noise_multiplier, delta)
        # The pessimistic PLD is an upper bound at any grid; keep the grid at <= ~2e4 points so that
        # large-epsilon atoms (hundreds of pure steps) stay cheap.
        basic_eps = BasicAccountant().compose(events).epsilon
        vdi = max(self.value_discretization_interval, basic_eps / 2e4) if math.isfinite(basic_eps) else self.value_discretization_interval
        total = None
        for event, count in Counter(events).items():
            dist = self._pld(event, vdi)
            if count > 1:
                dist = dist.self_compose(count)
            total = dist if total is None else total.compose(dist)
        return float(total.get_epsilon_for_delta(delta))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value_discretization_interval": self.value_discretization_interval}


class BestAccountant(Accountant):
    """Minimum epsilon over member accountants among answers whose delta stays within ``delta_cap``."""

    name = "best"

    def __init__(self, members: Sequence[Accountant], delta_cap: float = math.inf) -> None:
        if not members:
            raise ValueError("best needs at least one member accountant")
        self.members = list(members)
        self.delta_cap = float(delta_cap)

    def cost_by_member(self, charges: Sequence[Charge]) -> dict[str, Cost]:
        event_sets = atoms(charges)  # shared by every member
        return {m.name: m.cost_of_atoms(event_sets) for m in self.members}

    def choose(self, costs: dict[str, Cost]) -> tuple[str, Cost]:
        ok = {k: c for k, c in costs.items() if c.delta <= self.delta_cap} or costs
        name = min(ok, key=lambda k: (ok[k].epsilon, ok[k].delta))
        return name, ok[name]

    def cost_of_atoms(self, event_sets: Sequence[Sequence[Event]]) -> Cost:
        return self.choose({m.name: m.cost_of_atoms(event_sets) for m in self.members})[1]

    def compose(self, events: Sequence[Event]) -> Cost:
        return self.choose({m.name: m.compose(events) for m in self.members})[1]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "members": [m.to_dict() for m in self.members], "delta_cap": self.delta_cap}


ACCOUNTANT_NAMES = ("basic", "advanced", "rdp", "pld", "best")


def default_slack(budget_delta: float) -> float:
    """The slack delta' that ``"advanced"`` declares when none is given: half the budget's delta."""
    return budget_delta / 2.0


def make_accountant(spec: "str | Accountant", budget_delta: float = 0.0) -> Accountant:
    """Resolve an accountant name (``basic``, ``advanced``, ``rdp``, ``pld``, ``best``) or instance."""
    if isinstance(spec, Accountant):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"accountant must be a name or an Accountant, got {type(spec).__name__}")
    factories: dict[str, Callable[[], Accountant]] = {
        "basic": BasicAccountant,
        "advanced": lambda: AdvancedAccountant(default_slack(budget_delta), delta_cap=budget_delta),
        "rdp": RdpAccountant,
        "pld": PldAccountant,
        "best": lambda: BestAccountant(
            [BasicAccountant(), AdvancedAccountant(default_slack(budget_delta), budget_delta), RdpAccountant(), PldAccountant()],
            delta_cap=budget_delta,
        ),
    }
    try:
        return factories[spec]()
    except KeyError:
        raise ValueError(f"unknown accountant {spec!r}; expected one of {', '.join(ACCOUNTANT_NAMES)}") from None


def accountant_from_dict(data: dict[str, Any]) -> Accountant:
    name = data["name"]
    if name == "advanced":
        return AdvancedAccountant(data["slack"], data.get("delta_cap", math.inf))
    if name == "pld":
        return PldAccountant(data.get("value_discretization_interval", 1e-4))
    if name == "best":
        return BestAccountant([accountant_from_dict(m) for m in data["members"]], data["delta_cap"])
    return make_accountant(name)
