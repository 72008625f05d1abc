"""What an estimator declares for a secure fit over sites (``privsdr.federated.SecureSites``): its blocks.

Under horizontal partitioning (K sites, disjoint rows) every Gram block of the augmented row is a sum over the sites,
sum_i a_i b_i^T = sum_k sum_{i in site k} a_i b_i^T, so the central release of the block is the secure sum of the
sites' local block sums (``privsdr.secure.secure_release``) with distributed discrete Gaussian noise. An estimator
that supports it returns a ``SiteBlocks`` from ``_site_blocks(n_features, n_samples)``:

* ``plan``: the estimator's own plan of its central release (its node builder: DPPLS S2's ``ssp_plan``, the
  mean-covariance nodes), every sensitivity from ``released.gram``; ``distributed_plan`` turns each Gaussian node into
  the distributed release of the same sensitivity, with K noise shares of which t may collude;
* ``statistics(X, y)``: one site's block sums of its own (clipped) rows, divided by ``per`` (1 under add/remove, where
  n is not public; the public total N under replace-one): the central statistics are their sum;
* ``entry_bounds``: a public bound on every coordinate of one row's term (C^2 for X^T X, C C_y for X^T y, ...), which
  with ``per`` and the public cap on a site's rows bounds one site's statistic (``site_bounds``: it sizes the field);
* ``finish(released, report, plan, ledger)``: the estimator's own post-processing of the ``Released``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from ..errors import ValidationError
from ..plan import Plan

#: the distributed release of each Gaussian node (``mechanisms.distributed``: the same sensitivity, noise in shares)
DISTRIBUTED = {"gaussian": "distributed_gaussian", "symmetric_gaussian": "distributed_symmetric_gaussian"}


@attrs.frozen(eq=False)
class SiteBlocks:
    """An estimator's declared blocks for a secure fit over sites (module docstring)."""

    plan: Plan
    budget: Any
    ledger: Any
    shapes: Mapping[str, tuple[int, ...]]  #: node -> the shape of its array
    entry_bounds: Mapping[str, float]  #: node -> a public bound on every coordinate of one row's term
    per: float  #: every site divides its sums by this public number (1: raw sums, n not public)
    statistics: Callable[[np.ndarray, np.ndarray | None], Mapping[str, np.ndarray]]
    finish: Callable[..., Any]
    algorithm: str
    random_state: Any = None
    needs_y: bool = True
    notes: tuple[str, ...] = ()


def dimension(mechanism: str, shape: tuple[int, ...]) -> int:
    """The numbers a node releases: the upper triangle with its diagonal of a symmetric p x p node, else every entry."""
    if mechanism == "symmetric_gaussian":
        return shape[0] * (shape[0] + 1) // 2
    return int(math.prod(shape))


def distributed_plan(plan: Plan, parties: int, colluders: int, shapes: Mapping[str, tuple[int, ...]]) -> Plan:
    """``plan`` with every node released as a secure sum of ``parties`` noise shares, ``colluders`` of which may
    collude: the same sensitivities, weights and parents; mechanism ``distributed_gaussian`` (a symmetric matrix:
    ``distributed_symmetric_gaussian``), analytic calibration. A node that is not a certified Gaussian with a weight
    (a fixed share, a claimed or non-private release) has no distributed form and is refused."""
    out = Plan(plan.name, plan.relation, {**plan.public_params, "aggregation": "secure sum over sites", "sites": int(parties),
                                          "colluders": int(colluders)})
    for name, node in plan.nodes.items():
        kind = DISTRIBUTED.get(node.mechanism)
        if kind is None or node.weight is None or node.status.value != "certified" or node.adaptive:
            raise ValidationError(f"node {name!r} ({node.mechanism}) has no secure form over sites: only certified Gaussian "
                                  "releases of sums are summed securely")
        if node.calibration not in (None, "analytic"):
            raise ValidationError(f"node {name!r} asks for the {node.calibration!r} calibration; the distributed discrete Gaussian "
                                  "of a secure sum is calibrated analytically (use the default calibration)")
        out.add(name, kind, node.sensitivity, weight=node.weight, calibration="analytic", parents=node.parents,
                params={"parties": int(parties), "colluders": int(colluders), "dimension": dimension(node.mechanism, tuple(shapes[name]))},
                description=node.description)
    return out


def site_bounds(blocks: SiteBlocks, max_rows: int) -> dict[str, float]:
    """A public bound on every coordinate of one site's statistic: a site of n_k rows sums n_k terms, each within its
    entry bound, and divides by ``per``: n_k <= N = per under replace-one, n_k <= ``max_rows`` (a public cap) when n
    is not public (``per`` = 1)."""
    rows = 1.0 if blocks.per > 1 else float(max_rows)
    return {name: float(bound) * rows for name, bound in blocks.entry_bounds.items()}
