"""Accuracy of certified DP-SIR at fixed (epsilon, delta): the default estimator (sufficient statistics
released once, ``algorithm="moments"``) against the paper's one-pass design (B.1 initializer + Algorithm 2,
``algorithm="onepass"``) and non-private SIR on the same rows. Model M1, p = 10, delta = 1e-6, public
cut points; median ||P_B - P_B_hat||_F over replications, and in brackets the multiple of SIR's median.

    python benchmarks/bench_dpsir_accuracy.py                     # the issue-11 grid, 10 reps (about 10 min)
    python benchmarks/bench_dpsir_accuracy.py --reps 3 --n 100000 500000
    python benchmarks/bench_dpsir_accuracy.py --paper             # paper vs certified calibration (one-pass, n = 20000)
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np

from privsdr import DPSIR, Budget
from privsdr.core import classical_sir, projection_distance, slice_by_cut_points
from privsdr.datasets import sir_model

CUTS = [-6.0, 0.0, 6.0]  # public boundaries for M1's response (|b^T x| <= 20)


def cell(distances: list[float], sir_distance: float) -> str:
    """Median distance and its ratio to the non-private SIR's."""
    return f"{np.median(distances):.3f} [{np.median(distances) / sir_distance:4.1f}x]"


def grid(ns: list[int], epsilons: list[float], reps: int, p: int) -> None:
    print(f"M1, p = {p}, delta = 1e-6, {reps} replications; median distance (0 = exact, 1.34 = random); "
          "[x SIR] = multiple of non-private SIR on the same rows")
    print(f"{'n':>9} {'eps':>5} {'SIR':>7} {'moments (default)':>22} {'one-pass B.1':>18} {'one-pass final':>18} {'steps used':>11}")
    for n in ns:
        data = [sir_model("M1", n, p, seed=1000 + r) for r in range(reps)]
        sir = [projection_distance(classical_sir(X, slice_by_cut_points(y, CUTS), 4, 1)[0], B) for X, y, B in data]
        s = float(np.median(sir))
        for eps in epsilons:
            mom, ini, fin, used = [], [], [], 0
            for r, (X, y, B) in enumerate(data):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = DPSIR(1, bound=1.0, cut_points=CUTS, budget=Budget(eps, 1e-6), random_state=r).fit(X, y)
                    o = DPSIR(1, algorithm="onepass", bound=1.0, cut_points=CUTS, budget=Budget(eps, 1e-6), random_state=r).fit(X, y)
                mom.append(projection_distance(m.directions_, B))
                ini.append(projection_distance(o.init_directions_, B))
                fin.append(projection_distance(o.directions_, B))
                used += o.hyperparameters_["eta"] > 0
            print(f"{n:>9} {eps:>5g} {s:>7.3f} {cell(mom, s):>22} {cell(ini, s):>18} {cell(fin, s):>18} {used:>6}/{reps}", flush=True)


def paper_vs_certified(reps: int, n: int, p: int) -> None:
    print(f"one-pass, M1, n = {n}, p = {p}, delta = 1e-6, {reps} replications; median distance")
    print(f"{'epsilon':>8} {'paper DP-Ini':>13} {'paper DP-SIR':>13} {'cert. DP-Ini':>13} {'cert. DP-SIR':>13}")
    for eps in (1.0, 3.0, 10.0, 30.0):
        res = {m: ([], []) for m in ("paper", "certified")}
        for r in range(reps):
            X, y, B = sir_model("M1", n, p, seed=500 + r)
            for mode in res:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = DPSIR(1, algorithm="onepass", bound=1.0, cut_points=CUTS, mode=mode, budget=Budget(eps, 1e-6),
                                random_state=r, allow_uncertified=True).fit(X, y)
                res[mode][0].append(projection_distance(est.init_directions_, B))
                res[mode][1].append(projection_distance(est.directions_, B))
        med = {m: (float(np.median(a)), float(np.median(b))) for m, (a, b) in res.items()}
        print(f"{eps:>8g} {med['paper'][0]:>13.3f} {med['paper'][1]:>13.3f} {med['certified'][0]:>13.3f} {med['certified'][1]:>13.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 500_000, 2_000_000])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0, 8.0])
    parser.add_argument("--p", type=int, default=10)
    parser.add_argument("--paper", action="store_true", help="paper vs certified calibration of the one-pass design")
    args = parser.parse_args()
    if args.paper:
        paper_vs_certified(args.reps, 20_000, 5)
    else:
        grid(args.n, args.eps, args.reps, args.p)


if __name__ == "__main__":
    main()
