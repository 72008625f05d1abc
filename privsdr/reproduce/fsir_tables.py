"""Reproduction of FSIR Tables 1-4 and Figures 2-3 (He, Zhang & Chen; spec fsir_000.md §7).

The paper omits R, the slicing and the centring (spec §7.7), so each choice here is ours:

* X is standard normal-ish and centred at 0 (public); truncation R = 3 (``norm="linf"``); the
  estimator assumes centred data, as the paper (``center="none"``: no proportions, no mean correction).
* Continuous y: H = 8 public cut points = the quantiles of y in an independent draw of the same
  model (a simulation oracle: the design is public); model I: the classes {0, 1}.
* Each client spends (2 eps, 2 n^-1.1): (eps, n^-1.1) on each of Sigma~ and M~ (the tables' convention).
* ``IID (paper)``: Proposition 2 (classical) + MOD-SULQ with c_R = R sqrt(p);
  ``VGM (paper)``: Algorithm 2 as published (paper_approx floor; a *claimed* node) + MOD-SULQ;
  ``IID (certified)``: analytic Gaussian + Analyze-Gauss.
* High dimension (Tables 3-4): paper mode screens with CCMD (each client votes for the s largest
  |slice mean - mean| per slice, the server keeps a strict majority; not private), certified mode
  with the private peeling screen (20% of the budget; the server keeps the s most-voted coordinates).
"""
from __future__ import annotations

import json
import time
import warnings
import zlib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .. import core
from .._progress import progress
from ..accounting import Budget
from ..datasets import FSIR_D, fsir_model
from ..federated import FederatedSIR
from ._output import write_table

K_GRID = (1, 10, 50, 100)
METHODS: dict[str, dict[str, Any]] = {
    "IID (paper)": {"mechanism": "iid", "calibration": "classical", "cov_mechanism": "modsulq"},
    "VGM (paper)": {"mechanism": "vgm", "calibration": "paper_approx", "cov_mechanism": "modsulq"},
    "IID (certified)": {"mechanism": "iid", "calibration": "analytic", "cov_mechanism": "analyze_gauss"},
}
TABLES = {
    "fsir-table1": ("low", 1.0, "FSIR Table 1: p = 10, H = 8, eps = 1; mean projection loss (rows: client size n)"),
    "fsir-table2": ("low", 2.0, "FSIR Table 2: p = 10, H = 8, eps = 2; mean projection loss (rows: client size n)"),
    "fsir-table3": ("high", 1.0, "FSIR Table 3: n = 1000, H = 8, eps = 1; mean projection loss (rows: dimension p)"),
    "fsir-table4": ("high", 2.0, "FSIR Table 4: n = 1000, H = 8, eps = 2; mean projection loss (rows: dimension p)"),
}
R = 3.0


def paper_values() -> dict[str, Any]:
    return json.loads(resources.files("privsdr.reproduce").joinpath("data/fsir_paper_tables.json").read_text())


def public_slicing(model: str, B: np.ndarray, p: int) -> dict[str, Any]:
    """Classes for model I; otherwise 8 cut points from an independent draw of the same model."""
    if model == "I":
        return {"classes": (0.0, 1.0)}
    _, y, _ = fsir_model(model, 20_000, p, seed=987_654, B=B)
    return {"cut_points": tuple(np.unique(np.quantile(y, np.linspace(0, 1, 9)[1:-1])))}


def _loss(model: str, n: int, p: int, K: int, eps: float, seed: int, high: bool) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    X, y, B = fsir_model(model, n, p, seed=rng)  # the first client draws B; the others share it
    clients = [(X, y)] + [fsir_model(model, n, p, seed=rng, B=B)[:2] for _ in range(K - 1)]
    slicing = public_slicing(model, B, p)
    delta = n ** -1.1
    out = {}
    for name, kw in METHODS.items():
        extra: dict[str, Any] = {}
        if high:
            s = 5 if p <= 500 else 10
            extra = ({"screening": "ccmd", "ccmd_rule": "top_s", "screen_size": s} if "paper" in name
                     else {"screening": "private", "screen_size": s, "screen_share": 0.2})
        est = FederatedSIR(FSIR_D[model], bound=R, budget=Budget(2 * eps, 2 * delta), allow_uncertified=True,
                           psd_floor=1e-6, random_state=seed, center="none", **slicing, **kw, **extra)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(clients)
            out[name] = core.projection_distance(est.directions_, B)
        except Exception:  # noqa: BLE001 - e.g. screening kept too few coordinates: the estimate fails
            out[name] = float(np.sqrt(2 * FSIR_D[model]))
    return out


def run(table: str, reps: int = 2, seed: int = 0, cells: list[tuple[str, int]] | None = None, K_values: tuple[int, ...] = K_GRID) -> list[dict[str, Any]]:
    kind, eps, _ = TABLES[table]
    paper = paper_values()["tables"][table]
    grid = cells or [(key.split("|")[0], int(key.split("|")[1])) for key in paper]
    tasks = [(m, size, K, r) for (m, size) in grid for K in K_values for r in range(reps)]
    results: dict[tuple, list[dict[str, float]]] = {}
    start = time.perf_counter()
    for model, size, K, r in progress(tasks, len(tasks), table, min_total=1):
        n, p = (size, 10) if kind == "low" else (1000, size)
        cell_seed = seed + 7919 * r + zlib.crc32(f"{table}-{model}-{size}-{K}".encode()) % 10_007
        results.setdefault((model, size, K), []).append(_loss(model, n, p, K, eps, cell_seed, kind == "high"))
    elapsed = time.perf_counter() - start
    rows = []
    for (model, size, K), runs in results.items():
        ref = paper[f"{model}|{size}"]
        k_index = K_GRID.index(K)
        for method in METHODS:
            values = [r[method] for r in runs]
            base = method.split(" ")[0]
            rows.append({"table": table, "model": model, "size": size, "K": K, "method": method,
                         "mean": float(np.mean(values)), "sd": float(np.std(values)), "reps": reps,
                         "paper": ref[base][k_index] if "paper" in method else None, "seconds_total": round(elapsed, 2)})
    return rows


def to_markdown(rows: list[dict[str, Any]]) -> str:
    table = rows[0]["table"]
    title = TABLES[table][2]
    Ks = sorted({r["K"] for r in rows})
    cells = list(dict.fromkeys((r["model"], r["size"]) for r in rows))
    by = {(r["model"], r["size"], r["K"], r["method"]): r for r in rows}
    header = ["model", "n" if TABLES[table][0] == "low" else "p"]
    for method in METHODS:
        header += [f"{method} K={K}" for K in Ks]
    lines = [f"**{title}** — ours: mean over {rows[0]['reps']} replications (the paper: 400); `ours / paper`", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, size in cells:
        vals = []
        for method in METHODS:
            for K in Ks:
                r = by[(model, size, K, method)]
                vals.append(f"{r['mean']:.3f} / {r['paper']:.3f}" if r["paper"] is not None else f"{r['mean']:.3f}")
        lines.append(f"| {model} | {size} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    return write_table(rows, out_dir, to_markdown)
