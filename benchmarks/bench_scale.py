"""Fits on data larger than memory, and the cost of the scikit-learn base classes (issue 16).

1. Scaling: a DPSIR (algorithm="moments") fit on n x 10 synthetic rows
   * in memory (numpy) on 10^7 rows, scaled by 10 to compare with 10^8;
   * from ``privsdr.Chunks`` (a generator, 10^5-row chunks) in this process;
   * on a 2-worker Dask ``LocalCluster`` (1 thread each), rows generated chunk by chunk on the workers
     (``--dask-rows``, default 10^7, 3x10^7 and 10^8); the same generation followed by a plain column sum
     (no fit) measures what the data alone costs there.
   Wall time, the driver's peak of traced memory during the fit (numpy buffers included: tracemalloc) and,
   for Dask, the largest worker's peak resident memory.
2. Overhead of the scikit-learn base classes on a small fit: clone + fit + transform of DPSIR (n = 5000,
   p = 10) against the same computation without the scikit-learn layer (direct construction, no feature
   bookkeeping, the un-wrapped transform), as a ratio within one run.

    python benchmarks/bench_scale.py [--dask-rows 1e7,3e7,1e8] [--chunk 1000000] [--skip-dask] [--reps 30]

Run it alone with ``nice -n 10``: the 10^8 fit takes minutes on two cores.
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privsdr import DPSIR, Budget, Chunks  # noqa: E402

P = 10
CUTS = [-1.0, 0.0, 1.0]
BETA = np.ones(P) / np.sqrt(P)


def estimator() -> DPSIR:
    return DPSIR(1, bound=3.0, cut_points=CUTS, budget=Budget(1.0, 1e-6), random_state=0)


def traced(fn):
    """(seconds, peak traced MB, result) of fn() with tracemalloc on (its start excluded)."""
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    try:
        out = fn()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    return seconds, peak, out


def in_memory(n: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, P))
    y = X @ BETA + 0.5 * rng.standard_normal(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds, peak, est = traced(lambda: estimator().fit(X, y))
    return seconds, peak, X.nbytes / 1e6


def chunks_in_process(n: int, chunk: int) -> tuple[float, float]:
    def rows():
        rng = np.random.default_rng(2)
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            Xc = rng.standard_normal((m, P))
            yield Xc, Xc @ BETA + 0.5 * rng.standard_normal(m)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds, peak, _ = traced(lambda: estimator().fit(Chunks(rows())))
    return seconds, peak


def dask_data(n: int, chunk: int):
    import dask.array as da

    rng = da.random.default_rng(3)
    X = rng.standard_normal((n, P), chunks=(chunk, P))
    y = X @ BETA + 0.5 * rng.standard_normal(n, chunks=chunk)
    return X, y


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def on_dask(n: int, chunk: int) -> tuple[float, float, float, float]:
    """(fit seconds, driver peak MB, largest worker peak RSS MB, data-only seconds) on a fresh 2-worker
    LocalCluster (fresh worker processes: their peak RSS is this fit's, measured before the data-only pass)."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
                                  memory_limit="8GiB") as cluster, distributed.Client(cluster) as client:
        client.run(lambda: __import__("privsdr"))  # imports on the workers are not the fit's
        X, y = dask_data(n, chunk)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seconds, peak, _ = traced(lambda: estimator().fit(X, y))
        worker_peak = max(client.run(_maxrss_mb).values())
        X, y = dask_data(n, chunk)
        start = time.perf_counter()
        (X.sum(axis=0) + y.sum()).compute()  # generation + a trivial reduction: what the data alone costs
        data_only = time.perf_counter() - start
    return seconds, peak, worker_peak, data_only


def scaling(args: argparse.Namespace) -> None:
    n_mem = int(float(args.memory_rows))
    print(f"DPSIR(algorithm='moments') on n x {P} rows (p = {P}, H = 4 public slices, Budget(1, 1e-6)); "
          f"{os.cpu_count()} cores shared with other work")
    rows = []
    t, peak, data_mb = in_memory(n_mem)
    rows.append(("in memory (numpy), fit only", n_mem, t, peak, f"data {data_mb:.0f} MB on the driver"))
    rows.append(("  same, scaled x10 (extrapolated)", 10 * n_mem, 10 * t, peak, f"data {10 * data_mb:.0f} MB"))
    t, peak = chunks_in_process(n_mem, 100_000)
    rows.append(("Chunks generator (in process)", n_mem, t, peak, "generation included, 1e5-row chunks"))
    if not args.skip_dask:
        for n in [int(float(v)) for v in args.dask_rows.split(",")]:
            t, peak, worker, data_only = on_dask(n, args.chunk)
            rows.append(("Dask LocalCluster(2 workers)", n, t, peak,
                         f"worker peak RSS {worker:.0f} MB; data alone {data_only:.1f} s"))
            print(f"  ... {n:.0e} rows on Dask: {t:.1f} s", flush=True)
    print(f"\n{'setting':<36} {'rows':>8} {'wall (s)':>9} {'s per 1e7':>10} {'driver peak (MB)':>17}  notes")
    for name, n, t, peak, note in rows:
        print(f"{name:<36} {n:>8.0e} {t:>9.2f} {t / n * 1e7:>10.2f} {peak:>17.1f}  {note}")


# -- the scikit-learn layer ---------------------------------------------------------------------------------
def sklearn_overhead(reps: int) -> None:
    from sklearn.base import clone

    from privsdr.algorithms.dpsir import _SlicedDP

    rng = np.random.default_rng(4)
    X = rng.standard_normal((5000, P))
    y = X @ BETA + 0.5 * rng.standard_normal(5000)
    template = estimator()
    raw_transform = getattr(_SlicedDP.transform, "__wrapped__", _SlicedDP.transform)  # without set_output's wrapper

    class Plain(DPSIR):
        """The same computation without the scikit-learn layer's bookkeeping."""

        def _record_features(self, X_raw, n_features):
            self.n_features_in_ = int(n_features)

        def _check_features(self, X_raw, n_features):
            pass

    def with_sklearn():
        est = clone(template).fit(X, y)
        return est.transform(X)

    def without():
        est = Plain(1, bound=3.0, cut_points=CUTS, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
        return raw_transform(est, X)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in (with_sklearn, without):
            fn()  # warm caches
        times: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(reps):  # interleaved, so drifting machine load hits both alike
            for key, fn in (("with", with_sklearn), ("without", without)):
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
        clone_times = []
        for _ in range(reps):
            start = time.perf_counter()
            clone(template)
            clone_times.append(time.perf_counter() - start)
    a, b = statistics.median(times["with"]), statistics.median(times["without"])
    print(f"\nscikit-learn base classes on a small fit (DPSIR, n = 5000, p = {P}; median of {reps}, interleaved)")
    print(f"{'clone + fit + transform, scikit-learn estimator':<52} {a * 1e3:>9.2f} ms")
    print(f"{'direct construction + fit + transform, no sklearn layer':<52} {b * 1e3:>9.2f} ms")
    print(f"{'overhead':<52} {100 * (a - b) / b:>9.2f} %")
    print(f"{'clone() alone':<52} {statistics.median(clone_times) * 1e3:>9.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-rows", default="1e7")
    parser.add_argument("--dask-rows", default="1e7,3e7,1e8")
    parser.add_argument("--chunk", type=int, default=1_000_000)
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if not args.skip_scaling:
        scaling(args)
    sklearn_overhead(args.reps)


if __name__ == "__main__":
    main()
