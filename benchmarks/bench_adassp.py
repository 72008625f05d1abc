"""AdaSSPRegression, the central DP linear regression: test R^2 on the DP-BCD paper's simulation beside OLS, the
certified DP-BCD and PRIDE figures of the issue, and on diabetes.

    python benchmarks/bench_adassp.py simulation   # n in {1e3, 1e4, 1e5} x eps in {0.5, 1, 2, 8}, 10 seeds, median
    python benchmarks/bench_adassp.py diabetes     # 20 random 80/20 splits, median test R^2

Public bounds (never read off the data): the simulation's rows are scaled by a public 2.5 sqrt(p) (N(0, 1) columns
with correlation 0.3: |x_ij| <= 2.5 for ~99 % of entries) and y clipped at 3 public sds of y (the design's
signal-plus-noise variance is known to the simulation); diabetes uses its documented scaling (every column has
norm 1 over 442 rows: |x_ij| < 0.2, ||x|| <= 0.35 for every row) and the target's documented range 25..346.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from privsdr import AdaSSPRegression, Budget
from privsdr.datasets.vertical import dpbcd_synthetic


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    return 1.0 - float(np.sum((y - pred) ** 2)) / float(np.sum((y - y.mean()) ** 2))


def simulated_split(n: int, p: int, seed: int) -> tuple[tuple[np.ndarray, ...], float, float]:
    """One data set of the simulation: (train X, y, test X, y), OLS's test R^2, and the design's public sd of y."""
    data = dpbcd_synthetic(2 * n, p, seed=seed)
    X, y = np.hstack(data.blocks), data.y
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    theta = np.linalg.lstsq(np.column_stack([Xtr, np.ones(n)]), ytr, rcond=None)[0]
    y_sd = math.sqrt(float(data.beta @ (0.7 * np.eye(p) + 0.3) @ data.beta) / 0.3)  # public: the design's sd of y
    return (Xtr, ytr, Xte, yte), r2(yte, Xte @ theta[:p] + theta[p]), y_sd


def simulation(seeds: int = 10) -> None:
    p = 10
    print(f"DP-BCD simulation (p = {p}, correlation 0.3, population R^2 0.3), delta = 1e-6, median test R^2 over {seeds} seeds")
    print("| n | OLS | AdaSSP eps=0.5 | eps=1 | eps=2 | eps=8 |")
    print("|---|---|---|---|---|---|")
    for n in (1_000, 10_000, 100_000):
        cells: dict[str, list[float]] = {}
        for seed in range(seeds):
            (Xtr, ytr, Xte, yte), ols, y_sd = simulated_split(n, p, seed)
            cells.setdefault("ols", []).append(ols)
            for eps in (0.5, 1.0, 2.0, 8.0):
                est = AdaSSPRegression(bound_x=2.5 * math.sqrt(p), bound_y=3.0 * y_sd, budget=Budget(eps, 1e-6),
                                       random_state=seed).fit(Xtr, ytr)
                cells.setdefault(str(eps), []).append(est.score(Xte, yte))
        print(f"| {n:.0e} | {np.median(cells['ols']):.3f} | " + " | ".join(f"{np.median(cells[str(e)]):.3f}"
                                                                         for e in (0.5, 1.0, 2.0, 8.0)) + " |")


def diabetes(splits: int = 20) -> None:
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression

    X, y = load_diabetes(return_X_y=True)
    print(f"diabetes (442 x 10), 80/20 splits, median test R^2 over {splits} splits; bounds ||x|| <= 0.35, |y - 185.5| <= 160.5")
    rows: dict[str, list[float]] = {}
    for s in range(splits):
        order = np.random.default_rng(s).permutation(len(y))
        tr, te = order[:354], order[354:]
        rows.setdefault("OLS", []).append(LinearRegression().fit(X[tr], y[tr]).score(X[te], y[te]))
        for eps in (0.5, 1.0, 2.0, 8.0, 32.0):
            est = AdaSSPRegression(bound_x=0.35, bound_y=160.5, y_center=185.5, budget=Budget(eps, 1e-6), random_state=s)
            rows.setdefault(f"AdaSSP eps={eps:g}", []).append(est.fit(X[tr], y[tr]).score(X[te], y[te]))
    for name, values in rows.items():
        print(f"  {name:>18}: {np.median(values):7.3f}  (range {min(values):.3f} .. {max(values):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("simulation", "diabetes"))
    args = parser.parse_args()
    start = time.perf_counter()
    {"simulation": simulation, "diabetes": diabetes}[args.what]()
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
