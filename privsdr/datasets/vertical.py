"""Data of the DP-BCD paper (de Jong, Kamphorst & Kroes 2022; spec dpbcd_002.md §7).

* ``dpbcd_synthetic``: §7.1. Seed s; beta ~ N(2, 1.5^2) (p of them); re-seed s; X = Z L^T with L
  the Cholesky factor of the equicorrelation matrix (1 on the diagonal, c off it); y = X beta + e,
  e ~ N(0, var(X beta)/R^2 - var(X beta)) with the sample variance (ddof 0). No intercept, y not
  standardised. The legacy ``RandomState`` stream mimics the authors' ``np.random.seed`` calls.
* ``forest_fires`` / ``garment_productivity``: §7.3, the shipped UCI tables (``data/README.md``)
  preprocessed as the authors' code does, split into the two parties' column blocks.
"""
from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Sequence
from importlib import resources

import attrs
import numpy as np


@attrs.frozen(eq=False)
class VerticalData:
    """A vertically partitioned table: column blocks per party (the label at ``label_party``)."""

    blocks: tuple[np.ndarray, ...]
    y: np.ndarray
    party_names: tuple[str, ...]
    columns: tuple[tuple[str, ...], ...]
    label_party: int = 0
    beta: np.ndarray | None = None

    @property
    def X(self) -> np.ndarray:
        return np.hstack(self.blocks)


def equicorrelation_cholesky(p: int, c: float) -> np.ndarray:
    return np.linalg.cholesky(np.full((p, p), c) + (1.0 - c) * np.eye(p))


def dpbcd_synthetic(n: int = 1000, p: int = 10, *, correlation: float = 0.3, r2: float = 0.3, n_parties: int = 2,
                    seed: int = 2022, beta_seed: int | None = None) -> VerticalData:
    """One data set of the paper's simulation (§7.1). ``beta_seed`` fixes beta across data sets
    (the correlation experiment draws it once with seed 2022); by default it is drawn with ``seed``.
    Party i gets a contiguous block of p // k columns, the last party the rest; party 0 holds y."""
    if not (0.0 <= correlation < 1.0 and 0.0 < r2 < 1.0 and n > p >= n_parties >= 1):
        raise ValueError("need 0 <= correlation < 1, 0 < r2 < 1 and n > p >= n_parties >= 1")
    beta = np.random.RandomState(seed if beta_seed is None else beta_seed).normal(2.0, 1.5, p)
    rs = np.random.RandomState(seed)
    Z = rs.normal(size=(n, p))
    X = Z @ equicorrelation_cholesky(p, correlation).T
    signal = X @ beta
    s2 = signal.var() / r2 - signal.var()
    y = signal + rs.normal(0.0, math.sqrt(s2), n)
    width = p // n_parties
    edges = [i * width for i in range(n_parties)] + [p]
    blocks = tuple(X[:, a:b] for a, b in itertools.pairwise(edges))
    names = tuple(f"party{i}" for i in range(n_parties))
    columns = tuple(tuple(f"x{j}" for j in range(a, b)) for a, b in itertools.pairwise(edges))
    return VerticalData(blocks, y, names, columns, 0, beta)


def _read(name: str) -> list[dict[str, str]]:
    with resources.as_file(resources.files("privsdr.datasets").joinpath("data", name)) as path, open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _dummies(values: Sequence[str], prefix: str) -> tuple[np.ndarray, list[str]]:
    """Indicator columns of every level but the first in sorted order (pandas ``drop_first``)."""
    levels = sorted(set(values))[1:]
    return np.array([[float(v == level) for level in levels] for v in values]), [f"{prefix}_{level}" for level in levels]


def forest_fires() -> VerticalData:
    """Forest fires (517 x 27, no intercept; label log(area + 1)). Bob = {FFMC, DMC, DC, ISI};
    Alice = {X, Y, temp, RH, wind, rain} + 11 month and 6 day dummies (drop-first) and the label
    (spec §7.3: the split of van Kesteren et al. as reconstructed from the plots)."""
    rows = _read("forestfires.csv")
    alice_num = ["X", "Y", "temp", "RH", "wind", "rain"]
    bob_cols = ["FFMC", "DMC", "DC", "ISI"]
    months, month_names = _dummies([r["month"] for r in rows], "month")
    days, day_names = _dummies([r["day"] for r in rows], "day")
    alice = np.column_stack([np.array([[float(r[c]) for c in alice_num] for r in rows]), months, days])
    bob = np.array([[float(r[c]) for c in bob_cols] for r in rows])
    y = np.log1p(np.array([float(r["area"]) for r in rows]))
    return VerticalData((alice, bob), y, ("alice", "bob"), (tuple(alice_num + month_names + day_names), tuple(bob_cols)))


def garment_productivity() -> VerticalData:
    """Garment worker productivity (1197 x 17, no intercept; label actual_productivity). ``wip``
    (missing values) and ``date`` dropped; ``quarter`` as integer codes 0-4 in order of appearance;
    ``department`` and ``day`` dummy-coded (drop-first; ``department_finishing `` keeps the
    source's trailing space). Alice (11): quarter, team, targeted_productivity, smv, over_time,
    incentive, 5 day dummies; Bob (6): idle_time, idle_men, no_of_style_change, no_of_workers,
    2 department dummies (spec §7.3)."""
    rows = _read("garments_worker_productivity.csv")
    quarters = list(dict.fromkeys(r["quarter"] for r in rows))
    quarter = np.array([float(quarters.index(r["quarter"])) for r in rows])
    alice_num = ["team", "targeted_productivity", "smv", "over_time", "incentive"]
    days, day_names = _dummies([r["day"] for r in rows], "day")
    depts, dept_names = _dummies([r["department"] for r in rows], "department")
    bob_num = ["idle_time", "idle_men", "no_of_style_change", "no_of_workers"]
    alice = np.column_stack([quarter, np.array([[float(r[c]) for c in alice_num] for r in rows]), days])
    bob = np.column_stack([np.array([[float(r[c]) for c in bob_num] for r in rows]), depts])
    y = np.array([float(r["actual_productivity"]) for r in rows])
    return VerticalData((alice, bob), y, ("alice", "bob"),
                        (tuple(["quarter"] + alice_num + day_names), tuple(bob_num + dept_names)))
