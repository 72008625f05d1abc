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
    python benchmarks/bench_one_pass.py --chunked 10000000      # also 1e7 rows read as Chunks of ~80 MB (p = 10 and 100)
    python benchmarks/bench_one_pass.py --sizes 1000000 --block-rows 4096 8192 16384 32768 65536  # the block size

A measurement, not a test: on a shared machine the ratios move by tens of percent between runs.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from privsdr import DPPLS, DPSIR, AdaSSPRegression, Budget, Chunks, DPMeanCovariance
from privsdr.core.gram_pass import RowParts, gram_sums
from privsdr.preprocessing import DPStandardScaler
from privsdr.rows import reduce_rows

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


def chunked_rows(n: int, p: int, repeats: int, chunk_bytes: int = 80 * 10**6) -> list[str]:
    """n rows x p read as ``Chunks`` of about 80 MB each (larger than the CPU cache, so every chunk comes from memory).

    Two chunks are generated once and handed out in turn (generation is not timed); the floor is X^T X of every chunk
    summed. ``pass``: ``privsdr.rows.reduce_rows`` with ``gram_sums`` (each chunk's checks and its pass); ``fit``: the
    estimator's ``fit(Chunks(...))`` (plus its fixed costs)."""
    size = max(1, chunk_bytes // (8 * p))
    pool = [data(size, p, seed=s) for s in (0, 1)]
    counts = [min(size, n - start) for start in range(0, n, size)]

    def chunks(with_y: bool) -> Any:
        for i, m in enumerate(counts):
            X, y = pool[i % 2]
            yield (X[:m], y[:m]) if with_y else X[:m]

    def xtx_only() -> None:
        total = np.zeros((p, p))
        for X in chunks(False):
            total += np.dot(X.T, X)

    rows = []
    ests = estimators(p)
    with threadpool_limits(1):
        calls: dict[str, Callable[[], Any]] = {"XtX": xtx_only}
        for name, (make, with_y, parts, blocks) in ests.items():
            if name in ("DPStandardScaler", "AdaSSP (published)"):
                continue  # no chunked fit (the scaler), or the same pass as the certified default
            calls[f"fit {name}"] = lambda make=make, with_y=with_y: make().fit(Chunks(lambda: chunks(with_y)))
            fn = partial(gram_sums, parts=parts, blocks=blocks)
            calls[f"pass {name}"] = lambda fn=fn, with_y=with_y: reduce_rows(Chunks(lambda: chunks(with_y)), None, fn,
                                                                             with_y=with_y, fn_checks_finite=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            best = best_of(calls, repeats, time.process_time)
    for name in ests:
        if f"fit {name}" in best:
            rows.append(f"| {name} (Chunks of {size:.0e} rows) | {n:.0e} | {p} | 1 | {best['XtX'] * 1e3:.0f} | "
                        f"{best[f'fit {name}'] / best['XtX']:.2f} | {best[f'pass {name}'] / best['XtX']:.2f} | - | - |")
    return rows


def block_rows_sweep(n: int, p: int, repeats: int, sizes: list[int]) -> list[str]:
    """pass / XtX of each estimator's declaration at each number of rows per block (one BLAS thread)."""
    X, y = data(n, p)
    rows = []
    with threadpool_limits(1):
        calls: dict[str, Callable[[], Any]] = {"XtX": lambda: np.dot(X.T, X)}
        for name, (_, with_y, parts, blocks) in estimators(p).items():
            for b in sizes:
                calls[f"{name} {b}"] = lambda parts=parts, blocks=blocks, with_y=with_y, b=b: gram_sums(
                    X, y if with_y else None, parts, blocks, block_rows=b)
        best = best_of(calls, repeats, time.process_time)
    for name in estimators(p):
        rows.append(f"| {name} | {n:.0e} | {p} | " + " | ".join(f"{best[f'{name} {b}'] / best['XtX']:.2f}" for b in sizes) + " |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--p", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", nargs="+", default=["1", "default"])
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument("--chunked", type=int, default=0, help="also n rows read as Chunks of about 80 MB (e.g. 10000000)")
    parser.add_argument("--block-rows", type=int, nargs="+", default=None,
                        help="instead: pass / XtX at these rows per block (e.g. 4096 8192 16384 32768 65536)")
    args = parser.parse_args()
    if args.block_rows:
        print("| fit | n | p | " + " | ".join(f"{b} rows" for b in args.block_rows) + " |")
        print("|---|---|---|" + "---|" * len(args.block_rows))
        for n in args.sizes:
            for p in args.p:
                for row in block_rows_sweep(n, p, args.repeats, args.block_rows):
                    print(row, flush=True)
        return
    print("| fit | n | p | BLAS threads | XtX ms | fit / XtX | pass / XtX | fixed ms | peak / X |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for p in args.p:
            for threads in args.threads:
                for row in table_for(n, p, threads, args.repeats, memory=not args.no_memory and threads == args.threads[0]):
                    print(row, flush=True)
    if args.chunked:
        for p in args.p:
            for row in chunked_rows(args.chunked, p, args.repeats):
                print(row, flush=True)


if __name__ == "__main__":
    main()
