"""FSIR Figures 2 and 3 as curves (CSV + PNG): the cost of privacy in n (K = 1) and the gain in K.

Figure 2: models I, III, V, K = 1, angle against n for non-private SIR and the private uploads.
Figure 3: model I (federated DP-LDA), n in {100, 500, 1000}, angle against K, eps_x = 3, eps_m = 1.
Angle = the largest principal angle between the estimated and the true subspace (radians).
Choices as in ``fsir_tables`` (R = 3, public cut points from an independent draw, the paper's
uncentred estimator: ``center="none"``).
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import progress
from ..accounting import Budget
from ..datasets import FSIR_D, fsir_model
from ..federated import FederatedSIR
from ._output import output_dir, write_csv
from .fsir_tables import METHODS, R, public_slicing

FIGURES = {
    "fsir-figure2": "FSIR Figure 2: angle against n at K = 1 (models I, III, V)",
    "fsir-figure3": "FSIR Figure 3: angle against K (model I; eps_x = 3, eps_m = 1)",
}
N_GRID = (100, 200, 500, 1000, 2000, 5000, 10000, 20000)
K_GRID = (2, 5, 10, 20, 50, 100, 200)


def largest_angle(A: np.ndarray, B: np.ndarray) -> float:
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return float(np.arccos(np.clip(s.min(), 0.0, 1.0)))


def _angles(model: str, n: int, K: int, budget: Budget, cov_share: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    X, y, B = fsir_model(model, n, 10, seed=rng)  # the first client draws B; the others share it
    clients = [(X, y)] + [fsir_model(model, n, 10, seed=rng, B=B)[:2] for _ in range(K - 1)]
    slicing = public_slicing(model, B, 10)
    out = {}
    for name, kw in {"SIR (non-private)": {"mechanism": "none", "cov_mechanism": "none"}, **METHODS}.items():
        est = FederatedSIR(FSIR_D[model], bound=R, budget=budget, cov_share=cov_share, allow_uncertified=True, psd_floor=1e-6,
                           random_state=seed, center="none", **slicing, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[name] = largest_angle(est.fit(clients).directions_, B)
    return out


def run(figure: str, reps: int = 5, seed: int = 0) -> list[dict[str, Any]]:
    if figure == "fsir-figure2":
        tasks = [(m, n, 1) for m in ("I", "III", "V") for n in N_GRID]
    else:
        tasks = [("I", n, K) for n in (100, 500, 1000) for K in K_GRID]
    rows = []
    start = time.perf_counter()
    for model, n, K in progress(tasks, len(tasks), figure, min_total=1):
        delta = n ** -1.1
        budget, share = (Budget(2.0, 2 * delta), 0.5) if figure == "fsir-figure2" else (Budget(4.0, 2 * delta), 0.75)
        runs = [_angles(model, n, K, budget, share, seed + 104_729 * r + 31 * n + K) for r in range(reps)]
        for method in runs[0]:
            values = np.array([r[method] for r in runs])
            rows.append({"figure": figure, "model": model, "n": n, "K": K, "method": method, "mean_angle": float(values.mean()),
                         "q05": float(np.quantile(values, 0.05)), "q95": float(np.quantile(values, 0.95)), "reps": reps})
    for row in rows:
        row["seconds_total"] = round(time.perf_counter() - start, 2)
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    figure = rows[0]["figure"]
    panels = sorted({r["model"] for r in rows}) if figure == "fsir-figure2" else sorted({r["n"] for r in rows})
    fig = Figure(figsize=(4.2 * len(panels), 3.6), dpi=100)
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        sub = [r for r in rows if (r["model"] if figure == "fsir-figure2" else r["n"]) == panel]
        for method in dict.fromkeys(r["method"] for r in sub):
            pts = sorted((r["n"] if figure == "fsir-figure2" else r["K"], r["mean_angle"], r["q05"], r["q95"]) for r in sub if r["method"] == method)
            x, m, lo, hi = map(np.array, zip(*pts, strict=True))
            ax.errorbar(x, m, yerr=[m - lo, hi - m], label=method, capsize=2, marker="o", ms=3)
        ax.set_xscale("log")
        ax.set_xlabel("n (per client)" if figure == "fsir-figure2" else "K (clients)")
        ax.set_ylabel("largest principal angle (rad)")
        ax.set_title(f"model {panel}" if figure == "fsir-figure2" else f"model I, n = {panel}")
        if i == 0:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    out = output_dir(out_dir)
    figure = rows[0]["figure"]
    csv_path, png_path = out / f"{figure}.csv", out / f"{figure}.png"
    write_csv(rows, csv_path)
    plot(rows, png_path)
    md = out / f"{figure}.md"
    md.write_text(f"**{FIGURES[figure]}** — mean angle over {rows[0]['reps']} replications; plot: `{png_path.name}`\n\n"
                  + "| model | n | K | method | mean angle | 5% | 95% |\n|---|---|---|---|---|---|---|\n"
                  + "\n".join(f"| {r['model']} | {r['n']} | {r['K']} | {r['method']} | {r['mean_angle']:.3f} | {r['q05']:.3f} | {r['q95']:.3f} |" for r in rows) + "\n")
    return csv_path, md
