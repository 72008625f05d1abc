"""``privsdr fit METHOD``: fit an estimator on a CSV file under a budget.

Each method is one ``Method`` row in ``METHODS``: the options it reads (any other method option
given with it is refused), a ``check`` of those options that runs before any file is read, a
``build`` that returns the estimator and a ``show`` that prints its result. Adding a method is
adding a row (and its options, if new, to ``add_parser``).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..accounting import Budget, Ledger
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..datasets import csv_header, load_csv
from ..errors import ValidationError
from ..persistence import model_classes
from ._common import (
    FORMATTER,
    MODEL_SUFFIXES,
    REPORT_SUFFIXES,
    Outputs,
    budget_options,
    commit_report,
    distinct,
    filed,
    filing,
    finite_float,
    input_file,
    load_bounds,
    load_ranges,
    open_ledger,
    optional_input_file,
    positive_int,
    purpose_option,
)

if TYPE_CHECKING:  # the estimators (and scikit-learn) are imported when a fit runs, not when the command starts
    from ..algorithms import DPPLS, DPSIR, DPMeanCovariance

#: options that belong to one method or another: dest -> flag
METHOD_OPTIONS = {"clip": "--clip", "bound": "--bound", "bounds": "--bounds", "n_directions": "--n-directions",
                  "n_slices": "--n-slices", "cut_points": "--cut-points", "y_grid": "--y-grid", "algorithm": "--algorithm",
                  "components": "--components", "mode": "--mode", "bound_x": "--bound-x", "bound_y": "--bound-y",
                  "x_center": "--x-center", "y_center": "--y-center", "centering": "--centering",
                  "sparsity": "--sparsity"}


@attrs.frozen
class FitContext:
    budget: Budget
    ledger: Ledger | None
    accountant: str
    bounds: np.ndarray | None  #: per-column bounds from --bounds (in feature order), else None
    seed: int | None
    sampler: str = "numpy"  #: --sampler: numpy (fast) or secure (exact discrete noise, CSPRNG)
    centres: np.ndarray | None = None  #: mean-covariance: the centres of the --bounds ranges


@attrs.frozen
class Method:
    name: str
    summary: str
    options: frozenset[str]
    check: Callable[[argparse.Namespace], None]
    build: Callable[[argparse.Namespace, FitContext], Any]
    show: Callable[[Any, list[str]], None]  #: prints the estimate (``names``: the feature columns, in order)
    needs_target: bool = False


def _check_mean_covariance(args: argparse.Namespace) -> None:
    if args.clip is not None and args.bounds is not None:
        raise ValidationError("give --clip C (a bound on each row's L2 norm) or --bounds FILE.json (one per column), not both")
    if args.clip is None and args.bounds is None:
        raise ValidationError("mean-covariance needs --clip C (a public bound on each row's L2 norm) or --bounds FILE.json "
                              "(per-column bounds); bounds are public and never read off the data")


def _build_mean_covariance(args: argparse.Namespace, ctx: FitContext) -> DPMeanCovariance:
    from ..algorithms import DPMeanCovariance

    # --bounds: each column clipped to its range [lo, hi] = centre +- half-width; rows then have ||x - centre|| <= ||half-widths||
    return DPMeanCovariance(clip=args.clip, center=ctx.centres, bounds=ctx.bounds, budget=ctx.budget, ledger=ctx.ledger,
                            accountant=ctx.accountant, random_state=ctx.seed, sampler=ctx.sampler)


def by_column(names: list[str], values: np.ndarray, header: str) -> None:
    """One line per feature column: its name, then its row of ``values`` (a vector or a matrix with a row per column)."""
    rows = np.asarray(values, dtype=float).reshape(len(names), -1)
    width = max(map(len, names))
    print(header)
    for name, row in zip(names, rows, strict=True):
        print(f"  {name:<{width}}  " + "  ".join(f"{v: .5f}" for v in row))


def _show_mean_covariance(est: DPMeanCovariance, names: list[str]) -> None:
    print("mean:", est.mean_)
    print("covariance:\n", est.covariance_)
    report = est.privacy_report_
    if report is not None and "noise" in report.diagnostics.get("messages", {}):
        print(report.diagnostics["messages"]["noise"])


def _check_bound_or_bounds(args: argparse.Namespace, method: str) -> None:
    """--bound (one for every column) or --bounds (one per column): exactly one of them."""
    if args.bound is not None and args.bounds is not None:
        raise ValidationError("give --bound C (the same for every column) or --bounds FILE.json (one per column), not both")
    if args.bound is None and args.bounds is None:
        raise ValidationError(f"{method} needs --bound C (|x_ij| <= C for every column) or --bounds FILE.json (one bound per "
                              "column); bounds are public and never read off the data")


def _check_dpsir(args: argparse.Namespace) -> None:
    _check_bound_or_bounds(args, "dpsir")
    if args.cut_points is not None and args.y_grid is not None:
        raise ValidationError("give --cut-points (public slice boundaries) or --y-grid LO HI (a DP quantile release), not both")
    if args.cut_points is not None:
        H = len(args.cut_points) + 1
        if args.n_slices is not None and args.n_slices != H:
            raise ValidationError(f"--n-slices {args.n_slices} contradicts {len(args.cut_points)} --cut-points ({H} slices); "
                                  "omit --n-slices")
        args.n_slices = H
    if args.y_grid is not None and not args.y_grid[0] < args.y_grid[1]:
        raise ValidationError(f"--y-grid LO HI needs LO < HI, got {args.y_grid[0]:g} {args.y_grid[1]:g}")


def _sliced(args: argparse.Namespace, ctx: FitContext) -> dict[str, Any]:
    """What dpsir and sparse-dpsir share: the bounds (one, or one per column), the slices and the budget."""
    grid = np.linspace(args.y_grid[0], args.y_grid[1], 1001) if args.y_grid else None
    bound = ctx.bounds if ctx.bounds is not None else args.bound
    return {"bound": bound, "n_slices": args.n_slices or 4, "cut_points": args.cut_points, "y_grid": grid, "budget": ctx.budget,
            "ledger": ctx.ledger, "accountant": ctx.accountant, "random_state": ctx.seed, "sampler": ctx.sampler}


def _build_dpsir(args: argparse.Namespace, ctx: FitContext) -> DPSIR:
    from ..algorithms import DPSIR

    return DPSIR(args.n_directions or 1, algorithm=args.algorithm, **_sliced(args, ctx))


def _show_dpsir(est: DPSIR, names: list[str]) -> None:
    print("directions (columns, unit length):\n", est.directions_)
    by_column(names, est.directions_, "directions by feature:")
    print("slice boundaries:", est.cut_points_)
    print("centre (public shift + DP mean):", est.center_)
    if getattr(est, "noise_error_", None) is not None:
        print(f"the noise alone moves these directions by about {est.noise_error_:.3g} (a random subspace: {est.random_error_:.3g})")


def _check_sparse_dpsir(args: argparse.Namespace) -> None:
    if args.sparsity is None:
        raise ValidationError("sparse-dpsir needs --sparsity s (the number of nonzero rows of the directions: public)")
    _check_dpsir(args)


def _build_sparse_dpsir(args: argparse.Namespace, ctx: FitContext) -> Any:
    from ..algorithms import SparseDPSIR

    return SparseDPSIR(args.n_directions or 1, sparsity=args.sparsity, algorithm=args.algorithm, **_sliced(args, ctx))


def _show_sparse(est: Any, names: list[str]) -> None:
    support = [int(j) for j in est.support_]
    print("selected columns:", ", ".join(names[j] for j in support))
    weights = est.directions_ if hasattr(est, "directions_") else est.components_
    by_column([names[j] for j in support], np.asarray(weights)[support], "directions on the selected columns (the others are 0):")
    if getattr(est, "noise_error_", None) is not None:
        print(f"the noise alone moves these directions by about {est.noise_error_:.3g} given the selected columns (a random "
              f"subspace: {est.random_error_:.3g})")
    if getattr(est, "support_signal_", None) is False:
        print("the released slice means on the selected columns cannot be told from their noise: the selection is no better "
              "than a random one")


def _check_sparse_pca(args: argparse.Namespace) -> None:
    if args.sparsity is None:
        raise ValidationError("sparse-pca needs --sparsity s (the number of nonzero coordinates: public)")
    _check_bound_or_bounds(args, "sparse-pca")


def _build_sparse_pca(args: argparse.Namespace, ctx: FitContext) -> Any:
    from ..algorithms import DPSparsePCA

    bound = ctx.bounds if ctx.bounds is not None else args.bound
    return DPSparsePCA(args.n_directions or 1, sparsity=args.sparsity, bound=bound, budget=ctx.budget, ledger=ctx.ledger,  # type: ignore[arg-type]
                       accountant=ctx.accountant, random_state=ctx.seed, sampler=ctx.sampler)


def _check_pls(args: argparse.Namespace) -> None:
    paper = args.mode == "paper"
    if not paper and (args.bound_x is None or args.bound_y is None):
        raise ValidationError("pls needs --bound-x and --bound-y (public bounds on ||x - x_center|| and |y - y_center|); "
                              "they are never read off the data")
    if args.components is not None and args.components != "auto" and not str(args.components).isdigit():
        raise ValidationError(f"--components must be an integer or 'auto', got {args.components!r}")


def _build_pls(args: argparse.Namespace, ctx: FitContext) -> DPPLS:
    from ..algorithms import DPPLS

    paper = args.mode == "paper"
    components: Any = args.components or "2"
    components = components if components == "auto" else int(components)
    public = {} if paper else {"bound_x": args.bound_x, "bound_y": args.bound_y, "x_center": args.x_center,
                               "y_center": args.y_center, "centering": args.centering or "dp"}
    return DPPLS(components, mode=args.mode or "certified", budget=ctx.budget, ledger=ctx.ledger, accountant=ctx.accountant,
                 random_state=ctx.seed, allow_uncertified=args.allow_uncertified, sampler=ctx.sampler, **public)


def _check_adassp(args: argparse.Namespace) -> None:
    if args.bound_x is None or args.bound_y is None:
        raise ValidationError("adassp needs --bound-x and --bound-y (public bounds on ||x - x_center|| and |y - y_center|); "
                              "they are never read off the data")


def _build_adassp(args: argparse.Namespace, ctx: FitContext) -> Any:
    from ..algorithms import AdaSSPRegression

    return AdaSSPRegression(args.bound_x, args.bound_y, x_center=args.x_center, y_center=args.y_center or 0.0,
                            budget=ctx.budget, ledger=ctx.ledger, accountant=ctx.accountant, random_state=ctx.seed,
                            sampler=ctx.sampler)


def _show_adassp(est: Any, names: list[str]) -> None:
    by_column(names, est.coef_, "coefficients:")
    print(f"intercept: {est.intercept_:.6g}")
    print(f"ridge lambda (AdaSSP's rule from the released noise): {est.ridge_:.4g}")
    if getattr(est, "noise_ratio_", None) is not None:
        print(est.privacy_report_.diagnostics["messages"]["noise"])


def _show_pls(est: DPPLS, names: list[str]) -> None:
    print(f"components: {est.n_components_}")
    print("coefficients b:", est.coef_)
    by_column(names, est.coef_, "coefficients by feature:")
    print(f"intercept: {est.intercept_:.6g}")
    factor = getattr(est, "shrinkage_factor_", None)
    if factor is not None:
        print(f"shrinkage (never worse than the DP mean): {est.n_components_} component(s) above the noise, slopes kept at "
              f"{factor:.3g} of their fitted size" + (" -- the fit is the DP mean" if factor == 0 or est.n_components_ == 0 else ""))
    report = est.privacy_report_
    if getattr(est, "noise_ratio_", None) is not None and report is not None and "noise" in report.diagnostics.get("messages", {}):
        print(report.diagnostics["messages"]["noise"])


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("mean-covariance", "DP mean and covariance of the numeric columns (rows clipped to L2 norm --clip, or each "
           "column to its --bounds)", frozenset({"clip", "bounds"}), _check_mean_covariance, _build_mean_covariance,
           _show_mean_covariance),
    Method("dpsir", "DP sliced inverse regression of --target on the other columns (|x_ij| clipped to --bound or the "
           "per-column --bounds; slices from --cut-points, or a DP quantile release over --y-grid LO HI)",
           frozenset({"bound", "bounds", "n_directions", "n_slices", "cut_points", "y_grid", "algorithm"}), _check_dpsir, _build_dpsir,
           _show_dpsir, needs_target=True),
    Method("pls", "DP PLS1 regression of --target on the other columns, --components A (or auto); certified S2 by "
           "default (rows clipped to ||x - x_center|| <= --bound-x, |y - y_center| <= --bound-y); --mode paper is edPLS as "
           "published (NOT private; needs --allow-uncertified; --epsilon/--delta are then per release)",
           frozenset({"components", "mode", "bound_x", "bound_y", "x_center", "y_center", "centering"}), _check_pls, _build_pls,
           _show_pls, needs_target=True),
    Method("sparse-dpsir", "DP sparse SIR (p >> n) of --target on the other columns: at most --sparsity columns enter the "
           "directions (|x_ij| clipped to --bound or the per-column --bounds; slices as for dpsir)",
           frozenset({"bound", "bounds", "n_directions", "n_slices", "cut_points", "y_grid", "sparsity", "algorithm"}), _check_sparse_dpsir,
           _build_sparse_dpsir, _show_sparse, needs_target=True),
    Method("sparse-pca", "DP sparse PCA of the numeric columns: --n-directions components on at most --sparsity columns "
           "(|x_ij| clipped to --bound or the per-column --bounds)", frozenset({"bound", "bounds", "n_directions", "sparsity"}),
           _check_sparse_pca, _build_sparse_pca, _show_sparse),
    Method("adassp", "DP linear regression (AdaSSP, Wang 2018) of --target on the other columns: noisy X^T X, X^T y and "
           "smallest eigenvalue, ridge chosen from their noise (rows clipped to ||x - x_center|| <= --bound-x, "
           "|y - y_center| <= --bound-y)", frozenset({"bound_x", "bound_y", "x_center", "y_center"}), _check_adassp,
           _build_adassp, _show_adassp, needs_target=True),
)}


#: the methods whose certified fit has an accuracy forecast (``--dry-run``, ``--forecast``)
FORECASTS = ("adassp", "pls", "dpsir", "sparse-dpsir")


def check_method_options(method: Method, args: argparse.Namespace) -> None:
    """Refuse options of other methods (they would be ignored silently), then the method's own checks."""
    foreign = [flag for dest, flag in METHOD_OPTIONS.items() if getattr(args, dest, None) is not None and dest not in method.options]
    if foreign:
        raise ValidationError(f"{', '.join(foreign)} {'does' if len(foreign) == 1 else 'do'} not apply to `fit {method.name}`")
    if method.needs_target and not args.target:
        raise ValidationError(f"{method.name} needs --target, the response column")
    if args.forecast and method.name not in FORECASTS:
        raise ValidationError(f"--forecast: `fit {method.name}` has no accuracy forecast yet ({', '.join(FORECASTS)} have one)")
    method.check(args)


def _fit(args: argparse.Namespace) -> int:
    method = METHODS[args.method]
    check_method_options(method, args)
    budget = Budget(args.epsilon, args.delta)
    if args.dry_run:
        return _dry_run(args, method, budget)
    if args.rows is not None:
        raise ValidationError("--rows is for --dry-run (the public row count of a plan); a fit counts the rows it reads")
    with Outputs() as outputs:
        report_path = outputs.add(args.report, "--report", REPORT_SUFFIXES)
        model_path = outputs.add(args.out, "--out", MODEL_SUFFIXES)
        data = input_file(args.data, "--data")
        bounds_file = optional_input_file(args.bounds, "--bounds")
        distinct([("--data", data), ("--bounds", bounds_file), ("--journal", args.journal), ("--report", report_path),
                  ("--out", model_path)])
        ledger = open_ledger(args.journal, args.accountant)
        X, y, names = load_csv(data, target=args.target, columns=args.columns)
        centres, bounds = _public_bounds(method, bounds_file, names, csv_header(data))
        ctx = FitContext(budget, ledger, args.accountant or "best", bounds, args.seed, args.sampler, centres)
        est = method.build(args, ctx)
        if model_path is not None and type(est) not in model_classes().values():
            raise ValidationError(f"--out: {type(est).__name__} models cannot be saved yet; nothing was spent")
        np.set_printoptions(precision=5, suppress=True)
        print(f"columns: {', '.join(names)}")
        context = filing(args, data)
        est.fit(X, y)
        method.show(est, names)
        if args.forecast:  # at the row count the releases made public (the DP count under add/remove); free
            print("\n" + est.record_forecast().summary() + " (at the row count the releases made public)")
        print("\n" + est.privacy_report_.summary())
        if ledger is not None and budget.delta > ledger.budget.delta:
            run = est.privacy_report_.budget.get("spent_by_run") or {}
            print(f"note: this fit asked for delta = {budget.delta:g}, more than the journal's delta = {ledger.budget.delta:g}; the "
                  f"journal states every total at its own delta, so this run was charged as eps = {run.get('epsilon', float('nan')):.4g} "
                  f"at delta = {ledger.budget.delta:g} (`privsdr ledger show` says what spent means)")
        if model_path is not None:
            from ..persistence import dumps

            text, digest = dumps(est, {"columns": names, "target": args.target, "method": method.name, "command": "privsdr fit"})
            outputs.commit("--out", text)
            print(f"wrote the model to {model_path} (digest {digest}); `privsdr transform --model {model_path} --data NEW.csv`")
        commit_report(outputs, filed(est.privacy_report_, est, context), report_path)
    return 0


def _public_bounds(method: Method, bounds_file: Any, names: list[str], header: list[str]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(centres, bounds) from --bounds: mean-covariance reads a range as a centre and a half-width (docs/errors.md),
    the other methods a bound per column; (None, None) without the file."""
    if not bounds_file:
        return None, None
    if method.name == "mean-covariance":
        return load_ranges(bounds_file, names, header)
    return None, load_bounds(bounds_file, names, header)


def _dry_run(args: argparse.Namespace, method: Method, budget: Budget) -> int:
    """The plan's price and, where the estimator has one, its accuracy forecast, from public parameters and the CSV's
    header only: no row is read, nothing is spent or written (issue 24)."""
    import csv

    if args.rows is None:
        raise ValidationError("--dry-run needs --rows N, the public number of rows (no row of --data is read)")
    data = input_file(args.data, "--data")
    with open(data, newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), [])
    names = list(args.columns) if args.columns else [h for h in header if h != args.target]
    missing = [c for c in names + ([args.target] if args.target else []) if c not in header]
    if missing or not names:
        raise ValidationError(f"columns {missing or names} are not in the header of {data} (columns: {', '.join(header)})")
    centres, bounds = _public_bounds(method, optional_input_file(args.bounds, "--bounds"), names, header)
    ledger = Ledger(budget)  # in memory: the journal (if any) is not opened, nothing is charged
    est = method.build(args, FitContext(budget, ledger, args.accountant or "best", bounds, args.seed, args.sampler, centres))
    plan = est.plan(args.rows, len(names))
    print(f"dry run: `fit {method.name}` on {args.rows} rows x {len(names)} columns ({', '.join(names)}); nothing is read or spent")
    print(f"cost: {plan.cost()}")
    if plan.forecaster is None:
        print(f"no accuracy forecast for `fit {method.name}` yet ({', '.join(FORECASTS)} have one)")
    else:
        print(plan.forecast().summary())
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fit = sub.add_parser("fit", formatter_class=FORMATTER, help="fit a method on a CSV file under a budget",
                         description="Fit METHOD on the numeric columns of a CSV (UTF-8, header row required). Public bounds "
                         "are required options, never read off the data. Every input and output is checked before any "
                         "budget is spent. Methods:\n" + "\n".join(f"  {k}: {m.summary}" for k, m in METHODS.items()) +
                         "\n\n--bounds FILE.json maps column names to a bound c (|x| <= c) or a range [lo, hi]: "
                         "{\"age\": 0.11, \"bmi\": [-0.09, 0.17]}. mean-covariance reads a range as its centre and "
                         "half-width (the noise follows the width; the mean is clamped into the range); dpsir as "
                         "|x| <= max(|lo|, |hi|).")
    fit.add_argument("method", choices=sorted(METHODS), help="the method (see above)")
    fit.add_argument("--dry-run", action="store_true",
                     help="print the plan's cost and (adassp, pls, dpsir, sparse-dpsir) its accuracy forecast on a public synthetic problem; reads "
                          "only the CSV header, spends nothing (needs --rows)")
    fit.add_argument("--rows", type=positive_int, default=None, help="--dry-run: the public number of rows")
    fit.add_argument("--forecast", action="store_true",
                     help="adassp, pls, dpsir, sparse-dpsir: after the fit, forecast its accuracy at the row count the releases made public "
                     "(the DP count under add/remove) and record it in the report beside the noise diagnostic (free)")
    fit.add_argument("--data", required=True, help="CSV file with a header row (UTF-8)")
    fit.add_argument("--target", default=None, help="response column (excluded from the features)")
    fit.add_argument("--columns", nargs="+", default=None, help="feature columns (default: all but the target)")
    fit.add_argument("--clip", type=finite_float, default=None, help="mean-covariance: public bound on each row's L2 norm")
    fit.add_argument("--bound", type=finite_float, default=None, help="dpsir, sparse-dpsir, sparse-pca: public bound on |x_ij|, the same for every column")
    fit.add_argument("--bounds", default=None, metavar="FILE.json", help="public bounds per column (see above)")
    fit.add_argument("--n-directions", type=positive_int, default=None,
                     help="dpsir, sparse-dpsir: number of directions K; sparse-pca: number of components (default 1)")
    fit.add_argument("--sparsity", type=positive_int, default=None,
                     help="sparse-dpsir, sparse-pca: s, the public number of columns the estimate may use")
    fit.add_argument("--n-slices", type=positive_int, default=None,
                     help="dpsir, sparse-dpsir: number of slices H (default 4; inferred from --cut-points)")
    fit.add_argument("--cut-points", type=finite_float, nargs="+", default=None, help="dpsir, sparse-dpsir: public slice boundaries (H-1 values)")
    fit.add_argument("--y-grid", type=finite_float, nargs=2, default=None, metavar=("LO", "HI"),
                     help="dpsir, sparse-dpsir: public range of y for a DP quantile release of the slice boundaries")
    budget_options(fit)
    fit.add_argument("--algorithm", choices=("moments", "onepass"), default=None,
                     help="dpsir: moments (default: sufficient statistics released once) or onepass (the paper's B.1 + Algorithm "
                     "2); sparse-dpsir: moments (default: a top-s selection and the moments on all rows) or onepass (the "
                     "paper's B.2 + Algorithm 3)")
    fit.add_argument("--components", default=None, help="pls: number of components A, or 'auto' (certified mode; default 2)")
    fit.add_argument("--mode", choices=("certified", "certified_iterative", "paper"), default=None,
                     help="pls: certified (S2, default), certified_iterative (S1) or paper (edPLS as published, NOT private)")
    fit.add_argument("--bound-x", type=finite_float, default=None, help="pls, adassp: public bound on ||x - x_center|| (pls: certified modes)")
    fit.add_argument("--bound-y", type=finite_float, default=None, help="pls, adassp: public bound on |y - y_center| (pls: certified modes)")
    fit.add_argument("--x-center", type=finite_float, default=None, help="pls, adassp: public centre of every column (default 0)")
    fit.add_argument("--y-center", type=finite_float, default=None, help="pls, adassp: public centre of y (default 0)")
    fit.add_argument("--centering", choices=("dp", "public"), default=None,
                     help="pls: estimate the means privately (dp, charged; default) or take the public centre as the mean")
    fit.add_argument("--allow-uncertified", action="store_true", help="run a plan without a certified guarantee (pls --mode paper)")
    fit.add_argument("--sampler", choices=("numpy", "secure"), default="numpy",
                     help="noise sampler: numpy (fast floating-point noise, default) or secure (exact discrete "
                     "Gaussian/Laplace on a public grid with OS randomness; slower; priced by its own bound)")
    fit.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default=None,
                     help="accountant (default best; with --journal, the journal's: a different one is refused)")
    fit.add_argument("--journal", default=None, help="charge this ledger journal (see `privsdr ledger init`)")
    fit.add_argument("--report", default=None, help="write the report: OUT.html, OUT.md or OUT.json (with the released "
                     "estimate, the data file's sha256 and the privacy unit in plain language)")
    purpose_option(fit)
    fit.add_argument("--out", default=None, metavar="MODEL.json", help="write the fitted model (versioned JSON; see docs/models.md)")
    fit.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    fit.set_defaults(func=_fit)
