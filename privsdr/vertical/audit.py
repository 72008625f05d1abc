"""O-P1: the zero-row distinguisher that breaks DP-BCD's privacy claim (spec dpbcd_002.md §4.6, §8).

The paper's neighbours are the actual data and its copies with row r zero-filled. A party's step
releases v_out = v - X beta~ with beta~ = (X^T X)^-1 X^T (v - b): if row r of X is zero, then
(X beta~)_r = 0 exactly, so v_out[r] == v[r] with probability 1 (and v_out[r] == 0 when y_r is
zeroed too); with the real row (x_r != 0) the event has probability 0, because b has a continuous
law. The test "v_out[r] == v[r]" has TPR = 1 and FPR = 0, so no finite epsilon satisfies the
claim: the audit's lower bound exceeds any claimed eps_step and grows like log(samples).

``zero_row_audit`` runs the production step (``dpbcd_steps.paper_step`` with xi from each data
set's own residual) on the pair with a threshold fixed before sampling, through
``privsdr.audit.audit``. Use ``mechanism=`` to run the same distinguisher on another release.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..audit import ApproxDP, AuditResult, audit
from ..core import BlockSolver
from . import dpbcd_steps as steps

Mechanism = Callable[[tuple[np.ndarray, np.ndarray], np.random.Generator], np.ndarray]


def zero_row_pair(X: np.ndarray, v: np.ndarray, row: int, *, zero_label: bool = False) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((X, v), (X', v')): row ``row`` of X zero-filled in X' (and v'[row] = 0 with ``zero_label``)."""
    X1, v1 = np.array(X, dtype=float, copy=True), np.array(v, dtype=float, copy=True)
    X1[row] = 0.0
    if zero_label:
        v1[row] = 0.0
    return (np.asarray(X, dtype=float), np.asarray(v, dtype=float)), (X1, v1)


def paper_step_mechanism(eps_step: float, gamma: float = 1.2, *, noise: str = "radial") -> Mechanism:
    """One party-step of Algorithm 2 on D = (X, v): xi from D's own residual; no abort check."""

    def mechanism(D: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        X, v = D
        solver = BlockSolver(X)
        xi = steps.paper_xi(solver, v, gamma, None)
        return steps.paper_step(solver, v, eps_step, gamma, xi, rng, post_check=False, noise=noise)[1]

    return mechanism


def zero_row_audit(X: np.ndarray, v: np.ndarray, *, eps_step: float, row: int = 0, gamma: float = 1.2, zero_label: bool = False,
                   samples: int = 200, alpha: float = 1e-3, seed: int = 0, mechanism: Mechanism | None = None) -> AuditResult:
    """Audit the claim (eps_step, 0) with the statistic 1[v_out[r] == v[r]] (or 1[v_out[r] == 0] when the
    label row is zeroed too), threshold 0.5 (pre-registered). Expected for the paper's step: FP = 0,
    FN = 0, ``passed`` False (a documented finding, not a bug to hide)."""
    D0, D1 = zero_row_pair(X, v, row, zero_label=zero_label)
    target = 0.0 if zero_label else float(D1[1][row])
    mech = mechanism or paper_step_mechanism(eps_step, gamma)

    def statistic(outputs: Any) -> np.ndarray:
        return np.array([float(np.asarray(o)[row] == target) for o in outputs])

    return audit(mech, D0, D1, claim=ApproxDP(eps_step, 0.0), statistic=statistic, threshold=0.5, samples=samples,
                 alpha=alpha, seed=seed)


def posterior_bound(epsilon: float) -> float:
    """Example 2 of the paper: with two candidate data sets and an (eps, 0)-DP release, the posterior
    of either is at most e^eps / (1 + e^eps) (spec O-P3)."""
    import math

    return 1.0 / (1.0 + math.exp(-epsilon))
