"""A fit's fixed costs on their own: what planning, calibrating, reserving, charging and reporting cost one small fit.

Every case runs a three-node plan (two Gaussian nodes, one Laplace, all weighted, ``best`` accountant, tight) on
three numbers per node, so the data's share is nil and what is timed is the machinery every fit pays:

* ``fresh``: a fit given a budget and no ledger (a fresh ledger that enters the run in the tracking ledger);
* ``history``: five fits in a row on one ledger (the later ones priced after the earlier runs);
* ``json``: ``fresh`` plus the report's JSON (what a federated upload carries);
* ``new shape``: a plan priced for the first time (its budget differs from every earlier one; not tight, so no
  calibration search): mostly the PLD of each new noise multiplier, built once per process, then composed.

The figure is CPU milliseconds per fit (``time.process_time``, best of ``--repeats``), and the ratio to drawing
the same noise with bare numpy. A measurement, not a test: absolute figures depend on the machine.

    python benchmarks/bench_fixed_costs.py            # about 20 s
    python benchmarks/bench_fixed_costs.py --fits 100 --repeats 3
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from privsdr import Budget, Ledger, Plan, Run, Sensitivity  # noqa: E402
from privsdr.accounting.default import fresh_ledger, reset_tracking_ledger  # noqa: E402


def _plan(budget: Budget, tight: bool = True):
    p = Plan("fixed_costs", "replace_one", {"n": 100, "p": 3})
    p.add("a", "gaussian", Sensitivity(1.0), weight=1.0)
    p.add("b", "gaussian", Sensitivity(1.0), weight=2.0)
    p.add("c", "laplace", Sensitivity(1.0, "l1"), weight=1.0)
    return p.allocate(budget, tight=tight)


def _fit(ledger: Ledger, budget: Budget, seed: int, tight: bool = True) -> Run:
    with Run(_plan(budget, tight), ledger, random_state=seed) as run:
        for name in "abc":
            run.release(name, np.zeros(3))
    return run


def _case(name: str, fits: int, offset: int) -> None:
    budget = Budget(1.0, 1e-6)
    ledger = Ledger(Budget(10.0, 1e-5))
    for i in range(fits):
        if name == "fresh":
            if i % 20 == 0:
                reset_tracking_ledger()
            _fit(fresh_ledger(budget, "best", "bench"), budget, i)
        elif name == "history":
            if i % 5 == 0:
                ledger = Ledger(Budget(10.0, 1e-5))
            _fit(ledger, budget, i)
        elif name == "json":
            report = _fit(Ledger(budget), budget, i).report
            assert report is not None
            report.to_json(indent=None)
        else:  # new shape: a budget no earlier fit had
            shaped = Budget(1.0 + 1e-4 * (offset + i), 1e-6)
            _fit(Ledger(shaped), shaped, i, tight=False)


def _numpy(fits: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(fits):
        for _ in range(3):
            np.zeros(3) + rng.standard_normal(3)


def _best_ms(run, fits: int, repeats: int) -> float:
    best = float("inf")
    for r in range(repeats):
        start = time.process_time()
        run(fits, r)
        best = min(best, (time.process_time() - start) / fits * 1e3)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", type=int, default=200, help="fits per measurement (new shape: a fortieth)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    base = _best_ms(lambda k, r: _numpy(k), args.fits, args.repeats)
    print(f"bare numpy noise for three nodes: {base * 1e3:.1f} us per fit")
    print("| case | ms per fit | x bare numpy |\n|---|---|---|")
    for name in ("fresh", "history", "json", "new shape"):
        fits = max(1, args.fits // 40) if name == "new shape" else args.fits
        _case(name, 3, 10**6)  # warm: imports, the first PLDs
        ms = _best_ms(lambda k, r, name=name: _case(name, k, 1000 * (r + 1)), fits, args.repeats)
        print(f"| {name} | {ms:.2f} | {ms / base:.0f} |")


if __name__ == "__main__":
    main()
