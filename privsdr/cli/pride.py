"""``privsdr pride config|party|fit``: PRIDE among parties that hold different columns of the same people.

``config`` writes the shared public configuration (protocol, budget, layout); ``party`` runs one party
from its own CSV, exchanging messages with the others through a shared folder or, when the configuration has
``--addresses``, over mutual TLS (``run_party``);
``fit`` simulates every party in one process. A party whose CSV has the ``--target`` column holds y
and estimates its coefficients; the others only send their sketch.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import attrs

from .._json import parse_json
from ..accounting import Budget
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..errors import ValidationError
from ._common import FORMATTER, REPORT_SUFFIXES, Outputs, Parser, commit_report, filed, filing
from ._parties import (
    add_network_options,
    add_party_and_fit,
    configured_addresses,
    load_parties,
    network_note,
    play_party,
    print_coefficients,
    print_simulated_run,
    read_shared,
    sent_by_party,
    write_run_reports,
    write_shared,
)

SHARED = "privsdr.pride-run"


def _parse_bounds(values: list[str] | None) -> Any:
    """``LO HI`` for every column of every party, or ``alice=LO:HI bob=LO:HI``, or ``@FILE.json``
    ({party: {"lo": [...], "hi": [...]}} with one number per column)."""
    if not values:
        return None
    if len(values) == 1 and values[0].startswith("@"):
        try:
            return parse_json(Path(values[0][1:]).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValidationError(f"--bounds {values[0]}: {exc}") from None
    if len(values) == 2 and all("=" not in v for v in values):
        return (float(values[0]), float(values[1]))
    out = {}
    for item in values:
        name, sep, rng = item.partition("=")
        lo, colon, hi = rng.partition(":")
        if not sep or not colon:
            raise ValidationError(f"--bounds takes LO HI, NAME=LO:HI ... or @FILE.json, got {item!r}")
        out[name] = (float(lo), float(hi))
    return out


def _sketch_dim(value: str) -> Any:
    if value == "full":
        return "full"
    number = float(value)
    return int(number) if number >= 1 and number == int(number) else number


def _config_from_args(args: argparse.Namespace) -> Any:
    from ..vertical import PRIDEConfig

    return PRIDEConfig(mode=args.mode, sketch_dim=_sketch_dim(args.sketch_dim), relation=args.relation, calibration=args.calibration,
                       bounds=_parse_bounds(args.bounds), lam=args.lam, cv=args.cv, lambdas=args.lambdas, n_folds=args.n_folds,
                       loss_scale=args.loss_scale, bias_correction=args.bias_correction, shrinkage=args.shrinkage,
                       sketch_seed=args.sketch_seed)


def _budget(mode: str, epsilon: float | None, delta: float | None) -> Budget:
    if mode == "none":
        return Budget.infinite()
    if epsilon is None:
        raise ValidationError("--epsilon is required (every party's sketch is (epsilon, delta)-DP under the entry relation)")
    return Budget(epsilon, delta if delta is not None else (0.05 if mode == "paper" else 1e-6))


def _layout(specs: list[str], rows: int | None, labels: list[str] | None) -> Any:
    from ..vertical import Layout, PartyInfo

    if rows is None:
        raise ValidationError("--rows N is required with --party (the number of aligned rows, public)")
    named = []
    for item in specs:
        name, sep, width = item.partition("=")
        if not sep:
            raise ValidationError(f"--party takes NAME=N_COLUMNS, got {item!r}")
        named.append((name, int(width)))
    holders = set(labels) if labels else {name for name, _ in named}
    unknown = sorted(holders - {name for name, _ in named})
    if unknown:
        raise ValidationError(f"--label names unknown parties {unknown}")
    return Layout(int(rows), tuple(PartyInfo(name, width, name in holders) for name, width in named))


def _config(args: argparse.Namespace) -> int:
    from ..vertical import PRIDEProtocol

    config = _config_from_args(args)
    budget = _budget(args.mode, args.epsilon, args.delta)
    layout = _layout(args.party, args.rows, args.label) if args.party else None
    if layout is not None:
        PRIDEProtocol(config).build_plan(layout, budget)  # every public rule checked now, not at the parties
    addresses, tls = configured_addresses(args, layout)
    write_shared(args.out, SHARED, config, args.accountant, budget, layout, addresses, tls)
    print(f"wrote {args.out}: give it to every party (mode {config.mode}, relation {config.relation}, cv {config.cv_mode}"
          f"{network_note(addresses, tls, layout)})")
    return 0


def _read_shared(path: str) -> tuple[Any, Budget, str, Any]:
    from ..vertical import PRIDEConfig

    return read_shared(path, SHARED, PRIDEConfig, "PRIDE", " (write one with `privsdr pride config`)")


def _estimates(result: Any, as_json: bool, layout: Any, extra: dict[str, Any], own: Any = None) -> None:
    blocks = {k: v for k, v in result.coef_blocks.items()}
    if as_json:
        print(json.dumps({"coefficients": {k: v.tolist() for k, v in blocks.items()}, "lambda": dict(result.lambdas),
                          "noise_sd": dict(result.noise_sd), "held_out_p": dict(result.held_out_p),
                          "held_out_gain": dict(result.held_out_gain), "fell_back": dict(result.trivial), **extra}, indent=2, default=str))
        return
    if not blocks:
        print("this party holds no y: it only sent its sketch")
        return
    shown = type(layout)(layout.n_rows, tuple(p for p in layout.parties if p.name in blocks))
    print_coefficients(shown, blocks, False, {}, own)
    print("lambda: " + ", ".join(f"{k} {v:.4g}" for k, v in result.lambdas.items()))
    for name, p_value in result.held_out_p.items():
        fell_back = "  -> coefficients set to 0" if result.trivial.get(name) else ""
        print(f"held-out test ({name}): one-sided p = {p_value:.2g}, gain {result.held_out_gain[name]:.3g} of var(y){fell_back}")


def _party(args: argparse.Namespace) -> int:
    from ..vertical import PRIDEProtocol, format_revealed
    from ..vertical.pride import fallback_diagnosed, warn_if_fell_back

    config, budget, accountant, layout = _read_shared(args.config)
    if layout is None:
        raise ValidationError("the configuration has no layout: write it with `privsdr pride config ... --party NAME=N ... --rows N`")
    with Outputs() as outputs:  # a bad --report is refused before anything is charged
        report_path = outputs.add(args.report, "--report", REPORT_SUFFIXES)
        context = filing(args, args.data)
        party, outcome = play_party(args, PRIDEProtocol(config), layout, budget, accountant, SHARED)
        revealed = sent_by_party(outcome, lambda m: m.meta.get("status") or (m.report.status if m.report_json else "post-processing"))
        if not args.json:
            print(outcome.report.summary())
            print("\nwhat this party sent:\n" + format_revealed(revealed))
            print("\nthis party's estimate (never sent):")
        report = fallback_diagnosed({args.name: outcome.report}, outcome.result)[args.name]
        _estimates(outcome.result, args.json, layout, {"party": args.name, "report": report.to_dict()}, party)
        warn_if_fell_back(outcome.result)
        own = {f"coef_ ({name}, never sent)": block for name, block in outcome.result.coef_blocks.items()}
        commit_report(outputs, filed(report, own, context), report_path, json_output=args.json)
    return 0


def _fit(args: argparse.Namespace) -> int:
    from ..vertical import PRIDEProtocol, run_protocol
    from ..vertical.pride import fallback_diagnosed, warn_if_fell_back

    config, budget, accountant, _ = _read_shared(args.config)
    parties = load_parties(args.data, args.target)
    outcome = run_protocol(PRIDEProtocol(config), parties, budget, accountant=accountant, random_state=args.seed,
                           allow_uncertified=args.allow_uncertified)
    print_simulated_run(outcome, args.json)
    if not args.json:
        print("\neach estimating party's coefficients (each computed by its owner, never sent):")
    _estimates(outcome.result, args.json, outcome.layout, {"privacy": outcome.privacy})
    warn_if_fell_back(outcome.result)
    write_run_reports(args.report_dir, attrs.evolve(outcome, reports=fallback_diagnosed(outcome.reports, outcome.result)))
    return 0


def _protocol_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("certified", "paper", "none"), default="certified",
                   help="certified (default: public column ranges), paper (theta read off the data: claimed), none (DUAL-LOCO)")
    p.add_argument("--epsilon", type=float, default=None, help="each party's sketch is (epsilon, delta)-DP (entry relation)")
    p.add_argument("--delta", type=float, default=None, help="default 1e-6 (paper mode: 0.05, the paper's)")
    p.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best", help="accountant of every party's ledger (default best)")
    p.add_argument("--bounds", nargs="+", default=None,
                   help="certified: public column ranges: LO HI (every column), NAME=LO:HI ..., or @FILE.json (one range per column)")
    p.add_argument("--sketch-dim", default="0.2", help="tau_subs: a fraction of each block's width, an integer, or 'full' (default 0.2)")
    p.add_argument("--relation", choices=("entry", "row"), default="entry", help="entry: S-DP (default); row: one person's whole row")
    p.add_argument("--calibration", choices=("analytic", "kenthapadi"), default=None,
                   help="default: analytic (certified), kenthapadi (paper)")
    p.add_argument("--lam", type=float, default=None, help="a fixed ridge lambda (otherwise chosen by --cv)")
    p.add_argument("--cv", choices=("local", "global"), default=None,
                   help="local (default without --lam): each party on its own view, free; global: held-out predictions are "
                   "exchanged (not private, needs --allow-uncertified)")
    p.add_argument("--lambdas", type=float, nargs="+", default=None, help="the CV grid (default: a log grid)")
    p.add_argument("--n-folds", type=int, default=5, help="folds of the cross-validation of lambda (default 5, public folds)")
    p.add_argument("--loss-scale", choices=("half", "paper_eq1"), default="half",
                   help="half: the 1/2-squared loss, alpha = n lambda (default); paper_eq1: the reference code's n lambda / 2")
    p.add_argument("--bias-correction", action=argparse.BooleanOptionalAction, default=None,
                   help="the errors-in-variables correction (A9.2, beyond the paper); default: on in certified mode, off in "
                   "the paper's modes")
    p.add_argument("--shrinkage", choices=("held_out", "none"), default="held_out",
                   help="certified local CV: held_out (default) sets a party's coefficients to 0 when its held-out errors "
                   "cannot tell its part of the prediction from the mean of y (and warns); none")
    p.add_argument("--sketch-seed", type=int, default=0, help="public seed of the parties' SRHTs (default 0)")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pride = sub.add_parser("pride", formatter_class=FORMATTER,
                           help="PRIDE ridge regression among parties holding different columns of the same rows",
                           description="Parties hold column blocks of the same N aligned rows. Each sends one perturbed random sketch "
                           "of its block to the others (S-DP: one attribute value of one person is protected); each party that holds "
                           "y fits ridge on its own columns plus the others' sketches and keeps its own coefficients. `pride config` "
                           "writes the shared public configuration; `pride party` runs one party from its own CSV through a shared "
                           "folder (or over mutual TLS with config --addresses); `pride fit` simulates all parties in one process.")
    psub = pride.add_subparsers(dest="pride_command", required=True, metavar="ACTION", parser_class=Parser)
    conf = psub.add_parser("config", help="write the shared configuration (protocol, budget, layout)")
    conf.add_argument("out", help="the configuration file to write (.json)")
    _protocol_options(conf)
    conf.add_argument("--party", nargs="+", default=None, help="the layout for `pride party`: NAME=N_COLUMNS in protocol order")
    conf.add_argument("--rows", type=int, default=None, help="N, the number of aligned rows (public)")
    conf.add_argument("--label", nargs="+", default=None, help="the parties that hold y (default: all)")
    add_network_options(conf)
    conf.set_defaults(func=_config)
    add_party_and_fit(psub, _party, _fit, party_target_help="the label column (in the CSV of every party that holds y)",
                      fit_target_help="the label column (in the CSV of every party that holds y)",
                      allow_help="run paper/none mode or global CV (claimed or no guarantee)")
