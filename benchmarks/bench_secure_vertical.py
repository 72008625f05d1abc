"""SecureVerticalRegression (issue 23): vertical regression from securely computed X^T X and X^T y, beside AdaSSP on
the pooled rows (the central baseline), on the DP-BCD paper's simulation; the cost of the secure Gram against N.

    python benchmarks/bench_secure_vertical.py simulation [--seeds 10] [--sizes 1000 10000 100000]   # x eps in {0.5, 1, 2, 8}
    python benchmarks/bench_secure_vertical.py cost                      # N = 2.5e4, 5e4, 1e5 rows x 10 columns
    python benchmarks/bench_secure_vertical.py real [--splits 100]       # forest fires and garments, eps = 1

Every secure fit runs the real protocol: one MPyC process per party (two data parties of 5 columns and a helper) on
127.0.0.1. Public bounds as in ``bench_adassp.py``: each party's block is bounded by 2.5 sqrt(5) (so a row by
2.5 sqrt(10), AdaSSP's bound on the pooled rows), y by 3 public sds of y. delta = 1e-6 everywhere.
"""
from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

from privsdr import AdaSSPRegression, Budget
from privsdr.datasets.vertical import dpbcd_synthetic
from privsdr.vertical.secure_regression import SecureVerticalRegression

EPSILONS = (0.5, 1.0, 2.0, 8.0)


def simulation(seeds: int, sizes: tuple[int, ...] = (1_000, 10_000, 100_000)) -> None:
    p = 10
    print(f"DP-BCD simulation (p = {p}, two parties of 5 columns, correlation 0.3), delta = 1e-6, median test R^2 over {seeds} seeds")
    print("| n | OLS | " + " | ".join(f"eps={e:g}: secure vertical / AdaSSP pooled" for e in EPSILONS) + " | largest gap |")
    print("|---|---|" + "---|" * (len(EPSILONS) + 1))
    for n in sizes:
        cells: dict[str, list[float]] = {}
        for seed in range(seeds):
            data = dpbcd_synthetic(2 * n, p, seed=seed)
            X, y = np.hstack(data.blocks), data.y
            Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
            Z = np.column_stack([Xtr, np.ones(n)])
            theta = np.linalg.lstsq(Z, ytr, rcond=None)[0]
            resid = yte - Xte @ theta[:p] - theta[p]
            cells.setdefault("ols", []).append(1.0 - float(resid @ resid) / float(np.sum((yte - yte.mean()) ** 2)))
            y_sd = math.sqrt(float(data.beta @ (0.7 * np.eye(p) + 0.3) @ data.beta) / 0.3)  # public: the design's sd of y
            for eps in EPSILONS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    secure = SecureVerticalRegression(row_bound=2.5 * math.sqrt(5), label_bound=3.0 * y_sd, n_parties=2,
                                                      budget=Budget(eps, 1e-6), random_state=seed, diagnose_noise=False).fit(Xtr, ytr)
                    pooled = AdaSSPRegression(bound_x=2.5 * math.sqrt(p), bound_y=3.0 * y_sd, budget=Budget(eps, 1e-6),
                                              random_state=seed, diagnose_noise=False).fit(Xtr, ytr)
                cells.setdefault(f"s{eps}", []).append(secure.score(Xte, yte))
                cells.setdefault(f"a{eps}", []).append(pooled.score(Xte, yte))
        med = {k: float(np.median(v)) for k, v in cells.items()}
        gap = max(abs(med[f"s{e}"] - med[f"a{e}"]) for e in EPSILONS)
        print(f"| {n:.0e} | {med['ols']:.3f} | " + " | ".join(f"{med[f's{e}']:.3f} / {med[f'a{e}']:.3f}" for e in EPSILONS)
              + f" | {gap:.3f} |", flush=True)


def cost() -> None:
    print("secure Gram and X^T y, noise included: 2 data parties x 5 columns + helper, 3 MPyC processes on 127.0.0.1")
    print("| N | seconds | MB sent (all parties) | seconds per 1e4 rows |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(0)
    for N in (25_000, 50_000, 100_000):
        X = rng.normal(size=(N, 10))
        y = X[:, 0] + rng.normal(size=N)
        est = SecureVerticalRegression(row_bound=2.5 * math.sqrt(5), label_bound=5.0, n_parties=2, budget=Budget(1.0, 1e-6),
                                       random_state=0, diagnose_noise=False).fit(X, y)
        cost = est.secure_cost_
        mb = sum(cost["bytes_sent"].values()) / 1e6
        print(f"| {N:.1e} | {cost['seconds']:.1f} | {mb:.1f} | {cost['seconds'] / N * 1e4:.2f} |", flush=True)


def real(splits: int) -> None:
    """Forest fires and garments: columns scaled by their public ranges (the DP-BCD reproduction's), 80/20 splits."""
    from sklearn.linear_model import LinearRegression

    from privsdr.reproduce.dpbcd_realdata import PUBLIC_RANGES, load, public_scales

    for name in ("dpbcd-forestfires", "dpbcd-productivity"):
        data = load(name)
        scales = public_scales(name, data)
        blocks = [np.clip(b, -s, s) / s for b, s in zip(data.blocks, scales, strict=True)]
        X, y, widths = np.hstack(blocks), data.y, [b.shape[1] for b in blocks]
        _, label_bound = PUBLIC_RANGES[name]
        bounds = {f"party{i}": math.sqrt(w) for i, w in enumerate(widths)}  # every scaled entry is in [-1, 1]
        center = label_bound / 2.0  # y in [0, label_bound]: a public centre and half-width
        ols, secure = [], []
        coef_ols, coef_secure = [], []
        for s in range(splits):
            order = np.random.default_rng(s).permutation(len(y))
            cut = int(0.8 * len(y))
            tr, te = order[:cut], order[cut:]
            lin = LinearRegression().fit(X[tr], y[tr])
            ols.append(lin.score(X[te], y[te]))
            coef_ols.append(lin.coef_)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = SecureVerticalRegression(row_bound=bounds, label_bound=label_bound / 2.0, y_center=center, n_parties=None,
                                               budget=Budget(1.0, 1e-6), random_state=s, diagnose_noise=False)
                est.fit([X[tr][:, :widths[0]], X[tr][:, widths[0]:]], y[tr])
            secure.append(est.score(X[te], y[te]))
            coef_secure.append(est.coef_)
        print(f"{name} ({len(y)} x {X.shape[1]}), eps = 1, delta = 1e-6, {splits} random 80/20 splits: median test R^2 "
              f"OLS {np.median(ols):.3f}, secure vertical {np.median(secure):.3f} (5 %: {np.quantile(secure, 0.05):.3f})")
        names = [c for cols in data.columns for c in cols]
        co, cs = np.median(coef_ols, axis=0), np.median(coef_secure, axis=0)
        print("  median coefficient (scaled columns): " + ", ".join(f"{n} {a:+.3f}/{b:+.3f}" for n, a, b in zip(names, co, cs, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("simulation", "cost", "real"))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="simulation: the n of the grid")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.what == "simulation":
        simulation(args.seeds, tuple(args.sizes))
    elif args.what == "cost":
        cost()
    else:
        real(args.splits)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
