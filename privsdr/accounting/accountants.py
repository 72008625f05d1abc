"""Accountants: turn the events one record is exposed to into an (epsilon, delta) guarantee.

* ``basic``: sum of per-event (eps_i, delta_i), in exact rational arithmetic rounded up (pure eps is
  exact; dp-accounting answers eps = inf at delta = 0).
* ``advanced``: heterogeneous advanced composition with a declared slack delta' -- the better of
  Dwork-Rothblum-Vadhan (2010) and Kairouz-Oh-Viswanath (2015, Thm 3.5) -- or basic if smaller.
* ``rdp``: dp-accounting's RDP accountant (opaque (eps, delta) events added on top by basic composition).
* ``pld``: dp-accounting's privacy-loss-distribution accountant (same treatment of opaque events).
* ``best``: the minimum epsilon over the above (each is a valid upper bound).

**Where the guarantee is read.** An accountant built for a budget (``make_accountant(name, delta)``,
what every ledger and plan does) has a *target delta*: the budget's delta. ``rdp``, ``pld`` and
``advanced`` answer "the smallest epsilon at that delta" (``advanced`` uses the declared slack on top of
the nodes' delta shares), ``basic`` answers (sum eps_i, sum delta_i). Reading at a fixed delta is what
makes ``spent`` monotone: adding a release can only raise epsilon (reading at the sum of the charged
delta shares, as an earlier version did, let a charge with a large delta share lower epsilon, and a tiny
first share showed epsilon above the budget). ``best`` reports the smallest epsilon and the largest delta
among its members that fit the budget's delta (a weaker, valid, and monotone pair). Accountants built
without a delta (``RdpAccountant()``) read at the sum of the declared delta shares, for direct use.

Every answer is rounded outward: event costs in exact arithmetic (``rounding``), and epsilons computed by
dp-accounting with a 1e-12 relative margin. Parallel composition uses ``composition.exposure``.
"""
from __future__ import annotations

import functools
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .budget import Cost
from .charge import Charge
from .composition import MAX_ATOMS, Exposure, exposure
from .events import DELTA_EVENTS, PURE_EVENTS, ApproxEvent, Event, GaussianEvent, LaplaceEvent
from .gaussian import gaussian_delta_lower, gaussian_epsilon
from .pld_build import epsilon_for_delta, gaussian_pld, laplace_pld
from .rounding import outward, sum_up

#: per-event epsilons above this are answered by basic composition in rdp/pld (dp-accounting overflows
#: on exp(eps) near 710, and no finer accounting matters at such epsilons)
HUGE_EPSILON = 100.0


def _declared_delta(events: Sequence[Event]) -> float:
    return sum_up([e.delta for e in events if isinstance(e, DELTA_EVENTS)])


def _is_pure(events: Sequence[Event]) -> bool:
    return all(isinstance(e, PURE_EVENTS) for e in events)


def _flatten(exp: Exposure) -> list[Event]:
    """Every event of the exposure in one list: a valid (conservative) sequential composition."""
    return list(exp.base) + [e for options in exp.components for option in options for e in option]


class Accountant:
    """Base class: ``cost(charges)`` = worst case over one record's positions of ``compose(events)``."""

    name: str = "abstract"
    target_delta: float | None = None

    def compose(self, events: Sequence[Event]) -> Cost:  # pragma: no cover - abstract
        raise NotImplementedError

    def cost(self, charges: Sequence[Charge]) -> Cost:
        """Memoised on (the accountant's parameters, the charges): a ledger prices the same history many times
        per run (preflight, reserve, remaining, the report's totals), and the answer is a pure function of both."""
        key = self._memo_key(charges)
        if key is None:  # not a built-in accountant: its answers may depend on anything it holds
            return self._cost_afresh(charges)
        cost = _COST_CACHE.get(key)
        if cost is None:
            cost = self._cost_afresh(charges)
            _COST_CACHE.put(key, cost)
        return cost

    def _memo_key(self, charges: Sequence[Charge]) -> _HashedKey | None:
        """This accountant's key of ``charges`` in the cost memo; None when it is not memoised (``_memo_parameters``)."""
        parameters = _memo_parameters(self)
        return None if parameters is None else _HashedKey((type(self).__name__, parameters, self.target_delta, tuple(charges)))

    def _cost_afresh(self, charges: Sequence[Charge]) -> Cost:
        return self.cost_of_exposure(exposure(charges))

    def cost_of_exposure(self, exp: Exposure) -> Cost:
        if exp.combinations <= MAX_ATOMS:
            return self.cost_of_atoms(exp.atoms())
        return self.compose_components(exp)

    def compose_components(self, exp: Exposure) -> Cost:
        """More combinations than we enumerate: a rule valid for this accountant (default: everything in sequence)."""
        return self.compose(_flatten(exp))

    def cost_of_atoms(self, event_sets: Sequence[Sequence[Event]]) -> Cost:
        """Componentwise worst, over the positions of one record, of the sequential composition."""
        return _worst(self.compose(events) for events in event_sets if events)

    def retarget(self, delta: float) -> Accountant:
        """The same accountant reading its guarantee at ``delta`` (a budget's delta)."""
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "name")
        return f"{type(self).__name__}({params})"


def _worst(costs: Iterable[Cost]) -> Cost:
    """Componentwise largest epsilon and delta (zero for none)."""
    worst_eps, worst_delta = 0.0, 0.0
    for eps, delta in costs:
        worst_eps, worst_delta = max(worst_eps, eps), max(worst_delta, delta)
    return Cost(worst_eps, worst_delta)


def _basic_and_epsilons(events: Sequence[Event]) -> tuple[Cost, list[float]]:
    """Basic composition of ``events`` and their per-event epsilons (what ``advanced`` adds up next)."""
    costs = [e.basic_cost() for e in events]
    epsilons = [c.epsilon for c in costs]
    return Cost(sum_up(epsilons), sum_up([c.delta for c in costs])), epsilons


class BasicAccountant(Accountant):
    name = "basic"

    def compose(self, events: Sequence[Event]) -> Cost:
        return _basic_and_epsilons(events)[0]

    def compose_components(self, exp: Exposure) -> Cost:
        """Additive: the base plus, per component, its worst option (exact)."""
        base = self.compose(exp.base)
        worst = [self.cost_of_atoms([list(o) for o in options]) for options in exp.components]
        return Cost(sum_up([base.epsilon] + [c.epsilon for c in worst]), sum_up([base.delta] + [c.delta for c in worst]))


# -- advanced composition --------------------------------------------------------------------------
def _advanced_sums(epsilons: Sequence[float]) -> np.ndarray:
    """(sum eps^2, sum eps (e^eps - 1), sum eps tanh(eps/2)): what DRV and KOV depend on (monotone)."""
    eps = np.asarray(epsilons, dtype=float)  # ndarray.sum: np.sum's reduction without its Python dispatch
    return np.array([(eps * eps).sum(), (eps * np.expm1(eps)).sum(), (eps * np.tanh(eps / 2.0)).sum()])


def drv_from_sums(sq: float, exp_term: float, slack: float) -> float:
    """Dwork-Rothblum-Vadhan: sqrt(2 ln(1/d') sum eps_i^2) + sum eps_i (e^eps_i - 1)."""
    return math.sqrt(2.0 * math.log(1.0 / slack) * sq) + exp_term


def kov_from_sums(sq: float, t: float, slack: float) -> float:
    """Kairouz-Oh-Viswanath (2015) Thm 3.5, heterogeneous: with t = sum eps_i tanh(eps_i/2), S = sum eps_i^2,
    min( t + sqrt(2 S ln(e + sqrt(S)/d')),  t + sqrt(2 S ln(1/d')) )."""
    a = t + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / slack))
    b = t + math.sqrt(2.0 * sq * math.log(1.0 / slack))
    return min(a, b)


def drv_epsilon(epsilons: Sequence[float], slack: float) -> float:
    sq, exp_term, _ = _advanced_sums(epsilons)
    return drv_from_sums(sq, exp_term, slack)


def kov_epsilon(epsilons: Sequence[float], slack: float) -> float:
    sq, _, t = _advanced_sums(epsilons)
    return kov_from_sums(sq, t, slack)


class AdvancedAccountant(Accountant):
    """Heterogeneous advanced composition with declared slack ``slack`` (delta').

    The advanced bound holds at delta = sum delta_i + slack; it is used when that stays within
    ``delta_cap`` (a ledger sets the cap to its budget's delta) and its epsilon beats basic. With a
    finite cap the answer is read at the cap: (min(basic, advanced) epsilon, cap), which is monotone.
    """

    name = "advanced"

    def __init__(self, slack: float, delta_cap: float = math.inf) -> None:
        if not 0.0 <= slack < 1.0:
            raise ValueError(f"slack must satisfy 0 <= slack < 1, got {slack!r}")
        self.slack = float(slack)
        self.delta_cap = float(delta_cap)
        self.target_delta = None if math.isinf(self.delta_cap) else self.delta_cap

    def _answer(self, basic: Cost, sums: np.ndarray | None) -> Cost:
        advanced = math.inf
        if sums is not None and self.slack > 0 and math.isfinite(basic.epsilon):
            advanced = outward(self._bound(sums))
        with_slack = sum_up([basic.delta, self.slack])
        if math.isinf(self.delta_cap):  # no budget: the better of the two bounds, each at its own delta
            return Cost(advanced, with_slack) if advanced < basic.epsilon else basic
        if basic.delta > self.delta_cap or basic == Cost.zero():
            return basic
        eps = min(basic.epsilon, advanced) if with_slack <= self.delta_cap else basic.epsilon
        return Cost(eps, self.delta_cap if self.delta_cap > 0 else basic.delta)

    def _bound(self, sums: np.ndarray) -> float:
        """The better of DRV and KOV at this accountant's slack, from ``_advanced_sums`` (not yet rounded outward)."""
        return min(drv_from_sums(sums[0], sums[1], self.slack), kov_from_sums(sums[0], sums[2], self.slack))

    def _sums(self, events: Sequence[Event]) -> np.ndarray | None:
        return self._sums_of([e.basic_cost().epsilon for e in events])

    @staticmethod
    def _sums_of(eps: list[float]) -> np.ndarray | None:
        if not eps or max(eps) > 50.0:  # e^eps overflows; advanced never beats basic there anyway
            return None
        return _advanced_sums(eps)

    def compose(self, events: Sequence[Event]) -> Cost:
        basic, epsilons = _basic_and_epsilons(events)
        return self._answer(basic, self._sums_of(epsilons))

    def compose_components(self, exp: Exposure) -> Cost:
        """Each bound is increasing in its sums, so the base's sums plus each component's largest are valid."""
        basic = BasicAccountant().compose_components(exp)
        parts = [self._sums(exp.base) if exp.base else np.zeros(3)]
        for options in exp.components:
            sums = [self._sums(o) if o else np.zeros(3) for o in options]
            parts.append(None if any(s is None for s in sums) else np.max(np.array(sums), axis=0))
        return self._answer(basic, None if any(p is None for p in parts) else np.sum(np.array(parts), axis=0))

    def retarget(self, delta: float) -> AdvancedAccountant:
        return AdvancedAccountant(self.slack, delta)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slack": self.slack, "delta_cap": self.delta_cap}


# -- RDP and PLD -----------------------------------------------------------------------------------
class _Memo:
    """A bounded memo shared by threads: the least recently used entry goes first beyond ``size``.

    An ``OrderedDict``, whose ``popitem(last=False)`` drops the oldest entry in O(1): a plain dict's
    ``next(iter(d))`` scans past the holes its earlier deletions left at the front of its entry array, which
    cost ~20 us per insertion into a full memo of 4096 (every new price once the memo has filled)."""

    def __init__(self, size: int = 4096) -> None:
        self._entries: OrderedDict[Any, Cost] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Any) -> Cost | None:
        with self._lock:
            cost = self._entries.get(key)
            if cost is not None:
                self._entries.move_to_end(key)  # the most recent
            return cost

    def put(self, key: Any, cost: Cost) -> None:
        with self._lock:
            self._entries[key] = cost
            self._entries.move_to_end(key)  # a key put again (two threads pricing it at once) is the most recent too
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: _CurveAccountant.compose memo: (accountant type, parameters, target delta, event multiset) -> Cost
_CACHE = _Memo()


def _memo_parameters(accountant: Accountant) -> tuple[Any, ...] | None:
    """What a built-in accountant's answers depend on besides its type and reading delta, as a memo key: its parameters
    as a tuple (~1 us where the repr of ``best``'s nested dict costs ~20 us per priced history), with each member's
    reading delta; None for any other accountant (a subclass or a user's class: what it depends on is not known here,
    so it is not memoised -- a ``best`` subclass keyed on ``repr(to_dict())`` shared answers between members read at
    different deltas)."""
    kind = type(accountant)  # exactly a built-in class: a subclass may depend on more than its parent's parameters
    if kind is BasicAccountant or kind is RdpAccountant:
        return ()
    if isinstance(accountant, AdvancedAccountant) and kind is AdvancedAccountant:
        return (accountant.slack, accountant.delta_cap)
    if isinstance(accountant, PldAccountant) and kind is PldAccountant:
        return (accountant.value_discretization_interval,)
    if isinstance(accountant, BestAccountant) and kind is BestAccountant:
        members = tuple((type(m).__name__, m.target_delta, _memo_parameters(m)) for m in accountant.members)
        return None if any(parameters is None for _, _, parameters in members) else (accountant.delta_cap, members)
    return None


class _HashedKey:
    """A memo key that hashes its tuple once: a history of charges is hashed field by field (attrs), and a dict
    lookup, a move and a read each hashed it again."""

    __slots__ = ("key", "hash")

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _HashedKey) and self.hash == other.hash and self.key == other.key


#: Accountant.cost memo, least recently used first: (accountant type, parameters, target delta, charges) -> Cost
_COST_CACHE = _Memo()


def merge_gaussians(events: Sequence[Event]) -> list[Event]:
    """Replace all Gaussian events by one with z = (sum z_i^-2)^(-1/2): exact, not a bound.

    The privacy loss of a Gaussian release with multiplier z is N(1/(2z^2), 1/z^2) (Balle & Wang
    2018), and independent normal losses add, so k Gaussian releases have exactly the privacy curve
    of one Gaussian with mu^2 = sum mu_i^2 (Dong, Roth & Su 2022, Cor. 3.3).
    """
    gaussians = [e for e in events if isinstance(e, GaussianEvent)]
    if len(gaussians) <= 1:
        return list(events)
    return [merged_gaussian(gaussians)] + [e for e in events if not isinstance(e, GaussianEvent)]


def merged_gaussian(gaussians: Sequence[GaussianEvent]) -> GaussianEvent:
    """The one Gaussian event of ``merge_gaussians`` (a single event is returned as it is)."""
    if len(gaussians) == 1:
        return gaussians[0]
    if any(g.noise_multiplier == 0 for g in gaussians):
        return GaussianEvent(0.0, sum_up([g.delta for g in gaussians]))
    mu2 = math.fsum(1.0 / (g.noise_multiplier * g.noise_multiplier) for g in gaussians)
    return GaussianEvent(1.0 / math.sqrt(mu2), sum_up([g.delta for g in gaussians]))


class _CurveAccountant(Accountant):
    """Shared logic of RDP/PLD.

    One record's events split into curve events (Gaussian, Laplace, pure) and opaque (eps_o, delta_o)
    events. At the reading delta D (the target, else the declared shares), the curve is read at
    D - sum delta_o and the opaque epsilons are added (basic composition of the two parts). Pure-only
    curves are never charged above their exact pure composition (at zero delta that is the answer).
    Results are memoised on the event multiset.
    """

    def __init__(self, target_delta: float | None = None) -> None:
        self.target_delta = None if target_delta is None else float(target_delta)

    def compose(self, events: Sequence[Event]) -> Cost:
        parameters = _memo_parameters(self)
        if parameters is None:  # a subclass: not memoised (``_memo_parameters``)
            return self._compose(events)
        key = (type(self).__name__, parameters, self.target_delta, frozenset(Counter(events).items()))
        cost = _CACHE.get(key)
        if cost is None:
            cost = self._compose(events)
            _CACHE.put(key, cost)
        return cost

    def _reading_delta(self, events: Sequence[Event]) -> float:
        return _declared_delta(events) if self.target_delta is None else self.target_delta

    def _compose(self, events: Sequence[Event]) -> Cost:
        if not events:
            return Cost.zero()
        delta = self._reading_delta(events)
        opaque = [e for e in events if isinstance(e, ApproxEvent)]
        curve = merge_gaussians([e for e in events if not isinstance(e, ApproxEvent)])
        return self._compose_parts(curve, opaque, delta)

    def _compose_parts(self, curve: Sequence[Event], opaque: Sequence[ApproxEvent], delta: float) -> Cost:
        """``_compose`` of events already split into their curve part (Gaussians merged) and their opaque part, read
        at ``delta``: the curve at delta - sum delta_o, plus the opaque epsilons."""
        eps_curve = self._curve_epsilon(curve, delta - sum_up([e.delta for e in opaque]))
        return Cost(sum_up([eps_curve] + [e.epsilon for e in opaque]), delta)

    def _curve_epsilon(self, curve: Sequence[Event], delta: float) -> float:
        if not curve:
            return 0.0
        if delta < 0.0:
            return math.inf
        pure = _is_pure(curve)
        pure_sum = BasicAccountant().compose(curve).epsilon if pure else math.inf
        if delta == 0.0:
            return pure_sum
        if any(isinstance(e, GaussianEvent) and e.noise_multiplier == 0 for e in curve):
            return math.inf
        if any(e.basic_cost().epsilon > HUGE_EPSILON for e in curve if not isinstance(e, GaussianEvent)):
            # dp-accounting overflows on exp(eps) for such Laplace/pure steps; compose them exactly (pure sum)
            # and the (merged) Gaussian by its closed form, by basic composition of the two parts
            gaussians = [e for e in curve if isinstance(e, GaussianEvent)]
            others = BasicAccountant().compose([e for e in curve if not isinstance(e, GaussianEvent)]).epsilon
            return sum_up([others] + [gaussian_epsilon(g.noise_multiplier, delta) for g in gaussians])
        return min(pure_sum, outward(self._epsilon(curve, delta)))

    def _epsilon(self, events: Sequence[Event], delta: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def retarget(self, delta: float) -> _CurveAccountant:
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.target_delta = float(delta)
        return clone


class RdpAccountant(_CurveAccountant):
    name = "rdp"

    @staticmethod
    def _rdp(events: Sequence[Event]) -> tuple[np.ndarray, np.ndarray]:
        """dp-accounting's RDP curve of ``events``: its accountant adds ``count * curve(event)`` per distinct event,
        starting from zeros, in this order; the per-event curves are memoised (``_event_rdp``), the sums are the same."""
        orders = _RDP_ORDERS_ARRAY
        if len(events) == 1:  # one event once (a merged Gaussian): 0 + 1 * curve is 0.0 + curve, one operation
            return orders, _event_rdp(events[0])[1] + 0.0
        total = np.zeros_like(orders)
        for event, count in Counter(events).items():
            total += count * _event_rdp(event)[1]
        return orders, total

    def _epsilon(self, events: Sequence[Event], delta: float) -> float:
        orders, curve = self._rdp(events)
        return _rdp_epsilon(orders, curve, delta)

    def compose_components(self, exp: Exposure) -> Cost:
        """RDP adds at every order: the base's curve plus each component's pointwise-largest curve is a
        valid RDP curve for any position of the record (opaque parts: per-component largest eps, delta)."""
        def split(events: Sequence[Event]) -> tuple[np.ndarray | None, float, float, list[Event]]:
            opaque = [e for e in events if isinstance(e, ApproxEvent)]
            curve: list[Event] = [e for e in events if not isinstance(e, ApproxEvent)]
            vec = self._rdp(merge_gaussians(curve))[1] if curve else None
            return vec, sum_up([e.epsilon for e in opaque]), sum_up([e.delta for e in opaque]), curve

        flat = _flatten(exp)
        basic = BasicAccountant().compose_components(exp)
        if any(e.basic_cost().epsilon > HUGE_EPSILON for e in flat if not isinstance(e, GaussianEvent)):
            return self.compose(flat)
        orders = _RDP_ORDERS_ARRAY
        total, eps_o, delta_o = np.zeros_like(orders), 0.0, 0.0
        for options in [[exp.base]] + [list(c) for c in exp.components]:
            parts = [split(o) for o in options]
            vecs = [p[0] for p in parts if p[0] is not None]
            if vecs:
                total = total + np.max(np.array(vecs), axis=0)
            eps_o = sum_up([eps_o, max(p[1] for p in parts)])
            delta_o = sum_up([delta_o, max(p[2] for p in parts)])
        delta = self.target_delta if self.target_delta is not None else sum_up([basic.delta])
        curve_delta = delta - delta_o
        if curve_delta <= 0:
            eps = math.inf
        else:
            eps = sum_up([outward(_rdp_epsilon(orders, total, curve_delta)), eps_o])
        return Cost(eps, delta)


#: dp-accounting's ``rdp_privacy_accountant.DEFAULT_RDP_ORDERS`` (a test checks they are equal), so that a Gaussian
#: curve needs no dp-accounting import (it loads scipy.signal: ~0.3 s per process)
RDP_ORDERS = tuple(float(a) for a in [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024])
_RDP_ORDERS_ARRAY = np.array(RDP_ORDERS)
_RDP_ORDERS_ARRAY.flags.writeable = False


@functools.lru_cache(maxsize=4096)
def _event_rdp(event: Event) -> tuple[np.ndarray, np.ndarray]:
    """(orders, RDP curve of one ``event``) as dp-accounting's accountant computes it. Read-only arrays: an event's
    curve depends on the event alone, and cold plans repeat events.

    A Gaussian's curve is computed here with dp-accounting's own operations (``alpha / (2 z**2)`` per order, added
    to zeros: the same doubles, bit for bit, and inf for z = 0); every other event goes through dp-accounting."""
    orders = _RDP_ORDERS_ARRAY
    if isinstance(event, GaussianEvent):
        z = event.noise_multiplier
        curve = np.full_like(orders, np.inf) if z == 0 else orders / (2 * z**2)
    else:
        from dp_accounting import rdp

        accountant = rdp.RdpAccountant()
        accountant.compose(event.to_dp_event(), 1)
        orders, curve = np.asarray(accountant._orders, dtype=float), np.array(accountant._rdp, dtype=float)
    curve.flags.writeable = False
    return orders, curve


@functools.lru_cache(maxsize=64)
def _order_terms(orders: tuple[float, ...], delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per order a, the two terms of dp-accounting's conversion that do not depend on the curve: log1p(-1/a) and
    log(delta a) / (a - 1), computed by the same Python operations as its loop; and where a > 1.01 (else inf), or
    None when every order is (the default orders: no mask to apply)."""
    first = np.array([math.log1p(-1 / a) for a in orders])
    second = np.array([math.log(delta * a) / (a - 1) for a in orders])
    usable = np.array([a > 1.01 for a in orders])
    return first, second, None if bool(usable.all()) else usable


@functools.lru_cache(maxsize=64)
def _default_order_terms(delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``_order_terms`` of the default orders, keyed on delta alone (a tuple of 156 floats is hashed at every lookup)."""
    return _order_terms(RDP_ORDERS, delta)


def _rdp_epsilon(orders: np.ndarray, curve: np.ndarray, delta: float) -> float:
    """dp-accounting's ``compute_epsilon``: min over orders of r + log1p(-1/a) - log(delta a) / (a - 1) (Balle et al.
    2020, Prop. 12), with the same answer, bit for bit. Its loop adds and subtracts per order; here the two terms that
    depend on (a, delta) alone are computed once (``_order_terms``) and the sums are done by numpy (IEEE addition
    and subtraction round the same way), in the same order: (r + first) - second. Where its loop takes another branch
    (a negative or NaN r, or delta^2 + expm1(-r) > 0, possible only for r < 4 delta^2 + a margin, or delta >= 0.5)
    dp-accounting's own function answers."""
    from_library = not 0.0 < delta < 0.5 or orders.size != curve.size or not bool((curve >= 4.0 * delta * delta).all())
    if from_library:
        from dp_accounting.rdp import rdp_privacy_accountant as rpa

        return float(rpa.compute_epsilon(orders.tolist(), curve.tolist(), delta)[0])
    if orders is _RDP_ORDERS_ARRAY:
        first, second, usable = _default_order_terms(float(delta))
    else:
        first, second, usable = _order_terms(tuple(orders.tolist()), float(delta))
    eps = (curve + first) - second
    if usable is not None:
        eps = np.where(usable, eps, np.inf)
    # the smallest value (argmin's element; no NaN here: the curve is >= 4 delta^2 and the terms are finite)
    return float(max(0, eps.min()))


class PldAccountant(_CurveAccountant):
    name = "pld"

    def __init__(self, value_discretization_interval: float = 1e-4, target_delta: float | None = None) -> None:
        super().__init__(target_delta)
        self.value_discretization_interval = float(value_discretization_interval)

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
            dist = _event_pld(event, vdi, count)
            total = dist if total is None else total.compose(dist)
        assert total is not None
        return epsilon_for_delta(total, delta)

    def compose_components(self, exp: Exposure) -> Cost:
        """Gaussian-only components compose exactly (the worst option is the one with the largest mu^2);
        components with other events are composed in sequence (valid, conservative: ``best`` is then
        decided by ``rdp``/``basic``, which compose every component exactly or tightly)."""
        events = list(exp.base)
        for options in exp.components:
            gaussian_options = [[e for e in o if isinstance(e, GaussianEvent)] for o in options]
            if all(len(g) == len(o) for g, o in zip(gaussian_options, options, strict=True)):
                merged = [merged_gaussian(g) for g in gaussian_options if g]
                worst = min(g.noise_multiplier for g in merged)  # largest mu^2 = sum of 1/z^2
                events.append(GaussianEvent(worst, max(g.delta for g in merged)))
            else:
                events.extend(e for o in options for e in o)
        return self.compose(events)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value_discretization_interval": self.value_discretization_interval}


@functools.lru_cache(maxsize=64)
def _event_pld(event: Event, vdi: float, count: int) -> Any:
    """dp-accounting's privacy-loss distribution of ``count`` releases of ``event`` on the grid ``vdi``: a function of
    the three alone, and dp-accounting never changes a distribution in place (``compose`` and ``self_compose`` return
    new ones), so one object serves every composition that contains these releases; a ledger prices histories that
    share their earlier runs' events, so each is built once. Gaussian and Laplace distributions are built by
    ``pld_build`` (dp-accounting's construction in array operations, the same distribution bit for bit)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    if isinstance(event, GaussianEvent):
        dist = gaussian_pld(event.noise_multiplier, vdi)
    elif isinstance(event, LaplaceEvent):
        dist = laplace_pld(event.noise_multiplier, vdi)
    else:
        from dp_accounting.pld import common

        eps, d = event.basic_cost()
        dist = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, d), value_discretization_interval=vdi)
    return dist.self_compose(count) if count > 1 else dist


class BestAccountant(Accountant):
    """Minimum epsilon over member accountants among answers whose delta stays within ``delta_cap``,
    reported with the largest delta among those answers (valid for each, and monotone)."""

    name = "best"

    def __init__(self, members: Sequence[Accountant], delta_cap: float = math.inf) -> None:
        if not members:
            raise ValueError("best needs at least one member accountant")
        names = [m.name for m in members]
        if len(set(names)) != len(names):  # members are priced, memoised and chosen by name
            raise ValueError(f"best's member accountants need distinct names, got {names}")
        self.members = list(members)
        self.delta_cap = float(delta_cap)
        self.target_delta = None if math.isinf(self.delta_cap) else self.delta_cap

    def cost_by_member(self, charges: Sequence[Charge]) -> dict[str, Cost]:
        return self._member_costs(exposure(charges))

    def choose(self, costs: dict[str, Cost]) -> tuple[str, Cost]:
        ok = {k: c for k, c in costs.items() if c.delta <= self.delta_cap} or costs
        name = min(ok, key=lambda k: (ok[k].epsilon, ok[k].delta))
        return name, Cost(ok[name].epsilon, max(c.delta for c in ok.values()))

    def _chosen(self, costs: dict[str, Cost], above: dict[str, float]) -> Cost:
        """``choose``'s answer where the members in ``above`` (name -> delta) were shown to cost no less epsilon than
        another member that fits the cap (``_above_the_others``): each enters with its own delta and an infinite
        epsilon, which changes neither the members that fit, nor the smallest epsilon among them, nor their largest
        delta."""
        if not above:
            return self.choose(costs)[1]
        return self.choose({**costs, **{name: Cost(math.inf, delta) for name, delta in above.items()}})[1]

    def _cost_afresh(self, charges: Sequence[Charge]) -> Cost:
        """``choose`` over the members' answers, each also kept in the memo under its member: a run's report prices
        its charges under accountants equal to the members (``plan.execute``) and finds them there (a member shown
        not to be the smallest, and so not priced, is priced by the report itself)."""
        costs, above = self._priced(exposure(charges))
        for m in self.members:
            key = m._memo_key(charges) if m.name in costs else None
            if key is not None:
                _COST_CACHE.put(key, costs[m.name])
        return self._chosen(costs, above)

    def cost_of_exposure(self, exp: Exposure) -> Cost:
        return self._chosen(*self._priced(exp))

    def _member_costs(self, exp: Exposure) -> dict[str, Cost]:
        """Each member's ``cost_of_exposure``; members that keep the default one share the exposure's atoms (built
        once) and ``member_costs_of_atoms`` below."""
        if self._own_exposures(exp):
            return {m.name: m.cost_of_exposure(exp) for m in self.members}
        return self.member_costs_of_atoms(exp.atoms())  # what each member's own cost_of_exposure does

    def _priced(self, exp: Exposure) -> tuple[dict[str, Cost], dict[str, float]]:
        """``_member_costs`` for best's own answer: (the members priced, the deltas of those left out as costing no
        less epsilon than the others, ``_above_the_others``)."""
        if self._own_exposures(exp):
            return {m.name: m.cost_of_exposure(exp) for m in self.members}, {}
        return self._atoms_priced(exp.atoms(), every=False)

    def _own_exposures(self, exp: Exposure) -> bool:
        """Whether each member composes the exposure its own way (too many atoms, or a member that overrides it)."""
        return exp.combinations > MAX_ATOMS or any(type(m).cost_of_exposure is not Accountant.cost_of_exposure for m in self.members)

    def cost_of_atoms(self, event_sets: Sequence[Sequence[Event]]) -> Cost:
        return self._chosen(*self._atoms_priced(event_sets, every=False))

    def member_costs_of_atoms(self, event_sets: Sequence[Sequence[Event]]) -> dict[str, Cost]:
        """Each member's ``cost_of_atoms``; the built-in members share work (the same values each computes alone):
        ``basic`` and ``advanced`` each atom's basic composition and per-event epsilons, ``rdp`` and ``pld`` each
        Gaussian-only atom's merged Gaussian."""
        return self._atoms_priced(event_sets, every=True)[0]

    def _atoms_priced(self, event_sets: Sequence[Sequence[Event]], every: bool) -> tuple[dict[str, Cost], dict[str, float]]:
        """``member_costs_of_atoms``, and with ``every=False`` the ``basic`` and ``advanced`` members left out (their
        deltas returned) where ``_above_the_others`` shows that neither can be the smallest epsilon."""
        atoms = [events for events in event_sets if events]  # an empty atom costs nothing (``cost_of_atoms``)
        gaussian_only = all(type(e) is GaussianEvent for events in atoms for e in events)
        merged: list[list[Event]] | None = None
        costs: dict[str, Cost] = {}
        sharing = []
        for m in self.members:
            kind = type(m)
            if kind is BasicAccountant or kind is AdvancedAccountant:
                sharing.append(m)
            elif (kind is RdpAccountant or kind is PldAccountant) and gaussian_only and isinstance(m, _CurveAccountant):
                # _CurveAccountant.compose without its memo: one merged Gaussian, priced in microseconds
                merged = merged if merged is not None else [merge_gaussians(events) for events in atoms]
                curves = zip(atoms, merged, strict=True)
                costs[m.name] = _worst(m._compose_parts(curve, (), m._reading_delta(events)) for events, curve in curves)
            else:
                costs[m.name] = m.cost_of_atoms(event_sets)
        above = {} if every or not sharing else self._above_the_others(atoms, costs, sharing)
        shared = None if len(above) == len(sharing) else [_basic_and_epsilons(events) for events in atoms]
        for m in sharing:
            if m.name in above:
                continue
            assert shared is not None
            if isinstance(m, AdvancedAccountant):
                costs[m.name] = _worst(m._answer(basic, m._sums_of(epsilons)) for basic, epsilons in shared)
            else:
                costs[m.name] = _worst(basic for basic, _ in shared)
        return {m.name: costs[m.name] for m in self.members if m.name in costs}, above

    def _above_the_others(self, atoms: list[Sequence[Event]], costs: dict[str, Cost], sharing: list[Accountant]) -> dict[str, float]:
        """The deltas of the ``basic`` and ``advanced`` members (``sharing``) when neither can give best its epsilon,
        without their per-event Gaussian solves: one atom of Gaussians (0 < z < inf, delta_i > 0) and another member
        that fits the cap at an epsilon E in (0, inf). Otherwise {} (they are priced).

        Each release's charge eps_i is at least its exact epsilon (``gaussian_epsilon``), which exceeds any l_i with
        exact delta(l_i) > delta_i (``gaussian_delta_lower``). The l_i are a guess scaled to add up to E (1 + 1e-9):
        a quick upper bound mu_i (mu_i / 2 + sqrt(2 ln(1/delta_i))) on eps_i (mu_i = 1/z_i), times a common factor.
        When every l_i checks, basic's epsilon (the sum, rounded up) exceeds E; so does advanced's, the smaller of
        basic's and of DRV/KOV on the eps_i, both increasing in each eps_i, whose value at the l_i is checked to be
        at least E (1 + 1e-9). Their deltas do not depend on the eps_i (advanced with a finite cap).
        """
        if len(atoms) != 1 or any(isinstance(m, AdvancedAccountant) and math.isinf(m.delta_cap) for m in sharing):
            return {}
        events = [e for e in atoms[0] if isinstance(e, GaussianEvent)]
        if len(events) != len(atoms[0]) or not all(type(e) is GaussianEvent and 0.0 < e.noise_multiplier < math.inf
                                                   and 0.0 < e.delta < 1.0 for e in events):
            return {}
        fitting = [c.epsilon for c in costs.values() if c.delta <= self.delta_cap]
        least = min(fitting) if fitting else math.inf
        if not 0.0 < least < math.inf:
            return {}
        target = least * (1.0 + 1e-9)
        guess: dict[GaussianEvent, float] = {}
        for e in events:
            if e not in guess:
                mu = 1.0 / e.noise_multiplier
                guess[e] = mu * (0.5 * mu + math.sqrt(2.0 * math.log(1.0 / e.delta)))
        scale = target * (1.0 + 1e-9) / math.fsum(guess[e] for e in events)
        if not scale < 1.0:  # the guesses are upper bounds: the charges cannot add up to more than them
            return {}
        low = {e: scale * g for e, g in guess.items()}  # sum: target (1 + 1e-9) up to a few roundings, so >= target
        lows = [low[e] for e in events]
        for m in sharing:
            sums = m._sums_of(lows) if isinstance(m, AdvancedAccountant) and m.slack > 0 else None  # None beyond 50: basic
            if isinstance(m, AdvancedAccountant) and sums is not None and not m._bound(sums) >= target:
                return {}
        if not all(gaussian_delta_lower(e.noise_multiplier, x) > e.delta for e, x in low.items()):
            return {}
        basic_delta = sum_up([e.delta for e in events])
        return {m.name: basic_delta if not isinstance(m, AdvancedAccountant) or basic_delta > m.delta_cap
                else (m.delta_cap if m.delta_cap > 0 else basic_delta) for m in sharing}

    def compose(self, events: Sequence[Event]) -> Cost:
        return self.choose({m.name: m.compose(events) for m in self.members})[1]

    def retarget(self, delta: float) -> BestAccountant:
        return BestAccountant([m.retarget(delta) for m in self.members], delta)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "members": [m.to_dict() for m in self.members], "delta_cap": self.delta_cap}


ACCOUNTANT_NAMES = ("basic", "advanced", "rdp", "pld", "best")


def default_slack(budget_delta: float) -> float:
    """The slack delta' that ``"advanced"`` declares when none is given: half the budget's delta."""
    return budget_delta / 2.0


def make_accountant(spec: str | Accountant, budget_delta: float | None = None) -> Accountant:
    """Resolve an accountant name (``basic``, ``advanced``, ``rdp``, ``pld``, ``best``) or instance.

    ``budget_delta`` is the delta of the budget the accountant serves: its answers are read there.
    An instance is returned as given.
    """
    if isinstance(spec, Accountant):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"accountant must be a name or an Accountant, got {type(spec).__name__}")
    cap = math.inf if budget_delta is None else float(budget_delta)
    slack = 0.0 if budget_delta is None else default_slack(budget_delta)
    factories: dict[str, Callable[[], Accountant]] = {
        "basic": BasicAccountant,
        "advanced": lambda: AdvancedAccountant(slack, delta_cap=cap),
        "rdp": lambda: RdpAccountant(budget_delta),
        "pld": lambda: PldAccountant(target_delta=budget_delta),
        "best": lambda: BestAccountant(
            [BasicAccountant(), AdvancedAccountant(slack, cap), RdpAccountant(budget_delta), PldAccountant(target_delta=budget_delta)],
            delta_cap=cap,
        ),
    }
    try:
        return factories[spec]()
    except KeyError:
        raise ValueError(f"unknown accountant {spec!r}; expected one of {', '.join(ACCOUNTANT_NAMES)}") from None


def accountant_from_dict(data: dict[str, Any]) -> Accountant:
    """Rebuild an accountant from ``to_dict`` (its reading delta is set by the ledger that uses it)."""
    name = data["name"]
    if name == "advanced":
        return AdvancedAccountant(data["slack"], data.get("delta_cap", math.inf))
    if name == "pld":
        return PldAccountant(data.get("value_discretization_interval", 1e-4))
    if name == "best":
        return BestAccountant([accountant_from_dict(m) for m in data["members"]], data["delta_cap"])
    return make_accountant(name)
