"""Secure aggregation (issue 22): FederatedSIR's accuracy at the central rate, and what the MPyC parties cost.

accuracy: FSIR model II, p = 10, d = 1, H = 8 (cuts at the octiles of a public sample), K = 10 clients, eps = 1,
delta = 1e-6, certified defaults, bound 3; median projection distance ||P - P_B||_F over seeds, against pooled
non-private SIR on the same N = K n_k rows and cuts, the per-client FederatedSIR (aggregation="local") and
centralized DPSIR (moments) on the pooled rows. Ratios are to pooled SIR within the same run.

cost: one secure FSIR release (slice sums p x 8, 8 counts, the p x p second moment) for p x K parties plus the server,
on this machine's cores: wall time of the secure fit against the plain in-process fit (aggregation="local"), and
the bytes each party sent (MPyC's count).

    python benchmarks/bench_secure.py accuracy [--seeds 10] [--sizes 1000 10000 100000]
    python benchmarks/bench_secure.py cost [--p 10 50 100] [--clients 3 10 20]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import privsdr
from privsdr import Budget
from privsdr.core import classical_sir, projection_distance
from privsdr.datasets import fsir_model
from privsdr.federated import FederatedSIR
from privsdr.secure import secure_release  # noqa: F401  (fails early without the secure extra)

P, H, K, BOUND = 10, 8, 10, 3.0
BUDGET = Budget(1.0, 1e-6)


def public_cuts(p: int, B: np.ndarray) -> list[float]:
    """The octiles of y in a public sample (seed 10**6: no client's rows)."""
    _, y, _ = fsir_model("II", 20000, p, seed=10**6, B=B)
    return [float(c) for c in np.quantile(y, np.linspace(0, 1, H + 1)[1:-1])]


def sites(n_k: int, p: int, clients: int, seed: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    B = fsir_model("II", 10, p, seed=0)[2]  # the same B for every seed and client
    return [fsir_model("II", n_k, p, seed=1000 * seed + k, B=B)[:2] for k in range(clients)], B


def accuracy(seeds: int, sizes: list[int]) -> None:
    print(f"FSIR model II, p = {P}, d = 1, H = {H}, K = {K}, eps = 1, delta = 1e-6; median over {seeds} seeds "
          "(ratio to pooled SIR)")
    print("| n_k (N = 10 n_k) | pooled SIR | FederatedSIR local | FederatedSIR secure | DPSIR on the N rows | secure s/fit |")
    print("|---|---|---|---|---|---|")
    for n_k in sizes:
        rows: dict[str, list[float]] = {"sir": [], "local": [], "secure": [], "dpsir": []}
        seconds = []
        for seed in range(seeds):
            data, B = sites(n_k, P, K, seed)
            cuts = public_cuts(P, B)
            X = np.vstack([x for x, _ in data])
            y = np.concatenate([t for _, t in data])
            labels = np.searchsorted(np.asarray(cuts), y, side="left")
            rows["sir"].append(projection_distance(classical_sir(X, labels, H, 1)[0], B))
            common = dict(bound=BOUND, cut_points=cuts, budget=BUDGET, random_state=seed)
            rows["local"].append(projection_distance(FederatedSIR(1, **common).fit(data).directions_, B))
            start = time.perf_counter()
            est = FederatedSIR(1, aggregation="secure", timeout=120.0, **common).fit(data)
            seconds.append(time.perf_counter() - start)
            rows["secure"].append(projection_distance(est.directions_, B))
            rows["dpsir"].append(projection_distance(privsdr.DPSIR(1, n_slices=H, **common).fit(X, y).directions_, B))
        med = {k: float(np.median(v)) for k, v in rows.items()}

        def cell(key: str, med: dict[str, float] = med) -> str:
            return f"{med[key]:.3f} ({med[key] / med['sir']:.1f}x)"

        print(f"| {n_k:.0e} | {med['sir']:.3f} | {cell('local')} | {cell('secure')} | {cell('dpsir')} | {np.median(seconds):.1f} |",
              flush=True)


def cost(ps: list[int], ks: list[int]) -> None:
    print("one secure FSIR release (H = 8, 2000 rows per client) against the plain in-process fit; wall seconds on this "
          "machine, bytes sent per party")
    print("| p | K | numbers summed | plain fit s | secure fit s | added s | field bits | bytes sent per client | by the server |")
    print("|---|---|---|---|---|---|---|---|---|")
    from privsdr.secure import launch

    seen: list[launch.Opened] = []
    real = launch.run_parties

    def spy(*args, **kwargs):  # the benchmark reads the traffic off the parties' own counts
        opened = real(*args, **kwargs)
        seen.append(opened)
        return opened

    import privsdr.secure.aggregate as aggregate

    aggregate.run_parties = spy
    for p in ps:
        for k in ks:
            data, B = sites(2000, p, k, 0)
            common = dict(bound=BOUND, cut_points=public_cuts(p, B), budget=BUDGET, random_state=0)
            start = time.perf_counter()
            FederatedSIR(1, **common).fit(data)
            plain = time.perf_counter() - start
            start = time.perf_counter()
            est = FederatedSIR(1, aggregation="secure", timeout=300.0, **common).fit(data)
            secure = time.perf_counter() - start
            sent = seen[-1].bytes_sent
            clients = [v for name, v in sent.items() if name != "server"]
            numbers = p * H + H + p * (p + 1) // 2
            print(f"| {p} | {k} | {numbers} | {plain:.2f} | {secure:.2f} | {secure - plain:.2f} | {est.privacy_['field_bits']} | "
                  f"{np.median(clients) / 1e3:.0f} kB | {sent['server'] / 1e3:.0f} kB |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    acc = sub.add_parser("accuracy")
    acc.add_argument("--seeds", type=int, default=10)
    acc.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    cst = sub.add_parser("cost")
    cst.add_argument("--p", type=int, nargs="+", default=[10, 50, 100])
    cst.add_argument("--clients", type=int, nargs="+", default=[3, 10, 20])
    args = parser.parse_args()
    if args.what == "accuracy":
        accuracy(args.seeds, args.sizes)
    else:
        cost(args.p, args.clients)


if __name__ == "__main__":
    main()
