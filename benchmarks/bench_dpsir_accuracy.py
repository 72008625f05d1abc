"""Accuracy at equal (epsilon, delta): certified DPSIR (analytic calibration, steps at the full
budget by parallel composition, tight noise) against the paper's printed calibration (classical,
(eps/2, delta/2) for B.1 and (eps/T, delta/T) per step), with the same public slice boundaries, on
model M1 with p = 5 where the signal is detectable. Median ||P_B - P_B_hat||_F over replications.

    python benchmarks/bench_dpsir_accuracy.py [--reps 20]
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np

from privsdr import Budget, DPSIR
from privsdr.core import projection_distance
from privsdr.datasets import sir_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--p", type=int, default=5)
    args = parser.parse_args()
    cuts = [-6.0, 0.0, 6.0]  # public boundaries for M1's response (|b^T x| <= 20)
    print(f"M1, n = {args.n}, p = {args.p}, delta = 1e-6, {args.reps} replications; median distance (0 = exact, 1.41 = orthogonal)")
    print(f"{'epsilon':>8} {'paper DP-Ini':>13} {'paper DP-SIR':>13} {'cert. DP-Ini':>13} {'cert. DP-SIR':>13} {'paper/cert (DP-SIR)':>20}")
    for eps in (1.0, 3.0, 10.0, 30.0):
        res = {m: ([], []) for m in ("paper", "certified")}
        for r in range(args.reps):
            X, y, B = sir_model("M1", args.n, args.p, seed=500 + r)
            for mode in res:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = DPSIR(1, bound=1.0, cut_points=cuts, mode=mode, budget=Budget(eps, 1e-6), random_state=r).fit(X, y)
                res[mode][0].append(projection_distance(est.init_directions_, B))
                res[mode][1].append(projection_distance(est.directions_, B))
        med = {m: (float(np.median(a)), float(np.median(b))) for m, (a, b) in res.items()}
        print(f"{eps:>8g} {med['paper'][0]:>13.3f} {med['paper'][1]:>13.3f} {med['certified'][0]:>13.3f} "
              f"{med['certified'][1]:>13.3f} {med['paper'][1] / med['certified'][1]:>20.2f}")


if __name__ == "__main__":
    main()
