"""FSIR execution: K = 100 clients x n = 5000, p = 10 (by default) -- serial vs thread / process pool vs Dask
LocalCluster wall time, and the server merge against the clients' work (ratios within one run).

    python benchmarks/bench_fsir.py [--clients 100] [--n 5000] [--p 10]
"""
from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np

from privsdr import Budget
from privsdr.datasets import fsir_model
from privsdr.federated import FSIRConfig, client_message, client_seeds, merge, run_clients


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--p", type=int, default=10)
    args = parser.parse_args()
    B = None
    data = []
    for k in range(args.clients):
        X, y, B = fsir_model("III", args.n, args.p, seed=k, B=B)
        data.append((X, y))
    config = FSIRConfig(bound=3.0, cut_points=tuple(np.quantile(np.concatenate([y for _, y in data]), np.linspace(0, 1, 9)[1:-1])),
                        mechanism="iid", calibration="analytic", cov_mechanism="analyze_gauss", n_directions=2)
    budget = Budget(2.0, 2 * args.n ** -1.1)
    seeds = client_seeds(0, args.clients)
    tasks = [{"X": X, "y": y, "config": config, "budget": budget, "client_id": f"c{k}", "random_state": seeds[k]}
             for k, (X, y) in enumerate(data)]
    client_message(**tasks[0])  # warm the memoised calibration

    def timed(executor: object) -> tuple[float, list]:
        start = time.perf_counter()
        messages = run_clients(client_message, tasks, executor)
        return time.perf_counter() - start, messages

    rows = []
    serial, messages = timed(None)
    rows.append(("serial (in process)", serial))
    with ThreadPoolExecutor(2) as pool:
        rows.append(("ThreadPoolExecutor(2)", timed(pool)[0]))
    with ProcessPoolExecutor(2) as pool:
        timed(pool)  # start the workers
        rows.append(("ProcessPoolExecutor(2)", timed(pool)[0]))
    try:
        import distributed

        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0") as cluster, distributed.Client(cluster) as client:
            timed(client)
            rows.append(("Dask LocalCluster(2 workers)", timed(client)[0]))
    except ImportError:
        rows.append(("Dask (not installed)", float("nan")))
    start = time.perf_counter()
    merge(messages, config)
    merge_time = time.perf_counter() - start
    print(f"K = {args.clients} clients x n = {args.n}, p = {args.p} (model III), IID + Analyze-Gauss")
    print(f"{'executor':<30} {'wall (s)':>9} {'speed-up':>9}")
    for name, seconds in rows:
        print(f"{name:<30} {seconds:>9.3f} {serial / seconds:>9.2f}")
    print(f"server merge: {merge_time * 1000:.2f} ms = {100 * merge_time / (serial + merge_time):.2f}% of the serial total")


if __name__ == "__main__":
    main()
