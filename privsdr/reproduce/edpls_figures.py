"""edPLS Figures 3-5 on the corn data (m5 spectra, moisture): CSV + Markdown + PNG.

* ``edpls-figure3``: raw spectra, 10 LVs: RMSEP/sigma_y and R^2_P against eps (grid of the authors'
  notebook, 0.1 ... 700, plus 1e4), paper mode (std sigma and the reference code's sigma^2), certified S2
  at the same eps (total) and at the paper mode's composed eps; panels: b~ at eps in {1, 10, 100},
  RMSEP/sigma_y against eps, measured against predicted for non-private PLS.
* ``edpls-figure4``: raw spectra: 10-fold RMSECV/sigma_y (on the 56 training rows) against A = 1..19
  for eps in {1, 10, 100, 200, 500} (the notebook's grid; delta 0.01 as in the paper text); the optimal A.
* ``edpls-figure5``: airPLS, MSC, SG preprocessing: RMSEP/sigma_y against eps with 8 LVs, and RMSECV
  against A at eps = 1 with the CV-optimal A.
Mean and SEM over ``reps`` random 70/30 splits (the paper: 100 "experiments").
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import progress
from ._edpls_common import (
    METHODS,
    PREPROCESSING,
    SPEC_INDICATIVE,
    composed_epsilon,
    corn,
    cv_curves,
    fit_method,
    r2,
    rmse,
    sem,
    split,
)
from ._output import output_dir, write_csv

FIGURES = {
    "edpls-figure3": "edPLS Figure 3: RMSEP/sigma_y against eps, raw corn spectra, 10 LVs (paper mode vs certified S2)",
    "edpls-figure4": "edPLS Figure 4: 10-fold RMSECV against the number of LVs for several eps (raw spectra)",
    "edpls-figure5": "edPLS Figure 5: airPLS / MSC / SG preprocessing, RMSEP against eps (8 LVs) and RMSECV at eps = 1",
}
FIG3_EPS = (0.1, 1.0, 5.0, 10.0, 100.0, 250.0, 700.0, 1e4)
FIG4_EPS = (1.0, 10.0, 100.0, 200.0, 500.0)
FIG4_A = 19
FIG5_EPS = (0.1, 1.0, 2.0, 5.0, 10.0, 100.0)
FIG5_A = 8
FIG5_CV_A = 14


def _test_rows(figure: str, prep: str, A: int, eps_grid: tuple[float, ...], reps: int, seed: int,
               extra_composed: bool) -> list[dict[str, Any]]:
    X, y, sy = corn()
    rows = []
    methods: list[tuple[str, str]] = [(m, "same") for m in METHODS] + ([("certified S2 (A auto)", "composed")] if extra_composed else [])
    tasks = [(eps, m, at) for eps in eps_grid for m, at in methods]
    for eps, method, at in progress(tasks, len(tasks), figure, min_total=1):
        run_eps = composed_epsilon(A, eps) if at == "composed" else eps
        if at == "composed" and run_eps > 1e5:
            continue
        errs, r2s = [], []
        for r in range(reps):
            tr, te = split(seed + r)
            fitted = fit_method(method, A, run_eps, X[tr], y[tr], prep, seed * 1000 + r)
            yhat = fitted.predict(X[te])
            errs.append(rmse(y[te], yhat) / sy)
            r2s.append(r2(y[te], yhat))
        name = method if at == "same" else "certified S2 (A auto) at the paper's composed eps"
        rows.append({"figure": figure, "preprocessing": prep, "n_components": A, "method": name, "epsilon": eps,
                     "epsilon_run": run_eps, "paper_composed_epsilon": composed_epsilon(A, eps) if method.startswith("paper") else None,
                     "rmsep_over_sigma_mean": float(np.mean(errs)), "rmsep_over_sigma_sem": sem(errs),
                     "rmsep_over_sigma_median": float(np.median(errs)), "r2p_median": float(np.median(r2s)), "reps": reps,
                     "spec_indicative_median": SPEC_INDICATIVE.get(method, {}).get(eps) if prep == "raw" and A == 10 else None})
    errs = [rmse(y[te], fit_method("non-private", A, None, X[tr], y[tr], prep, 0).predict(X[te])) / sy  # the non-private reference
            for tr, te in (split(seed + r) for r in range(reps))]
    rows.append({"figure": figure, "preprocessing": prep, "n_components": A, "method": "non-private PLS", "epsilon": float("inf"),
                 "epsilon_run": float("inf"), "paper_composed_epsilon": None, "rmsep_over_sigma_mean": float(np.mean(errs)),
                 "rmsep_over_sigma_sem": sem(errs), "rmsep_over_sigma_median": float(np.median(errs)), "r2p_median": None,
                 "reps": reps, "spec_indicative_median": 0.0508 if prep == "raw" and A == 10 else None})
    return rows


def _cv_rows(figure: str, prep: str, eps_grid: tuple[float, ...], A_max: int, reps: int, seed: int) -> list[dict[str, Any]]:
    X, y, sy = corn()
    rows = []
    tasks = [(eps, m) for eps in eps_grid for m in ("paper", "paper (ref-code)", "certified S2")] + [(None, "non-private")]
    for eps, method in progress(tasks, len(tasks), f"{figure} CV ({prep})", min_total=1):
        curves = []
        for r in range(reps):
            tr, _ = split(seed + r)
            curves.append(cv_curves(method, A_max, eps, X[tr], y[tr], prep, seed * 1000 + r) / sy)
        curves_arr = np.array(curves)
        mean = curves_arr.mean(axis=0)
        best = int(np.argmin(mean)) + 1
        for a in range(1, A_max + 1):
            rows.append({"figure": figure, "preprocessing": prep, "method": method, "epsilon": float("inf") if eps is None else eps,
                         "n_components": a, "rmsecv_over_sigma_mean": float(mean[a - 1]), "rmsecv_over_sigma_sem": sem(curves_arr[:, a - 1]),
                         "cv_optimal_n_components": best, "reps": reps})
    return rows


def run(figure: str, reps: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    start = time.perf_counter()
    if figure == "edpls-figure3":
        rows = _test_rows(figure, "raw", 10, FIG3_EPS, reps, seed, extra_composed=True)
    elif figure == "edpls-figure4":
        rows = _cv_rows(figure, "raw", FIG4_EPS, FIG4_A, reps, seed)
    elif figure == "edpls-figure5":
        rows = []
        for prep in ("airpls", "msc", "sg"):
            rows += _test_rows(figure, prep, FIG5_A, FIG5_EPS, reps, seed, extra_composed=False)
        for prep in ("airpls", "msc", "sg"):
            rows += _cv_rows(figure, prep, (1.0,), FIG5_CV_A, reps, seed)
    else:
        raise ValueError(f"unknown figure {figure!r}")
    for row in rows:
        row["seconds_total"] = round(time.perf_counter() - start, 2)
    return rows


# -- output -------------------------------------------------------------------------------------------
def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if np.isinf(x):
            return "∞"
        return f"{x:.{digits}g}" if abs(x) >= 1e4 else f"{x:.{digits}f}"
    return str(x)


def _markdown_test(rows: list[dict[str, Any]], title: str) -> str:
    out = [f"**{title}** — mean ± SEM (median) of RMSEP/σ_y over {rows[0]['reps']} random 70/30 splits; σ_y = std of all 80 "
           "moisture values; δ = 0.01. `paper` ε is per release (the 4A releases compose to the ε in the next column, PLD); "
           "`certified S2` ε is the total. *spec* = the spec author's indicative medians (30 splits, not from the paper).\n",
           "| preprocessing | method | ε | composed ε (paper) | RMSEP/σ_y mean ± SEM | median | R²P median | spec (median) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "rmsep_over_sigma_mean" not in r:
            continue
        out.append(f"| {r['preprocessing']} | {r['method']} | {_fmt(r['epsilon'], 4)}"
                   + (f" (run at {_fmt(r['epsilon_run'], 4)})" if r["epsilon_run"] != r["epsilon"] else "")
                   + f" | {_fmt(r['paper_composed_epsilon'], 4)} | {_fmt(r['rmsep_over_sigma_mean'])} ± {_fmt(r['rmsep_over_sigma_sem'])} "
                   f"| {_fmt(r['rmsep_over_sigma_median'])} | {_fmt(r['r2p_median'])} | {_fmt(r['spec_indicative_median'])} |")
    return "\n".join(out) + "\n"


def _markdown_cv(rows: list[dict[str, Any]]) -> str:
    cv = [r for r in rows if "rmsecv_over_sigma_mean" in r]
    if not cv:
        return ""
    out = [f"\n10-fold RMSECV/σ_y on the 56 training rows, mean over {cv[0]['reps']} splits; one fit per fold serves every A "
           "(the first a components of an A-component fit), so the curves are paths.\n",
           "| preprocessing | method | ε | CV-optimal A | RMSECV/σ_y at A = 1 | at the optimum | at A = 10 |", "|---|---|---|---|---|---|---|"]
    seen = set()
    for r in cv:
        key = (r["preprocessing"], r["method"], r["epsilon"])
        if key in seen:
            continue
        seen.add(key)
        curve = {x["n_components"]: x["rmsecv_over_sigma_mean"] for x in cv if (x["preprocessing"], x["method"], x["epsilon"]) == key}
        best = r["cv_optimal_n_components"]
        out.append(f"| {key[0]} | {key[1]} | {_fmt(key[2], 4)} | {best} | {_fmt(curve[1])} | {_fmt(curve[best])} | {_fmt(curve.get(10))} |")
    return "\n".join(out) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    figure = rows[0]["figure"]
    test = [r for r in rows if "rmsep_over_sigma_mean" in r]
    cv = [r for r in rows if "rmsecv_over_sigma_mean" in r]
    panels = (1 if test else 0) + (len({r["preprocessing"] for r in cv}) if cv else 0) + (1 if figure == "edpls-figure3" else 0)
    fig = Figure(figsize=(4.6 * panels, 3.8), dpi=100)
    k = 1
    if figure == "edpls-figure3":
        ax = fig.add_subplot(1, panels, k)
        k += 1
        X, y, _ = corn()
        tr, _ = split(0)
        wl = np.arange(1100, 2499, 2)
        for i, eps in enumerate((1.0, 10.0, 100.0)):
            b = fit_method("paper", 10, eps, X[tr], y[tr], "raw", 0).model.coef_
            ax.plot(wl, b / np.abs(b).max() - 2.5 * i, lw=0.8, label=f"paper, ε = {eps:g}")
        b = fit_method("non-private", 10, None, X[tr], y[tr], "raw", 0).model.coef_
        ax.plot(wl, b / np.abs(b).max() - 7.5, lw=0.8, color="k", label="non-private")
        ax.set_xlabel("wavelength (nm)")
        ax.set_ylabel("b (scaled, offset)")
        ax.set_title("regression coefficients, 10 LVs", fontsize=10)
        ax.legend(fontsize=6)
    if test:
        ax = fig.add_subplot(1, panels, k)
        k += 1
        for key in dict.fromkeys((r["preprocessing"], r["method"]) for r in test if np.isfinite(r["epsilon"])):
            pts = sorted((r["epsilon"], r["rmsep_over_sigma_mean"], r["rmsep_over_sigma_sem"]) for r in test
                         if (r["preprocessing"], r["method"]) == key)
            e, m, s = map(np.array, zip(*pts, strict=True))
            ax.errorbar(e, m, yerr=s, marker="o", ms=3, capsize=2, label=f"{key[0]}: {key[1]}" if figure == "edpls-figure5" else key[1])
        base = [r for r in test if not np.isfinite(r["epsilon"])]
        for r in base:
            ax.axhline(r["rmsep_over_sigma_mean"], ls=":", color="k", lw=0.8)
        ax.axhline(1.0, ls="--", color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε (paper: per release; certified: total)")
        ax.set_ylabel("RMSEP / σ_y")
        ax.set_title(f"test error, {test[0]['n_components']} LVs", fontsize=10)
        ax.legend(fontsize=6)
    for prep in dict.fromkeys(r["preprocessing"] for r in cv):
        ax = fig.add_subplot(1, panels, k)
        k += 1
        for method, eps in dict.fromkeys((r["method"], r["epsilon"]) for r in cv if r["preprocessing"] == prep):
            curve_pts = sorted((r["n_components"], r["rmsecv_over_sigma_mean"]) for r in cv
                         if (r["preprocessing"], r["method"], r["epsilon"]) == (prep, method, eps))
            a, m = map(np.array, zip(*curve_pts, strict=True))
            ax.plot(a, m, marker=".", ms=3, label=f"{method}" + ("" if not np.isfinite(eps) else f", ε = {eps:g}"))
        ax.set_yscale("log")
        ax.set_xlabel("number of LVs")
        ax.set_ylabel("RMSECV / σ_y")
        ax.set_title(f"10-fold CV, {prep}", fontsize=10)
        ax.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(path)


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    out = output_dir(out_dir)
    figure = rows[0]["figure"]
    csv_path, png_path, md_path = out / f"{figure}.csv", out / f"{figure}.png", out / f"{figure}.md"
    keys = list(dict.fromkeys(k for r in rows for k in r))
    write_csv([{k: r.get(k) for k in keys} for r in rows], csv_path)
    plot(rows, png_path)
    title = FIGURES[figure]
    test = [r for r in rows if "rmsep_over_sigma_mean" in r]
    text = (_markdown_test(test, title) if test else f"**{title}**\n") + _markdown_cv(rows)
    preps = sorted({r["preprocessing"] for r in rows})
    text += "\nPreprocessing: " + "; ".join(f"{p} = {PREPROCESSING[p]}" for p in preps) + f". Plot: `{png_path.name}`.\n"
    md_path.write_text(text)
    return csv_path, md_path
