"""DP-BCD on the forest-fire and garment tables (spec dpbcd_002.md §7.3, §7.5: Figures 5-8).

For eps (total) in {0.2, 1, 2, 5, 10} and ``reps`` seeds, both modes fit the published two-party
split (no intercept, T = 5, gamma = 1.2):

* ``paper``: Algorithm 2 on the raw columns, as the authors ran it (no aborts, accounting
  "paper"): eps-LSDP claimed, not standard DP.
* ``certified``: (eps, 1e-6)-DP, replace-one. Every column is clipped to a public range from
  domain knowledge (``PUBLIC_RANGES``; never the data's own minimum and maximum) and divided by its
  largest absolute value, so a block's rows have norm <= sqrt(m_i); the coefficients are mapped back
  to the raw units (post-processing). C_y from the label's public range, B_i = C_y per increment.

The reference, printed and plotted beside the private runs, is non-private BCD after the same T = 5 rounds
(``core.bcd``, no intercept): what the paper's code compares with (spec A13, as the Tables' AAPD in
``dpbcd_tables``), what paper mode computes when its noise vanishes, and what the paper calls "centralized"
(its garment R^2 0.24 is this fit's 0.241; OLS gives 0.272). OLS, BCD run to convergence, is printed beside it for
information (on forest fires the 5-round fit is still far from it: AAPD 0.44 mean, 0.18 median). Certified mode
fits a DP intercept besides (issue 24) and is scored with it.

Outputs: per coefficient the reference and the OLS value, the median and the 2.5-97.5% range of each mode at
eps = 1 and 10 (Figures 5/7), and R^2 = 1 - SS_res/SS_tot against eps (Figures 6/8: median and 2.5-97.5%)
beside the reference's and OLS's; a PNG with both and CSV/Markdown tables. The paper used 1000 replications.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import progress
from ..accounting import Budget
from ..core import bcd, r_squared
from ..datasets import VerticalData, forest_fires, garment_productivity
from ..errors import NoiseDominatesWarning
from ..vertical import DPBCDRegression
from ._output import output_dir, write_csv

EPSILONS = (0.2, 1.0, 2.0, 5.0, 10.0)
T_ROUNDS = 5  #: the paper's rounds, of the private runs and of the reference
REFERENCE = f"non-private BCD after T = {T_ROUNDS} rounds"
COEF_EPSILONS = (1.0, 10.0)
DELTA = 1e-6
FIGURES = {
    "dpbcd-forestfires": "DP-BCD forest fires (517 x 27): coefficients (Fig. 5) and R^2 against eps (Fig. 6)",
    "dpbcd-productivity": "DP-BCD garment productivity (1197 x 17): coefficients (Fig. 7) and R^2 against eps (Fig. 8)",
}

#: Public ranges (|value| <= bound) from domain knowledge, not from the data: the park grid is 9 x 9;
#: FWI codes FFMC <= 101, DMC < 400, DC < 1000, ISI < 60; temperature < 50 C; RH <= 100 %; wind
#: < 20 km/h; rain < 20 mm; dummies in {0, 1}; log(area + 1) with area below the park's 75,000 ha.
#: Garments: quarter codes 0-4, 12 teams, target productivity <= 1, SMV < 100 min, overtime < 30,000
#: min, incentive < 5,000 BDT, idle time < 500 min, idle men < 100, style changes < 5, workers < 100,
#: productivity <= 1.2.
PUBLIC_RANGES = {
    "dpbcd-forestfires": ({"X": 9, "Y": 9, "temp": 50, "RH": 100, "wind": 20, "rain": 20, "FFMC": 101, "DMC": 400, "DC": 1000,
                           "ISI": 60}, math.log1p(75_000.0)),
    "dpbcd-productivity": ({"quarter": 4, "team": 12, "targeted_productivity": 1, "smv": 100, "over_time": 30_000,
                            "incentive": 5_000, "idle_time": 500, "idle_men": 100, "no_of_style_change": 5,
                            "no_of_workers": 100}, 1.2),
}


def load(name: str) -> VerticalData:
    return forest_fires() if name == "dpbcd-forestfires" else garment_productivity()


def public_scales(name: str, data: VerticalData) -> list[np.ndarray]:
    """Per column the public bound on |value| (1 for dummies)."""
    ranges, _ = PUBLIC_RANGES[name]
    return [np.array([float(ranges.get(c, 1.0)) for c in cols]) for cols in data.columns]


def certified_fit(name: str, data: VerticalData, eps: float, seed: int, n_rounds: int = T_ROUNDS) -> tuple[np.ndarray, float]:
    """Clip to the public ranges, scale to [-1, 1], fit, map back (the scaling is public post-processing). Certified
    DP-BCD with its defaults (issue 24): the noise-aware shrinkage and the DP intercept, returned beside the slopes."""
    scales = public_scales(name, data)
    _, label_bound = PUBLIC_RANGES[name]
    blocks = [np.clip(b, -s, s) / s for b, s in zip(data.blocks, scales, strict=True)]
    names = [f"party{i}" for i in range(len(blocks))]
    est = DPBCDRegression("certified", n_rounds=n_rounds, budget=Budget(eps, DELTA), message_reports=False, random_state=seed,
                          row_bound={n: math.sqrt(b.shape[1]) for n, b in zip(names, blocks, strict=True)}, label_bound=label_bound,
                          coef_bound=label_bound)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)  # every fit at these sizes warns; the table shows why
        est.fit(blocks, np.clip(data.y, -label_bound, label_bound))
    return est.coef_ / np.concatenate(scales), est.intercept_


def paper_fit(data: VerticalData, eps: float, seed: int, n_rounds: int = T_ROUNDS) -> np.ndarray:
    est = DPBCDRegression("paper", n_rounds=n_rounds, budget=Budget(eps, 0.0), abort_check="none", accounting="paper",
                          allow_uncertified=True, message_reports=False, random_state=seed)
    return est.fit(list(data.blocks), data.y).coef_


def run(name: str, reps: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    data = load(name)
    X = data.X
    reference = bcd(list(data.blocks), data.y, T_ROUNDS).coef
    ols = np.linalg.lstsq(X, data.y, rcond=None)[0]
    columns = [c for cols in data.columns for c in cols]
    parties = [p for p, cols in zip(data.party_names, data.columns, strict=True) for _ in cols]
    start = time.perf_counter()
    coefs: dict[tuple[str, float], list[np.ndarray]] = {}
    intercepts: dict[tuple[str, float], list[float]] = {}
    tasks = [(eps, r) for eps in EPSILONS for r in range(reps)]
    for eps, r in progress(tasks, len(tasks), name, min_total=1):
        coefs.setdefault(("paper", eps), []).append(paper_fit(data, eps, seed + r))
        intercepts.setdefault(("paper", eps), []).append(0.0)  # the paper's model has no intercept (A21)
        coef, intercept = certified_fit(name, data, eps, seed + r)
        coefs.setdefault(("certified", eps), []).append(coef)
        intercepts.setdefault(("certified", eps), []).append(intercept)
    elapsed = time.perf_counter() - start
    ref_r2, ols_r2 = r_squared(data.y, X @ reference), r_squared(data.y, X @ ols)
    rows: list[dict[str, Any]] = [{"figure": name, "kind": "r2", "mode": "reference", "eps": None, "column": "", "party": "",
                                   "reference": ref_r2, "ols": ols_r2, "median": ref_r2, "q025": None, "q975": None, "reps": reps}]
    for (mode, eps), runs in coefs.items():
        r2 = np.array([r_squared(data.y, X @ c + a) for c, a in zip(runs, intercepts[(mode, eps)], strict=True)])
        rows.append({"figure": name, "kind": "r2", "mode": mode, "eps": eps, "column": "", "party": "", "reference": ref_r2, "ols": ols_r2,
                     "median": float(np.median(r2)), "q025": float(np.quantile(r2, 0.025)), "q975": float(np.quantile(r2, 0.975)), "reps": reps})
        if eps in COEF_EPSILONS:
            stack = np.vstack(runs)
            for j, col in enumerate(columns):
                rows.append({"figure": name, "kind": "coef", "mode": mode, "eps": eps, "column": col, "party": parties[j],
                             "reference": float(reference[j]), "ols": float(ols[j]), "median": float(np.median(stack[:, j])),
                             "q025": float(np.quantile(stack[:, j], 0.025)), "q975": float(np.quantile(stack[:, j], 0.975)), "reps": reps})
    for row in rows:
        row["seconds_total"] = round(elapsed, 2)
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.2), dpi=100)
    coef = [r for r in rows if r["kind"] == "coef"]
    columns = list(dict.fromkeys(r["column"] for r in coef))
    x = np.arange(len(columns))
    for panel, mode in enumerate(("paper", "certified")):
        ax = fig.add_subplot(1, 3, panel + 1)
        cent = [next(r["reference"] for r in coef if r["column"] == c) for c in columns]
        ols = [next(r["ols"] for r in coef if r["column"] == c) for c in columns]
        scale = max(abs(v) for v in cent) * 4 or 1.0
        for k, (eps, colour) in enumerate(zip(COEF_EPSILONS, ("tab:orange", "tab:green"), strict=True)):
            sub = {r["column"]: r for r in coef if r["mode"] == mode and r["eps"] == eps}
            med = np.array([sub[c]["median"] for c in columns])
            lo, hi = np.array([sub[c]["q025"] for c in columns]), np.array([sub[c]["q975"] for c in columns])
            ax.errorbar(x + (k - 0.5) * 0.3, med, yerr=[med - lo, hi - med], fmt="o", ms=3, color=colour, capsize=2, label=f"eps = {eps:g}")
        ax.plot(x, cent, "k_", ms=10, mew=2, label=f"reference: {REFERENCE}")
        ax.plot(x, ols, "_", color="0.55", ms=7, mew=1.5, label="OLS (BCD converged)")
        bob = [i for i, c in enumerate(columns) if next(r["party"] for r in coef if r["column"] == c) != coef[0]["party"]]
        if bob:
            ax.axvspan(min(bob) - 0.5, max(bob) + 0.5, color="0.9", zorder=0)
        ax.set_ylim(-scale, scale)
        ax.set_xticks(x)
        ax.set_xticklabels(columns, rotation=90, fontsize=6)
        ax.set_title(f"{mode} mode: median and 2.5-97.5% (shaded: second party)", fontsize=9)
        if panel == 0:
            ax.legend(fontsize=7)
    ax = fig.add_subplot(1, 3, 3)
    r2 = [r for r in rows if r["kind"] == "r2" and r["mode"] != "reference"]
    for mode, colour in (("paper", "tab:blue"), ("certified", "tab:red")):
        pts = sorted((r["eps"], r["median"], r["q025"], r["q975"]) for r in r2 if r["mode"] == mode)
        e, m, lo, hi = map(np.array, zip(*pts, strict=True))
        ax.plot(e, m, "o-", color=colour, label=f"{mode} (median)")
        ax.fill_between(e, lo, hi, color=colour, alpha=0.15)
    ax.axhline(rows[0]["reference"], color="k", ls="-.", label=f"reference: {REFERENCE}")
    ax.axhline(rows[0]["ols"], color="0.55", ls=":", label="OLS (BCD converged)")
    worst = min(r["median"] for r in r2)
    if worst < -0.5:
        ax.text(0.02, 0.03, f"medians below the axis (down to {worst:.3g}): see the table", transform=ax.transAxes, fontsize=7)
    ax.set_xscale("log")
    ax.set_ylim(-0.5, max(0.5, rows[0]["ols"] + 0.1))
    ax.set_xlabel("eps (total)")
    ax.set_ylabel("R^2 (axis cut at -0.5)")
    ax.legend(fontsize=7)
    fig.suptitle(FIGURES[rows[0]["figure"]], fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


def to_markdown(rows: list[dict[str, Any]]) -> str:
    name = rows[0]["figure"]
    r2 = [r for r in rows if r["kind"] == "r2"]
    lines = [f"**{FIGURES[name]}** — {rows[0]['reps']} replications (the paper: 1000); plot: `{name}.png`", "",
             f"reference ({REFERENCE}, no intercept; what the private runs are compared with): R^2 {rows[0]['reference']:.4f}; "
             f"OLS (BCD converged, for information): R^2 {rows[0]['ols']:.4f}", "",
             "| eps (total) | paper mode: median R^2 [2.5%, 97.5%] | certified (delta = 1e-6; its DP intercept): median R^2 [2.5%, 97.5%] |",
             "|---|---|---|"]
    for eps in EPSILONS:
        p = next(r for r in r2 if r["mode"] == "paper" and r["eps"] == eps)
        c = next(r for r in r2 if r["mode"] == "certified" and r["eps"] == eps)
        lines.append(f"| {eps:g} | {p['median']:.3g} [{p['q025']:.3g}, {p['q975']:.3g}] | {c['median']:.3g} [{c['q025']:.3g}, {c['q975']:.3g}] |")
    lines += ["", f"| party | column | reference (BCD, T = {T_ROUNDS}) | OLS | paper eps=1 | paper eps=10 | certified eps=1 | certified eps=10 |",
              "|---|---|---|---|---|---|---|---|"]
    coef = [r for r in rows if r["kind"] == "coef"]
    for col in dict.fromkeys(r["column"] for r in coef):
        sub = {(r["mode"], r["eps"]): r for r in coef if r["column"] == col}
        first = next(iter(sub.values()))
        cells = [f"{sub[(m, e)]['median']:.3g} [{sub[(m, e)]['q025']:.3g}, {sub[(m, e)]['q975']:.3g}]"
                 for m in ("paper", "certified") for e in COEF_EPSILONS]
        lines.append(f"| {first['party']} | {col} | {first['reference']:.3g} | {first['ols']:.3g} | " + " | ".join(cells) + " |")
    lines += ["", "paper mode: eps-LSDP claimed, not standard DP; certified: replace-one (eps, 1e-6)-DP with public column "
              "ranges (privsdr/reproduce/dpbcd_realdata.py PUBLIC_RANGES), with its defaults since issue 24: steps its own "
              "noise explains are dropped and the trivial model is the DP mean (R^2 about 0), so its R^2 is scored with "
              "its DP intercept; the paper's model has none."]
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    out = output_dir(out_dir)
    name = rows[0]["figure"]
    csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
    write_csv(rows, csv_path)
    plot(rows, out / f"{name}.png")
    md_path.write_text(to_markdown(rows))
    return csv_path, md_path
