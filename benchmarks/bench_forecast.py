"""Forecast / measured per cell on correlated columns (issue 33), and the extrapolation of large-n forecasts.

    python benchmarks/bench_forecast.py correlated --seeds 5    # estimator x correlation x n x eps
    python benchmarks/bench_forecast.py extrapolation           # the forecast at 10^6 rows carried from 10^5 vs simulated
    python benchmarks/bench_forecast.py margins --seeds 10      # the sparse selection-margin warnings against the truth

``correlated``: AdaSSP and certified DP-BCD on the DP-BCD simulation at column correlation rho (coefficients N(2, 1.5^2),
of one sign; public bounds as in ``bench_never_worse.py``), the measured excess risk exact from beta and Sigma (median
over seeds), beside ``est.plan(n, p).forecast(correlation=rho, direction=...)`` for each public direction assumption:
forecast / measured (ratio). ``extrapolation``: ``forecast.at_full_size`` against a forecast simulated at full size.
"""
from __future__ import annotations

import argparse
import math
import warnings
from typing import Any

import numpy as np
from bench_never_worse import excess_risk_on, make_regression

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
                        measured.append(excess_risk_on(est, d, sigma, var_y))
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


def margins(seeds: int) -> None:
    """SparseDPSIR on a six-column single index (``forecast_sir.single_index``, fill 0.7, cut points -1, 0, 1) and
    DPSparsePCA on ``bench_sparse.py``'s spike: per cell, seeds that missed a true column, seeds that warned, and both."""
    from bench_sparse import spike

    from privsdr import DPSparsePCA, NoiseDominatesWarning, SparseDPSIR
    from privsdr.algorithms.forecast_sir import single_index

    def quantiles(prob: np.ndarray) -> np.ndarray:
        return np.interp(prob, np.arange(5) / 4, [-2.0, -1.0, 0.0, 1.0, 2.0])

    print(f"sparse selection margins, {seeds} seeds: missed a true column / warned / both\n")
    print("| estimator | (n, p) | eps | missed | warned | both |")
    print("|---|---|---|---|---|---|")
    for name, n, p, eps in (("SparseDPSIR", 20_000, 1000, 0.5), ("SparseDPSIR", 20_000, 1000, 4.0), ("DPSparsePCA", 2000, 250, 2.0),
                            ("DPSparsePCA", 20_000, 250, 0.5), ("DPSparsePCA", 2000, 250, 8.0)):
        missed, warned = [], []
        for seed in range(seeds):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                if name == "SparseDPSIR":
                    u = np.where(np.arange(p) < 6, 1 / math.sqrt(6), 0.0)
                    X, y = single_index(n, np.ones(p), np.zeros(p), quantiles, u, 0.5, np.random.default_rng(seed), 0.7)
                    est: Any = SparseDPSIR(1, sparsity=6, bound=1.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(eps, 1e-6),
                                           random_state=seed).fit(X, y)
                    missed.append(not set(range(6)) <= set(est.screened_))
                else:
                    est = DPSparsePCA(1, sparsity=5, bound=1.0, budget=Budget(eps, 1e-6), random_state=seed).fit(spike(n, p, seed)[0])
                    missed.append(not set(range(5)) <= set(est.support_))
            warned.append(any(issubclass(w.category, NoiseDominatesWarning) and ("margin" in str(w.message) or "co-vary" in str(w.message))
                              for w in seen))
        both = sum(m and w for m, w in zip(missed, warned, strict=True))
        print(f"| {name} | ({n}, {p}) | {eps:g} | {sum(missed)} | {sum(warned)} | {both} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("correlated", "extrapolation", "margins"))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    {"correlated": lambda: correlated(args.seeds), "extrapolation": extrapolation, "margins": lambda: margins(args.seeds)}[args.what]()


if __name__ == "__main__":
    main()
