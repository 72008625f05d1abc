"""End-to-end audits of whole fits (spec/auditing.md §2.4): the statistic and its threshold come
from the noise-free outputs on D and D' (a fit under ``Budget.infinite()``), fixed before sampling."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..report import PrivacyReport
from .claims import GDP, ApproxDP, Claim
from .core import AuditResult, audit

GAUSSIAN_FAMILY = ("gaussian", "shaped_gaussian", "symmetric_gaussian")


def claim_from_report(report: PrivacyReport) -> Claim:
    """The claim a fit makes: mu-GDP if every released node is a certified Gaussian, else (eps, delta)."""
    released = [n for n in report.nodes if n.released]
    eps, delta = report.spent
    if released and all(n.mechanism in GAUSSIAN_FAMILY and n.status == "certified" for n in released):
        return GDP.composed([n.noise_multiplier for n in released], delta)
    return ApproxDP(eps, delta)


def projection_statistic(reference0: Any, reference1: Any) -> tuple[Callable[[Any], np.ndarray], float]:
    """T(y) = <y, r1 - r0> and the pre-registered threshold T((r0 + r1)/2), for vector or matrix outputs."""
    r0, r1 = np.asarray(reference0, dtype=float), np.asarray(reference1, dtype=float)
    direction = (r1 - r0).ravel()
    if not np.any(direction):
        raise ValueError("the noise-free outputs on D and D' coincide: this pair cannot be distinguished")

    def statistic(outputs: Any) -> np.ndarray:
        return np.array([np.asarray(o, dtype=float).ravel() @ direction for o in outputs])

    return statistic, float(((r0 + r1) / 2.0).ravel() @ direction)


def subspace_statistic(basis0: np.ndarray, basis1: np.ndarray) -> tuple[Callable[[Any], np.ndarray], float]:
    """T(V) = <V V^T, P1 - P0>_F on projectors (sign/rotation invariant), threshold at the midpoint."""

    def projector(b: np.ndarray) -> np.ndarray:
        q, _ = np.linalg.qr(np.asarray(b, dtype=float))
        return q @ q.T

    p0, p1 = projector(basis0), projector(basis1)
    a = p1 - p0
    stat = lambda outputs: np.array([np.sum(projector(o) * a) for o in outputs])  # noqa: E731
    return stat, float(np.sum((p0 + p1) / 2.0 * a))


def membership_statistic(index: int) -> tuple[Callable[[Any], np.ndarray], float]:
    """For top-k / peeling outputs: T = 1[index selected], threshold 0.5 (pre-registered)."""

    def statistic(outputs: Any) -> np.ndarray:
        return np.array([float(index in np.atleast_1d(o)) for o in outputs])

    return statistic, 0.5


def audit_estimator(
    fit: Callable[[Any, Any], Any],
    D0: Any,
    D1: Any,
    *,
    reference: Callable[[Any], Any],
    claim: Claim,
    kind: str = "vector",
    samples: int = 2_000,
    alpha: float = 1e-3,
    seed: int = 0,
) -> AuditResult:
    """Audit a whole fit. ``fit(D, random_state)`` returns the released output; ``reference(D)`` the
    same output without noise. ``kind``: ``vector`` (projection), ``subspace`` (projector alignment),
    or ``membership`` (``reference`` then returns the index whose selection distinguishes D')."""
    if kind == "membership":
        statistic, threshold = membership_statistic(int(reference(D1)))
    else:
        r0, r1 = reference(D0), reference(D1)
        statistic, threshold = (subspace_statistic if kind == "subspace" else projection_statistic)(r0, r1)
    return audit(lambda D, rng: fit(D, rng), D0, D1, claim=claim, statistic=statistic, threshold=threshold,
                 samples=samples, alpha=alpha, seed=seed)
