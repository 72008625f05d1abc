"""Secure horizontal AdaSSP (issue 34 item 4): ``SecureSites(AdaSSPRegression(...))`` over K sites against central
AdaSSP on the pooled rows, test R^2 over seeds (goal: within 0.02 at N = 10^5).

The DP-BCD paper's simulation (``bench_adassp.simulated_split``: p = 10, correlation 0.3, population R^2 0.3, public
bounds 2.5 sqrt(p) and 3 sds of y), N training rows split into K equal sites, eps = 1, delta = 1e-6, the certified
default (S2's releases, AdaSSP's ridge, the fallback towards the DP mean). The secure fit runs K + 1 real MPyC party
processes on this machine (TLS, loopback); the central fit releases the same statistics with one Gaussian each.

    python benchmarks/bench_secure_horizontal.py [--n 100000] [--sites 5] [--seeds 10]
"""
from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
from bench_adassp import simulated_split

from privsdr import AdaSSPRegression, Budget
from privsdr.errors import FreshBudgetWarning, NoiseDominatesWarning
from privsdr.federated import SecureSites

P = 10


def run(n: int, sites: int, seeds: int) -> None:
    print(f"DP-BCD simulation, p = {P}, N = {n} training rows in {sites} equal sites, eps = 1, delta = 1e-6, {seeds} seeds")
    print("| seed | OLS | central AdaSSP | secure AdaSSP | secure - central | secure s/fit |")
    print("|---|---|---|---|---|---|")
    diffs, central_r2, secure_r2, seconds = [], [], [], []
    for seed in range(seeds):
        (Xtr, ytr, Xte, yte), ols, y_sd = simulated_split(n, P, seed)

        def make(seed: int = seed, y_sd: float = y_sd) -> AdaSSPRegression:
            return AdaSSPRegression(bound_x=2.5 * math.sqrt(P), bound_y=3.0 * y_sd, budget=Budget(1.0, 1e-6), random_state=seed)

        parts = np.array_split(np.arange(n), sites)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatesWarning)
            warnings.simplefilter("ignore", FreshBudgetWarning)  # one fresh budget per fit: each is its own comparison
            central = make().fit(Xtr, ytr).score(Xte, yte)
            start = time.perf_counter()
            secure = SecureSites(make(), colluders=1, timeout=300.0).fit([(Xtr[i], ytr[i]) for i in parts]).score(Xte, yte)
            seconds.append(time.perf_counter() - start)
        central_r2.append(central)
        secure_r2.append(secure)
        diffs.append(secure - central)
        print(f"| {seed} | {ols:.4f} | {central:.4f} | {secure:.4f} | {secure - central:+.4f} | {seconds[-1]:.1f} |")
    d = np.abs(diffs)
    print(f"\nmedian test R^2: central {np.median(central_r2):.4f}, secure {np.median(secure_r2):.4f}; |secure - central|: "
          f"median {np.median(d):.4f}, max {np.max(d):.4f} (goal <= 0.02); median secure fit {np.median(seconds):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--sites", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    run(args.n, args.sites, args.seeds)


if __name__ == "__main__":
    main()
