"""Each sufficient-statistics fit's time over one X^T X (issue 35): the one blocked pass (``privsdr.core.gram_pass``)
against the floor of a fit that reads X once, ``np.dot(X.T, X)`` on the same float64 array.

For each n and p, every timed call runs ``--repeats`` times, interleaved in one process (baseline, then each fit, in
turn), and the best time of each is kept; with one BLAS thread (threadpoolctl; CPU time of the process, which a
loaded machine does not inflate as it does wall time) and with the default threads (wall time). Columns:

* ``fit / XtX``: the whole ``fit`` (checks, the pass, plan, calibration, noise, post-processing, report);
* ``pass / XtX``: the statistics' pass alone (``gram_sums`` with the estimator's declaration);
* ``fixed ms``: the fit's cost that does not grow with n, measured as the whole fit at n = 2,000 (same p);
* ``peak / X``: the fit's peak of traced allocations (tracemalloc; numpy's buffers are traced) over X's size, one run.

    python benchmarks/bench_one_pass.py                         # n = 1e5 and 1e6, p = 10 and 100, best of 3
    python benchmarks/bench_one_pass.py --sizes 100000 --p 10   # a quick look
    python benchmarks/bench_one_pass.py --chunked 10000000      # also 1e7 rows x 10 read as Chunks of 1e6 (generated)

A measurement, not a test: on a shared machine the ratios move by tens of percent between runs.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from privsdr import DPPLS, DPSIR, AdaSSPRegression, Budget, Chunks, DPMeanCovariance
from privsdr.core.gram_pass import RowParts, gram_sums
from privsdr.preprocessing import DPStandardScaler

CUTS = [-1.0, 0.0, 1.0]
BUDGET = Budget(1.0, 1e-6)


def estimators(p: int) -> dict[str, tuple[Callable[[], Any], bool, RowParts, tuple[str, ...]]]:
    """name -> (factory, needs y, the pass's declaration, its blocks)."""
    c, cy = 1.5 * np.sqrt(p), 3.0
    ssp = RowParts(l2=c, phi="label", y_bound=cy)
    ssp_blocks = ("count", "x_sum", "xtx", "x_phi", "phi_sum")
    return {
        "DPSIR (moments)": (lambda: DPSIR(1, bound=2.5, cut_points=CUTS, budget=BUDGET, random_state=0), True,
                            RowParts(box=2.5, phi="slices", cuts=np.asarray(CUTS)), ("xtx", "x_phi", "phi_sum")),
        "AdaSSP (certified)": (lambda: AdaSSPRegression(bound_x=c, bound_y=cy, budget=BUDGET, random_state=0), True, ssp, ssp_blocks),
        "AdaSSP (published)": (lambda: AdaSSPRegression(bound_x=c, bound_y=cy, shrinkage="none", budget=BUDGET, random_state=0),
                               True, ssp, ssp_blocks),
        "DPPLS S2": (lambda: DPPLS(2, bound_x=c, bound_y=cy, budget=BUDGET, random_state=0), True, ssp, ssp_blocks),
        "DPMeanCovariance": (lambda: DPMeanCovariance(clip=c, budget=BUDGET, random_state=0), False, RowParts(l2=c),
                             ("x_sum", "xtx")),
        "DPStandardScaler": (lambda: DPStandardScaler(bound=3.0, budget=BUDGET, random_state=0), False,
                             RowParts(scale=3.0, box=1.0), ("x_sum", "x_sq")),
    }


def data(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, 0] + 0.5 * rng.standard_normal(n)
    return X, y


def fit(make: Callable[[], Any], with_y: bool, X: Any, y: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fresh-budget and noise diagnostics
        return make().fit(X, y) if with_y else make().fit(X)


def best_of(calls: dict[str, Callable[[], Any]], repeats: int, clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Best time of each call on ``clock``, the calls interleaved."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = clock()
            call()
            times[name].append(clock() - start)
    return {name: min(ts) for name, ts in times.items()}


def peak_ratio(call: Callable[[], Any], nbytes: int) -> float:
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / nbytes


def table_for(n: int, p: int, threads: str, repeats: int, memory: bool) -> list[str]:
    X, y = data(n, p)
    small_X, small_y = data(2000, p, seed=1)
    ests = estimators(p)
    limit = threadpool_limits(1) if threads == "1" else nullcontext()
    with limit:
        calls: dict[str, Callable[[], Any]] = {"XtX": lambda: np.dot(X.T, X)}
        for name, (make, with_y, parts, blocks) in ests.items():
            calls[f"fit {name}"] = lambda make=make, with_y=with_y: fit(make, with_y, X, y)
            calls[f"pass {name}"] = lambda parts=parts, blocks=blocks, with_y=with_y: gram_sums(X, y if with_y else None, parts, blocks)
            calls[f"fixed {name}"] = lambda make=make, with_y=with_y: fit(make, with_y, small_X, small_y)
        # one BLAS thread: the process's CPU time (on a loaded machine a long call's wall time counts the other
        # processes' time slices, a short one's often does not); default threads: wall time
        best = best_of(calls, repeats, time.process_time if threads == "1" else time.perf_counter)
    rows = []
    for name, (make, with_y, _, _) in ests.items():
        peak = f"{peak_ratio(lambda make=make, with_y=with_y: fit(make, with_y, X, y), X.nbytes):.2f}" if memory else "-"
        rows.append(f"| {name} | {n:.0e} | {p} | {threads} | {best['XtX'] * 1e3:.1f} | {best[f'fit {name}'] / best['XtX']:.2f} | "
                    f"{best[f'pass {name}'] / best['XtX']:.2f} | {best[f'fixed {name}'] * 1e3:.1f} | {peak} |")
    return rows


def chunked_rows(n: int, p: int, repeats: int) -> list[str]:
    """n rows x p read as Chunks of 10^6 generated rows: the fit over one pass of generated chunks that only sums X^T X."""
    size = 10**6

    def chunks() -> Any:
        for start in range(0, n, size):
            X, y = data(min(size, n - start), p, seed=start)
            yield X, y

    def xtx_only() -> None:
        total = np.zeros((p, p))
        for X, _ in chunks():
            total += np.dot(X.T, X)

    rows = []
    ests = estimators(p)
    with threadpool_limits(1):
        calls: dict[str, Callable[[], Any]] = {"XtX": xtx_only}
        for name, (make, with_y, _, _) in ests.items():
            if name in ("DPStandardScaler", "AdaSSP (published)"):
                continue  # no chunked fit (the scaler), or the same pass as the certified default
            source = Chunks(chunks) if with_y else Chunks(lambda: (X for X, _ in chunks()))
            calls[name] = lambda make=make, source=source: make().fit(source)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            best = best_of(calls, repeats, time.process_time)
    for name in calls:
        if name != "XtX":
            rows.append(f"| {name} (Chunks) | {n:.0e} | {p} | 1 | {best['XtX'] * 1e3:.0f} | {best[name] / best['XtX']:.2f} | - | - | - |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--p", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", nargs="+", default=["1", "default"])
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument("--chunked", type=int, default=0, help="also n rows x 10 read as Chunks of 1e6 (e.g. 10000000)")
    args = parser.parse_args()
    print("| fit | n | p | BLAS threads | XtX ms | fit / XtX | pass / XtX | fixed ms | peak / X |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for p in args.p:
            for threads in args.threads:
                for row in table_for(n, p, threads, args.repeats, memory=not args.no_memory and threads == args.threads[0]):
                    print(row, flush=True)
    if args.chunked:
        for row in chunked_rows(args.chunked, 10, 1):
            print(row, flush=True)


if __name__ == "__main__":
    main()
