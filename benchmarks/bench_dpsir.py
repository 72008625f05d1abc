"""Fit time of DPSIR (default ``moments`` and the one-pass design) against the non-private core SIR and
against one ``X.T @ X`` pass on the same data, as ratios within one run, and peak memory (tracemalloc)
relative to the data itself.

    python benchmarks/bench_dpsir.py [--big]     # --big adds n = 10^6, p = 100
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings
from functools import partial

import numpy as np

from privsdr import DPSIR, Budget
from privsdr.core import classical_sir, equal_count_cut_points, slice_by_cut_points
from privsdr.datasets import sir_model


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def peak_bytes(fn) -> int:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def gram(X: np.ndarray) -> None:
    X.T @ X


def sir(X: np.ndarray, y: np.ndarray, cuts: np.ndarray) -> None:
    classical_sir(X, slice_by_cut_points(y, cuts), 4, 1)


def dpsir_fit(X: np.ndarray, y: np.ndarray, cuts: np.ndarray, algorithm: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPSIR(1, algorithm=algorithm, bound=1.0, cut_points=cuts, budget=Budget(1.0, len(y) ** -1.1), random_state=0).fit(X, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", action="store_true", help="also n = 10^6, p = 100 (about a minute)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [(40_000, 40)] + ([(1_000_000, 100)] if args.big else [])
    print(f"{'n':>9} {'p':>4} {'algorithm':>9} {'X^T X (s)':>10} {'core SIR (s)':>13} {'DPSIR (s)':>10} "
          f"{'/ X^T X':>8} {'/ SIR':>6} {'peak / data':>12}")
    for n, p in sizes:
        X, y, _ = sir_model("M1", n, p, seed=0)
        cuts = equal_count_cut_points(y, 4)

        t_gram = median_seconds(partial(gram, X), args.repeats)
        t_sir = median_seconds(partial(sir, X, y, cuts), args.repeats)
        for algorithm in ("moments", "onepass"):
            dp = partial(dpsir_fit, X, y, cuts, algorithm)
            dp()  # warm the memoised calibration of this plan shape
            t_dp = median_seconds(dp, args.repeats)
            peak = peak_bytes(dp)
            print(f"{n:>9} {p:>4} {algorithm:>9} {t_gram:>10.3f} {t_sir:>13.3f} {t_dp:>10.3f} {t_dp / t_gram:>8.2f} "
                  f"{t_dp / t_sir:>6.2f} {peak / X.nbytes:>12.2f}")


if __name__ == "__main__":
    main()
