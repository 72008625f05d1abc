"""The edPLS paper's reconstruction attack (Algorithm K; Sec. 2.3 Eq. 5, Figs 1-2; spec §3.4, §6.7).

Holder i received the global model's weights W (or X-loadings P), fitted on the stacked data of
all holders, and fits its own noise-free local PLS with the same number of components. What the
global components contain beyond the span of its own local components,

    W_perp = W - W_i (W_i^T W_i)^{-1} W_i^T W,

points at the variability that only the other holders' data have; its column for component 3
peaks where holder j's unique signal lies. The paper judges this by eye; the metrics here are

* hit: argmax_k |W_perp[k, a]| lies within ``tolerance`` indices of the other holder's peak;
* cosine: |cos| between W_perp[:, a] and the other holder's unique signal with its part in
  span(W_i) removed (1 = perfect reconstruction of the signal's shape).

Chance level of a hit is (2 tolerance + 1) / m. Numerics only; the caller supplies the global
model (any estimator's ``x_weights_`` / ``x_loadings_``).
"""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .. import core


def residual_components(global_components: np.ndarray, local_components: np.ndarray) -> np.ndarray:
    """K2: the part of each global column outside span(local columns) (least squares, so rank-safe)."""
    G = np.asarray(global_components, dtype=float)
    L = np.asarray(local_components, dtype=float)
    coef, *_ = np.linalg.lstsq(L, G, rcond=None)
    return G - L @ coef


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


@attrs.frozen
class AttackResult:
    """One attack: the residual column inspected, its peak, and the two success metrics."""

    residual: np.ndarray = attrs.field(eq=False)
    component: int
    peak_index: int
    target_index: int
    hit: bool
    cosine: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "peak_index": self.peak_index, "target_index": self.target_index,
                "hit": self.hit, "cosine": self.cosine}


def reconstruction_attack(
    global_components: np.ndarray,
    X_local: np.ndarray,
    y_local: np.ndarray,
    *,
    target_index: int,
    component: int = 3,
    use: str = "weights",
    tolerance: int = 2,
    unique_signal: np.ndarray | None = None,
) -> AttackResult:
    """Algorithm K by holder i: local noise-free PLS (centred, same A), residual, peak of column ``component``.

    ``global_components`` is m x A: the released W (``use="weights"``) or P (``use="loadings"``).
    """
    G = np.asarray(global_components, dtype=float)
    A = G.shape[1]
    if not 1 <= component <= A:
        raise ValueError(f"component must be in 1..{A}")
    if use not in ("weights", "loadings"):
        raise ValueError("use must be 'weights' or 'loadings'")
    local = core.nipals_pls1(X_local, y_local, A)  # K1 (spec A21: centred on the local means)
    L = local.weights if use == "weights" else local.loadings
    column = residual_components(G, L)[:, component - 1]
    peak = int(np.argmax(np.abs(column)))
    cosine = None
    if unique_signal is not None:
        target = residual_components(np.asarray(unique_signal, dtype=float)[:, None], L)[:, 0]
        cosine = float(abs(_unit(column) @ _unit(target)))
    return AttackResult(column, component, peak, int(target_index), abs(peak - int(target_index)) <= tolerance, cosine)


def hit_rate(results: list[AttackResult]) -> float:
    """Fraction of runs whose peak landed within the tolerance of the target."""
    return float(np.mean([r.hit for r in results])) if results else float("nan")
