"""``privsdr ledger init|show|verify``: persistent budget journals."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..accounting import Budget, Ledger
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..accounting.journal import verify
from ..report import ledger_to_html, ledger_to_markdown
from ._common import EXIT_FAILED, Parser, budget_options


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



def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ledger = sub.add_parser("ledger", help="create, inspect and verify ledger journals")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True, metavar="ACTION", parser_class=Parser)
    init = lsub.add_parser("init", help="create a journal with a total budget")
    init.add_argument("path")
    budget_options(init, None, None)
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

