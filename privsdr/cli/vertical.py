"""``privsdr vertical config|party|fit``: DP-BCD among parties that hold different columns of the same people."""
from __future__ import annotations

import argparse
from typing import Any

import attrs

from ..accounting import Budget
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..errors import ValidationError
from ._common import FORMATTER, REPORT_SUFFIXES, Outputs, Parser, commit_report, filed, filing
from ._parties import (
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

SHARED = "privsdr.vertical-run"


def _bounds(values: list[str] | None) -> Any:
    """``3.0`` for every party, or ``alice=3 bob=2.5``."""
    if not values:
        return None
    if len(values) == 1 and "=" not in values[0]:
        return float(values[0])
    out = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValidationError(f"give one number for every party or NAME=VALUE pairs, got {item!r}")
        out[name] = float(value)
    return out


def _config_from_args(args: argparse.Namespace) -> Any:
    from ..vertical import DPBCDConfig

    return DPBCDConfig(mode=args.mode, n_rounds=args.rounds, gamma=args.gamma, abort_check=args.abort_check, accounting=args.accounting,
                       noise=args.noise, xi_floor=args.xi_floor, row_bound=_bounds(args.row_bound), label_bound=args.label_bound,
                       coef_bound=_bounds(args.coef_bound), ridge=args.ridge, remainder_clip=args.remainder_clip,
                       shrinkage=args.shrinkage, y_center=args.y_center, dp_intercept=not args.no_intercept)


def _budget(mode: str, epsilon: float | None, delta: float | None) -> Budget:
    if mode == "none":
        return Budget.infinite()
    if epsilon is None:
        raise ValidationError("--epsilon is required (the per-record total over every party's releases)")
    return Budget(epsilon, 0.0 if mode == "paper" else (delta if delta is not None else 1e-6))


def _layout(specs: list[str], rows: int, label: str) -> Any:
    from ..vertical import Layout, PartyInfo

    parties = []
    for item in specs:
        name, sep, width = item.partition("=")
        if not sep:
            raise ValidationError(f"--party takes NAME=N_COLUMNS, got {item!r}")
        parties.append(PartyInfo(name, int(width), name == label))
    if label not in [p.name for p in parties]:
        raise ValidationError(f"--label {label!r} is not one of the parties")
    return Layout(int(rows), tuple(parties))


def _config(args: argparse.Namespace) -> int:
    layout = _layout(args.party, args.rows, args.label) if args.party else None
    if args.secure:
        from . import vertical_secure

        vertical_secure.write_config(args, _bounds(args.row_bound), _budget("certified", args.epsilon, args.delta), layout)
        return 0
    config = _config_from_args(args)
    budget = _budget(args.mode, args.epsilon, args.delta)
    addresses, tls = configured_addresses(args, layout)
    write_shared(args.out, SHARED, config, args.accountant, budget, layout, addresses, tls)
    print(f"wrote {args.out}: give it to every party (mode {config.mode}, T = {config.n_rounds}{network_note(addresses, tls, layout)})")
    return 0


def _read_shared(path: str) -> tuple[Any, Budget, str, Any]:
    from ..vertical import DPBCDConfig

    return read_shared(path, SHARED, DPBCDConfig, "vertical")


def _party(args: argparse.Namespace) -> int:
    from ..vertical import DPBCDProtocol, format_revealed
    from ..vertical.dpbcd import diagnosed

    if args.secure:
        from . import vertical_secure

        return vertical_secure.party(args, args.name, True)
    config, budget, accountant, layout = _read_shared(args.config)
    if layout is None:
        raise ValidationError("the configuration has no layout: write it with `privsdr vertical config ... --party NAME=N ... --rows N --label NAME`")
    with Outputs() as outputs:  # a bad --report is refused before anything is charged
        report_path = outputs.add(args.report, "--report", REPORT_SUFFIXES)
        context = filing(args, args.data)
        party, outcome = play_party(args, DPBCDProtocol(config), layout, budget, accountant, SHARED)
        revealed = sent_by_party(outcome, lambda m: m.report.status if m.report_json else "post-processing")
        report = diagnosed({args.name: outcome.report}, outcome.result)[args.name]
        if not args.json:
            print(report.summary())
            print("\nwhat this party sent:\n" + format_revealed(revealed))
            print("\npublished coefficients:")
        print_coefficients(layout, dict(outcome.result.coef_blocks), args.json,
                           {"party": args.name, "report": report.to_dict(), **model_extras(outcome.result)}, party)
        print_noise(outcome.result, args.json)
        estimate = {f"coef_ ({name})": block for name, block in outcome.result.coef_blocks.items()}
        commit_report(outputs, filed(report, {**estimate, "intercept_": outcome.result.intercept}, context),
                      report_path, json_output=args.json)
    return 0


def _fit(args: argparse.Namespace) -> int:
    from ..vertical import DPBCDProtocol, run_protocol
    from ..vertical.dpbcd import diagnosed

    if args.secure:
        from . import vertical_secure

        return vertical_secure.fit(args)
    config, budget, accountant, _ = _read_shared(args.config)
    parties = load_parties(args.data, args.target)
    outcome = run_protocol(DPBCDProtocol(config), parties, budget, accountant=accountant, random_state=args.seed,
                           allow_uncertified=args.allow_uncertified)
    print_simulated_run(outcome, args.json)
    if not args.json:
        print("\npublished coefficients:")
    print_coefficients(outcome.layout, dict(outcome.result.coef_blocks), args.json, {"privacy": outcome.privacy, **model_extras(outcome.result)})
    print_noise(outcome.result, args.json)
    write_run_reports(args.report_dir, attrs.evolve(outcome, reports=diagnosed(outcome.reports, outcome.result)))
    return 0


def model_extras(result: Any) -> dict[str, Any]:
    return {"intercept": result.intercept, "noise_ratio": result.noise_ratio}


def print_noise(result: Any, as_json: bool) -> None:
    """The intercept and the certified fit's noise diagnostic (stdout) and, when the noise wins, the warning (stderr)."""
    if not as_json:
        print(f"intercept: {result.intercept:.6g}")
    if result.noise_ratio is None:
        return
    from ..released import regression

    if not as_json:
        print("\n" + regression.noise_message(result.noise_ratio))
    regression.warn_if_noise_wins(result.noise_ratio, stacklevel=2,
                                  fallback=regression.ZEROED_NOTE if getattr(result, "fell_back", False) else None)


def _protocol_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("certified", "paper", "none"), default="certified",
                   help="certified (default: DP with public bounds), paper (Algorithm 2 as published: claimed), none (not private)")
    p.add_argument("--rounds", type=int, default=5, help="T, rounds of BCD (default 5)")
    p.add_argument("--epsilon", type=float, default=None, help="per-record total over every party's releases")
    p.add_argument("--delta", type=float, default=None, help="certified: delta (default 1e-6); paper mode uses 0")
    p.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best", help="accountant of every party's ledger (default best)")
    p.add_argument("--row-bound", nargs="+", default=None, help="certified: public bound C_i on each row of a block (one value or NAME=VALUE ...)")
    p.add_argument("--label-bound", type=float, default=None, help="certified: public bound C_y on |y|")
    p.add_argument("--coef-bound", nargs="+", default=None, help="certified: public bound B_i on each increment (one value or NAME=VALUE ...)")
    p.add_argument("--ridge", type=float, default=0.0, help="certified/none: ridge lambda (default 0)")
    p.add_argument("--remainder-clip", type=float, default=4.0, help="certified: kappa of the remainder clip (default 4)")
    p.add_argument("--shrinkage", choices=("james_stein", "none"), default="james_stein",
                   help="certified: shrink each step by the share of it its released noise explains, dropping steps of noise "
                        "alone (default james_stein), or keep every step (none)")
    p.add_argument("--no-intercept", action="store_true",
                   help="certified: no DP intercept (default: the label holder releases its clipped label sum once, and the "
                        "trivial model predicts the DP mean)")
    p.add_argument("--gamma", type=float, default=1.2, help="paper: utility tolerance gamma > 1 (default 1.2)")
    p.add_argument("--abort-check", choices=("both", "post", "gamma_min", "none"), default="both",
                   help="paper mode: which of the paper's abort rules run (default both; none for reproductions)")
    p.add_argument("--accounting", choices=("conservative", "paper"), default="conservative",
                   help="paper mode: conservative (default: half the budget for revealing the coefficients) or paper (not charged)")
    p.add_argument("--noise", choices=("radial", "gaussian"), default="radial",
                   help="paper mode: the objective perturbation's distribution (default radial, as published)")
    p.add_argument("--xi-floor", type=float, default=None, help="paper: public floor for xi when a residual is 0 (spec A9)")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    vert = sub.add_parser("vertical", formatter_class=FORMATTER,
                          help="regression among parties holding different columns of the same rows (secure Gram or DP-BCD)",
                          description="Parties hold column blocks of the same N aligned rows (one also holds y). Two estimators:\n"
                          "  --secure  X^T X and X^T y computed inside a secure computation (MPyC) and released once with central "
                          "noise, then ridge (AdaSSP's rule) or PLS: as accurate as DP regression on the pooled rows; needs an honest "
                          "majority (two data parties run a helper: `vertical helper`).\n"
                          "  DP-BCD    (default) block coordinate descent, each party noising its own messages: no secure computation, "
                          "the local price of privacy.\n"
                          "Which one to use: docs/vertical.md, 'Which estimator for vertically partitioned data?'.\n"
                          "`vertical config` writes the shared public configuration; `vertical party` runs one party from its own CSV "
                          "(DP-BCD: messages through a shared folder, or over mutual TLS with config --addresses; --secure: its own MPyC process at its address, mutual TLS); `vertical fit` "
                          "runs all parties on this machine.")
    vsub = vert.add_subparsers(dest="vertical_command", required=True, metavar="ACTION", parser_class=Parser)
    conf = vsub.add_parser("config", help="write the shared configuration (protocol, budget, layout)")
    conf.add_argument("out", help="the configuration file to write (.json)")
    _protocol_options(conf)
    conf.add_argument("--party", nargs="+", default=None, help="the layout for `vertical party`: NAME=N_COLUMNS in protocol order")
    conf.add_argument("--rows", type=int, default=None, help="N, the number of aligned rows (public)")
    conf.add_argument("--label", default=None, help="the party that holds y")
    from .vertical_secure import add_config_options, add_helper

    add_config_options(conf)
    conf.set_defaults(func=_config)
    party, fit = add_party_and_fit(vsub, _party, _fit, party_target_help="the label column (only in the label holder's CSV)",
                                   fit_target_help="the label column (in exactly one party's CSV)",
                                   allow_help="run paper/none mode (claimed or no guarantee)")
    for p in (party, fit):
        p.add_argument("--secure", action="store_true",
                       help="the configuration is a --secure one: X^T X and X^T y inside MPyC, one process per party at its address")
    fit.add_argument("--certs", default=None, metavar="DIR",
                     help="--secure with TLS: the folder `privsdr secure keys` wrote (default a CA made for the run, on loopback only)")
    add_helper(vsub)
    from .vertical_link import add_link

    add_link(vsub)
