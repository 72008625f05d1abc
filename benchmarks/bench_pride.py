"""PRIDE: sketch time (fast Walsh-Hadamard transform against a dense Pi), a full fit at the climate shape
against scikit-learn's Ridge on the pooled data, and the error of certified analytic calibration against
the paper's Kenthapadi calibration at equal (eps, delta) (with the errors-in-variables correction).

    python benchmarks/bench_pride.py [--repeats 5] [--reps 10] [--json FILE]

1. Sketch of one party's block, n = 849 rows, tau = 2,592 columns (the climate shape, tau' = 4,096), for
   tau_subs in {26, 130, 259, 518} (Table D.1): ``SRHT.apply`` (the pruned FWHT, O(n tau' log tau')) and the
   full butterfly transform against X @ Pi
   with Pi formed beforehand, and against forming Pi's tau_subs columns (Hadamard entries by bit parity)
   and multiplying. Median of ``--repeats``; ratios within one run.
2. A full certified PRIDE fit (K = 4, tau_subs = 130, (1, 1e-5), in process, message reports off) on the
   synthetic climate stand-in (849 x 10,368; the climate data are not obtainable) with a fixed lambda and
   with local 5-fold CV, against ``Ridge`` (fixed alpha) and ``RidgeCV`` (the same 31 lambdas, efficient
   leave-one-out) on the pooled matrix.
3. The simulated data (``--reps`` data sets, tau_subs = 0.2 tau, lambda fixed at the pooled-CV lambda of
   each data set, so only the noise differs): the normalised error ||b - b*||^2 / ||b*||^2 against the
   pooled ridge b* at that lambda, for the certified release (public range [-4, 4], theta = 8) with the
   Kenthapadi and the analytic calibration at the same (eps, 0.05), the paper mode (theta off the data,
   Kenthapadi), and the analytic release with the errors-in-variables correction (A9.2).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privsdr import Budget, PRIDERegressor  # noqa: E402
from privsdr.core import SRHT, LocalDesign, fwht_columns, kfold, ridge, ridge_alpha  # noqa: E402
from privsdr.datasets import climate_standin, pride_simulation  # noqa: E402
from privsdr.mechanisms import gaussian_noise_multiplier  # noqa: E402
from privsdr.vertical import LargeDeltaWarning  # noqa: E402

EPSILONS = (0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 20.0)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def dense_columns(s: SRHT) -> np.ndarray:
    """Pi formed directly: entry (i, j) = d_i (-1)^popcount(i & S_j) / sqrt(tau_subs) (no tau' x tau' matrix)."""
    rows = np.arange(s.n_features)[:, None]
    bits = np.bitwise_and(rows, s.columns[None, :])
    parity = np.zeros(bits.shape, dtype=np.int64)
    while np.any(bits):
        parity ^= bits & 1
        bits >>= 1
    return s.signs[: s.n_features, None] * (1.0 - 2.0 * parity) / np.sqrt(s.sketch_dim)


def full_transform(s: SRHT, X: np.ndarray) -> np.ndarray:
    """Every butterfly level on every row, then the selected outputs."""
    padded = np.zeros((s.padded_dim, X.shape[0]))
    padded[: s.n_features] = X.T * s.signs[: s.n_features, None]
    return fwht_columns(padded)[s.columns].T / np.sqrt(s.sketch_dim)


def build_and_multiply(s: SRHT, X: np.ndarray) -> np.ndarray:
    return X @ dense_columns(s)


def sketch_timing(repeats: int) -> list[dict]:
    X = np.random.default_rng(0).standard_normal((849, 2592))
    rows = []
    for tau_subs in (26, 130, 259, 518):
        s = SRHT.draw(2592, tau_subs, 1)
        P = dense_columns(s)
        assert np.allclose(P, s.matrix()) and np.allclose(X @ P, s.apply(X))
        fast = median_time(partial(s.apply, X), repeats)
        assert np.allclose(full_transform(s, X), s.apply(X))
        full = median_time(partial(full_transform, s, X), repeats)
        dense = median_time(partial(np.matmul, X, P), repeats)
        build = median_time(partial(build_and_multiply, s, X), repeats)
        rows.append({"tau_subs": tau_subs, "fwht_s": fast, "full_fwht_s": full, "dense_multiply_s": dense, "dense_build_and_multiply_s": build,
                     "fwht_over_dense": fast / dense, "fwht_over_build_and_dense": fast / build})
    return rows


def fit_timing(repeats: int) -> dict:
    from sklearn.linear_model import Ridge, RidgeCV

    data = climate_standin(0)
    X, y = data.X_train, data.y_train
    blocks = data.blocks(X)
    n = len(y)
    lam = 0.1
    lambdas = np.logspace(-4, 2, 31) * 100.0

    def pride(**kw):
        return PRIDERegressor("certified", budget=Budget(1.0, 1e-5), bounds=(-5, 5), sketch_dim=130, random_state=0, sketch_seed=0,
                              message_reports=False, **kw).fit(blocks, y)

    pride(lam=lam)  # warm up (memoised calibration, BLAS threads)
    t_fixed = median_time(lambda: pride(lam=lam), repeats)
    t_cv = median_time(lambda: pride(lambdas=lambdas), max(1, repeats // 2))
    Xc, yc = X - X.mean(0), y - y.mean()
    t_ridge = median_time(lambda: Ridge(alpha=ridge_alpha(lam, n), fit_intercept=False).fit(Xc, yc), repeats)
    t_ridgecv = median_time(lambda: RidgeCV(alphas=[ridge_alpha(v, n) for v in lambdas], fit_intercept=False).fit(Xc, yc),
                            max(1, repeats // 2))
    est = pride(lam=lam)
    star = Ridge(alpha=ridge_alpha(lam, n), fit_intercept=False).fit(Xc, yc).coef_
    return {"n": n, "p": X.shape[1], "K": 4, "tau_subs": 130, "pride_fixed_s": t_fixed, "pride_local_cv_s": t_cv,
            "ridge_s": t_ridge, "ridgecv_s": t_ridgecv, "fixed_over_ridge": t_fixed / t_ridge, "cv_over_ridgecv": t_cv / t_ridgecv,
            "sigma": est.noise_sd_["party0"], "normalised_error_vs_pooled": float(np.sum((est.coef_ - star) ** 2) / np.sum(star**2))}


def calibration_accuracy(reps: int) -> list[dict]:
    variants = {
        "certified, Kenthapadi": dict(mode="certified", bounds=(-4, 4), calibration="kenthapadi"),
        "certified, analytic": dict(mode="certified", bounds=(-4, 4), calibration="analytic"),
        "paper (theta from data), Kenthapadi": dict(mode="paper", standardize=False, allow_uncertified=True),
        "certified, analytic + correction": dict(mode="certified", bounds=(-4, 4), calibration="analytic", bias_correction=True),
    }
    errors: dict[tuple[str, float], list[float]] = {}
    sigmas: dict[tuple[str, float], float] = {}
    lambdas = np.logspace(-4, 3, 29)
    for rep in range(reps):
        data = pride_simulation(rep)
        X, y = data.X_train - data.X_train.mean(0), data.y_train - data.y_train.mean()
        n = len(y)
        mse = LocalDesign(X, np.zeros((n, 0))).cv_path(y, lambdas, kfold(n, 5, 0)).mse(y)
        lam = float(lambdas[int(np.argmin(mse))])
        star = ridge(X, y, ridge_alpha(lam, n))
        blocks = data.blocks(data.X_train)
        for eps in EPSILONS:
            for name, kw in variants.items():
                kw = dict(kw)
                mode = kw.pop("mode")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", LargeDeltaWarning)
                    est = PRIDERegressor(mode, budget=Budget(eps, 0.05), sketch_dim=0.2, lam=lam, sketch_seed=rep, random_state=rep,
                                         message_reports=False, **kw).fit(blocks, data.y_train)
                errors.setdefault((name, eps), []).append(float(np.sum((est.coef_ - star) ** 2) / np.sum(star**2)))
                sigmas[(name, eps)] = max(est.noise_sd_.values())
    rows = []
    for eps in EPSILONS:
        row = {"eps": eps, "z_analytic_over_kenthapadi": gaussian_noise_multiplier(eps, 0.05, "analytic") /
               gaussian_noise_multiplier(eps, 0.05, "kenthapadi")}
        for name in variants:
            row[f"{name}: median error"] = float(np.median(errors[(name, eps)]))
            row[f"{name}: sigma"] = sigmas[(name, eps)]
        row["analytic / Kenthapadi error"] = row["certified, analytic: median error"] / row["certified, Kenthapadi: median error"]
        row["corrected / analytic error"] = row["certified, analytic + correction: median error"] / row["certified, analytic: median error"]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    out = {"sketch": sketch_timing(args.repeats)}
    print("1. sketch of one party's block, n = 849, tau = 2592 (tau' = 4096); median seconds")
    print("| tau_subs | pruned FWHT (SRHT.apply) | full FWHT | dense X @ Pi | form Pi + multiply | FWHT / dense | FWHT / (form + dense) |")
    print("|---|---|---|---|---|---|---|")
    for r in out["sketch"]:
        print(f"| {r['tau_subs']} | {r['fwht_s']:.4f} | {r['full_fwht_s']:.4f} | {r['dense_multiply_s']:.4f} | {r['dense_build_and_multiply_s']:.4f} | "
              f"{r['fwht_over_dense']:.2f}x | {r['fwht_over_build_and_dense']:.2f}x |")
    out["fit"] = fit_timing(args.repeats)
    f = out["fit"]
    print(f"\n2. certified PRIDE on the climate stand-in ({f['n']} x {f['p']}, K = 4, tau_subs = 130); median seconds")
    print("| fit | seconds | baseline on the pooled matrix | seconds | ratio |\n|---|---|---|---|---|")
    print(f"| PRIDE, fixed lambda | {f['pride_fixed_s']:.2f} | Ridge | {f['ridge_s']:.2f} | {f['fixed_over_ridge']:.2f}x |")
    print(f"| PRIDE, local 5-fold CV (31 lambdas) | {f['pride_local_cv_s']:.2f} | RidgeCV (31 alphas, LOO) | {f['ridgecv_s']:.2f} | "
          f"{f['cv_over_ridgecv']:.2f}x |")
    print(f"(sigma = {f['sigma']:.3g} at (1, 1e-5), range [-5, 5]; normalised error against pooled ridge "
          f"{f['normalised_error_vs_pooled']:.3g})")
    out["accuracy"] = calibration_accuracy(args.reps)
    print(f"\n3. SIM, tau_subs = 0.2 tau, lambda = pooled-CV lambda; median normalised error against pooled ridge over {args.reps} data sets")
    names = ("certified, Kenthapadi", "certified, analytic", "paper (theta from data), Kenthapadi", "certified, analytic + correction")
    print("| eps | sigma analytic / Kenthapadi | " + " | ".join(names) + " | analytic / Kenthapadi error | corrected / analytic |")
    print("|---|---|" + "---|" * (len(names) + 2))
    for r in out["accuracy"]:
        cells = " | ".join(f"{r[f'{n}: median error']:.3g} (sigma {r[f'{n}: sigma']:.3g})" for n in names)
        print(f"| {r['eps']:g} | {r['z_analytic_over_kenthapadi']:.3f} | {cells} | {r['analytic / Kenthapadi error']:.3f} | "
              f"{r['corrected / analytic error']:.3f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
