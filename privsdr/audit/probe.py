"""Deterministic sensitivity probe: evaluate a query on adversarial neighbours and compare the
largest change with the declared sensitivity (spec/auditing.md §2.3). No sampling, no alpha."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs
import numpy as np

from ..mechanisms import Sensitivity


def released_coordinates(value: Any, mechanism: str = "gaussian") -> np.ndarray:
    """The numbers a mechanism's noise covers (upper triangle with diagonal for symmetric matrices)."""
    arr = np.asarray(value, dtype=float)
    if mechanism == "symmetric_gaussian":
        return arr[np.triu_indices(arr.shape[0])]
    return arr.ravel()


def norm_of(change: np.ndarray, norm: str) -> float:
    if norm == "l1":
        return float(np.abs(change).sum())
    if norm == "l2":
        return float(np.sqrt(np.sum(change * change)))
    if norm == "linf":
        return float(np.abs(change).max(initial=0.0))
    raise ValueError(f"unknown norm {norm!r}")


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
    worst, worst_i, count = 0.0, -1, 0
    for i, (d0, d1) in enumerate(pairs):
        change = released_coordinates(query(d0), mechanism) - released_coordinates(query(d1), mechanism)
        value = norm_of(change, sensitivity.norm)
        count += 1
        if value > worst:
            worst, worst_i = value, i
    if count == 0:
        raise ValueError("the probe needs at least one neighbouring pair")
    return ProbeResult(worst, sensitivity.value, sensitivity.norm, count, worst_i, worst <= sensitivity.value * (1 + rtol))
