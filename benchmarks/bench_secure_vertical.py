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
from bench_adassp import simulated_split  # benchmarks/ is on sys.path when this script runs

from privsdr import AdaSSPRegression, Budget
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
            (Xtr, ytr, Xte, yte), ols, y_sd = simulated_split(n, p, seed)  # the same data sets as bench_adassp.py
            cells.setdefault("ols", []).append(ols)
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


def _row_bound(columns: tuple[str, ...]) -> float:
    """A public bound on a party's scaled row: every numeric column is in [-1, 1], and each one-hot group (month_,
    day_, department_) has at most one 1 -- a fact of the encoding, not of the data."""
    groups = {c.split("_", 1)[0] for c in columns if c.startswith(("month_", "day_", "department_"))}
    numeric = [c for c in columns if not c.startswith(("month_", "day_", "department_"))]
    return math.sqrt(len(numeric) + len(groups))


def real(splits: int) -> None:
    """Forest fires and garments: columns scaled by their public ranges (the DP-BCD reproduction's). Test R^2 over
    random 80/20 splits, and R^2 on all rows over as many noise draws (how the DP-BCD reproduction scores)."""
    from sklearn.linear_model import LinearRegression

    from privsdr.reproduce.dpbcd_realdata import PUBLIC_RANGES, load, public_scales

    for name in ("dpbcd-forestfires", "dpbcd-productivity"):
        data = load(name)
        scales = public_scales(name, data)
        blocks = [np.clip(b, -s, s) / s for b, s in zip(data.blocks, scales, strict=True)]
        X, y, widths = np.hstack(blocks), data.y, [b.shape[1] for b in blocks]
        _, label_bound = PUBLIC_RANGES[name]
        bounds = {f"party{i}": _row_bound(cols) for i, cols in enumerate(data.columns)}
        center = label_bound / 2.0  # y in [0, label_bound]: a public centre and half-width

        params = dict(row_bound=bounds, label_bound=label_bound / 2.0, y_center=center, budget=Budget(1.0, 1e-6), diagnose_noise=False)

        def fit(Xf: np.ndarray, yf: np.ndarray, seed: int, params: dict = params, cut: int = widths[0]) -> SecureVerticalRegression:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return SecureVerticalRegression(**params, random_state=seed).fit([Xf[:, :cut], Xf[:, cut:]], yf)

        ols, secure, coef_secure = [], [], []
        for s in range(splits):
            order = np.random.default_rng(s).permutation(len(y))
            cut = int(0.8 * len(y))
            tr, te = order[:cut], order[cut:]
            ols.append(LinearRegression().fit(X[tr], y[tr]).score(X[te], y[te]))
            secure.append(fit(X[tr], y[tr], s).score(X[te], y[te]))
        inside = []
        for s in range(splits):
            est = fit(X, y, 1000 + s)
            inside.append(est.score(X, y))
            coef_secure.append(est.coef_)
        lin = LinearRegression().fit(X, y)
        print(f"{name} ({len(y)} x {X.shape[1]}), eps = 1, delta = 1e-6, row bounds {', '.join(f'{v:.2f}' for v in bounds.values())}:")
        print(f"  test R^2, {splits} random 80/20 splits (median): OLS {np.median(ols):.3f}, secure vertical {np.median(secure):.3f} "
              f"(5 %: {np.quantile(secure, 0.05):.3f})")
        print(f"  R^2 on all rows, {splits} noise draws (median): OLS {lin.score(X, y):.3f}, secure vertical {np.median(inside):.3f} "
              f"(5 %: {np.quantile(inside, 0.05):.3f})")
        names = [c for cols in data.columns for c in cols]
        cs = np.median(coef_secure, axis=0)
        print("  coefficients on all rows (scaled columns), OLS / secure median: "
              + ", ".join(f"{n.strip()} {a:+.3f}/{b:+.3f}" for n, a, b in zip(names, lin.coef_, cs, strict=True)))


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
