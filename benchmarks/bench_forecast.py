"""Forecast / measured per cell on correlated columns (issue 33), and the extrapolation of large-n forecasts.

    python benchmarks/bench_forecast.py correlated --seeds 5    # estimator x correlation x n x eps
    python benchmarks/bench_forecast.py extrapolation           # the forecast at 10^6 rows carried from 10^5 vs simulated

``correlated``: AdaSSP and certified DP-BCD on the DP-BCD simulation at column correlation rho (coefficients N(2, 1.5^2),
of one sign; public bounds as in ``bench_never_worse.py``), the measured excess risk exact from beta and Sigma (median
over seeds), beside ``est.plan(n, p).forecast(correlation=rho, direction=...)`` for each public direction assumption:
forecast / measured (ratio). ``extrapolation``: ``forecast.at_full_size`` against a forecast simulated at full size.
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from bench_never_worse import make_regression

from privsdr import DPSIR, AdaSSPRegression, Budget
from privsdr.datasets.vertical import dpbcd_synthetic

EPSILONS = (0.5, 2.0, 8.0)
DIRECTIONS = {"AdaSSPRegression": ("random", "same_sign"), "DPBCDRegression": ("random", "common")}


def correlated(seeds: int) -> None:
    p = 10
    print(f"forecast / measured excess risk (ratio), DP-BCD simulation, p = {p}, delta = 1e-6, median of {seeds} seeds\n")
    print("| estimator | rho | n | direction | " + " | ".join(f"eps = {e:g}" for e in EPSILONS) + " |")
    print("|---|---|---|---|" + "---|" * len(EPSILONS))
    for name, directions in DIRECTIONS.items():
        for rho in (0.3, 0.6, 0.9):
            sigma = (1 - rho) * np.eye(p) + rho
            for n in (1_000, 10_000):
                cells: dict[str, list[str]] = {d: [] for d in directions}
                for eps in EPSILONS:
                    measured = []
                    for seed in range(seeds):
                        d = dpbcd_synthetic(n, p, seed=seed, correlation=rho)
                        var_y = float(d.beta @ sigma @ d.beta) / 0.3
                        est = make_regression(name, eps, 3.0 * math.sqrt(var_y), seed)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est.fit(np.hstack(d.blocks), d.y)
                        miss = est.coef_ - d.beta
                        measured.append(float((miss @ sigma @ miss + est.intercept_**2) / var_y))
                    m = float(np.median(measured))
                    plan = est.plan(n, [5, 5]) if name == "DPBCDRegression" else est.plan(n, p)
                    made = plan.forecast(signal=0.3, correlation=rho, search=False)
                    for direction in directions:
                        f = made.by_direction[direction]
                        cells[direction].append(f"{f:.3g} / {m:.3g} ({f / m:.2f})")
                for direction in directions:
                    print(f"| {name} | {rho:g} | {n:.0e} | {direction} | " + " | ".join(cells[direction]) + " |", flush=True)


def extrapolation() -> None:
    import privsdr.algorithms.forecast as forecast

    p = 10
    print("forecast at n = 10^6 carried from 10^5 simulated rows / simulated at 10^6 rows (3 reps)\n")
    print("| estimator | eps | simulated at 10^6 | carried from 10^5 | ratio |")
    print("|---|---|---|---|---|")
    for eps in (0.5, 2.0):
        for name, est in (("AdaSSPRegression", AdaSSPRegression(bound_x=2.5 * math.sqrt(p), bound_y=10.0, budget=Budget(eps, 1e-6))),
                          ("DPSIR (M1 slicing)", DPSIR(1, bound=1.0, cut_points=[-6.0, 0.0, 6.0], budget=Budget(eps, 1e-6)))):
            forecast.MAX_SIMULATED_ROWS = 10**6
            direct = est.plan(10**6, p).forecast(search=False, reps=3).private_error
            forecast.MAX_SIMULATED_ROWS = 100_000
            carried = est.plan(10**6, p).forecast(search=False, reps=3).private_error
            print(f"| {name} | {eps:g} | {direct:.3g} | {carried:.3g} | {carried / direct:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("correlated", "extrapolation"))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    correlated(args.seeds) if args.what == "correlated" else extrapolation()


if __name__ == "__main__":
    main()
