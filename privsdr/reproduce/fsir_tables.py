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
* ``IID (secure)`` (Tables 1-2 only): ``FederatedSIR(aggregation="secure")`` on the same clients at the same
  (2 eps, 2 n^-1.1) and the same slicing and truncation: the clients' sums are added on MPyC (one process per client
  plus the server) and released once for all K n rows. It needs K >= 2 clients and no screening, so it has no K = 1
  column and no high-dimensional table (Tables 3-4 screen). A fit starts K + 1 processes (about 3.5 s at K = 10 and
  17 s at K = 50 on two shared cores; K = 100, 101 processes, was not run), so it runs at K in ``SECURE_K`` only and on the first
  ``secure_reps`` replications of each cell (default ``SECURE_REPS``); its noise comes from the OS CSPRNG, so it does
  not repeat for a seed. Each of its cells shows our mean beside the better of the two published methods.
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
from ._output import merge_secure, write_table

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
SECURE = "IID (secure)"
SECURE_KWARGS: dict[str, Any] = {"mechanism": "iid", "aggregation": "secure", "colluders": 1, "timeout": 900.0}
#: the client counts the secure column runs at (K = 1 has no secure form; K = 100 is left out for its cost: 101
#: processes per fit) and its replications when the caller does not say
SECURE_K = (10, 50)
SECURE_REPS = 1


def paper_values() -> dict[str, Any]:
    return json.loads(resources.files("privsdr.reproduce").joinpath("data/fsir_paper_tables.json").read_text())


def public_slicing(model: str, B: np.ndarray, p: int) -> dict[str, Any]:
    """Classes for model I; otherwise 8 cut points from an independent draw of the same model."""
    if model == "I":
        return {"classes": (0.0, 1.0)}
    _, y, _ = fsir_model(model, 20_000, p, seed=987_654, B=B)
    return {"cut_points": tuple(np.unique(np.quantile(y, np.linspace(0, 1, 9)[1:-1])))}


def _loss(model: str, n: int, p: int, K: int, eps: float, seed: int, high: bool, secure: bool = False,
          secure_only: bool = False) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    X, y, B = fsir_model(model, n, p, seed=rng)  # the first client draws B; the others share it
    clients = [(X, y)] + [fsir_model(model, n, p, seed=rng, B=B)[:2] for _ in range(K - 1)]
    slicing = public_slicing(model, B, p)
    delta = n ** -1.1
    out = {}
    methods = {} if secure_only else dict(METHODS)
    for name, kw in {**methods, **({SECURE: SECURE_KWARGS} if secure else {})}.items():
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
            if name == SECURE:
                raise  # a secure run that fails (a party, a timeout) is an error, never a cell at the worst loss
            out[name] = float(np.sqrt(2 * FSIR_D[model]))
    return out


def run(table: str, reps: int = 2, seed: int = 0, cells: list[tuple[str, int]] | None = None, K_values: tuple[int, ...] = K_GRID,
        secure_reps: int | None = None, secure_K: tuple[int, ...] = SECURE_K, secure_only: bool = False) -> list[dict[str, Any]]:
    """Mean projection loss per (model, size, K) and method; the secure column at K in ``secure_K`` on the first
    ``secure_reps`` replications (default min(reps, SECURE_REPS); 0: none; Tables 1-2 only). ``secure_only``: the
    secure rows alone (the other methods are deterministic for a seed: ``merge_secure`` puts these rows into a table
    already written)."""
    kind, eps, _ = TABLES[table]
    wanted = (min(reps, SECURE_REPS) if kind == "low" else 0) if secure_reps is None else secure_reps
    if wanted < 0:
        raise ValueError(f"secure_reps must be >= 0, got {wanted}")
    if wanted and kind == "high":
        raise ValueError(f"{table} screens columns, which secure aggregation does not do: it has no secure column")
    if wanted and any(k < 2 for k in secure_K):
        raise ValueError("secure aggregation needs K >= 2 clients")
    paper = paper_values()["tables"][table]
    grid = cells or [(key.split("|")[0], int(key.split("|")[1])) for key in paper]
    tasks = [(m, size, K, r) for (m, size) in grid for K in K_values for r in range(reps)
             if not secure_only or (K in secure_K and r < wanted)]
    results: dict[tuple, list[dict[str, float]]] = {}
    start = time.perf_counter()
    for model, size, K, r in progress(tasks, len(tasks), table, min_total=1):
        n, p = (size, 10) if kind == "low" else (1000, size)
        cell_seed = seed + 7919 * r + zlib.crc32(f"{table}-{model}-{size}-{K}".encode()) % 10_007
        results.setdefault((model, size, K), []).append(_loss(model, n, p, K, eps, cell_seed, kind == "high",
                                                              secure=K in secure_K and r < wanted, secure_only=secure_only))
    elapsed = time.perf_counter() - start
    rows = []
    for (model, size, K), runs in results.items():
        ref = paper[f"{model}|{size}"]
        k_index = K_GRID.index(K)
        for method in (*METHODS, SECURE):
            values = [r[method] for r in runs if method in r]
            if not values:
                continue
            base = method.split(" ")[0]
            published = (ref[base][k_index] if "paper" in method else
                         min(ref["IID"][k_index], ref["VGM"][k_index]) if method == SECURE else None)
            rows.append({"table": table, "model": model, "size": size, "K": K, "method": method,
                         "mean": float(np.mean(values)), "sd": float(np.std(values)), "reps": len(values),
                         "paper": published, "compared_with": COMPARED_WITH.get(method, ""), "seconds_total": round(elapsed, 2)})
    return rows


#: what each row's ``paper`` value is
COMPARED_WITH = {"IID (paper)": "published IID", "VGM (paper)": "published VGM", SECURE: "better of published IID and VGM"}


def to_markdown(rows: list[dict[str, Any]]) -> str:
    table = rows[0]["table"]
    title = TABLES[table][2]
    Ks = sorted({r["K"] for r in rows})
    cells = list(dict.fromkeys((r["model"], r["size"]) for r in rows))
    by = {(r["model"], r["size"], r["K"], r["method"]): r for r in rows}
    secure_Ks = sorted({r["K"] for r in rows if r["method"] == SECURE})
    columns = [(method, K) for method in METHODS for K in Ks] + [(SECURE, K) for K in secure_Ks]
    header = ["model", "n" if TABLES[table][0] == "low" else "p"] + [f"{method} K={K}" for method, K in columns]
    lines = [f"**{title}** — ours: mean over {rows[0]['reps']} replications (the paper: 400); `ours / paper`", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, size in cells:
        vals = []
        for method, K in columns:
            r = by[(model, size, K, method)]
            vals.append(f"{r['mean']:.3f} / {r['paper']:.3f}" if r["paper"] is not None else f"{r['mean']:.3f}")
        lines.append(f"| {model} | {size} | " + " | ".join(vals) + " |")
    if secure_Ks:
        reps = sorted({r["reps"] for r in rows if r["method"] == SECURE})
        lines += ["", f"{SECURE}: FederatedSIR(aggregation=\"secure\") at the same (2 eps, 2 n^-1.1), the clients' sums added on "
                  f"MPyC and released once; mean over {'/'.join(map(str, reps))} replication(s) (the first of each cell: each "
                  "fit starts K + 1 processes), shown as `ours / the better of the published IID and VGM`. It has no K = 1 "
                  "column (it needs two clients); K = 100 is left out for its cost (101 processes per fit).", ""]
        for K in secure_Ks:
            ratios = np.array([r["mean"] / r["paper"] for r in rows if r["method"] == SECURE and r["K"] == K])
            lines.append(f"* K = {K}: the secure mean is below the better published value in {int(np.sum(ratios < 1))} of "
                         f"{ratios.size} cells (ours / published: median {np.median(ratios):.2f}, largest {ratios.max():.2f}).")
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    return write_table(rows, out_dir, to_markdown)


def merge(secure_rows: list[dict[str, Any]], out_dir: str | Path) -> list[dict[str, Any]]:
    """The table in ``out_dir`` with these secure rows in place of its own (``_output.merge_secure``)."""
    return merge_secure(secure_rows, out_dir, lambda row: row["method"] == SECURE,
                        lambda row: (str(row["model"]), int(row["size"]), int(row["K"])))
