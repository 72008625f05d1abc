"""Vertical-secure DPSIR against central DPSIR on the pooled rows, and the cost of a secure vertical Gram read as
chunks (issue 34).

    python benchmarks/bench_secure_vertical_moments.py sir [--n 100000] [--seeds 10] [--helpers 1]  # p = 10, eps = 1
    python benchmarks/bench_secure_vertical_moments.py gram [--sizes 10000 30000 100000]  # N x 10 columns, as Chunks

``sir``: a single-index model y = sin(b^T x) + 0.2 e with x ~ N(0, I_10) truncated to |x_j| <= 3, four slices at the
public cut points -0.5, 0, 0.5; central ``DPSIR(algorithm="moments")`` with the per-column bound 3 (rows within
3 sqrt(10)) against ``SecureVerticalSIR`` with two data parties of 5 columns, each bounded by 3 sqrt(5) (rows within
the same 3 sqrt(10)), and ``--helpers`` helpers (parties that add only a noise share: with m parties and t = 1 the
opened noise sd is sqrt(m / (m - 1)) times the calibrated one); replace-one, (eps, delta) = (1, 1e-6). Projection distance ||P_B - P_b||_F to the
true direction, median over the seeds. Every secure fit runs the real protocol: one MPyC process per party on 127.0.0.1.

``gram``: ``SecureVerticalMeanCovariance`` on two parties of 5 columns whose rows arrive as ``Chunks`` of 10^4 rows
(generated, never held whole as floats; streamed to the party processes as they compute): seconds of the secure
computation, seconds per 10^5 rows, each party process's peak resident memory (its own VmHWM, reported when done:
``secure_cost_["peak_rss_kib"]``) and that of the launching process (``RUSAGE_SELF``), which in this simulated fit
also reads every party's chunks. While it runs, the party processes' peaks so far go to stderr every minute.
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import threading
import time
import warnings

import numpy as np

from privsdr import DPSIR, Budget, Chunks, core
from privsdr.vertical import Party
from privsdr.vertical.secure_moments import SecureVerticalMeanCovariance, SecureVerticalSIR

CUTS = [-0.5, 0.0, 0.5]
BUDGET = Budget(1.0, 1e-6)


def single_index(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    b = np.zeros(p)
    b[:2] = [1.0, 1.0]
    b /= np.linalg.norm(b)
    X = np.clip(rng.normal(size=(n, p)), -3.0, 3.0)
    y = np.sin(X @ b) + 0.2 * rng.normal(size=n)
    return X, y, b[:, None]


def sir(n: int, seeds: int, helpers: int = 1) -> None:
    p = 10
    central, secure, seconds = [], [], []
    for seed in range(seeds):
        X, y, b = single_index(n, p, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pooled = DPSIR(1, algorithm="moments", bound=3.0, cut_points=CUTS, n_slices=4, budget=BUDGET, random_state=seed).fit(X, y)
            start = time.perf_counter()
            vertical = SecureVerticalSIR(1, cut_points=CUTS, row_bound=3.0 * math.sqrt(5), budget=BUDGET, random_state=seed,
                                         timeout=3600.0, helper=helpers).fit([X[:, :5], X[:, 5:]], y)
            seconds.append(time.perf_counter() - start)
        central.append(core.projection_distance(pooled.directions_, b))
        secure.append(core.projection_distance(vertical.directions_, b))
        print(f"seed {seed}: central {central[-1]:.4f}, vertical secure {secure[-1]:.4f} ({seconds[-1]:.1f} s)", flush=True)
    mc, ms = float(np.median(central)), float(np.median(secure))
    print("| N | p | eps | parties (helpers) | central DPSIR (median) | vertical-secure DPSIR (median) | ratio | secure fit (median s) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {n} | {p} | 1 | {2 + helpers} ({helpers}) | {mc:.4f} | {ms:.4f} | {ms / mc:.2f} | {float(np.median(seconds)):.1f} |")


class PartyMemory:
    """Polls /proc for this process's party processes (``privsdr.secure.party``) and keeps each one's VmHWM (its peak
    resident memory since its exec; monotone, so the last reading before it ends is its peak); every ``every``
    seconds it prints the peaks so far to stderr (a long run shows whether memory stays flat while it runs). Linux."""

    def __init__(self, every: float = 60.0) -> None:
        self.peak: dict[int, int] = {}
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        me, start, told = os.getpid(), time.monotonic(), time.monotonic()
        while not self._stop.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/status") as f:
                        status = dict(line.split(":", 1) for line in f if ":" in line)
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if int(status.get("PPid", "0").strip() or 0) == me and b"privsdr.secure.party" in cmd and "VmHWM" in status:
                    self.peak[int(entry)] = max(self.peak.get(int(entry), 0), int(status["VmHWM"].split()[0]))
            if time.monotonic() - told >= self.every:
                told = time.monotonic()
                peaks = ", ".join(f"{v / 1024:.0f}" for v in self.peak.values())
                print(f"  {told - start:.0f} s: party peaks so far (MiB) {peaks}", file=sys.stderr, flush=True)
            time.sleep(0.5)

    def __enter__(self) -> PartyMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def gram(sizes: list[int], chunk: int = 10_000) -> None:
    print("| N | secure seconds | seconds per 10^5 rows | peak RSS per party: helper, alice, bob (MiB) | peak RSS, launcher (MiB) |")
    print("|---|---|---|---|---|")
    for n in sizes:
        def rows(side: int, n: int = n) -> Chunks:
            def read() -> object:
                for start in range(0, n, chunk):
                    rng = np.random.default_rng([side, start])
                    yield rng.uniform(-1.0, 1.0, (min(chunk, n - start), 5))
            return Chunks(read, n_rows=n, n_features=5)

        with warnings.catch_warnings(), PartyMemory():
            warnings.simplefilter("ignore")
            est = SecureVerticalMeanCovariance(row_bound=math.sqrt(5), budget=BUDGET, timeout=36_000.0).fit(
                [Party("alice", rows(0)), Party("bob", rows(1))])
        seconds = est.secure_cost_["seconds"]
        party = ", ".join(f"{v / 1024:.0f}" for v in est.secure_cost_["peak_rss_kib"].values())  # each process's own VmHWM
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {n} | {seconds:.1f} | {seconds / n * 1e5:.1f} | {party} | {own:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sir")
    s.add_argument("--n", type=int, default=100_000)
    s.add_argument("--seeds", type=int, default=10)
    s.add_argument("--helpers", type=int, default=1, help="helpers that add only a noise share (t = 1 of 2 + helpers parties)")
    g = sub.add_parser("gram")
    g.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    args = parser.parse_args()
    if args.what == "sir":
        sir(args.n, args.seeds, args.helpers)
    else:
        gram(args.sizes)


if __name__ == "__main__":
    main()
