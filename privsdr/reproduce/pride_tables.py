"""PRIDE Tables 1 and D.2 (Heinze-Deml, McWilliams & Meinshausen; spec pride_004.md §7.3, §7.4).

* ``pride-table1``: the design statistics of Table 1 (n_train, p, max_k theta_k, d_min, r_eff, J_80,
  J_90) for our reconstruction of the simulated data (§7.3 (a), ``datasets.pride_simulation``; median
  and range over ``reps`` data sets, each block standardised on its training rows as PRIDE's paper mode
  does) and for the synthetic climate stand-in (``datasets.climate_standin``, one data set). The climate
  (CMIP5 GISS control runs) and breast-cancer (GEO GSE3494) data are not obtainable here: their rows
  show the paper's values only.
* ``pride-table-d2``: max_k sigma_k at delta = 0.05 over the eps grid: the paper's values, ours from
  Theorem 1's calibration sigma = theta sqrt(2 (ln(1/(2 delta)) + eps)) / eps with Table 1's theta (and
  the relative error), with the theta of our simulated data (median over reps), the analytic
  calibration's sigma at the same (eps, delta) (A9.1) and what the Kenthapadi sigma really costs (the
  exact PLD epsilon of one release at delta = 0.05; spec §4.3).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import progress
from ..accounting import Charge, GaussianEvent, make_accountant
from ..datasets import climate_standin, design_statistics, pride_simulation
from ..mechanisms import gaussian_noise_multiplier
from ._output import write_table

EPSILONS = (0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 20.0)
DELTA = 0.05
#: Table 1 as published (n_train, p, max theta, d_min, r_eff, J80, J90)
TABLE1_PAPER = {"SIM": (800, 400, 7.41, 3.7e-6, 2.03, 3, 5), "CLIMATE": (849, 10_368, 8.51, 3.32, 4.03, 29, 54),
                "CANCER": (188, 2_000, 10.92, 11.57, 4.53, 65, 107)}
#: Table D.2 as published: max_k sigma_k at delta = 0.05
TABLED2_PAPER = {
    "SIM": (162.47, 66.99, 35.10, 24.42, 19.05, 10.87, 5.67, 3.68, 2.48),
    "CLIMATE": (186.59, 76.93, 40.30, 28.04, 21.88, 12.48, 6.51, 4.22, 2.84),
    "CANCER": (239.41, 98.71, 51.71, 35.98, 28.07, 16.02, 8.35, 5.42, 3.65),
}
TABLES: dict[str, str] = {
    "pride-table1": "PRIDE Table 1: design statistics (SIM reconstruction; a synthetic climate stand-in)",
    "pride-table-d2": "PRIDE Table D.2: max_k sigma_k at delta = 0.05 (Theorem 1), with the analytic sigma beside it",
}
STATS = ("n_train", "p", "max_theta", "d_min", "r_eff", "J80", "J90")


def _standardised_blocks(X: np.ndarray, widths: tuple[int, ...]) -> np.ndarray:
    blocks = np.split(X, np.cumsum(widths)[:-1], axis=1)
    return np.hstack([(b - b.mean(axis=0)) / b.std(axis=0) for b in blocks])


def sim_statistics(reps: int, seed: int) -> list[dict[str, float]]:
    out = []
    for r in progress(range(reps), reps, "pride-table1 (SIM)", min_total=2):
        data = pride_simulation(seed + r)
        out.append(design_statistics(_standardised_blocks(data.X_train, data.widths), data.widths))
    return out


def run(table: str, reps: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    start = time.perf_counter()
    rows = _table1(reps, seed) if table == "pride-table1" else _table_d2(reps, seed)
    for row in rows:
        row["seconds_total"] = round(time.perf_counter() - start, 2)
    return rows


def _table1(reps: int, seed: int) -> list[dict[str, Any]]:
    sims = sim_statistics(reps, seed)
    rows = []
    for key in STATS:
        values = np.array([s[key] for s in sims], dtype=float)
        rows.append({"table": "pride-table1", "data": "SIM", "statistic": key, "ours": float(np.median(values)),
                     "ours_min": float(values.min()), "ours_max": float(values.max()),
                     "paper": TABLE1_PAPER["SIM"][STATS.index(key)], "reps": reps, "note": "our reconstruction (spec §7.3 a)"})
    climate = climate_standin(seed)
    stats = design_statistics(_standardised_blocks(climate.X_train, climate.widths), climate.widths)
    for key in STATS:
        rows.append({"table": "pride-table1", "data": "CLIMATE", "statistic": key, "ours": float(stats[key]), "ours_min": None,
                     "ours_max": None, "paper": TABLE1_PAPER["CLIMATE"][STATS.index(key)], "reps": 1,
                     "note": "synthetic stand-in of the same shape: the climate data are not obtainable"})
    for key in STATS:
        rows.append({"table": "pride-table1", "data": "CANCER", "statistic": key, "ours": None, "ours_min": None, "ours_max": None,
                     "paper": TABLE1_PAPER["CANCER"][STATS.index(key)], "reps": 0, "note": "not obtainable here (GEO GSE3494)"})
    return rows


def exact_epsilon(noise_multiplier: float, delta: float) -> float:
    """What one Gaussian release with this multiplier costs at ``delta`` (PLD, closed form)."""
    charge = Charge("x", (GaussianEvent(noise_multiplier, delta),), "replace_entry")
    return make_accountant("pld", delta).cost([charge]).epsilon


def _table_d2(reps: int, seed: int) -> list[dict[str, Any]]:
    sims = sim_statistics(reps, seed)
    theta_sim = float(np.median([s["max_theta"] for s in sims]))
    theta = {k: v[2] for k, v in TABLE1_PAPER.items()}
    rows = []
    for i, eps in enumerate(EPSILONS):
        z = gaussian_noise_multiplier(eps, DELTA, "kenthapadi")
        za = gaussian_noise_multiplier(eps, DELTA, "analytic")
        row: dict[str, Any] = {"table": "pride-table-d2", "eps": eps, "z_kenthapadi": z, "z_analytic": za}
        for name in ("SIM", "CLIMATE", "CANCER"):
            ours = theta[name] * z
            row[f"{name}_paper"] = TABLED2_PAPER[name][i]
            row[f"{name}_ours"] = ours
            row[f"{name}_rel_err"] = abs(ours - TABLED2_PAPER[name][i]) / TABLED2_PAPER[name][i]
        row["SIM_ours_theta"] = theta_sim
        row["SIM_sigma_our_theta"] = theta_sim * z
        row["SIM_sigma_analytic"] = theta["SIM"] * za
        row["analytic_over_kenthapadi"] = za / z
        row["exact_eps_of_kenthapadi"] = exact_epsilon(z, DELTA)
        row["reps"] = reps
        rows.append(row)
    return rows


def _fmt(value: Any, key: str) -> str:
    if value is None:
        return "—"
    if key == "d_min":
        return f"{value:.3g}"
    if key in ("n_train", "p", "J80", "J90"):
        return f"{value:g}"
    return f"{value:.3g}"


def to_markdown(rows: list[dict[str, Any]]) -> str:
    table = rows[0]["table"]
    if table == "pride-table1":
        lines = [f"**{TABLES[table]}** — ours beside the paper's; SIM: median [min, max] over {rows[0]['reps']} simulated data sets", "",
                 "| data | " + " | ".join(STATS) + " | note |", "|---|" + "---|" * (len(STATS) + 1)]
        for data in ("SIM", "CLIMATE", "CANCER"):
            by = {r["statistic"]: r for r in rows if r["data"] == data}
            cells = []
            for key in STATS:
                r = by[key]
                ours = _fmt(r["ours"], key)
                if r["ours_min"] is not None and r["ours_min"] != r["ours_max"]:
                    ours += f" [{_fmt(r['ours_min'], key)}, {_fmt(r['ours_max'], key)}]"
                cells.append(f"{ours} / {_fmt(r['paper'], key)}")
            lines.append(f"| {data} | " + " | ".join(cells) + f" | {by[STATS[0]]['note']} |")
        lines += ["", "Cells: ours / the paper. max_theta is the largest column range of a party's block after "
                  "standardising it on the training rows (data-derived, as in the paper); d_min the smallest non-zero singular "
                  "value; r_eff = tr(X^T X)/||X||_2^2; J_u the number of PCs capturing u% of the variance."]
        return "\n".join(lines) + "\n"
    lines = [f"**{TABLES[table]}** — sigma = theta z(eps, 0.05) with Table 1's theta; our SIM theta is the median over "
             f"{rows[0]['reps']} simulated data sets", "",
             "| eps | z (Thm 1) | SIM paper / ours | CLIMATE paper / ours | CANCER paper / ours | largest rel. error | "
             "SIM, our theta | SIM analytic sigma | analytic / Thm 1 | exact eps of the Thm 1 sigma |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        worst = max(r[f"{n}_rel_err"] for n in ("SIM", "CLIMATE", "CANCER"))
        lines.append(f"| {r['eps']:g} | {r['z_kenthapadi']:.4f} | {r['SIM_paper']:.2f} / {r['SIM_ours']:.2f} | "
                     f"{r['CLIMATE_paper']:.2f} / {r['CLIMATE_ours']:.2f} | {r['CANCER_paper']:.2f} / {r['CANCER_ours']:.2f} | "
                     f"{100 * worst:.2f}% | {r['SIM_sigma_our_theta']:.2f} (theta {r['SIM_ours_theta']:.2f}) | "
                     f"{r['SIM_sigma_analytic']:.2f} | {r['analytic_over_kenthapadi']:.3f} | {r['exact_eps_of_kenthapadi']:.3f} |")
    lines += ["", "The Theorem 1 (Kenthapadi) sigma is conservative: one release at it costs the exact eps in the last column at "
              "delta = 0.05 (PLD, closed form), far below the nominal eps; the analytic calibration (A9.1, beyond the paper) "
              "meets (eps, 0.05) exactly with the sigma in the 'SIM analytic' column."]
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], out_dir: str | Path) -> tuple[Path, Path]:
    return write_table(rows, out_dir, to_markdown)


__all__ = ["EPSILONS", "TABLES", "TABLE1_PAPER", "TABLED2_PAPER", "run", "to_markdown", "write"]
