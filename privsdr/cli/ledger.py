"""``privsdr ledger init|show|verify|repair``: persistent budget journals."""
from __future__ import annotations

import argparse
import json

from ..accounting import Budget, Ledger
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..accounting.journal import KEY_ENV, KEY_FILE_ENV, key_from_environment, repair, verify
from ..errors import ValidationError
from ..report import ledger_to_html, ledger_to_markdown
from ..report.report import _num
from ._common import EXIT_FAILED, FORMATTER, Outputs, Parser, budget_options, check_output, distinct, input_file

KEY_HELP = (f"With {KEY_ENV} (the key) or {KEY_FILE_ENV} (a file holding it) set, new journals are HMAC-chained "
            "under that key and existing ones are checked against it.")


def _ledger_init(args: argparse.Namespace) -> int:
    path = check_output(args.path, "journal")
    if path.exists() and path.stat().st_size > 0:
        raise ValidationError(f"journal {args.path} already exists")
    ledger = Ledger.create(args.path, Budget(args.epsilon, args.delta), accountant=args.accountant, relation=args.relation)
    keyed = " (HMAC-keyed)" if key_from_environment() is not None else ""
    print(f"created {args.path}{keyed}: total budget epsilon={ledger.budget.epsilon:g}, delta={ledger.budget.delta:g}, "
          f"accountant {ledger.accountant.name}")
    return 0


def _ledger_show(args: argparse.Namespace) -> int:
    with Outputs() as outputs:
        html = outputs.add(args.html, "--html", (".html", ".htm"))
        distinct([("journal", args.path), ("--html", html)])
        summary = Ledger.open(input_file(args.path, "journal")).summary()
        if html is not None:
            outputs.commit("--html", ledger_to_html(summary))
    if args.json:
        # standard JSON: infinite values (a filter rule that does not apply) as {"$float": "inf"}, as in reports
        print(json.dumps(_num(summary), indent=2, default=str))
    else:
        print(ledger_to_markdown(summary))
    if html is not None:
        print(f"wrote the ledger report to {args.html}")
    return 0


def _ledger_verify(args: argparse.Namespace) -> int:
    input_file(args.path, "journal")
    ok, message, _ = verify(args.path)
    print(("OK: " if ok else "TAMPERED OR CORRUPT: ") + message)
    return 0 if ok else EXIT_FAILED


def _ledger_repair(args: argparse.Namespace) -> int:
    input_file(args.path, "journal")
    print(repair(args.path))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ledger = sub.add_parser("ledger", help="create, inspect, verify and repair ledger journals", formatter_class=FORMATTER,
                            description="A journal is a budget shared by every fit charged to it (append-only, fsync'd, "
                            "hash-chained, sealed, file-locked: docs/ledger.md). " + KEY_HELP)
    lsub = ledger.add_subparsers(dest="ledger_command", required=True, metavar="ACTION", parser_class=Parser)
    init = lsub.add_parser("init", help="create a journal with a total budget", description="Create a journal. " + KEY_HELP)
    init.add_argument("path", help="the journal file to create (.jsonl)")
    budget_options(init, None, None, what="the journal's total budget, shared by every fit charged to it")
    init.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default="best", help="how charges compose (default best)")
    init.add_argument("--relation", choices=("replace_one", "add_remove"), default=None,
                      help="the neighbouring relation every charge is composed under (default: the first fit's); replace_one "
                      "gives one journal for every method of a data set: add/remove plans (pls, adassp) are converted to it "
                      "with their sensitivities doubled")
    init.set_defaults(func=_ledger_init)
    show = lsub.add_parser("show", help="spent, remaining and every run of a journal")
    show.add_argument("path", help="the journal file (.jsonl)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.add_argument("--html", default=None, help="also write a ledger-level HTML report")
    show.set_defaults(func=_ledger_show)
    ver = lsub.add_parser("verify", help="check the hash chain and the sealed head (exit 1 if edited, truncated or torn)")
    ver.add_argument("path", help="the journal file (.jsonl)")
    ver.set_defaults(func=_ledger_verify)
    rep = lsub.add_parser("repair", help="remove a torn last line left by a crash; never lowers spent",
                          description="A process killed in the middle of writing a record leaves a torn last line, and the "
                          "journal is refused until it is removed. `repair` keeps the torn bytes in PATH.torn-<time>, "
                          "truncates to the last complete record (that record was never acknowledged, so no noise depends "
                          "on it) and re-seals the head. Anything else (an edit, a missing tail) is refused.")
    rep.add_argument("path", help="the journal file (.jsonl)")
    rep.set_defaults(func=_ledger_repair)
