"""Private record linkage on 2 cores (issue 36, "Measure"): two parties, each its own process, n identifiers each.

    python benchmarks/bench_linkage.py [--sizes 10000 100000 300000] [--overlap 0.5] [--parties 2] [--tls] [--workers 1]

Each party is a process of its own (``multiprocessing``, fork) on its own loopback address (127.0.0.2, 127.0.0.3, ...),
running ``privsdr.linkage.link`` on n identifiers of which a share ``--overlap`` is common to all parties; with
``--tls`` over TLS with throwaway certificates (``cryptography``). The figure is the wall time of the slowest party
(from the start of ``link``: normalising, hashing, blinding, the ring, the intersection) and the microseconds per
identifier, whose constancy across n shows linearity; beside it the CPU seconds of the busiest party (what the wall
time would be with a free core per party; the load-independent figure) and the machine's load averages over 1 and 5
minutes before and after the run (the cores are shared). ``--workers`` is each party's ``link(workers=...)``: threads
sharing its hashing and scalar multiplications (on 2 cores with 2 parties, 1 each: every core is already busy).
At the end a least-squares fit of wall and CPU seconds on n. It checks the result (N, the common order at every party).
Not a test: it never fails; the goals are 60 s at 10^5 and 10 minutes at 10^6 per party.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _ids(index: int, n: int, overlap: float) -> list[str]:
    common = int(n * overlap)
    return [f"person-{i:08d}" for i in range(common)] + [f"only-{index}-{i:08d}" for i in range(n - common)]


def _party(index: int, peers: list[tuple[str, str, int]], n: int, overlap: float, tls: tuple[str, str, str] | None,
           workers: int, queue: mp.Queue) -> None:
    from privsdr.linkage import LinkageConfig, Peer, link, tls_contexts

    config = LinkageConfig(tuple(Peer(*p) for p in peers), peers[0][0])
    ids = _ids(index, n, overlap)
    contexts = tls_contexts(*tls) if tls else (None, None)
    start, cpu = time.perf_counter(), time.process_time()
    result = link(ids, config, peers[index][0], server_context=contexts[0], client_context=contexts[1], timeout=1800,
                  workers=workers)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    queue.put((index, seconds, result.n, [ids[j] for j in result.order[:50]], cpu))


def _certificates(names: list[str], folder: str) -> dict[str, tuple[str, str, str]]:
    """Each party's (CA, certificate, key) files from ``privsdr secure keys``' ``make_keys``."""
    from privsdr.network.certificates import CA_CERT, make_keys

    return {name: (str(own / CA_CERT), str(own / f"party_{i}.crt"), str(own / f"party_{i}.key"))
            for i, (name, own) in enumerate(make_keys(Path(folder) / "keys", names).items())}


def measure(n: int, parties: int, overlap: float, tls: bool, workers: int = 1) -> tuple[float, int, float]:
    names = [f"party{i}" for i in range(parties)]
    peers = [(name, f"127.0.0.{2 + i}", _free_port(f"127.0.0.{2 + i}")) for i, name in enumerate(names)]
    with tempfile.TemporaryDirectory() as folder:
        certs = _certificates(names, folder) if tls else {}
        ctx = mp.get_context("fork")
        queue: mp.Queue = ctx.Queue()
        procs = [ctx.Process(target=_party, args=(i, peers, n, overlap, certs.get(names[i]), workers, queue)) for i in range(parties)]
        for p in procs:
            p.start()
        try:
            results = sorted(queue.get(timeout=3600) for _ in procs)
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.terminate()
                    p.join()
    assert all(r[2] == int(n * overlap) for r in results) and all(r[3] == results[0][3] for r in results), "wrong linkage"
    return max(r[1] for r in results), results[0][2], max(r[4] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    parser.add_argument("--parties", type=int, default=2)
    parser.add_argument("--overlap", type=float, default=0.5)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="threads per party (link(workers=...))")
    args = parser.parse_args()
    print(f"{args.parties} parties, one process each, {os.cpu_count()} cores, overlap {args.overlap}, "
          f"{'TLS' if args.tls else 'plaintext on loopback'}, {args.workers} worker thread(s) per party")
    print(f"{'n per party':>12} {'N linked':>10} {'seconds':>9} {'us per id':>10} {'CPU s':>8} {'CPU us per id':>14} "
          f"{'load 1/5 min before':>20} {'after':>10}")
    rows = []
    for n in args.sizes:
        before = os.getloadavg()
        seconds, linked, cpu = measure(n, args.parties, args.overlap, args.tls, args.workers)
        after = os.getloadavg()
        rows.append((n, seconds, cpu))
        print(f"{n:>12} {linked:>10} {seconds:>9.1f} {1e6 * seconds / n:>10.1f} {cpu:>8.1f} {1e6 * cpu / n:>14.1f} "
              f"{before[0]:>10.1f} {before[1]:>9.1f} {after[0]:>5.1f} {after[1]:>4.1f}", flush=True)
    if len(rows) >= 2:
        import numpy as np

        n, wall, cpu = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
        for what, y in (("wall", wall), ("CPU", cpu)):
            slope, intercept = np.polyfit(n, y, 1)
            print(f"linear fit of {what} seconds: {intercept:.2f} s + {1e6 * slope:.1f} us x n; projected at 10^6: "
                  f"{intercept + slope * 1e6:.0f} s")


if __name__ == "__main__":
    main()
