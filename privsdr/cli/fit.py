"""``privsdr fit METHOD``: fit an estimator on a CSV file under a budget."""
from __future__ import annotations

import argparse

import numpy as np

from ..accounting import Budget
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..algorithms import DPPLS, DPSIR, DPMeanCovariance
from ..datasets import load_csv
from ._common import FORMATTER, budget_options, ledger_for, write_report

METHODS = {
    "mean-covariance": "DP mean and covariance of the numeric columns (rows clipped to L2 norm --clip)",
    "dpsir": "DP sliced inverse regression of --target on the other columns (|x_ij| clipped to --bound; "
             "slices from --cut-points, or a DP quantile release over --y-grid LO HI)",
    "pls": "DP PLS1 regression of --target on the other columns, --components A (or auto); certified S2 by default "
           "(rows clipped to ||x - x_center|| <= --bound-x, |y - y_center| <= --bound-y); --mode paper is edPLS as "
           "published (NOT private; needs --allow-uncertified; --epsilon/--delta are then per release)",
}


def _fit(args: argparse.Namespace) -> int:
    budget = Budget(args.epsilon, args.delta)
    if args.method in ("dpsir", "pls") and not args.target:
        raise ValueError(f"{args.method} needs --target, the response column")
    X, y, names = load_csv(args.data, target=args.target, columns=args.columns)
    ledger = ledger_for(args, budget)
    np.set_printoptions(precision=5, suppress=True)
    print(f"columns: {', '.join(names)}")
    if args.method == "pls":
        est = _fit_pls(args, X, y, budget, ledger)
    elif args.method == "dpsir":
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
    write_report(est.privacy_report_, args.report)
    return 0



def _fit_pls(args: argparse.Namespace, X: np.ndarray, y: np.ndarray, budget: Budget, ledger: object) -> DPPLS:
    paper = args.mode == "paper"
    if not paper and (args.bound_x is None or args.bound_y is None):
        raise ValueError("--bound-x and --bound-y (public bounds) are required; they are never read off the data")
    if args.components != "auto" and not str(args.components).isdigit():
        raise ValueError(f"--components must be an integer or 'auto', got {args.components!r}")
    components = args.components if args.components == "auto" else int(args.components)
    public = {} if paper else {"bound_x": args.bound_x, "bound_y": args.bound_y, "x_center": args.x_center,
                               "y_center": args.y_center, "centering": args.centering}
    est = DPPLS(components, mode=args.mode, budget=budget, ledger=ledger, accountant=args.accountant, random_state=args.seed,
                allow_uncertified=args.allow_uncertified, **public).fit(X, y)
    print(f"components: {est.n_components_}")
    print("coefficients b:", est.coef_)
    print(f"intercept: {est.intercept_:.6g}")
    return est


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fit = sub.add_parser("fit", formatter_class=FORMATTER, help="fit a method on a CSV file under a budget",
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
    fit.add_argument("--components", default="2", help="pls: number of components A, or 'auto' (certified mode; default 2)")
    fit.add_argument("--mode", choices=("certified", "certified_iterative", "paper"), default="certified",
                     help="pls: certified (S2, default), certified_iterative (S1) or paper (edPLS as published, NOT private)")
    fit.add_argument("--bound-x", type=float, default=None, help="pls: public bound on ||x - x_center|| (certified modes)")
    fit.add_argument("--bound-y", type=float, default=None, help="pls: public bound on |y - y_center| (certified modes)")
    fit.add_argument("--x-center", type=float, default=None, help="pls: public centre of every column (default 0)")
    fit.add_argument("--y-center", type=float, default=None, help="pls: public centre of y (default 0)")
    fit.add_argument("--centering", choices=("dp", "public"), default="dp",
                     help="pls: estimate the means privately (dp, charged) or take the public centre as the mean")
    fit.add_argument("--allow-uncertified", action="store_true", help="run a plan without a certified guarantee (pls --mode paper)")
    budget_options(fit)
    fit.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best")
    fit.add_argument("--journal", default=None, help="charge this ledger journal")
    fit.add_argument("--report", default=None, help="write the report: OUT.html, OUT.md or OUT.json")
    fit.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    fit.set_defaults(func=_fit)

