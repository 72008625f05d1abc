"""What the secure sampler costs: draws per second against numpy's floating-point samplers, and whole fits.

Ratios within one run (the machine's speed cancels). The secure draws are timed on ``--draws`` numbers and
reported per million; numpy's on a million.

    python benchmarks/bench_secure_sampler.py              # 50,000 secure draws per row (~10 s)
    python benchmarks/bench_secure_sampler.py --draws 200000
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import privsdr
from privsdr import Budget, Plan, Sensitivity
from privsdr.datasets import sir_model
from privsdr.mechanisms import get_mechanism


def _seconds(fn, repeat: int = 3) -> float:
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def per_million(mechanism: str, norm: str, draws: int) -> tuple[float, float]:
    plan = Plan("one", "replace_one")
    plan.add("v", mechanism, Sensitivity(1.0, norm))
    fast = plan.allocate(Budget(1.0, 1e-6)).specs["v"]
    exact = plan.allocate(Budget(1.0, 1e-6), sampler="secure").specs["v"]
    mech, rng = get_mechanism(mechanism), np.random.default_rng(0)
    million = np.zeros(1_000_000)
    numpy_s = _seconds(lambda: mech.sample(million, fast, rng))
    some = np.zeros(draws)
    secure_s = _seconds(lambda: mech.sample(some, exact, rng), repeat=1) * 1_000_000 / draws
    return numpy_s, secure_s


def fit_seconds(p: int, sampler: str) -> float:
    X, y, _ = sir_model("M1", 100_000, p, seed=1)
    est = privsdr.DPSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-6), random_state=0,
                        sampler=sampler, diagnose_noise=False)
    est.fit(X, y)  # the first fit also calibrates the plan (memoised per sampler)
    return _seconds(lambda: est.fit(X, y), repeat=3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=50_000)
    args = parser.parse_args()
    print("| noise | numpy s / 1e6 draws | secure s / 1e6 draws | secure / numpy |")
    print("|---|---|---|---|")
    for mechanism, norm in (("gaussian", "l2"), ("laplace", "l1")):
        a, b = per_million(mechanism, norm, args.draws)
        print(f"| {mechanism} | {a:.3f} | {b:.1f} | {b / a:,.0f}x |")
    print()
    print("| DPSIR moments fit, n = 100,000 | noisy numbers | numpy s | secure s | secure / numpy |")
    print("|---|---|---|---|---|")
    for p in (10, 30, 60):
        released = 4 * p + 4 + p * (p + 1) // 2
        a, b = fit_seconds(p, "numpy"), fit_seconds(p, "secure")
        print(f"| p = {p} | {released} | {a:.3f} | {b:.3f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
