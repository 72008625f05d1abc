"""Composition across runs chosen adaptively: privacy filters (fully adaptive composition).

A ledger shared by many fits is interactive: the next fit and its budget may be chosen after seeing
the last one's output. Within one plan everything is fixed before any data is read, so any accountant
applies (non-adaptive composition). Across runs only rules that stay valid when the privacy parameters
themselves are chosen adaptively may be used -- *privacy filters* (Rogers, Roth, Ullman & Vadhan 2016):
a stopping rule that admits the next run only while the history, including it, meets a condition fixed
in advance for the target (eps_B, delta_B). Each run enters as a ``RunProfile`` computed within the run.

Rules (``usage`` is the smallest target the history meets; admission iff usage <= eps_B):

* ``basic`` -- sum eps_r <= eps_B and sum delta_r <= delta_B (RRUV 2016: basic composition is a filter).
  Its usage is itself a valid guarantee at every point.
* ``advanced`` -- sqrt(2 ln(1/delta_f) sum eps_r^2) + (1/2) sum eps_r^2 <= eps_B with sum delta_r <= delta_B
  - delta_f, delta_f = delta_B / 2: the advanced-composition filter of Whitehouse, Ramdas, Rogers & Wu
  (2023), which matches advanced composition (eps-DP => eps^2/2-zCDP, Bun & Steinke 2016; approximate
  zCDP filters compose fully adaptively). DRV's bound as such is not a filter.
* ``rdp`` -- a Renyi filter at each order of a fixed set A (Feldman & Zrnic 2021: for a fixed order
  alpha, sum rho_r(alpha) <= B_alpha gives (alpha, B_alpha)-RDP under full adaptivity). The order is not
  chosen after the fact for free: a run is admitted while *some* alpha in A meets
  sum rho_r(alpha) + ln(|A| / delta_B)/(alpha - 1) <= eps_B -- a union bound over the |A| orders.
* ``gdp`` -- Gaussian-only histories: sum mu_r^2 <= mu_B^2 (Smith & Thakurta 2022: Gaussian DP composes
  fully adaptively with the same parameters), read at delta_B through the exact Gaussian profile.
* ``best`` -- admit while *any* of basic, advanced, rdp, gdp admits, each held to delta_B / 4 (a union
  bound over the rules: the run that ends the history may have been admitted by a different rule on a
  neighbouring data set). PLD has no known filter; a PLD ledger composes across runs only within a batch
  of plans declared up front (``Ledger.commit``).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .composition import Exposure, exposure
from .events import (
    ApproxEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DistributedDiscreteGaussianEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PureEvent,
)
from .gaussian import gaussian_epsilon
from .rounding import outward, sum_up

#: the Renyi orders of the rdp filter, fixed in advance (the union bound pays ln |A|)
FILTER_ORDERS = (1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 32.0, 64.0, 128.0, 256.0)

CITATIONS = {
    "non_adaptive": "sequential composition of releases fixed in advance (one plan, or a batch of plans declared up front)",
    "basic": "basic composition as a privacy filter: Rogers, Roth, Ullman & Vadhan, 'Privacy Odometers and Filters: "
             "Pay-as-you-Go Composition', NeurIPS 2016",
    "advanced": "advanced-composition privacy filter: Whitehouse, Ramdas, Rogers & Wu, 'Fully-Adaptive Composition in "
                "Differential Privacy', ICML 2023 (with eps-DP => eps^2/2-zCDP, Bun & Steinke, TCC 2016)",
    "rdp": "Renyi privacy filter at fixed orders: Feldman & Zrnic, 'Individual Privacy Accounting via a Renyi Filter', "
           "NeurIPS 2021, with a union bound over the orders",
    "gdp": "Gaussian-DP filter: Smith & Thakurta, 'Fully Adaptive Composition for Gaussian Differential Privacy', 2022",
    "best": "the smallest of the basic, advanced, rdp and gdp filters, each held to delta/4 (union bound over the rules)",
}
RULES = ("basic", "advanced", "rdp", "gdp")


@attrs.frozen
class RunProfile:
    """What one run (or one batch of plans declared up front) exposes one record to. ``rdp`` may be given as the
    run's ``Exposure``: its curve (``rdp_of``, which imports dp-accounting) is then computed when first read, i.e.
    only under a rule that reads it (rdp, best), never under basic or advanced."""

    epsilon: float  #: within-run guarantee at ``delta`` (any accountant: the run is non-adaptive)
    delta: float
    _rdp: Any = attrs.field(alias="rdp")  #: a tuple, None, or the Exposure it is computed from on first read
    mu: float | None  #: Gaussian-DP mu of the worst atom if every event is Gaussian, else None

    @property
    def rdp(self) -> tuple[float, ...] | None:
        """Worst-atom RDP at FILTER_ORDERS; None if an opaque (eps, delta) event."""
        if isinstance(self._rdp, Exposure):
            object.__setattr__(self, "_rdp", rdp_of(self._rdp))  # computed once, then kept (frozen to the outside)
        return self._rdp  # type: ignore[no-any-return]


def _rdp_vector(events: Sequence[Event]) -> np.ndarray | None:
    if any(isinstance(e, ApproxEvent) for e in events):
        return None
    if not events:
        return np.zeros(len(FILTER_ORDERS))
    from dp_accounting import rdp

    accountant = rdp.RdpAccountant(orders=list(FILTER_ORDERS))
    for e in events:
        if isinstance(e, GaussianEvent) and e.noise_multiplier == 0:
            return np.full(len(FILTER_ORDERS), math.inf)
        if isinstance(e, (LaplaceEvent, PureEvent, DiscreteGaussianEvent, DistributedDiscreteGaussianEvent, DiscreteLaplaceEvent)) \
                and math.isinf(e.basic_cost().epsilon):
            return np.full(len(FILTER_ORDERS), math.inf)
        accountant.compose(e.to_dp_event())
    return np.asarray(accountant._rdp, dtype=float)


def _mu_squared(events: Sequence[Event]) -> float | None:
    gaussians = [e for e in events if isinstance(e, GaussianEvent)]
    if len(gaussians) != len(events):
        return None
    return math.fsum(math.inf if e.noise_multiplier == 0 else 1.0 / e.noise_multiplier**2 for e in gaussians)


def _options(exp: Exposure) -> list[list[list[Event]]]:
    """The exposure as [base] + components, each a list of event-list options."""
    return [[list(exp.base)]] + [[list(o) for o in options] for options in exp.components]


def rdp_of(exp: Exposure) -> tuple[float, ...] | None:
    """RDP curve valid for every position of the record: per order, base + the largest option of each component."""
    total = np.zeros(len(FILTER_ORDERS))
    for options in _options(exp):
        vecs = [_rdp_vector(o) for o in options]
        if any(v is None for v in vecs):
            return None
        total = total + np.max(np.array(vecs), axis=0)
    return tuple(float(v) for v in total)


def mu_of(exp: Exposure) -> float | None:
    total = 0.0
    for options in _options(exp):
        sq = [_mu_squared(o) for o in options]
        known = [v for v in sq if v is not None]
        if len(known) != len(sq):
            return None
        total += max(known)
    return math.sqrt(total)


_PROFILES: dict[tuple[tuple[Any, ...], float, str], RunProfile] = {}


def profile(charges: Sequence[Any], delta: float, accountant: Any) -> RunProfile:
    """A run's profile from its charges: ``accountant`` (retargeted at ``delta``) gives (eps, delta). Memoised."""
    key = (tuple(charges), float(delta), repr(accountant.to_dict()))
    if key not in _PROFILES:
        if len(_PROFILES) > 4096:
            _PROFILES.clear()
        _PROFILES[key] = _profile(charges, delta, accountant)
    return _PROFILES[key]


def _profile(charges: Sequence[Any], delta: float, accountant: Any) -> RunProfile:
    exp = exposure(charges)
    events = [e for c in charges for e in c.events if not isinstance(e, NonPrivateEvent)]
    if not events:
        return RunProfile(0.0, 0.0, tuple(0.0 for _ in FILTER_ORDERS), 0.0)
    cost = accountant.retarget(delta).cost(charges) if delta > 0 else accountant.retarget(0.0).cost(charges)
    return RunProfile(float(cost.epsilon), float(delta), exp, mu_of(exp))


# -- the rules ---------------------------------------------------------------------------------------
def basic_usage_delta(runs: Sequence[RunProfile]) -> float:
    return sum_up([r.delta for r in runs])


def basic_usage(runs: Sequence[RunProfile], delta: float) -> float:
    if sum_up([r.delta for r in runs]) > delta:
        return math.inf
    return sum_up([r.epsilon for r in runs])


def advanced_usage(runs: Sequence[RunProfile], delta: float) -> float:
    """sqrt(2 ln(1/delta_f) sum eps^2) + sum eps^2 / 2 with delta_f = delta / 2, if sum delta_r <= delta / 2."""
    delta_f = delta / 2.0
    if delta_f <= 0 or sum_up([r.delta for r in runs]) > delta - delta_f:
        return math.inf
    sq = math.fsum(r.epsilon**2 for r in runs)
    if math.isinf(sq):
        return math.inf
    return outward(math.sqrt(2.0 * math.log(1.0 / delta_f) * sq) + 0.5 * sq)


def rdp_usage(runs: Sequence[RunProfile], delta: float) -> float:
    """min over the fixed orders of sum rho(alpha) + ln(|A| / delta) / (alpha - 1)."""
    if delta <= 0 or any(r.rdp is None for r in runs):
        return math.inf
    rho = np.sum(np.array([r.rdp for r in runs], dtype=float), axis=0) if runs else np.zeros(len(FILTER_ORDERS))
    alphas = np.asarray(FILTER_ORDERS)
    eps = rho + math.log(len(FILTER_ORDERS) / delta) / (alphas - 1.0)
    return outward(float(np.min(eps)))


def gdp_usage(runs: Sequence[RunProfile], delta: float) -> float:
    if delta <= 0 or any(r.mu is None for r in runs):
        return math.inf
    mu = math.sqrt(math.fsum(r.mu**2 for r in runs))  # type: ignore[operator]
    if mu == 0:
        return 0.0
    return gaussian_epsilon(1.0 / mu, delta) if math.isfinite(mu) else math.inf


USAGE = {"basic": basic_usage, "advanced": advanced_usage, "rdp": rdp_usage, "gdp": gdp_usage}


@attrs.frozen
class FilterResult:
    epsilon: float
    delta: float
    rule: str
    citation: str
    by_rule: dict[str, float] = attrs.field(factory=dict)


def usage(runs: Sequence[RunProfile], rule: str, delta: float) -> FilterResult:
    """The filter usage of a history of ``runs`` under ``rule`` at the target ``delta``."""
    if rule == "best":
        share = delta / len(RULES)
        by_rule = {name: USAGE[name](runs, share) for name in RULES}
        chosen = min(by_rule, key=by_rule.__getitem__)
        return FilterResult(by_rule[chosen], delta, f"best ({chosen})", CITATIONS["best"] + "; here " + CITATIONS[chosen], by_rule)
    if rule not in USAGE:
        raise ValueError(f"no privacy filter for rule {rule!r}")
    value = USAGE[rule](runs, delta)
    return FilterResult(value, delta, rule, CITATIONS[rule], {rule: value})


def within_run(accountant_name: str) -> dict[str, Any]:
    """What justifies one run's own total: its plan is fixed before any data is read, so its releases compose
    non-adaptively and the ledger's accountant (any of them, PLD included) applies (the run report's
    ``budget["run_composition"]``)."""
    return {"kind": "non-adaptive", "rule": "non_adaptive", "accountant": accountant_name, "citation": CITATIONS["non_adaptive"]}


def filter_rule_for(accountant_name: str) -> str | None:
    """The cross-run rule a ledger of this accountant uses (None: no filter known, i.e. PLD)."""
    return {"basic": "basic", "advanced": "advanced", "rdp": "rdp", "best": "best"}.get(accountant_name)
