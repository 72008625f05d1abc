"""The ``privsdr`` command. ``privsdr --help`` and ``privsdr COMMAND --help`` explain each part."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from . import __version__
from .accounting import Budget, Ledger
from .accounting.accountants import ACCOUNTANT_NAMES
from .accounting.journal import verify
from .algorithms import DPSIR, DPMeanCovariance
from .datasets import MODELS, TRUE_K, load_csv, sir_model
from .errors import BudgetExceededError, PrivsdrError
from .mechanisms import available_mechanisms
from .report import PrivacyReport, ledger_to_html, ledger_to_markdown

EXIT_ERROR, EXIT_REFUSED, EXIT_FAILED = 2, 3, 1

OVERVIEW = """\
privsdr fits differentially private estimators under a declared (epsilon, delta) budget and
writes a privacy report you can file. A ledger (optionally a journal file shared by several
processes) refuses, before reading any data, a fit that would overspend.

typical session:
  privsdr ledger init budget.jsonl --epsilon 3 --delta 1e-5 --accountant best
  privsdr demo --journal budget.jsonl --report demo.html     # a DP-SIR fit on built-in data
  privsdr fit dpsir --data rows.csv --target y --bound 3 --y-grid -10 10 --epsilon 1 --delta 1e-6 --journal budget.jsonl
  privsdr reproduce dpsir-table1 --reps 3                    # the paper's table, our medians beside it
  privsdr ledger show budget.jsonl                            # spent, remaining, runs
  privsdr ledger verify budget.jsonl                          # detects any edit of the journal
  privsdr audit gaussian --noise-scale 0.5                    # watch an audit catch too little noise

exit codes: 0 ok, 1 audit or verification failed, 2 bad input, 3 refused for lack of budget.
"""


def _ledger_for(args: argparse.Namespace, budget: Budget) -> Ledger | None:
    return Ledger.open(args.journal) if getattr(args, "journal", None) else None


def _write_report(report: PrivacyReport, out: str | None) -> None:
    if not out:
        return
    suffix = Path(out).suffix.lower()
    text = report.to_html() if suffix in (".html", ".htm") else report.to_markdown() if suffix == ".md" else report.to_json()
    Path(out).write_text(text)
    print(f"wrote the privacy report to {out}")


def _demo(args: argparse.Namespace) -> int:
    from .core import classical_sir, equal_count_cut_points, projection_distance, slice_by_cut_points
    from .reproduce.dpsir_tables import public_grid

    budget = Budget(args.epsilon, args.delta)
    ledger = _ledger_for(args, budget)
    X, y, B = sir_model(args.model, args.n, args.p, seed=0)
    K = TRUE_K[args.model]
    accountant = ledger.accountant.name if ledger else args.accountant
    print(f"privsdr {__version__} demo: DP sliced inverse regression on model {args.model} "
          f"({args.n} synthetic rows, {args.p} features, K = {K} true direction{'s' if K > 1 else ''})")
    print(f"declared budget: epsilon={budget.epsilon:g}, delta={budget.delta:g}; accountant: {accountant}; "
          "public bound |x_ij| <= 1; slices from a DP quantile release over a public grid")
    est = DPSIR(K, bound=1.0, y_grid=public_grid(args.model), budget=budget, ledger=ledger, accountant=args.accountant,
                random_state=args.seed)
    preview = est.plan(*X.shape)
    print(f"preflight: this fit costs epsilon={preview.cost(accountant).epsilon:.4g} (before any data is read)")
    est.fit(X, y)
    labels = slice_by_cut_points(y, equal_count_cut_points(y, 4))
    sir = classical_sir(X, labels, 4, K)[0]
    np.set_printoptions(precision=3, suppress=True)
    truth = B / np.linalg.norm(B, axis=0)
    estimate = est.directions_ * np.sign(np.sum(est.directions_ * truth, axis=0))
    print("\ntrue direction(s), normalised:\n", truth.T)
    print("DP-SIR estimate:\n", estimate.T)
    print(f"distance ||P_B - P_B_hat||_F (0 = exact, {np.sqrt(2 * K):.2f} = orthogonal): DP-SIR {projection_distance(est.directions_, B):.3f}, "
          f"DP initializer {projection_distance(est.init_directions_, B):.3f}, non-private SIR {projection_distance(sir, B):.3f}")
    print("\n" + est.privacy_report_.summary())
    if ledger is not None:
        eps, delta = ledger.remaining
        print(f"journal {args.journal}: remaining epsilon={eps:.4g}, delta={delta:.3g}")
    _write_report(est.privacy_report_, args.report)
    return 0


METHODS = {
    "mean-covariance": "DP mean and covariance of the numeric columns (rows clipped to L2 norm --clip)",
    "dpsir": "DP sliced inverse regression of --target on the other columns (|x_ij| clipped to --bound; "
             "slices from --cut-points, or a DP quantile release over --y-grid LO HI)",
}


def _fit(args: argparse.Namespace) -> int:
    budget = Budget(args.epsilon, args.delta)
    if args.method == "dpsir" and not args.target:
        raise ValueError("dpsir needs --target, the response column")
    X, y, names = load_csv(args.data, target=args.target, columns=args.columns)
    ledger = _ledger_for(args, budget)
    np.set_printoptions(precision=5, suppress=True)
    print(f"columns: {', '.join(names)}")
    if args.method == "dpsir":
        if args.bound is None:
            raise ValueError("--bound (a public bound on |x_ij|) is required; it is never read off the data")
        grid = np.linspace(args.y_grid[0], args.y_grid[1], 1001) if args.y_grid else None
        est = DPSIR(args.n_directions, bound=args.bound, n_slices=args.n_slices, cut_points=args.cut_points, y_grid=grid,
                    budget=budget, ledger=ledger, accountant=args.accountant, random_state=args.seed).fit(X, y)
        print("directions (columns):\n", est.directions_)
        print("slice boundaries:", est.cut_points_)
    else:
        if args.clip is None:
            raise ValueError("--clip (a public bound on each row's L2 norm) is required; it is never read off the data")
        est = DPMeanCovariance(clip=args.clip, budget=budget, ledger=ledger, accountant=args.accountant, random_state=args.seed).fit(X)
        print("mean:", est.mean_)
        print("covariance:\n", est.covariance_)
    print("\n" + est.privacy_report_.summary())
    _write_report(est.privacy_report_, args.report)
    return 0


def _fsir_config(args: argparse.Namespace) -> int:
    from .federated import FSIRConfig

    config = FSIRConfig(bound=args.bound, norm=args.norm, cut_points=args.cut_points, classes=args.classes,
                        mechanism=args.mechanism, cov_mechanism=args.cov_mechanism, calibration=args.calibration,
                        n_directions=args.n_directions)
    Path(args.out).write_text(config.to_json())
    print(f"wrote {args.out} (configuration digest {config.digest()}); give it to every client and to the server")
    return 0


def _fsir_client(args: argparse.Namespace) -> int:
    from .federated import FSIRConfig, client_message

    config = FSIRConfig.from_json(Path(args.config).read_text())
    X, y, names = load_csv(args.data, target=args.target, columns=args.columns)
    ledger = Ledger.open(args.journal) if args.journal else None
    message = client_message(X, y, config, Budget(args.epsilon, args.delta), client_id=args.client_id, ledger=ledger)
    message.save(args.out)
    print(message.report.summary())
    print(f"wrote {args.out}: n = {message.n}, p = {message.p}, H = {message.n_slices}; upload it to the server")
    return 0


def _fsir_server(args: argparse.Namespace) -> int:
    from .federated import ClientMessage, FSIRConfig, merge

    config = FSIRConfig.from_json(Path(args.config).read_text())
    messages = [ClientMessage.load(path) for path in args.messages]
    result = merge(messages, config, psd_floor=args.psd_floor)
    if args.json:
        print(json.dumps({"directions": result.directions.tolist(), "n_total": result.n_total, "privacy": result.privacy}, indent=2, default=str))
        return 0
    np.set_printoptions(precision=4, suppress=True)
    print(f"merged {len(messages)} clients, N = {result.n_total}; {result.n_directions} direction(s) (columns):")
    print(result.directions)
    per = result.privacy["per_record"]
    print(f"privacy per record ({result.privacy['status']}): epsilon = {per['epsilon']:.4g}, delta = {per['delta']:.3g} "
          f"-- {result.privacy['composition']}")
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    from .reproduce import REPRODUCTIONS

    if args.list or not args.name:
        for name, (_, title) in REPRODUCTIONS.items():
            print(f"{name:<14} {title}")
        return 0
    if args.name not in REPRODUCTIONS:
        raise ValueError(f"unknown reproduction {args.name!r}; see privsdr reproduce --list")
    module, _ = REPRODUCTIONS[args.name]
    start = time.perf_counter()
    rows = module.run(args.name, reps=args.reps, seed=args.seed)
    for row in rows:
        row.setdefault("seconds_total", round(time.perf_counter() - start, 2))
    csv_path, md_path = module.write(rows, args.out)
    print(md_path.read_text())
    seconds = rows[0].get("seconds_total")
    print(f"wrote {csv_path} and {md_path}" + (f" ({seconds} s)" if seconds is not None else ""))
    return 0


def _ledger_init(args: argparse.Namespace) -> int:
    ledger = Ledger.create(args.path, Budget(args.epsilon, args.delta), accountant=args.accountant)
    print(f"created {args.path}: budget epsilon={ledger.budget.epsilon:g}, delta={ledger.budget.delta:g}, accountant {ledger.accountant.name}")
    return 0


def _ledger_show(args: argparse.Namespace) -> int:
    summary = Ledger.open(args.path).summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(ledger_to_markdown(summary))
    if args.html:
        Path(args.html).write_text(ledger_to_html(summary))
        print(f"wrote the ledger report to {args.html}")
    return 0


def _ledger_verify(args: argparse.Namespace) -> int:
    ok, message, _ = verify(args.path)
    print(("OK: " if ok else "TAMPERED OR CORRUPT: ") + message)
    return 0 if ok else EXIT_FAILED


def _report(args: argparse.Namespace) -> int:
    report = PrivacyReport.from_json(Path(args.path).read_text())
    if not (args.html or args.markdown):
        print(report.summary())
    if args.html:
        Path(args.html).write_text(report.to_html())
        print(f"wrote {args.html}")
    if args.markdown:
        Path(args.markdown).write_text(report.to_markdown())
        print(f"wrote {args.markdown}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from .audit import audit_mechanism

    result = audit_mechanism(
        args.mechanism, epsilon=args.epsilon, delta=args.delta, calibration=args.calibration,
        noise_scale=args.noise_scale, samples=args.samples, alpha=args.alpha, seed=args.seed,
    )
    if args.json:
        print(json.dumps({"mechanism": args.mechanism, "noise_scale": args.noise_scale, **result.to_dict()}))
    else:
        print(f"{args.mechanism} at (epsilon={args.epsilon:g}, delta={args.delta:g}), noise x{args.noise_scale:g}")
        print(result.summary())
    return 0 if result.passed else EXIT_FAILED


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line (plus exit code 2), like every other bad-input error."""

    def error(self, message: str) -> "None":  # type: ignore[override]
        self.exit(EXIT_ERROR, f"privsdr: error: {self.prog}: {message} (see --help)\n")


def _budget_options(p: argparse.ArgumentParser, epsilon: float | None = 1.0, delta: float | None = 1e-6) -> None:
    p.add_argument("--epsilon", type=float, default=epsilon, required=epsilon is None, help=f"epsilon of this fit (default {epsilon})")
    p.add_argument("--delta", type=float, default=delta, required=delta is None, help=f"delta of this fit (default {delta})")


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="privsdr", description=OVERVIEW, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"privsdr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    demo = sub.add_parser("demo", formatter_class=fmt, help="the main job on built-in synthetic data",
                          description="A simulated single-index problem (DP-SIR paper, model M1), a declared budget, a DP "
                          "sliced inverse regression fit, the estimated direction against the truth, and the privacy report. "
                          "With --journal the fit is charged to that journal and refused (exit 3, nothing spent) when it "
                          "lacks budget.")
    _budget_options(demo)
    demo.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best", help="accountant when no journal is given (default best)")
    demo.add_argument("--model", choices=MODELS, default="M1", help="simulation model of the DP-SIR paper (default M1)")
    demo.add_argument("--n", type=int, default=200_000, help="number of synthetic rows (default 200000)")
    demo.add_argument("--p", type=int, default=5, help="number of features (default 5)")
    demo.add_argument("--seed", type=int, default=None, help="seed the noise (reproducible demos only; never for real releases)")
    demo.add_argument("--journal", default=None, help="charge this ledger journal (see `privsdr ledger init`)")
    demo.add_argument("--report", default=None, help="write the report: OUT.html, OUT.md or OUT.json")
    demo.set_defaults(func=_demo)

    fit = sub.add_parser("fit", formatter_class=fmt, help="fit a method on a CSV file under a budget",
                         description="Fit METHOD on the numeric columns of a CSV (header row required). Public bounds are "
                         "required options. Methods:\n" + "\n".join(f"  {k}: {v}" for k, v in METHODS.items()))
    fit.add_argument("method", choices=sorted(METHODS))
    fit.add_argument("--data", required=True, help="CSV file with a header row")
    fit.add_argument("--target", default=None, help="response column (excluded from the features)")
    fit.add_argument("--columns", nargs="+", default=None, help="feature columns (default: all but the target)")
    fit.add_argument("--clip", type=float, default=None, help="mean-covariance: public bound on each row's L2 norm (required)")
    fit.add_argument("--bound", type=float, default=None, help="dpsir: public bound on |x_ij| (required)")
    fit.add_argument("--n-directions", type=int, default=1, help="dpsir: number of directions K (default 1)")
    fit.add_argument("--n-slices", type=int, default=4, help="dpsir: number of slices H (default 4)")
    fit.add_argument("--cut-points", type=float, nargs="+", default=None, help="dpsir: public slice boundaries (H-1 values)")
    fit.add_argument("--y-grid", type=float, nargs=2, default=None, metavar=("LO", "HI"),
                     help="dpsir: public range of y for a DP quantile release of the slice boundaries")
    _budget_options(fit)
    fit.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best")
    fit.add_argument("--journal", default=None, help="charge this ledger journal")
    fit.add_argument("--report", default=None, help="write the report: OUT.html, OUT.md or OUT.json")
    fit.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    fit.set_defaults(func=_fit)

    ledger = sub.add_parser("ledger", help="create, inspect and verify ledger journals")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True, metavar="ACTION", parser_class=_Parser)
    init = lsub.add_parser("init", help="create a journal with a total budget")
    init.add_argument("path")
    _budget_options(init, None, None)
    init.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best")
    init.set_defaults(func=_ledger_init)
    show = lsub.add_parser("show", help="spent, remaining and every run of a journal")
    show.add_argument("path")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.add_argument("--html", default=None, help="also write a ledger-level HTML report")
    show.set_defaults(func=_ledger_show)
    ver = lsub.add_parser("verify", help="check the journal's hash chain (exit 1 if tampered)")
    ver.add_argument("path")
    ver.set_defaults(func=_ledger_verify)

    fsir = sub.add_parser("fsir", help="federated SIR: a shared configuration, client uploads, the server merge",
                          description="Clients compute private uploads from their own CSV with `fsir client`; the server "
                          "merges the upload files with `fsir server`. Everything after an upload is post-processing.")
    fsub = fsir.add_subparsers(dest="fsir_command", required=True, metavar="ACTION", parser_class=_Parser)
    fconf = fsub.add_parser("config", help="write the public configuration every client and the server share")
    fconf.add_argument("out")
    fconf.add_argument("--bound", type=float, required=True, help="public truncation: |x_ij| <= R (linf) or ||x|| <= C (l2)")
    fconf.add_argument("--norm", choices=("linf", "l2"), default="linf")
    fconf.add_argument("--cut-points", type=float, nargs="+", default=None, help="public slice boundaries for a continuous y")
    fconf.add_argument("--classes", type=float, nargs="+", default=None, help="the classes of a categorical y")
    fconf.add_argument("--mechanism", choices=("iid", "vgm", "vgm_two_stage", "none"), default="iid")
    fconf.add_argument("--cov-mechanism", choices=("modsulq", "analyze_gauss", "none"), default="analyze_gauss")
    fconf.add_argument("--calibration", choices=("classical", "thm3_exact", "paper_approx", "analytic"), default="analytic")
    fconf.add_argument("--n-directions", type=int, default=1)
    fconf.set_defaults(func=_fsir_config)
    fcl = fsub.add_parser("client", help="compute one client's private upload from its own CSV")
    fcl.add_argument("--config", required=True)
    fcl.add_argument("--data", required=True)
    fcl.add_argument("--target", required=True)
    fcl.add_argument("--columns", nargs="+", default=None)
    fcl.add_argument("--client-id", required=True)
    _budget_options(fcl)
    fcl.add_argument("--journal", default=None, help="charge this client's ledger journal")
    fcl.add_argument("--out", required=True, help="the upload file to send to the server")
    fcl.set_defaults(func=_fsir_client)
    fsv = fsub.add_parser("server", help="merge client uploads into the SDR directions")
    fsv.add_argument("messages", nargs="+")
    fsv.add_argument("--config", required=True)
    fsv.add_argument("--psd-floor", type=float, default=None, help="floor the merged second moment's eigenvalues (post-processing)")
    fsv.add_argument("--json", action="store_true")
    fsv.set_defaults(func=_fsir_server)

    repro = sub.add_parser("reproduce", formatter_class=fmt, help="reproduce a paper's table (--list shows them)",
                           description="Run a paper's simulation grid and write a CSV and a Markdown table with our medians "
                           "beside the paper's. The paper used 1000 replications; the default here is small enough for minutes.")
    repro.add_argument("name", nargs="?", default=None, help="e.g. dpsir-table1")
    repro.add_argument("--list", action="store_true", help="list the available reproductions")
    repro.add_argument("--reps", type=int, default=3, help="replications per cell (default 3; the paper: 1000)")
    repro.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    repro.add_argument("--out", default="reproductions", help="output folder (default ./reproductions)")
    repro.set_defaults(func=_reproduce)

    rep = sub.add_parser("report", help="render a saved JSON privacy report")
    rep.add_argument("path", help="a report written with --report OUT.json")
    rep.add_argument("--html", default=None, help="write a self-contained HTML page")
    rep.add_argument("--markdown", default=None, help="write Markdown")
    rep.set_defaults(func=_report)

    audit = sub.add_parser("audit", formatter_class=fmt,
                           help="empirically audit a registered mechanism: a lower confidence bound on its epsilon",
                           description="Sample MECHANISM on its worst-case neighbouring pair, count a pre-registered threshold "
                           "test, and print a lower confidence bound on epsilon with the counts behind it. Exit code 1 when "
                           "the claimed guarantee is rejected. --noise-scale F < 1 draws less noise than calibrated: watch "
                           "the audit fail.")
    audit.add_argument("mechanism", choices=available_mechanisms(), help="registered mechanism name")
    audit.add_argument("--epsilon", type=float, default=1.0, help="claimed epsilon (default 1.0)")
    audit.add_argument("--delta", type=float, default=1e-5, help="claimed delta (default 1e-5; ignored by pure mechanisms)")
    audit.add_argument("--samples", type=int, default=None, help="samples per side (default: enough to certify 0.8 at epsilon 1)")
    audit.add_argument("--noise-scale", type=float, default=1.0, help="multiply the calibrated noise by F (F < 1 is a bug)")
    audit.add_argument("--calibration", default=None, help="noise calibration (mechanism default if omitted)")
    audit.add_argument("--alpha", type=float, default=1e-3, help="1 - confidence (default 1e-3)")
    audit.add_argument("--seed", type=int, default=0, help="seed of the audit's own sampling (default 0)")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.set_defaults(func=_audit)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BudgetExceededError as exc:
        print(f"privsdr: refused, nothing spent: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_REFUSED
    except (PrivsdrError, ValueError, TypeError, OSError, ImportError) as exc:
        print(f"privsdr: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
