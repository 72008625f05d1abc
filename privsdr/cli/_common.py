"""What every ``privsdr`` command shares: exit codes, one-line usage errors, budget options, outputs."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..accounting import Budget, Ledger
from ..report import PrivacyReport

EXIT_ERROR, EXIT_REFUSED, EXIT_FAILED = 2, 3, 1
FORMATTER = argparse.RawDescriptionHelpFormatter


class Parser(argparse.ArgumentParser):
    """Usage errors are one line (plus exit code 2), like every other bad-input error."""

    def error(self, message: str) -> "None":  # type: ignore[override]
        self.exit(EXIT_ERROR, f"privsdr: error: {self.prog}: {message} (see --help)\n")


def budget_options(p: argparse.ArgumentParser, epsilon: float | None = 1.0, delta: float | None = 1e-6) -> None:
    p.add_argument("--epsilon", type=float, default=epsilon, required=epsilon is None, help=f"epsilon of this fit (default {epsilon})")
    p.add_argument("--delta", type=float, default=delta, required=delta is None, help=f"delta of this fit (default {delta})")



def ledger_for(args: argparse.Namespace, budget: Budget) -> Ledger | None:
    return Ledger.open(args.journal) if getattr(args, "journal", None) else None


def write_report(report: PrivacyReport, out: str | None) -> None:
    if not out:
        return
    suffix = Path(out).suffix.lower()
    text = report.to_html() if suffix in (".html", ".htm") else report.to_markdown() if suffix == ".md" else report.to_json()
    Path(out).write_text(text)
    print(f"wrote the privacy report to {out}")
