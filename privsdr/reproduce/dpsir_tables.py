"""Reproduction of DP-SIR Tables 1 and 2 (Xia, Zhang & Cai 2024; spec dpsir_003.md §8.1).

Each cell draws ``reps`` data sets of model M1..M4 (mu redrawn per replication, X clipped to
[-1, 1], H = 4 slices, true K, (eps, delta) = (1, n^-1.1)) and reports the median of
||P_B - P_B_hat||_F for:

* the non-private reference (Table 1: SIR on all data; Table 2: Oracle-SIR on X[:, :6]);
* ``paper`` mode: equal-count slices read off the data (a ``none`` node, as the paper presumably
  did), the printed classical calibrations, sequential per-step budgets (Algorithm 2);
* ``certified`` mode: slice boundaries from a DP quantile release over a public grid, analytic
  calibration, steps at the full budget by parallel composition, tight global noise scale;
* Table 1 also: privsdr's default certified estimator (``algorithm="moments"``: sufficient statistics
  released once), at the same budget and with the same DP quantile slices.

The DP-RF / DP-TRF baselines (Hu et al. 2023) are not implemented (spec §10 E6).
"""
from __future__ import annotations

import time
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .. import core
from .._progress import progress
from ..accounting import Budget
from ..algorithms import DPSIR, SparseDPSIR
from ..datasets import TRUE_K, sir_model
from ._output import write_table

# Medians of ||P_B - P_B_hat||_F over 1000 replications, copied from the paper (spec §8.1).
# Table 1's "M2 (2000, 40)" row is read as (20000, 40) (spec §10 E5).
TABLE1_PAPER = {
    ("M1", 20000, 20): (0.035, 0.346, 1.310, 0.334), ("M1", 20000, 40): (0.050, 0.950, 1.401, 0.918),
    ("M1", 40000, 20): (0.028, 0.183, 0.939, 0.179), ("M1", 40000, 40): (0.037, 0.549, 1.398, 0.517),
    ("M2", 20000, 20): (0.044, 0.555, 1.369, 0.520), ("M2", 20000, 40): (0.062, 1.274, 1.403, 1.239),
    ("M2", 40000, 20): (0.033, 0.290, 1.359, 0.274), ("M2", 40000, 40): (0.046, 0.877, 1.404, 0.814),
    ("M3", 20000, 20): (0.116, 1.435, 1.649, 1.432), ("M3", 20000, 40): (0.170, 1.714, 1.707, 1.701),
    ("M3", 40000, 20): (0.085, 1.392, 1.630, 1.388), ("M3", 40000, 40): (0.119, 1.522, 1.710, 1.512),
    ("M4", 20000, 20): (0.087, 1.387, 1.639, 1.381), ("M4", 20000, 40): (0.125, 1.626, 1.705, 1.610),
    ("M4", 40000, 20): (0.058, 1.139, 1.191, 1.124), ("M4", 40000, 40): (0.089, 1.466, 1.700, 1.458),
}
TABLE1_COLUMNS = ("SIR", "DP-Ini", "DP-RF", "DP-SIR")
TABLE2_PAPER = {
    ("M1", 1000, 1000): (0.038, 0.371, 0.344, 0.327), ("M1", 1000, 2000): (0.037, 0.392, 0.364, 0.346),
    ("M1", 2000, 1000): (0.028, 0.178, 0.154, 0.139), ("M1", 2000, 2000): (0.029, 0.189, 0.164, 0.145),
    ("M2", 1000, 1000): (0.086, 0.586, 0.826, 0.556), ("M2", 1000, 2000): (0.044, 0.522, 0.494, 0.463),
    ("M2", 2000, 1000): (0.034, 0.286, 0.256, 0.249), ("M2", 2000, 2000): (0.035, 0.287, 0.251, 0.237),
    ("M3", 2000, 2000): (0.055, 0.908, 1.006, 0.761), ("M3", 2000, 4000): (0.057, 0.861, 1.006, 0.710),
    ("M3", 4000, 2000): (0.040, 0.656, 1.002, 0.536), ("M3", 4000, 4000): (0.041, 0.642, 1.002, 0.514),
    ("M4", 2000, 2000): (0.046, 0.603, 1.004, 0.466), ("M4", 2000, 4000): (0.046, 0.580, 1.004, 0.461),
    ("M4", 4000, 2000): (0.034, 0.391, 1.001, 0.308), ("M4", 4000, 4000): (0.031, 0.382, 1.001, 0.298),
}
TABLE2_COLUMNS = ("Oracle-SIR", "DP-SIni", "DP-TRF", "DP-SSIR")
H = 4


def public_grid(model: str) -> np.ndarray:
    """Public candidate cut points for the DP quantile release: the models' response scales are
    public knowledge (|b^T x| <= 20 for M1/M3; M2/M4 are exponential, so a sinh-spaced grid)."""
    if model in ("M1", "M3"):
        return np.linspace(-40.0, 40.0, 801)
    return np.sinh(np.linspace(-23.0, 23.0, 801))


def _sir_full(X: np.ndarray, y: np.ndarray, K: int) -> np.ndarray:
    """SIR on the paper's H equal-count slices (Arc's rule: never more than H; at the tables' n, H slices of n / H)."""
    labels = core.slice_by_cut_points(y, core.equal_count_cut_points(y, H, rule="arc"))
    return core.classical_sir(X, labels, H, K)[0]


def _oracle_sir(X: np.ndarray, y: np.ndarray, K: int) -> np.ndarray:
    B = np.zeros((X.shape[1], K))
    B[:6] = _sir_full(X[:, :6], y, K)
    return B


def _fit(cls: type, mode: str, model: str, K: int, X: np.ndarray, y: np.ndarray, seed: int, **kw: Any) -> Any:
    budget = Budget(1.0, X.shape[0] ** -1.1)
    slicing = {"y_grid": public_grid(model)} if mode == "certified" else {}
    est = cls(K, bound=1.0, n_slices=H, mode=mode, budget=budget, random_state=seed, allow_uncertified=True, **slicing, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BIC/cap warnings are irrelevant with K given
        return est.fit(X, y)


def _cell(table: str, model: str, n: int, p: int, seed: int) -> dict[str, float]:
    """One replication of one cell: distance of every method."""
    X, y, B = sir_model(model, n, p, seed=seed)
    K = TRUE_K[model]
    out: dict[str, float] = {}
    if table == "dpsir-table1":
        out["SIR"] = core.projection_distance(_sir_full(X, y, K), B)
        for mode in ("paper", "certified"):
            est = _fit(DPSIR, mode, model, K, X, y, seed, algorithm="onepass")
            out[f"DP-Ini ({mode})"] = core.projection_distance(est.init_directions_, B)
            out[f"DP-SIR ({mode})"] = core.projection_distance(est.directions_, B)
        est = _fit(DPSIR, "certified", model, K, X, y, seed, algorithm="moments")
        out["DPSIR moments (certified)"] = core.projection_distance(est.directions_, B)
    else:
        out["Oracle-SIR"] = core.projection_distance(_oracle_sir(X, y, K), B)
        for mode in ("paper", "certified"):
            est = _fit(SparseDPSIR, mode, model, K, X, y, seed, sparsity=6, algorithm="onepass")
            out[f"DP-SIni ({mode})"] = core.projection_distance(est.init_directions_, B)
            out[f"DP-SSIR ({mode})"] = core.projection_distance(est.directions_, B)
        est = _fit(SparseDPSIR, "certified", model, K, X, y, seed, sparsity=6, algorithm="moments")
        out["SparseDPSIR moments (certified)"] = core.projection_distance(est.directions_, B)
    return out


TABLES: dict[str, tuple[dict, tuple[str, ...], str]] = {
    "dpsir-table1": (TABLE1_PAPER, TABLE1_COLUMNS, "DP-SIR Table 1: low dimensions, medians of ||P_B - P_B_hat||_F"),
    "dpsir-table2": (TABLE2_PAPER, TABLE2_COLUMNS, "DP-SIR Table 2: sparse high dimensions (s = 6), medians of ||P_B - P_B_hat||_F"),
}


def run(table: str, reps: int = 3, seed: int = 0, cells: list[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]:
    """Medians per cell and method, beside the paper's values (None for a cell of ``cells`` the paper has not)."""
    paper, columns, _ = TABLES[table]
    grid = cells or list(paper)
    rows: list[dict[str, Any]] = []
    tasks = [(cell, r) for cell in grid for r in range(reps)]
    results: dict[tuple, list[dict[str, float]]] = {cell: [] for cell in grid}
    start = time.perf_counter()
    for (model, n, p), r in progress(tasks, len(tasks), table, min_total=1):
        cell_seed = seed + 1000 * r + zlib.crc32(f"{model}-{n}-{p}".encode()) % 997  # stable across processes
        results[(model, n, p)].append(_cell(table, model, n, p, cell_seed))
    elapsed = time.perf_counter() - start
    for cell in grid:
        ours, published = results[cell], paper.get(cell)  # a cell the paper has no value for: None beside ours
        for method in ours[0]:
            base = method.split(" (")[0]
            paper_value = published[columns.index(base)] if published is not None and base in columns else None
            rows.append({
                "table": table, "model": cell[0], "n": cell[1], "p": cell[2], "method": method,
                "median": float(np.median([o[method] for o in ours])), "paper": paper_value, "reps": reps,
            })
    for row in rows:
        row["seconds_total"] = round(elapsed, 2)
    return rows


def to_markdown(rows: list[dict[str, Any]]) -> str:
    table = rows[0]["table"]
    _, columns, title = TABLES[table]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cells = list(dict.fromkeys((r["model"], r["n"], r["p"]) for r in rows))
    by = {(r["model"], r["n"], r["p"], r["method"]): r for r in rows}
    header = ["model", "(n, p)"] + [f"{m} ours / paper" for m in methods]
    lines = [f"**{title}** — ours: median over {rows[0]['reps']} replications (the paper: 1000)", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell in cells:
        vals = []
        for m in methods:
            r = by[(*cell, m)]
            vals.append(f"{r['median']:.3f} / {r['paper']:.3f}" if r["paper"] is not None else f"{r['median']:.3f}")
        lines.append(f"| {cell[0]} | ({cell[1]}, {cell[2]}) | " + " | ".join(vals) + " |")
    lines += ["", "paper mode: data-quantile slices (not private), printed calibrations; certified: DP quantiles, "
              "analytic calibration, parallel composition; moments: privsdr's default estimator (sufficient "
              "statistics released once; sparse: a top-s selection on all rows, then the moments on the selected "
              "columns). DP-RF/DP-TRF are not implemented."]
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    return write_table(rows, out_dir, to_markdown)
