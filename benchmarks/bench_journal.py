"""Cost of persistence: one-node runs against an in-memory ledger vs a journal (fsync per record),
and what the sealed head (issue 10: a second atomic, fsync'd file per record) adds to the journal.

    python benchmarks/bench_journal.py [--runs 200]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from privsdr import Budget, Ledger, Plan, Run, Sensitivity
from privsdr.accounting.journal import Journal


def one_node_plan():
    plan = Plan("unit", "replace_one")
    plan.add("x", "laplace", Sensitivity(1.0, "l1"), share=Budget(1 / 128, 0.0))
    return plan.allocate(Budget(1 / 128, 0.0))


def ms_per_run(ledger: Ledger, runs: int) -> float:
    plan = one_node_plan()
    start = time.perf_counter()
    for i in range(runs):
        with Run(plan, ledger, random_state=i) as run:
            run.release("x", 0.0)
    return (time.perf_counter() - start) / runs * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    budget = Budget(args.runs / 64, 0.0)
    memory = ms_per_run(Ledger(budget, "basic"), args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        journal = ms_per_run(Ledger(budget, "basic", journal=Path(tmp) / "bench.jsonl"), args.runs)
        sealing = Journal._write_head, Journal._check_head
        Journal._write_head = lambda self, *a: None  # type: ignore[method-assign]  # the journal before the head
        Journal._check_head = lambda self: None  # type: ignore[method-assign]
        try:
            unsealed = ms_per_run(Ledger(budget, "basic", journal=Path(tmp) / "unsealed.jsonl"), args.runs)
        finally:
            Journal._write_head, Journal._check_head = sealing  # type: ignore[method-assign]
    print(f"{'ledger':<18} {'ms per one-node run':>20}")
    print(f"{'in-memory':<18} {memory:>20.2f}")
    print(f"{'journal, no head':<18} {unsealed:>20.2f}   (x{unsealed / memory:.1f}: 3 fsync'd records per run)")
    print(f"{'journal, sealed':<18} {journal:>20.2f}   (x{journal / memory:.1f}; the head costs x{journal / unsealed:.2f})")


if __name__ == "__main__":
    main()
