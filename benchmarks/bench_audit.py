"""Samples and time to certify eps_lb >= 0.8 for correct eps = 1 mechanisms (alpha = 1e-3).

For each mechanism and per-side sample size, run the built-in audit over several seeds and report
the median and 5%-quantile lower bound and the median wall time. "Certifies" = the 5% quantile is
>= 0.8 (the audit reaches 0.8 with probability ~95%).

    python benchmarks/bench_audit.py [--seeds 20] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from privsdr.audit import audit_mechanism

GRID = {
    "gaussian": [5_000, 10_000, 20_000, 50_000, 100_000, 200_000],
    "laplace": [1_000, 2_000, 5_000, 10_000, 20_000, 50_000],
}


def run(seeds: int) -> list[dict]:
    rows = []
    for name, sizes in GRID.items():
        for n in sizes:
            bounds, times = [], []
            for seed in range(seeds):
                t0 = time.perf_counter()
                r = audit_mechanism(name, epsilon=1.0, delta=1e-5, samples=n, alpha=1e-3, seed=1000 + seed)
                times.append(time.perf_counter() - t0)
                bounds.append(r.epsilon_lower)
            rows.append({
                "mechanism": name, "samples_per_side": n, "median_eps_lb": float(np.median(bounds)),
                "q05_eps_lb": float(np.quantile(bounds, 0.05)), "median_seconds": float(np.median(times)),
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = run(args.seeds)
    print(f"{'mechanism':<10} {'n/side':>8} {'median eps_lb':>14} {'5% eps_lb':>10} {'time (s)':>9}  certifies 0.8?")
    for r in rows:
        ok = "yes" if r["q05_eps_lb"] >= 0.8 else "no"
        print(f"{r['mechanism']:<10} {r['samples_per_side']:>8} {r['median_eps_lb']:>14.3f} {r['q05_eps_lb']:>10.3f} {r['median_seconds']:>9.4f}  {ok}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
