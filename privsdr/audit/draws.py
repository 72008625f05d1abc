"""Does a mechanism charge an event for every round of noise it draws? (issue 33, item 7)

The ledger prices a release by ``mechanism.events(spec)``; the noise comes from ``mechanism.sample``. Nothing ties
the two together but the mechanism's own code: a sampler that draws a second noisy look per round, or an event list
one round short, passes every calibration test and every audit of the output's spread that does not look at the
number of rounds. ``count_draws`` runs ``sample`` with an instrumented generator (every sampling call: its method
and how many numbers) and counts the exact samplers' draws (``mechanisms.secure``: discrete Gaussian and Laplace);
``DRAW_RULES`` says, for each registered mechanism, which events those draws must be charged as (one rule per
mechanism, written from its paper, not from its code):

* Gaussian family: one Gaussian event per noise vector (a generator call, or ``size`` exact discrete draws);
* Laplace: one Laplace event per noise vector (likewise);
* report-noisy-max and noisy-top: one pure selection event per round (a generator call over the scores);
* peeling: one pure selection event per round, and one Laplace event per released coordinate;
* distributed: one event per release of ``dimension`` coordinates, each the sum of ``parties`` exact shares;
* opaque: one event per call of the released function; non-private: one non-private event and no draw.

``events_match_draws`` compares the counts of the charged event types with the rule's.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np

from ..mechanisms import NoiseSpec, get_mechanism
from ..mechanisms import secure as exact

#: the sampling methods of ``numpy.random.Generator`` a mechanism may draw noise with
SAMPLING = frozenset({"standard_normal", "normal", "laplace", "exponential", "gumbel", "uniform", "random", "integers",
                      "standard_exponential", "choice", "permutation", "permuted", "multivariate_normal", "binomial", "poisson"})


@attrs.define
class Draws:
    """What one ``sample`` call drew: generator calls (method, numbers), exact discrete draws, released-function calls."""

    calls: list[tuple[str, int]] = attrs.field(factory=list)
    gaussian: int = 0  #: exact discrete Gaussian draws (``secure._discrete_gaussian``)
    laplace: int = 0  #: exact discrete Laplace draws outside the Gaussian sampler (``secure._discrete_laplace``)
    functions: int = 0  #: calls of an opaque mechanism's released function


class CountingGenerator:
    """A ``numpy.random.Generator`` that records every sampling call in ``draws`` (and otherwise is the generator)."""

    def __init__(self, rng: np.random.Generator, draws: Draws) -> None:
        self._rng, self._draws = rng, draws

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._rng, name)
        if name not in SAMPLING:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            self._draws.calls.append((name, int(np.size(out))))
            return out

        return counted


@contextmanager
def _counting_exact(draws: Draws) -> Iterator[None]:
    gaussian, laplace = exact._discrete_gaussian, exact._discrete_laplace
    inside = [0]

    def counted_gaussian(num: int, den: int) -> int:
        draws.gaussian += 1
        inside[0] += 1
        try:
            return gaussian(num, den)
        finally:
            inside[0] -= 1

    def counted_laplace(t: int, s: int) -> int:
        if not inside[0]:
            draws.laplace += 1
        return laplace(t, s)

    exact._discrete_gaussian, exact._discrete_laplace = counted_gaussian, counted_laplace
    try:
        yield
    finally:
        exact._discrete_gaussian, exact._discrete_laplace = gaussian, laplace


def count_draws(mechanism: str, value: Any, spec: NoiseSpec, seed: int = 0, **options: Any) -> tuple[Draws, Any]:
    """Release ``value`` through ``mechanism`` (its ``prepare`` and ``sample``) and record what it drew."""
    mech = get_mechanism(mechanism)
    draws = Draws()
    if callable(value):
        inner = value

        def value(rng: Any) -> Any:  # noqa: F811 - the released function, counted
            draws.functions += 1
            return inner(rng)

    prepared = mech.prepare(value, spec, **options)
    with _counting_exact(draws):
        out = mech.sample(prepared, spec, CountingGenerator(np.random.default_rng(seed), draws), **options)  # type: ignore[arg-type]
    return draws, out


def _per(total: int, size: int) -> float:
    return total / size if size else float(total)


def _gaussian(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    if spec.secure:
        return Counter({"DiscreteGaussianEvent": _per(draws.gaussian, size)})
    return Counter({"GaussianEvent": len(draws.calls)})


def _laplace(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    if spec.secure:
        return Counter({"DiscreteLaplaceEvent": _per(draws.laplace, size)})
    return Counter({"LaplaceEvent": len(draws.calls)})


def _selection(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    return Counter({"PureEvent": len(draws.calls)})


def _peeling(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    """``size``: the number of columns (the scores of each selection round); every other number drawn is a value."""
    rounds = sum(1 for _, n in draws.calls if n == size)
    values = sum(n for _, n in draws.calls if n != size)
    return Counter({"PureEvent": rounds, "LaplaceEvent": values})


def _distributed(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    return Counter({"DistributedDiscreteGaussianEvent": _per(draws.gaussian, int(spec.params["parties"]) * size)})


def _opaque(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    assert spec.share is not None
    return Counter({"PureEvent" if spec.share.delta == 0 else "ApproxEvent": draws.functions})


def _non_private(draws: Draws, spec: NoiseSpec, size: int) -> Counter[str]:
    drawn = len(draws.calls) + draws.gaussian + draws.laplace + draws.functions
    return Counter({"NonPrivateEvent": 1 if drawn == 0 else 0})


#: mechanism -> (draws, spec, size) -> the charged events those draws need (``size``: the numbers one noise vector
#: covers; for the selections and peeling, the number of scores)
DRAW_RULES: dict[str, Callable[[Draws, NoiseSpec, int], Counter[str]]] = {
    "gaussian": _gaussian, "shaped_gaussian": _gaussian, "symmetric_gaussian": _gaussian, "laplace": _laplace,
    "report_noisy_max": _selection, "noisy_top": _selection, "peeling": _peeling,
    "distributed_gaussian": _distributed, "distributed_symmetric_gaussian": _distributed,
    "opaque": _opaque, "non_private": _non_private,
}


def events_match_draws(mechanism: str, value: Any, spec: NoiseSpec, size: int, seed: int = 0,
                       **options: Any) -> tuple[bool, Counter[str], Counter[str]]:
    """(charged == needed, the charged event types counted, the events the draws need) for one release."""
    if mechanism not in DRAW_RULES:
        raise KeyError(f"no draw rule for the mechanism {mechanism!r}: add one to privsdr.audit.draws.DRAW_RULES")
    draws, _ = count_draws(mechanism, value, spec, seed, **options)
    return _compared(mechanism, draws, spec, size)


def _compared(mechanism: str, draws: Draws, spec: NoiseSpec, size: int) -> tuple[bool, Counter[str], Counter[str]]:
    """(charged == needed, the event types ``mechanism`` charges for ``spec``, the events ``draws`` need)."""
    charged = Counter(type(e).__name__ for e in get_mechanism(mechanism).events(spec))
    needed = +DRAW_RULES[mechanism](draws, spec, size)
    return charged == needed, charged, needed


def fit_draws(fit: Callable[[], Any]) -> dict[str, tuple[Draws, NoiseSpec, Any]]:
    """Run ``fit()`` with every ``Run``'s per-node generators counting (``plan.execute``) and the release tap recording:
    node -> (what its release drew, the spec it was released with, its noise-free value). One run per fit; the releases
    are recorded by the replay audit's tap (``replay.record``)."""
    from ..plan import Run
    from .replay import record

    runs: list[dict[str, Draws]] = []
    run_enter = Run.__enter__

    def counting_enter(self: Any) -> Any:
        out = run_enter(self)
        counted = {name: Draws() for name in self._rngs}
        runs.append(counted)
        self._rngs = {name: CountingGenerator(rng, counted[name]) for name, rng in self._rngs.items()}
        return out

    Run.__enter__ = counting_enter  # type: ignore[method-assign]
    try:
        _, recording = record(fit)
    finally:
        Run.__enter__ = run_enter  # type: ignore[method-assign]
    (counted,) = runs
    return {r.key[1]: (counted[r.key[1]], r.spec, r.value) for r in recording.releases}


def fit_events_match_draws(fit: Callable[[], Any]) -> dict[str, tuple[bool, Counter[str], Counter[str]]]:
    """For every release of a fit: (charged == needed, the charged event types, the events its draws need). ``size`` of
    each rule is read off the released value (the scores of a selection, the columns of peeling's matrix)."""
    out = {}
    for name, (draws, spec, value) in fit_draws(fit).items():
        arr = np.asarray(value)
        out[name] = _compared(spec.mechanism, draws, spec, arr.shape[-1] if spec.mechanism == "peeling" else arr.size)
    return out
