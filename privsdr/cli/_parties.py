"""What ``privsdr vertical`` and ``privsdr pride`` share: the public configuration file every party gets,
each party's CSV, what a party sent, coefficients, and the per-party reports of a simulated run.

Contract: the configuration file is ``{"format", "config", "accountant", "budget", "layout"}`` with a
protocol-specific ``format`` tag; reading it refuses anything else with one clear line.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .._json import parse_json
from ..accounting import Budget
from ..datasets import load_csv
from ..errors import ValidationError
from ._common import positive_float, purpose_option, write_report


def write_shared(path: str, tag: str, config: Any, accountant: str, budget: Budget, layout: Any) -> None:
    shared = {"format": tag, "config": json.loads(config.to_json()), "accountant": accountant,
              "budget": None if budget.is_infinite else {"epsilon": budget.epsilon, "delta": budget.delta},
              "layout": None if layout is None else layout.to_dict()}
    Path(path).write_text(json.dumps(shared, indent=2))


def read_tagged(path: str, tag: str, what: str, hint: str = "") -> dict[str, Any]:
    """The JSON object of a configuration file whose ``format`` is ``tag``; one clear line for anything else."""
    try:
        shared = parse_json(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError(f"not a privsdr {what} configuration: {exc}") from None
    if not isinstance(shared, dict) or shared.get("format") != tag:
        raise ValidationError(f"{path} is not a privsdr {what} configuration{hint}")
    return shared


def read_shared(path: str, tag: str, config_class: Any, what: str, hint: str = "") -> tuple[Any, Budget, str, Any]:
    """(config, budget, accountant, layout or None) of a file written by ``write_shared`` with ``tag``."""
    from ..vertical import Layout

    shared = read_tagged(path, tag, what, hint)
    config = config_class.from_json(json.dumps(shared["config"]))
    budget = Budget.infinite() if shared["budget"] is None else Budget(shared["budget"]["epsilon"], shared["budget"]["delta"])
    layout = None if shared.get("layout") is None else Layout.from_dict(shared["layout"])
    return config, budget, shared.get("accountant", "best"), layout


def _has_column(path: str, column: str | None) -> bool:
    if column is None:
        return False
    with open(path, newline="") as fh:
        header = next(csv.reader(fh), [])
    return column in [h.strip() for h in header]


def load_party(name: str, path: str, target: str | None, columns: list[str] | None = None) -> Any:
    """One party from its CSV; it holds y when its header has the ``target`` column."""
    from ..vertical import Party

    label = target if _has_column(path, target) else None
    X, y, names = load_csv(path, target=label, columns=columns)
    return Party(name, X, y, names)


def load_parties(items: list[str], target: str | None) -> list[Any]:
    """The parties of ``--data NAME=FILE.csv ...``, in protocol order."""
    parties = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            raise ValidationError(f"--data takes NAME=FILE.csv, got {item!r}")
        parties.append(load_party(name, path, target))
    return parties


def sent_by_party(outcome: Any, status: Any) -> dict[str, Any]:
    """What one party's run sent, in the shape ``format_revealed`` prints; ``status(message)`` labels each."""
    from ..vertical import revealed_entry

    return {"revealed": [revealed_entry(m, status(m)) for m in outcome.sent]}


def print_coefficients(layout: Any, coef_blocks: dict[str, np.ndarray], as_json: bool, extra: dict[str, Any],
                       own: Any = None) -> None:
    if as_json:
        print(json.dumps({"coefficients": {k: v.tolist() for k, v in coef_blocks.items()}, **extra}, indent=2, default=str))
        return
    for info in layout.parties:
        names = (own.columns if own is not None and own.name == info.name else None) or info.columns or [f"x{j}" for j in range(info.n_columns)]
        print(f"{info.name}:")
        for col, value in zip(names, coef_blocks[info.name], strict=True):
            print(f"  {col:<24} {value: .6g}")


def write_run_reports(report_dir: str | None, outcome: Any) -> None:
    """One privacy report per party and ``protocol.json`` (what each revealed to whom) in ``report_dir``."""
    if not report_dir:
        return
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, report in outcome.reports.items():
        write_report(report, str(out / f"{name}.html"))
    (out / "protocol.json").write_text(json.dumps(outcome.privacy, indent=2, default=str))


def print_simulated_run(outcome: Any, as_json: bool) -> None:
    """The per-record line, what each party revealed to whom and each party's status (not with --json)."""
    from ..vertical import format_revealed, per_record_line

    if as_json:
        return
    print(per_record_line(outcome.privacy))
    print("\nwhat each party revealed to whom:\n" + format_revealed(outcome.privacy))
    for name, report in outcome.reports.items():
        print(f"\n[{name}] {report.status_line}")



def play_party(args: argparse.Namespace, protocol: Any, layout: Any, budget: Budget, accountant: str) -> tuple[Any, Any]:
    """``party`` of a mailbox protocol: this party's CSV and journal, then its side of the run (``run_party``, with
    ``--timeout`` and progress lines on stderr, so that --json stays clean). Returns (party, outcome)."""
    from ..accounting import Ledger
    from ..parties.party_process import post_abort
    from ..vertical import run_party

    try:
        party = load_party(args.name, args.data, args.target, args.columns)
        ledger = Ledger.open(args.journal) if args.journal else None
    except Exception as exc:  # the others would wait for this party until their timeout
        post_abort(args.mailbox, protocol, layout, args.name, exc)
        raise
    outcome = run_party(protocol, party, layout, budget, args.mailbox, ledger=ledger, accountant=accountant,
                        allow_uncertified=args.allow_uncertified, timeout=args.timeout,
                        progress=lambda line: print(f"[{args.name}] {line}", file=sys.stderr, flush=True))
    return party, outcome


def add_party_and_fit(sub: Any, party_fn: Any, fit_fn: Any, *, party_target_help: str, fit_target_help: str,
                      allow_help: str, mailbox_required: bool = True) -> tuple[Any, Any]:
    """The ``party`` and ``fit`` actions every vertical protocol command has (their options only differ in help)."""
    party = sub.add_parser("party", help="run one party from its own CSV (messages through --mailbox)")
    party.add_argument("--config", required=True, help="the shared configuration (from `config`)")
    party.add_argument("--name", required=True, help="this party's name in the layout")
    party.add_argument("--data", required=True, help="this party's CSV (header row; the same rows in the same order as the others')")
    party.add_argument("--target", default=None, help=party_target_help)
    party.add_argument("--columns", nargs="+", default=None, help="this party's feature columns (default: the layout's)")
    party.add_argument("--mailbox", required=mailbox_required, default=None, help="a folder every party can read and write")
    party.add_argument("--journal", default=None, help="charge this party's ledger journal")
    party.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                       help="seconds to wait for any one message of the other parties before aborting the run for everyone "
                       "(default 300; with --secure the configuration's timeout applies)")
    party.add_argument("--report", default=None, help="write this party's privacy report (.html, .md or .json), with its "
                       "estimate, its data file's sha256 and the privacy unit in plain language")
    purpose_option(party)
    party.add_argument("--allow-uncertified", action="store_true", help=allow_help)
    party.add_argument("--json", action="store_true", help="print the result as JSON")
    party.set_defaults(func=party_fn)
    fit = sub.add_parser("fit", help="simulate every party in one process, each from its own CSV")
    fit.add_argument("--config", required=True, help="the shared configuration (from `config`)")
    fit.add_argument("--data", nargs="+", required=True, help="NAME=FILE.csv per party, in protocol order")
    fit.add_argument("--target", required=True, help=fit_target_help)
    fit.add_argument("--report-dir", default=None, help="write one privacy report per party and protocol.json here")
    fit.add_argument("--allow-uncertified", action="store_true", help=allow_help)
    fit.add_argument("--json", action="store_true", help="print the result as JSON")
    fit.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    fit.set_defaults(func=fit_fn)
    return party, fit
