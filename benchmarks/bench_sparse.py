"""High-dimensional certified estimators (issue 26): the moments design (one top-s selection and one moments release on
all n rows) against the noise-off fit and, where cheap enough, the paper's one-pass design.

    python benchmarks/bench_sparse.py sir     # SparseDPSIR, M1, s = 6, H = 4, delta = 1e-6: median ||P_B - P_B_hat||_F
    python benchmarks/bench_sparse.py pca     # DPSparsePCA, a spike on 5 of 250 coordinates: median distance and / noise off
    python benchmarks/bench_sparse.py time    # the fit at n = 2e4, p = 1000 against one X^T X pass

SparseDPSIR slices with a DP quantile release over the public grid of the DP-SIR reproduction (as issue 26 measured);
the reference is oracle SIR on the true support (noise off, equal-count slices), the random level sqrt(2).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from privsdr import Budget, DPSparsePCA, SparseDPSIR
from privsdr.core import classical_sir, equal_count_cut_points, projection_distance, slice_by_cut_points
from privsdr.datasets import sir_model
from privsdr.reproduce.dpsir_tables import public_grid

EPSILONS = (0.5, 1.0, 2.0, 8.0)


def oracle(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    B = np.zeros((X.shape[1], 1))
    B[:6] = classical_sir(X[:, :6], slice_by_cut_points(y, equal_count_cut_points(y, 4)), 4, 1)[0]
    return B


def sparse_sir(seeds: int, onepass: bool) -> None:
    print(f"SparseDPSIR on M1 (s = 6, H = 4, delta = 1e-6), {seeds} seeds: median distance (random level 1.414)\n")
    header = " | ".join(f"eps = {e:g}" for e in EPSILONS)
    print(f"| (n, p) | oracle SIR | design | {header} |")
    print("|---|---|---|" + "---|" * len(EPSILONS))
    for n, p in ((2000, 1000), (20_000, 1000), (200_000, 250)):
        data = [sir_model("M1", n, p, seed=700 + r) for r in range(seeds)]
        ref = float(np.median([projection_distance(oracle(X, y), B) for X, y, B in data]))
        for algorithm in ("moments",) + (("onepass",) if onepass else ()):
            cells = []
            for eps in EPSILONS:
                d = []
                for r, (X, y, B) in enumerate(data):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est = SparseDPSIR(1, sparsity=6, bound=1.0, n_slices=4, y_grid=public_grid("M1"), budget=Budget(eps, 1e-6),
                                          algorithm=algorithm, random_state=r).fit(X, y)
                    d.append(projection_distance(est.directions_, B))
                cells.append(f"{np.median(d):.3f}")
            print(f"| ({n}, {p}) | {ref:.3f} | {algorithm} | " + " | ".join(cells) + " |", flush=True)


def spike(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x = z + 2 w u with u uniform on the first 5 coordinates, scaled by 1/3 and clipped to [-1, 1]."""
    rng = np.random.default_rng(seed)
    u = np.zeros(p)
    u[:5] = 1 / np.sqrt(5)
    X = rng.standard_normal((n, p)) + 2.0 * rng.standard_normal((n, 1)) * u
    return np.clip(X / 3, -1, 1), u[:, None]


def sparse_pca(seeds: int, onepass: bool) -> None:
    print(f"DPSparsePCA, spike on 5 of 250 coordinates, delta = 1e-6, {seeds} seeds: median distance (x noise off)\n")
    print("| n | noise off | design | " + " | ".join(f"eps = {e:g}" for e in EPSILONS) + " |")
    print("|---|---|---|" + "---|" * len(EPSILONS))
    for n in (2000, 20_000, 200_000):
        data = [spike(n, 250, 900 + r) for r in range(seeds)]
        off = float(np.median([projection_distance(DPSparsePCA(1, sparsity=5, bound=1.0, budget=Budget.infinite()).fit(X).components_, u)
                               for X, u in data]))
        for algorithm in ("moments",) + (("onepass",) if onepass else ()):
            cells = []
            for eps in EPSILONS:
                d = []
                for r, (X, u) in enumerate(data):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est = DPSparsePCA(1, sparsity=5, bound=1.0, budget=Budget(eps, 1e-6), algorithm=algorithm, random_state=r).fit(X)
                    d.append(projection_distance(est.components_, u))
                cells.append(f"{np.median(d):.3f} ({np.median(d) / off:.1f}x)")
            print(f"| {n} | {off:.4f} | {algorithm} | " + " | ".join(cells) + " |", flush=True)


def timing(repeats: int) -> None:
    X, y, _ = sir_model("M1", 20_000, 1000, seed=1)
    grid = public_grid("M1")

    def median_time(fn: object) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    gram = median_time(lambda: X.T @ X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sir = median_time(lambda: SparseDPSIR(1, sparsity=6, bound=1.0, y_grid=grid, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y))
        pca = median_time(lambda: DPSparsePCA(1, sparsity=6, bound=1.0, budget=Budget(1.0, 1e-6), random_state=0).fit(X))
    print(f"n = 20000, p = 1000, median of {repeats}: X^T X {gram:.3f} s; SparseDPSIR (moments) {sir:.3f} s = {sir / gram:.2f}x; "
          f"DPSparsePCA (moments) {pca:.3f} s = {pca / gram:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("sir", "pca", "time"))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--onepass", action="store_true", help="also the paper's one-pass design (slow at n = 2e5)")
    args = parser.parse_args()
    if args.what == "sir":
        sparse_sir(args.seeds, args.onepass)
    elif args.what == "pca":
        sparse_pca(args.seeds, args.onepass)
    else:
        timing(5)


if __name__ == "__main__":
    main()
