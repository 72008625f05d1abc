"""``privsdr report X.json``: render a saved privacy report."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..report import PrivacyReport


def _report(args: argparse.Namespace) -> int:
    report = PrivacyReport.from_json(Path(args.path).read_text())
    if not (args.html or args.markdown):
        print(report.summary())
    if args.html:
        Path(args.html).write_text(report.to_html())
        print(f"wrote {args.html}")
    if args.markdown:
        Path(args.markdown).write_text(report.to_markdown())
        print(f"wrote {args.markdown}")
    return 0



def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser("report", help="render a saved JSON privacy report")
    rep.add_argument("path", help="a report written with --report OUT.json")
    rep.add_argument("--html", default=None, help="write a self-contained HTML page")
    rep.add_argument("--markdown", default=None, help="write Markdown")
    rep.set_defaults(func=_report)

