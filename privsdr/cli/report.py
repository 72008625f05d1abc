"""``privsdr report X.json``: render a saved privacy report."""
from __future__ import annotations

import argparse

from ..errors import ValidationError
from ..report import PrivacyReport
from ._common import Outputs, distinct, input_file, read_text


def _report(args: argparse.Namespace) -> int:
    with Outputs() as outputs:
        html = outputs.add(args.html, "--html", (".html", ".htm"))
        markdown = outputs.add(args.markdown, "--markdown", (".md",))
        path = input_file(args.path, "report")
        distinct([("report", path), ("--html", html), ("--markdown", markdown)])
        try:
            report = PrivacyReport.from_json(read_text(path, "report"))
        except ValueError as exc:
            raise ValidationError(f"{args.path}: {exc} (render a report written with --report OUT.json)") from None
        if html is not None:
            outputs.commit("--html", report.to_html())
        if markdown is not None:
            outputs.commit("--markdown", report.to_markdown())
    if not (html or markdown):
        print(report.summary())
    for written in (html, markdown):
        if written is not None:
            print(f"wrote {written}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser("report", help="render a saved JSON privacy report")
    rep.add_argument("path", help="a report written with --report OUT.json")
    rep.add_argument("--html", default=None, help="write a self-contained HTML page")
    rep.add_argument("--markdown", default=None, help="write Markdown")
    rep.set_defaults(func=_report)
