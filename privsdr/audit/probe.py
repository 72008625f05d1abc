"""Deterministic sensitivity probe: evaluate a query on adversarial neighbours and compare the
largest change with the declared sensitivity (spec/auditing.md §2.3). No sampling, no alpha."""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from ..mechanisms import Sensitivity
from .replay import record


@functools.lru_cache(maxsize=64)
def _upper_triangle(size: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(size)


def released_coordinates(value: Any, mechanism: str = "gaussian") -> np.ndarray:
    """The numbers a mechanism's noise covers (upper triangle with diagonal for symmetric matrices)."""
    arr = np.asarray(value, dtype=float)
    if mechanism == "symmetric_gaussian":
        return arr[_upper_triangle(arr.shape[0])]
    return arr.ravel()


def norm_of(change: np.ndarray, norm: str) -> float:
    return float(norms_of([np.asarray(change)], norm)[0])


@attrs.frozen
class ProbeResult:
    max_change: float
    declared: float
    norm: str
    pairs: int
    worst_pair: int
    passed: bool

    def summary(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        return (f"sensitivity probe {verdict}: largest change {self.max_change:.6g} ({self.norm}) over {self.pairs} "
                f"neighbouring pairs; declared {self.declared:.6g}")


def probe_sensitivity(
    query: Callable[[Any], Any],
    pairs: Iterable[tuple[Any, Any]],
    sensitivity: Sensitivity,
    *,
    mechanism: str = "gaussian",
    rtol: float = 1e-9,
) -> ProbeResult:
    """Fail when some pair changes ``query`` by more than ``sensitivity`` (relative slack ``rtol``)."""
    changes = [released_coordinates(query(d0), mechanism) - released_coordinates(query(d1), mechanism) for d0, d1 in pairs]
    if not changes:
        raise ValueError("the probe needs at least one neighbouring pair")
    values = norms_of(changes, sensitivity.norm)
    worst_i = int(np.argmax(values))  # the first pair with the largest change
    worst = float(values[worst_i])
    if worst <= 0.0:
        worst, worst_i = 0.0, -1
    return ProbeResult(worst, sensitivity.value, sensitivity.norm, len(changes), worst_i, worst <= sensitivity.value * (1 + rtol))


def norms_of(changes: Sequence[np.ndarray], norm: str) -> np.ndarray:
    """``norm_of`` of each change, in one array operation when they all have one size (the probe's pairs)."""
    if len({c.size for c in changes}) != 1:
        return np.concatenate([norms_of([c], norm) for c in changes])
    stacked = np.stack([c.ravel() for c in changes])
    if norm == "l1":
        return np.abs(stacked).sum(axis=1)
    if norm == "l2":
        return np.sqrt(np.sum(stacked * stacked, axis=1))
    if norm == "linf":
        return np.abs(stacked).max(axis=1, initial=0.0)
    raise ValueError(f"unknown norm {norm!r}")


def recorded_releases(fit: Callable[[], Any]) -> dict[str, tuple[Any, Any, Any]]:
    """Run ``fit()`` and return node -> (noise-free value, output, spec) of every release it made in this process (the
    replay audit's recording, ``replay.record``; a node released twice: its last release)."""
    _, recording = record(fit)
    return {r.key[1]: (r.value, r.output, r.spec) for r in recording.releases}


def _value_of(seen: Sequence[dict[str, tuple[Any, Any, Any]]], node: str, i: int) -> Any:
    return seen[i][node][0]


def _same(a: Any, b: Any) -> bool:
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def probe_releases(fit_on: Callable[[Any], Any], datasets: Sequence[Any], pairs: Iterable[tuple[int, int]], *,
                   given: Sequence[str] = (), rtol: float = 1e-9) -> dict[str, ProbeResult]:
    """The sensitivity probe of a whole fit, through its production code: ``fit_on(D)`` runs on every data set with the
    releases recorded (``recorded_releases``); each node's noise-free value is probed over ``pairs`` (indices into
    ``datasets``) against the sensitivity of the spec it was released with. A node's sensitivity holds given the
    earlier outputs (adaptive composition), so a pair counts for the nodes after a ``given`` node (a selection) only
    where that node's outputs agree on both data sets. Returns node -> ``ProbeResult``."""
    seen = [recorded_releases(functools.partial(fit_on, D)) for D in datasets]
    pairs = list(pairs)
    out: dict[str, ProbeResult] = {}
    for node, (_, _, spec) in seen[0].items():
        if spec.noise_off and spec.mechanism == "non_private":
            continue
        kept = [(a, b) for a, b in pairs if node in seen[a] and node in seen[b]
                and (node in given or all(_same(seen[a][g][1], seen[b][g][1]) for g in given if g in seen[a] and g in seen[b]))]
        if not kept:
            continue
        mechanism = "symmetric_gaussian" if spec.mechanism.endswith("symmetric_gaussian") else "gaussian"
        out[node] = probe_sensitivity(functools.partial(_value_of, seen, node), kept, spec.sensitivity, mechanism=mechanism, rtol=rtol)
    return out
