"""The ``privsdr`` command.

    privsdr demo [--epsilon E] [--delta D] [--accountant NAME] [--seed S] [--report OUT.json]
    privsdr audit MECHANISM [--epsilon E] [--delta D] [--samples N] [--noise-scale F] [--json]

``demo`` runs the main job on built-in synthetic data: declare a budget, fit, print the estimate
against the truth and the privacy report summary, write the JSON report. ``audit`` prints an
empirical lower bound on a mechanism's epsilon and exits 1 when the claim is rejected.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from . import __version__
from .accounting import Budget
from .accounting.accountants import ACCOUNTANT_NAMES
from .algorithms import DPMeanCovariance
from .datasets import gaussian_rows
from .errors import PrivsdrError
from .mechanisms import available_mechanisms


def _demo(args: argparse.Namespace) -> int:
    budget = Budget(args.epsilon, args.delta)
    X, mean, cov = gaussian_rows(n=args.n, p=args.p, seed=0)
    print(f"privsdr {__version__} demo: DP mean and covariance of {args.n} synthetic rows in {args.p} dimensions")
    print(f"declared budget: epsilon={budget.epsilon:g}, delta={budget.delta:g}; accountant: {args.accountant}; public row bound clip={args.clip:g}")
    est = DPMeanCovariance(clip=args.clip, budget=budget, accountant=args.accountant, random_state=args.seed)
    preview = est.plan(*X.shape)
    print(f"preflight: this fit costs at most (epsilon={preview.cost(args.accountant).epsilon:.4g}) before any data is read")
    est.fit(X)
    np.set_printoptions(precision=4, suppress=True)
    print("\nestimated mean: ", est.mean_)
    print("true mean:      ", mean)
    rel = np.linalg.norm(est.covariance_ - cov) / np.linalg.norm(cov)
    print(f"mean error (L2): {np.linalg.norm(est.mean_ - mean):.4g}; covariance relative error (Frobenius): {rel:.4g}")
    print("\n" + est.privacy_report_.summary())
    if args.report:
        Path(args.report).write_text(est.privacy_report_.to_json())
        print(f"\nwrote the privacy report to {args.report}")
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
    return 0 if result.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privsdr",
        description="Differentially private dimension reduction and regression, with privacy accounting first.",
    )
    parser.add_argument("--version", action="version", version=f"privsdr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="fit on built-in synthetic data under a declared budget and print the privacy report",
        description="The main job on a built-in default: synthetic data, a declared (epsilon, delta) budget, a DP fit, "
        "the estimate against the known truth, and the privacy report.",
    )
    demo.add_argument("--epsilon", type=float, default=1.0, help="total epsilon of the fit (default 1.0)")
    demo.add_argument("--delta", type=float, default=1e-6, help="total delta of the fit (default 1e-6)")
    demo.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best", help="composition accountant (default best)")
    demo.add_argument("--clip", type=float, default=3.0, help="public bound on each row's L2 norm (default 3.0)")
    demo.add_argument("--n", type=int, default=20_000, help="number of synthetic rows (default 20000)")
    demo.add_argument("--p", type=int, default=5, help="number of features (default 5)")
    demo.add_argument("--seed", type=int, default=None, help="seed the noise (for reproducible demos only)")
    demo.add_argument("--report", default=None, help="write the JSON privacy report to this file")
    demo.set_defaults(func=_demo)

    audit = sub.add_parser(
        "audit",
        help="empirically audit a registered mechanism: a lower confidence bound on its epsilon",
        description="Sample MECHANISM on its worst-case neighbouring pair, count a pre-registered threshold test, "
        "and print a lower confidence bound on epsilon with the counts behind it. Exit code 1 when the claimed "
        "guarantee is rejected. --noise-scale F < 1 draws less noise than calibrated: watch the audit fail.",
    )
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
    except (PrivsdrError, ValueError, TypeError) as exc:
        print(f"privsdr: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
