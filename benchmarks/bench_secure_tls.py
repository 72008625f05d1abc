"""Mutual TLS against plaintext on the secure vertical Gram (issue 36): N = 10^5 rows x 10 columns, two data parties
of 5 columns and a helper, three MPyC processes on 127.0.0.1, noise included; one run of each, plaintext first.

    python benchmarks/bench_secure_tls.py [--rows 100000]

Prints the secure computation's seconds as the estimator records them (``secure_cost_``: from starting the party
processes to the opened statistics, so TLS's handshakes and its encryption of every message are in it; with TLS also
making the run's CA and keys) and the bytes MPyC counts (payloads, not TLS framing), and the ratio TLS / plaintext.
The goal of issue 36 is a ratio of at most 1.3. A measurement, not a test: it takes about a minute.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from privsdr import Budget, Ledger, SecureVerticalRegression


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, 10))
    y = X[:, 0] + rng.normal(size=args.rows)
    seconds = {}
    print(f"secure Gram and X^T y of {args.rows} rows x 10 columns (2 data parties x 5 columns + helper, 3 MPyC processes)")
    print("| channels | secure computation (s) | whole fit (s) | MB sent (MPyC's count) |")
    print("|---|---|---|---|")
    for tls in (False, True):
        start = time.perf_counter()
        est = SecureVerticalRegression(row_bound=2.5 * math.sqrt(5), label_bound=5.0, n_parties=2, budget=Budget(1.0, 1e-6),
                                       ledger=Ledger(Budget(1.0, 1e-6)),
                                       random_state=0, diagnose_noise=False, tls=tls, timeout=600.0).fit(X, y)
        whole = time.perf_counter() - start
        cost = est.secure_cost_
        seconds[tls] = cost["seconds"]
        print(f"| {'mutual TLS' if tls else 'plaintext'} | {cost['seconds']:.2f} | {whole:.2f} | "
              f"{sum(cost['bytes_sent'].values()) / 1e6:.1f} |", flush=True)
    print(f"TLS / plaintext: {seconds[True] / seconds[False]:.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
