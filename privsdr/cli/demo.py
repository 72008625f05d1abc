"""``privsdr demo``: the main job on built-in synthetic data."""
from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .. import __version__
from ..accounting import Budget
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..datasets import MODELS, TRUE_K, sir_model
from ..errors import ValidationError
from ._common import (
    FORMATTER,
    REPORT_SUFFIXES,
    Outputs,
    budget_options,
    commit_report,
    distinct,
    filed,
    filing,
    open_ledger,
    positive_int,
    purpose_option,
)


def _demo(args: argparse.Namespace) -> int:
    budget = Budget(args.epsilon, args.delta)
    if args.p < 2:
        raise ValidationError(f"--p must be at least 2 (the models' true directions live in the first two coordinates), got {args.p}")
    if args.write_data is not None:
        return _write_data(args)
    with Outputs() as outputs:
        report_path = outputs.add(args.report, "--report", REPORT_SUFFIXES)
        distinct([("--journal", args.journal), ("--report", report_path)])
        ledger = open_ledger(args.journal, args.accountant)
        return _run_demo(args, budget, ledger, outputs, report_path)


def _write_data(args: argparse.Namespace) -> int:
    """The demo's synthetic rows as a CSV (columns x1..xp and y) for trying `privsdr fit`; nothing is fitted or spent.
    ``--data-seed`` draws other rows (e.g. new rows for `privsdr transform`)."""
    if args.journal is not None or args.report is not None:
        raise ValidationError("--write-data only writes rows: it fits nothing, so --journal and --report do not apply")
    with Outputs() as outputs:
        path = outputs.add(args.write_data, "--write-data", (".csv",))
        X, y, _ = sir_model(args.model, args.n, args.p, seed=args.data_seed)
        header = ",".join([f"x{j + 1}" for j in range(args.p)] + ["y"])
        rows = "\n".join(",".join(f"{v:.6g}" for v in row) for row in np.column_stack([X, y]))
        outputs.commit("--write-data", header + "\n" + rows + "\n")
    print(f"wrote {args.n} rows of model {args.model} ({args.p} features, |x_ij| <= 1) to {path}; nothing was fitted or spent")
    return 0


def _run_demo(args: argparse.Namespace, budget: Budget, ledger: Any, outputs: Outputs, report_path: Any) -> int:
    from ..algorithms import DPSIR
    from ..core import (
        classical_sir,
        equal_count_cut_points,
        projection_distance,
        slice_by_cut_points,
    )
    from ..reproduce.dpsir_tables import public_grid

    accountant = ledger.accountant.name if ledger else (args.accountant or "best")
    K = TRUE_K[args.model]
    est = DPSIR(K, bound=1.0, y_grid=public_grid(args.model), budget=budget, ledger=ledger, accountant=accountant,
                random_state=args.seed)
    preview = est.plan(args.n, args.p)  # checks every public parameter before any data is made or read
    X, y, B = sir_model(args.model, args.n, args.p, seed=0)
    print(f"privsdr {__version__} demo: DP sliced inverse regression on model {args.model} "
          f"({args.n} synthetic rows, {args.p} features, K = {K} true direction{'s' if K > 1 else ''})")
    print(f"declared budget: epsilon={budget.epsilon:g}, delta={budget.delta:g}; accountant: {accountant}; "
          "public bound |x_ij| <= 1; slices from a DP quantile release over a public grid")
    print(f"preflight: this fit costs epsilon={preview.cost(accountant).epsilon:.4g} (before any data is read)")
    est.fit(X, y)
    cuts = equal_count_cut_points(y, 4)  # R dr's slices (dr.slices): 4, or 5 when n mod 4 > 2
    sir = classical_sir(X, slice_by_cut_points(y, cuts), len(cuts) + 1, K)[0]
    np.set_printoptions(precision=3, suppress=True)
    truth = B / np.linalg.norm(B, axis=0)
    estimate = est.directions_ * np.sign(np.sum(est.directions_ * truth, axis=0))
    print("\ntrue direction(s), normalised:\n", truth.T)
    print("DP-SIR estimate:\n", estimate.T)
    print(f"distance ||P_B - P_B_hat||_F (0 = exact, {np.sqrt(2 * K):.2f} = orthogonal): DP-SIR {projection_distance(est.directions_, B):.3f}, "
          f"non-private SIR {projection_distance(sir, B):.3f}; the noise alone accounts for about {est.noise_error_:.3f} "
          "(a bootstrap of the released statistics, no extra cost)")
    report = est.privacy_report_
    assert report is not None  # fit() sets it
    print("\n" + report.summary())
    if ledger is not None:
        eps, delta = ledger.remaining
        print(f"journal {args.journal}: remaining epsilon={eps:.4g}, delta={delta:.3g}")
    commit_report(outputs, filed(report, est, filing(args, None)), report_path)
    return 0



def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", formatter_class=FORMATTER, help="the main job on built-in synthetic data",
                          description="A simulated single-index problem (DP-SIR paper, model M1), a declared budget, a DP "
                          "sliced inverse regression fit, the estimated direction against the truth, and the privacy report. "
                          "With --journal the fit is charged to that journal and refused (exit 3, nothing spent) when it "
                          "lacks budget.")
    budget_options(demo)
    demo.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default=None,
                      help="accountant (default best; with --journal, the journal's: a different one is refused)")
    demo.add_argument("--model", choices=MODELS, default="M1", help="simulation model of the DP-SIR paper (default M1)")
    demo.add_argument("--n", type=positive_int, default=200_000, help="number of synthetic rows (default 200000)")
    demo.add_argument("--p", type=positive_int, default=5, help="number of features, at least 2 (default 5)")
    demo.add_argument("--seed", type=int, default=None, help="seed the noise (reproducible demos only; never for real releases)")
    demo.add_argument("--journal", default=None, help="charge this ledger journal (see `privsdr ledger init`)")
    demo.add_argument("--report", default=None, help="write the report: OUT.html, OUT.md or OUT.json")
    purpose_option(demo, digest=False)
    demo.add_argument("--write-data", default=None, metavar="ROWS.csv",
                      help="write the synthetic rows (x1..xp, y) to a CSV to try `privsdr fit` on, instead of fitting (spends nothing)")
    demo.add_argument("--data-seed", type=int, default=0, help="--write-data: seed of the rows (default 0, the demo's own)")
    demo.set_defaults(func=_demo)

