"""DP-BCD: certified fit time against numpy.linalg.lstsq on the pooled data, bytes each party sends
per round, and the AAPD of certified against paper mode at equal eps on Table 1's grid.

    python benchmarks/bench_dpbcd.py [--n 1000000] [--p 50] [--rounds 5] [--repeats 3] [--reps 100] [--json FILE]

1. Wall time (median of ``--repeats``) of a certified ``DPBCDRegression`` fit (k = 2 parties of
   p/2 columns, T = ``--rounds``, eps = 2, delta = 1e-6, in process) against ``lstsq`` on the pooled
   N x p matrix, as a ratio measured in one run; the fit's parts (input checks incl. the rank
   check, the Gram releases, the T rounds) from the protocol's own stages.
2. Bytes per party per round: the arrays of every message a party sends (what grows with N), and
   the whole serialised message (npz + JSON header + the sender's privacy report).
3. Table 1's grid (N = 1000, p = 10, ``--reps`` data sets per eps): median AAPD of both modes and
   their ratio.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privsdr import Budget, DPBCDRegression  # noqa: E402
from privsdr.datasets import dpbcd_synthetic  # noqa: E402
from privsdr.reproduce import dpbcd_tables  # noqa: E402


def certified(n_rounds: int, p: int, y_sd: float, reports: bool = False) -> DPBCDRegression:
    m = p // 2
    return DPBCDRegression("certified", n_rounds=n_rounds, budget=Budget(2.0, 1e-6), row_bound=2.5 * math.sqrt(m),
                           label_bound=3 * y_sd, coef_bound=math.sqrt(m) * 6.5, message_reports=reports, random_state=0)


def timing(n: int, p: int, rounds: int, repeats: int) -> dict:
    data = dpbcd_synthetic(n, p, seed=1)
    X, y = data.X, data.y
    blocks = list(data.blocks)
    y_sd = 3 * math.sqrt(float(np.var(y)))  # the design's scale; only the timing matters here
    lstsq, fit = [], []
    certified(rounds, p, y_sd).fit(blocks, y)  # warm up: memoised calibration, BLAS threads
    for _ in range(repeats):
        start = time.perf_counter()
        np.linalg.lstsq(X, y, rcond=None)
        lstsq.append(time.perf_counter() - start)
        start = time.perf_counter()
        est = certified(rounds, p, y_sd).fit(blocks, y)
        fit.append(time.perf_counter() - start)
    from privsdr.vertical import DPBCDProtocol, Party, check_parties

    parties, layout = check_parties([Party("party0", blocks[0], y), Party("party1", blocks[1])])
    protocol = DPBCDProtocol(est.config_)
    start = time.perf_counter()
    protocol.check(parties, layout)
    checks = time.perf_counter() - start
    return {"n": n, "p": p, "rounds": rounds, "lstsq_s": statistics.median(lstsq), "certified_s": statistics.median(fit),
            "ratio": statistics.median(fit) / statistics.median(lstsq), "input_checks_s": checks, "repeats": repeats}


def message_bytes(n: int, p: int, rounds: int) -> list[dict]:
    data = dpbcd_synthetic(n, p, seed=2)
    y_sd = 3 * math.sqrt(float(np.var(data.y)))
    rows = []
    for mode in ("certified", "paper"):
        if mode == "certified":
            est = certified(rounds, p, y_sd, reports=True).fit(list(data.blocks), data.y)
        else:
            est = DPBCDRegression("paper", n_rounds=rounds, budget=Budget(2.0, 0.0), abort_check="none", accounting="paper",
                                  allow_uncertified=True, random_state=0).fit(list(data.blocks), data.y)
        for name in est.layout_.names:
            sent = [m for m in est.messages_ if m.sender == name]
            steps_ = [m for m in sent if m.kind == "remainder"]
            rows.append({"mode": mode, "party": name, "n": n, "messages": len(sent),
                         "payload_per_round": sum(m.payload_bytes for m in steps_) / rounds,
                         "serialised_per_round": sum(len(m.to_bytes()) for m in steps_) / rounds,
                         "payload_total": sum(m.payload_bytes for m in sent), "serialised_total": sum(len(m.to_bytes()) for m in sent)})
    return rows


def accuracy(reps: int) -> list[dict]:
    rows = dpbcd_tables.run("dpbcd-table1", reps=reps)
    out = []
    for eps in dpbcd_tables.TABLE1_PAPER:
        p = next(r for r in rows if r["eps"] == eps and r["mode"] == "paper")
        c = next(r for r in rows if r["eps"] == eps and r["mode"] == "certified")
        out.append({"eps": eps, "paper_median": p["median"], "certified_median": c["median"], "ratio": c["median"] / p["median"],
                    "paper_published_median": p["paper_median"], "reps": reps})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--p", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reps", type=int, default=100, help="data sets per eps on Table 1's grid")
    parser.add_argument("--bytes-n", type=int, default=100_000, help="N of the message-size run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    t = timing(args.n, args.p, args.rounds, args.repeats)
    print(f"1. certified DP-BCD fit against numpy.linalg.lstsq on the pooled data (N = {t['n']:,}, p = {t['p']}, k = 2, "
          f"T = {t['rounds']}; median of {t['repeats']})")
    print(f"   lstsq {t['lstsq_s']:.3f} s | certified fit {t['certified_s']:.3f} s | ratio {t['ratio']:.2f}x "
          f"(goal <= 5x) | of which input checks (rank via QR) {t['input_checks_s']:.3f} s")
    b = message_bytes(args.bytes_n, args.p, args.rounds)
    print(f"\n2. bytes each party sends per round (N = {args.bytes_n:,}, p = {args.p}, T = {args.rounds})")
    print("   | mode | party | payload / round | serialised / round | all messages (incl. coefficients) |")
    print("   |---|---|---|---|---|")
    for r in b:
        print(f"   | {r['mode']} | {r['party']} | {r['payload_per_round']:,.0f} B ({r['payload_per_round'] / r['n']:.2f} B/row) | "
              f"{r['serialised_per_round']:,.0f} B | {r['serialised_total']:,} B in {r['messages']} messages |")
    a = accuracy(args.reps)
    print(f"\n3. median AAPD, certified against paper mode at equal eps on Table 1's grid (N = 1000, p = 10, {args.reps} data sets)")
    print("   | eps (total) | paper mode (ours) | the paper | certified (delta 1e-6) | certified / paper |")
    print("   |---|---|---|---|---|")
    for r in a:
        print(f"   | {r['eps']:g} | {r['paper_median']:.3g} | {r['paper_published_median']:.2f} | {r['certified_median']:.3g} | {r['ratio']:.1f}x |")
    print(f"   median ratio over the grid: {statistics.median(r['ratio'] for r in a):.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"timing": t, "bytes": b, "accuracy": a}, indent=2))


if __name__ == "__main__":
    main()
