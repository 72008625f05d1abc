"""What an in-MPC row-norm check would cost the secure Gram (issue 33, item 2): measured before deciding.

    python benchmarks/bench_secure_rowcheck.py [--sizes 10000 100000] [--bits 60] [--width 5] [--no-ranges]

Three MPyC processes on 127.0.0.1 (two data parties of ``width`` columns and a helper, as ``SecureVerticalRegression``
runs them). Each data party secret-shares its integer block (N x width; the first also a label), and the script times,
on the same shares:

* ``input + products``: the secure Gram's own work (the blocks shared, the cross-block Q_a^T Q_b and Q_a^T y);
* ``row norms``: one secure squared norm and one secure comparison ``||q_r||^2 <= B^2`` per row of each block, and
  ``|y_r| <= B_y`` per label entry (3N comparisons);
* ``entry ranges``: a check of every entry ``-B <= q <= B`` (2 comparisons per entry). A row-norm check alone is
  not sound against a party that deviates: MPyC's comparisons assume their operands lie within the secure type's
  bits, and a field element input by a deviating party need not (its square can wrap around the prime), so a sound
  check also range-checks every entry before squaring it.

The figures are seconds of the slowest party (wall clock, this machine), measured once per N.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def party(index: int, ports: list[int], N: int, width: int, bits: int, out: str, ranges: bool) -> None:
    import numpy as np

    sys.argv = [sys.argv[0], "-M3", f"-I{index}", *[f"-P127.0.0.1:{p}" for p in ports], "--no-log"]
    from mpyc.runtime import mpc

    async def main() -> dict[str, float]:
        await mpc.start()
        secint = mpc.SecInt(bits)
        rng = np.random.default_rng(index)
        bound = 1 << 12
        times: dict[str, float] = {}
        t0 = time.perf_counter()
        blocks = []
        for owner in (1, 2):
            mine = rng.integers(-bound // 4, bound // 4, size=(N, width)) if index == owner else np.zeros((N, width), dtype=np.int64)
            blocks.append(mpc.input(secint.array(mine), senders=owner))
        y = mpc.input(secint.array(rng.integers(-bound // 4, bound // 4, size=N) if index == 1 else np.zeros(N, dtype=np.int64)), senders=1)
        gram = blocks[0].T @ blocks[1]
        xty = blocks[1].T @ y
        await mpc.output(gram)
        await mpc.output(xty)
        times["input + products"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ok = None
        for block in blocks:
            norms = (block * block).sum(axis=1)
            check = norms <= bound * bound
            ok = check if ok is None else ok * check
        ok = ok * (y * y <= bound * bound)
        await mpc.output(ok.sum())
        times["row norms"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        total = None
        for block in blocks if ranges else []:
            inside = ((block >= -bound) * (block <= bound)).sum()
            total = inside if total is None else total + inside
        if total is not None:
            await mpc.output(total)
        times["entry ranges"] = time.perf_counter() - t0
        await mpc.shutdown()
        return times

    with open(out, "w") as fh:
        json.dump(mpc.run(main()), fh)


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def measure(N: int, width: int, bits: int, limit: float, ranges: bool) -> dict[str, float]:
    ports = free_ports(3)
    with tempfile.TemporaryDirectory() as tmp:
        outs = [os.path.join(tmp, f"{i}.json") for i in range(3)]
        procs = [subprocess.Popen([sys.executable, __file__, "--party", str(i), "--ports", *map(str, ports), "--rows", str(N),
                                   "--width", str(width), "--bits", str(bits), "--out", outs[i], *([] if ranges else ["--no-ranges"])]) for i in range(3)]
        try:
            for p in procs:
                p.wait(timeout=limit)
        finally:
            for p in procs:  # exactly the processes started here
                if p.poll() is None:
                    p.kill()
                    p.wait()
        results = [json.load(open(o)) for o in outs]
    return {k: max(r[k] for r in results) for k in results[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--width", type=int, default=5)
    parser.add_argument("--bits", type=int, default=60)
    parser.add_argument("--limit", type=float, default=3600.0)
    parser.add_argument("--party", type=int, default=None)
    parser.add_argument("--ports", type=int, nargs="*")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--out")
    parser.add_argument("--no-ranges", action="store_true", help="time the row norms only (the entry ranges take 10x as long)")
    args = parser.parse_args()
    if args.party is not None:
        party(args.party, args.ports, args.rows, args.width, args.bits, args.out, not args.no_ranges)
        return
    print(f"2 data parties x {args.width} columns + helper, SecInt({args.bits}), 3 MPyC processes on 127.0.0.1; seconds (slowest party)")
    print("| N | input + products | row norms (3N comparisons) | entry ranges (4 N width comparisons) | check / Gram |")
    print("|---|---|---|---|---|")
    for N in args.sizes:
        t = measure(N, args.width, args.bits, args.limit, not args.no_ranges)
        check = t["row norms"] + t["entry ranges"]
        print(f"| {N:.0e} | {t['input + products']:.1f} | {t['row norms']:.1f} | {t['entry ranges']:.1f}{'' if not args.no_ranges else ' (not run)'} | {check / t['input + products']:.1f}x |",
              flush=True)


if __name__ == "__main__":
    main()
