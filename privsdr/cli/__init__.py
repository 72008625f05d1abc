"""The ``privsdr`` command. ``privsdr --help`` and ``privsdr COMMAND --help`` explain each part.

One module per command (``demo``, ``fit``, ``ledger``, ``fsir``, ``vertical``, ``reproduce``, ``report``,
``audit``); each exposes ``add_parser(subparsers)``. ``main`` maps exceptions to exit codes:
0 ok, 1 an audit or verification failed, 2 bad input, 3 refused for lack of budget (nothing spent).
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .. import __version__
from ..errors import BudgetExceededError, PrivsdrError
from . import audit, demo, fit, fsir, ledger, report, reproduce, vertical
from ._common import EXIT_ERROR, EXIT_FAILED, EXIT_REFUSED, FORMATTER, Parser

__all__ = ["EXIT_ERROR", "EXIT_FAILED", "EXIT_REFUSED", "build_parser", "main"]

COMMANDS = (demo, fit, ledger, fsir, vertical, reproduce, report, audit)

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



def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="privsdr", description=OVERVIEW, formatter_class=FORMATTER)
    parser.add_argument("--version", action="version", version=f"privsdr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
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


