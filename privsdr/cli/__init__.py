"""The ``privsdr`` command. ``privsdr --help`` and ``privsdr COMMAND --help`` explain each part.

One module per command (``demo``, ``fit``, ``transform``, ``ledger``, ``fsir``, ``vertical``, ``secure``, ``pride``, ``reproduce``,
``report``, ``audit``); each exposes ``add_parser(subparsers)`` and checks every input and output
before it spends anything (``_common``). ``main`` maps exceptions to one-line messages and exit
codes: 0 ok, 1 an audit or verification failed, 2 bad input, 3 refused for lack of budget (nothing
spent). A reader that closes the pipe early (``privsdr ledger show --json | head``) silences the
rest of the output; the command still finishes (and writes its files).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..errors import BudgetExceededError, PrivsdrError, UncertifiedPlanError
from . import audit, demo, fit, fsir, ledger, pride, report, reproduce, secure, transform, vertical
from ._common import EXIT_ERROR, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_REFUSED, FORMATTER, Parser

__all__ = ["EXIT_ERROR", "EXIT_FAILED", "EXIT_REFUSED", "build_parser", "main"]

COMMANDS = (demo, fit, transform, ledger, fsir, vertical, secure, pride, reproduce, report, audit)

OVERVIEW = """\
privsdr fits differentially private estimators under a declared (epsilon, delta) budget and
writes a privacy report you can file. A ledger (optionally a journal file shared by several
processes) refuses, before reading any data, a fit that would overspend.

typical session:
  privsdr ledger init budget.jsonl --epsilon 3 --delta 1e-5 --accountant best
  privsdr demo --journal budget.jsonl --report demo.html     # a DP-SIR fit on built-in data
  privsdr demo --write-data rows.csv --n 20000              # example rows to fit on (nothing spent)
  privsdr fit dpsir --data rows.csv --target y --bound 3 --y-grid -10 10 --epsilon 1 --delta 1e-6 --journal budget.jsonl --out model.json
  privsdr transform --model model.json --data new_rows.csv    # project new rows with the saved model
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


class _PipeSafeStdout:
    """stdout that turns a closed pipe into silence: the command goes on and finishes its work."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._silence()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._silence()

    def _silence(self) -> None:
        self._closed = True
        try:  # the interpreter flushes fd 1 at exit: point it at /dev/null so that flush cannot fail
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """The parser ``main`` reads with, built once per process (~20 ms): parsing does not change it (its defaults are
    constants; nothing is read from the environment until a command runs)."""
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stdout = sys.stdout
    sys.stdout = _PipeSafeStdout(stdout)
    shown = warnings.showwarning
    warnings.showwarning = _one_line_warning
    try:
        return args.func(args)
    except BudgetExceededError as exc:
        print(f"privsdr: refused, nothing spent: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM/SIGHUP where a command turns them into one (secure.launch)
        print(f"privsdr: {_one_line(exc) if str(exc) else 'interrupted'}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (PrivsdrError, ValueError, TypeError, OSError, ImportError) as exc:
        message = _one_line(exc)
        if isinstance(exc, UncertifiedPlanError):
            message = message.replace("allow_uncertified=True", "--allow-uncertified")
        print(f"privsdr: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        warnings.showwarning = shown
        try:
            sys.stdout.flush()
        finally:
            sys.stdout = stdout


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                      line: str | None = None) -> None:
    """Warnings on the command line are one line each, like errors (no source file and line)."""
    print(f"privsdr: warning: {message}", file=sys.stderr)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
