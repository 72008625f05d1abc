"""Fit time of DPPLS against scikit-learn's PLSRegression on the same data, as ratios within one run.

    python benchmarks/bench_pls.py                 # n = 10^5, m = 700, A = 10 (the issue's size; ~1.2 GB of RAM)
    python benchmarks/bench_pls.py --n 20000 --m 200 --repeats 5

Rows: scikit-learn ``PLSRegression(n_components=A, scale=False).fit`` (the reference), the non-private
core (``core.nipals_pls1`` and the kernel form on X^T X), and the private fits: certified S2 (one
blocked pass for X^T X plus an m x m eigendecomposition for the PSD repair), certified S1 (A passes
over the deflated rows) and the paper mode (NIPALS with noise). The ratio is median time / median
time of scikit-learn, measured in the same process; the goal for S2 is <= 1x.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_dpsir import median_seconds  # noqa: E402  (this folder is on sys.path when a benchmark runs)

from privsdr import DPPLS, Budget, core  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=700)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-slow", action="store_true", help="skip S1 and the paper mode")
    args = parser.parse_args()
    from sklearn.cross_decomposition import PLSRegression

    n, m, A = args.n, args.m, args.components
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, m)) * np.linspace(1.0, 0.1, m) / np.sqrt(m)
    y = X @ rng.standard_normal(m) + 0.1 * rng.standard_normal(n)
    bounds = dict(bound_x=1.5, bound_y=float(np.abs(y).max()) + 1.0)  # fixed before timing; the data are synthetic
    budget = Budget(1.0, 1e-6)

    def s2() -> None:
        DPPLS(A, budget=budget, random_state=0, **bounds).fit(X, y)

    def s1() -> None:
        DPPLS(A, mode="certified_iterative", budget=budget, random_state=0, **bounds).fit(X, y)

    def paper() -> None:
        DPPLS(A, mode="paper", budget=Budget(1.0, 1e-6), allow_uncertified=True, random_state=0).fit(X, y)

    def kernel() -> None:
        S, u, _, _ = core.centred_moments(X, y)
        core.kernel_pls1(S, u, A)

    cases = [
        ("sklearn PLSRegression(scale=False)", lambda: PLSRegression(n_components=A, scale=False).fit(X, y)),
        ("core.nipals_pls1 (non-private)", lambda: core.nipals_pls1(X, y, A)),
        ("core.kernel_pls1 on X^T X (non-private)", kernel),
        ("DPPLS certified S2", s2),
    ]
    if not args.skip_slow:
        cases += [("DPPLS certified_iterative S1", s1), ("DPPLS paper (edPLS)", paper)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s2()  # warm the memoised calibration of this plan shape
        times = {name: median_seconds(fn, args.repeats) for name, fn in cases}
    ref = times[cases[0][0]]
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"n = {n}, m = {m}, A = {A}, median of {args.repeats} runs, OPENBLAS_NUM_THREADS={threads}")
    print(f"{'fit':<42} {'seconds':>9} {'ratio to sklearn':>17}")
    for name, seconds in times.items():
        print(f"{name:<42} {seconds:>9.3f} {seconds / ref:>17.2f}")


if __name__ == "__main__":
    main()
