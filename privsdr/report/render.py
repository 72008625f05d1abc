"""Human-readable renderings of privacy reports: Markdown and a self-contained HTML page.

The HTML page has no network assets: its chart (matplotlib, Agg backend) is an embedded PNG and its
style is inline. The status line comes first, then the budget, the chart of where the budget
went, the table of nodes, and the accountant totals side by side.
"""
from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: ``report`` imports this module to render itself
    from .report import PrivacyReport


def _f(x: Any, digits: int = 4) -> str:
    if isinstance(x, float):
        if math.isinf(x):
            return "∞"
        return f"{x:.{digits}g}"
    return str(x)


def _cost(c: dict[str, float] | None) -> str:
    return "n/a" if c is None else f"ε = {_f(c['epsilon'])}, δ = {_f(c['delta'], 3)}"


def composition_text(composition: dict[str, Any]) -> str:
    """Which theorem justifies a total: the kind of composition, the rule, its citation."""
    rule = str(composition.get("rule", "?"))
    if rule == "non_adaptive":
        accountant = composition.get("accountant")
        how = f" under the {accountant!r} accountant" if accountant else ""
        return f"non-adaptive{how}: {composition.get('citation', '')}"
    groups = composition.get("groups")
    across = f" across {groups} runs or batches" if groups is not None else " across runs"
    return (f"privacy filter {rule}, fully adaptive{across}: the budget holds for everything the filter admits, and "
            f"spent is the smallest target this history meets; {composition.get('citation', '')}")


def by_rule_text(composition: dict[str, Any]) -> str | None:
    """The epsilon each filter rule gives (shown when a ledger chose among several: how close the others were)."""
    by_rule = composition.get("by_rule") or {}
    if len(by_rule) < 2:
        return None
    values = ", ".join(f"{k} {_f(float(v))}" for k, v in by_rule.items())
    return f"{values} (each rule held to δ/{len(by_rule)}; ∞: the rule does not apply or its δ condition fails)"


def _composition_rows(composition: dict[str, Any] | None, label: str) -> list[tuple[str, str]]:
    if not composition:
        return []
    rows = [(label, composition_text(composition))]
    rules = by_rule_text(composition)
    if rules is not None:
        rows.append(("ε under each filter rule", rules))
    return rows


def _budget_rows(report: PrivacyReport) -> list[tuple[str, str]]:
    b = report.budget  # "run_composition" and "composition": absent from reports written before issue 15
    return [
        ("privacy unit", report.unit),
        ("ledger budget", _cost(b["total"])),
        ("this fit's budget", _cost(b["requested"])),
        ("remaining before", _cost(b["before"])),
        ("spent by this run", _cost(b["spent_by_run"])),
        *_composition_rows(b.get("run_composition"), "this run composed"),
        ("remaining after", _cost(b["after"])),
        *_composition_rows(b.get("composition"), "ledger composition after this run"),
        ("allocation", str(b.get("allocation", ""))),
    ]


NODE_HEADERS = ("node", "mechanism", "calibration", "status", "sensitivity", "noise scale", "ε (basic)", "δ", "scope", "released")


def _node_rows(report: PrivacyReport) -> list[tuple[str, ...]]:
    return [
        (
            n.name, n.mechanism + (" (secure sampler)" if n.sampler == "secure" else ""), n.calibration, n.status,
            f"{_f(n.sensitivity['value'])} ({n.sensitivity['norm']}, {n.sensitivity['relation']})",
            _f(n.noise_scale), _f(n.cost["epsilon"]), _f(n.cost["delta"], 3), n.scope, "yes" if n.released else "no",
        )
        for n in report.nodes
    ]


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


def _numbers(value: Any, limit: int = 40) -> str:
    """An estimate's numbers on one line (5 significant digits), or its shape when it has more than ``limit``."""
    flat = list(_flatten(value))
    if len(flat) > limit:
        shape = [len(value)] + ([len(value[0])] if value and isinstance(value[0], list) else [])
        return f"{' × '.join(map(str, shape))} numbers (in the JSON report)"
    return str(_round(value))


def _flatten(value: Any) -> Any:
    if isinstance(value, list):
        for v in value:
            yield from _flatten(v)
    else:
        yield value


def _round(value: Any) -> Any:
    if isinstance(value, list):
        return [_round(v) for v in value]
    return float(f"{value:.5g}") if isinstance(value, float) else value


def filing_rows(filing: dict[str, Any]) -> list[tuple[str, str]]:
    """The filing section (``PrivacyReport.with_filing``): purpose, data set, and each released estimate."""
    rows = []
    if "purpose" in filing:
        rows.append(("purpose", str(filing["purpose"])))
    if "data" in filing:
        data = filing["data"]
        digest = f" · sha256 {data['sha256']} ({data.get('note')})" if "sha256" in data else ""
        rows.append(("data set", f"{data.get('file')}{digest}"))
    rows += [(f"released: {name}", _numbers(value)) for name, value in filing.get("estimate", {}).items()]
    return rows


def to_markdown(report: PrivacyReport) -> str:
    lines = [
        f"**{report.status_line}**",
        "",
        f"# Privacy report: {report.algorithm}",
        "",
        f"privsdr {report.algorithm_version} · run `{report.run_id}` · plan `{report.plan_hash}` · relation `{report.relation}` · "
        f"accountant `{report.accountant.get('name')}`",
        "",
        "## Budget",
        "",
        _md_table(("", "value"), _budget_rows(report)),
        "",
        "## Releases",
        "",
        _md_table(NODE_HEADERS, _node_rows(report)),
        "",
        "## This run under each accountant",
        "",
        _md_table(("accountant", "composed cost"), [(k, _cost(v)) for k, v in report.totals.items()]),
        "",
        "## Parameters",
        "",
        _md_table(("public parameter", "value"), [(k, _f(v)) for k, v in report.public_parameters.items()]),
        "",
        f"Data shape: {report.data_shape if report.data_shape is not None else 'not recorded'}. Seed policy: {report.seed_policy}. "
        f"Started {report.timestamps.get('started')}, finished {report.timestamps.get('finished')}.",
    ]
    if report.diagnostics.get("messages"):
        lines += ["", "## Diagnostics (post-processing, no cost)", ""] + [f"- {t}" for t in report.diagnostics["messages"].values()]
    if report.coverage:
        lines += ["", "## What the guarantee covers", "", report.coverage]
    if report.trust_model:
        lines += ["", "## Trust model", ""] + [f"- {line}" for line in trust_lines(report.trust_model)]
    if report.model:
        lines += ["", f"Model file: `{report.model.get('format')}` digest `{report.model.get('digest')}`."]
    if report.filing:
        lines += ["", "## Filing", "", _md_table(("", "value"), filing_rows(report.filing))]
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in report.notes]
    return "\n".join(lines) + "\n"


def trust_lines(model: dict[str, Any]) -> list[str]:
    """A trust-model section (``privsdr.secure.trust``) as one sentence per line."""
    lines = [str(model.get("setting", "")),
             f"parties: {', '.join(model.get('parties', []))}; contributors: {', '.join(model.get('contributors', []))}"
             + (f"; server: {model['server']}" if model.get("server") else ""),
             f"collusion threshold t = {model.get('collusion_threshold')}"]
    lines += [f"assumption: {a}" for a in model.get("assumptions", [])]
    lines += [f"{party} sees {what}" for party, what in model.get("what_each_party_sees", {}).items()]
    lines += [f"one party's own values: {model['own_values']}"] if model.get("own_values") else []
    lines += [f"agreement: {model['agreement']}"] if model.get("agreement") else []
    lines += [f"opened: {', '.join(model.get('opened', []))}", f"noise: {model.get('noise', '')}"]
    return [line for line in lines if line]


def budget_chart_png(labels: Sequence[str], epsilons: Sequence[float], title: str) -> bytes:
    """A horizontal bar chart of epsilon per item, as PNG bytes (matplotlib, Agg)."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("HTML reports need matplotlib: pip install 'privsdr[report]'") from exc
    fig = Figure(figsize=(7.0, 0.55 * max(2, len(labels)) + 1.2), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    values = [0.0 if not math.isfinite(e) else e for e in epsilons]
    ax.barh(list(labels)[::-1], values[::-1], color="#2b6cb0")
    for y, v in enumerate(values[::-1]):
        ax.text(v, y, f" {v:.3g}", va="center", fontsize=9)
    ax.set_xlabel("ε (basic cost of each release)")
    ax.set_title(title, fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#1a202c;padding:0 1em}
.status{font-size:1.15em;font-weight:600;padding:.8em 1em;border-radius:6px;margin-bottom:1.2em}
.certified{background:#e6fffa;border-left:6px solid #2c7a7b}
.claimed{background:#fffaf0;border-left:6px solid #c05621}
.none{background:#fff5f5;border-left:6px solid #c53030}
table{border-collapse:collapse;margin:.6em 0 1.4em 0;font-size:.92em}
th,td{border:1px solid #cbd5e0;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#edf2f7}
.meta{color:#4a5568;font-size:.9em}
img{max-width:100%;border:1px solid #e2e8f0}
"""


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, status_class: str, status_line: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<div class='status {status_class}' id='status'>{html.escape(status_line)}</div>{body}</body></html>\n"
    )


def to_html(report: PrivacyReport) -> str:
    released = [n for n in report.nodes if n.released]
    png = budget_chart_png([n.name for n in released], [n.cost["epsilon"] for n in released], "Where the budget went")
    chart = f"<img id='budget-chart' alt='epsilon per release' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
    body = (
        f"<h1>Privacy report: {html.escape(report.algorithm)}</h1>"
        f"<p class='meta'>privsdr {html.escape(report.algorithm_version)} · run {html.escape(report.run_id)} · plan "
        f"{html.escape(report.plan_hash)} · relation {html.escape(report.relation)} · accountant "
        f"{html.escape(str(report.accountant.get('name')))}</p>"
        "<h2>Budget</h2>" + _html_table(("", "value"), _budget_rows(report))
        + "<h2>Where the budget went</h2>" + chart
        + f"<p class='meta'>Each bar is the basic (&epsilon;, &delta;) cost of one release on its own. Composed, the run "
        f"spent {html.escape(_cost(report.budget['spent_by_run']))} under the {html.escape(str(report.accountant.get('name')))} "
        "accountant (tight composition is sub-additive).</p>"
        + "<h2>Releases</h2>" + _html_table(NODE_HEADERS, _node_rows(report))
        + "<h2>This run under each accountant</h2>"
        + _html_table(("accountant", "composed cost"), [(k, _cost(v)) for k, v in report.totals.items()])
        + ("<h2>Diagnostics (post-processing, no cost)</h2><ul>"
           + "".join(f"<li>{html.escape(t)}</li>" for t in report.diagnostics["messages"].values()) + "</ul>"
           if report.diagnostics.get("messages") else "")
        + (f"<h2>What the guarantee covers</h2><p>{html.escape(report.coverage)}</p>" if report.coverage else "")
        + ("<h2>Trust model</h2><ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in trust_lines(report.trust_model)) + "</ul>"
           if report.trust_model else "")
        + "<h2>Public parameters</h2>"
        + _html_table(("parameter", "value"), [(k, _f(v)) for k, v in report.public_parameters.items()])
        + f"<p class='meta'>Data shape {html.escape(str(report.data_shape) if report.data_shape is not None else 'not recorded')}. Seed policy: {html.escape(report.seed_policy)}. "
        f"Started {html.escape(str(report.timestamps.get('started')))}, finished {html.escape(str(report.timestamps.get('finished')))}.</p>"
        + (f"<p class='meta'>Model file {html.escape(str(report.model.get('format')))}, digest "
           f"<code>{html.escape(str(report.model.get('digest')))}</code>.</p>" if report.model else "")
        + ("<h2>Filing</h2>" + _html_table(("", "value"), filing_rows(report.filing)) if report.filing else "")
    )
    return _page(f"privacy report — {report.algorithm}", report.status, report.status_line, body)


# -- ledger-level ------------------------------------------------------------------------------------
def _ledger_status(summary: dict[str, Any]) -> tuple[str, str]:
    statuses = [r.get("status") for r in summary["runs"] if r.get("status")]
    worst = "none" if "none" in statuses else ("claimed" if "claimed" in statuses else "certified")
    spent, total = summary["spent"], summary["budget"]
    of = ("with no total (tracking ledger)" if summary.get("tracking")
          else f"of ε = {_f(total['epsilon'])}, δ = {_f(total['delta'], 3)}")
    line = (f"LEDGER: spent ε = {_f(spent['epsilon'])}, δ = {_f(spent['delta'], 3)} {of} under the "
            f"{summary['accountant']['name']!r} accountant over {len(summary['runs'])} runs")
    composition = summary.get("composition")
    if composition:
        rule = composition.get("rule")
        line += " (non-adaptive)" if rule == "non_adaptive" else f" (privacy filter {rule})"
    if worst != "certified":
        line += f"; some runs are {worst.upper()}"
    return worst, line


RUN_HEADERS = ("run", "plan / algorithm", "status", "started", "charged / nodes", "spent by run", "closed")


def _run_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (
            r["run_id"], f"{r['plan']} / {r.get('algorithm', '?')}", r.get("status", "open" if not r["closed"] else "?"),
            r["started"], f"{r['charged']} / {r['nodes']}", _cost(r.get("spent_by_run")) if r.get("spent_by_run") else "n/a",
            (f"failed: {r.get('why', 'see the log')}" if r.get("failed") else "yes") if r["closed"] else "no (crashed or running)",
        )
        for r in summary["runs"]
    ]


def spent_meaning(summary: dict[str, Any]) -> str:
    """One sentence on what the ledger's "spent" and "remaining" mean, so that a reader can add them up (issue 25)."""
    total = summary["budget"]
    if summary.get("tracking"):
        return ("this is the process's tracking ledger (privsdr.default_ledger() with none configured): it has no total. Each fit "
                "given a budget and no ledger is entered once with its own guarantee (an add/remove fit under replace-one by "
                "group privacy: 2ε, (1 + e^ε)δ), and spent is their basic composition: the ε and the δ add up.")
    return (f"spent is the privacy loss of everything charged so far, composed by the {summary['accountant']['name']!r} "
            f"accountant and stated at the ledger's δ = {_f(total['delta'], 3)}: every total is stated at that δ (the runs' "
            f"releases are composed at it), so a run's own δ is not subtracted from it. Remaining is the ε a further run may add before the total reaches ε = "
            f"{_f(total['epsilon'])} at that δ; spent ε + remaining ε = the budget's ε.")


def _ledger_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    remaining = summary["remaining"]
    return [
        ("budget", _cost(summary["budget"])), ("spent", _cost(summary["spent"])),
        *_composition_rows(summary.get("composition"), "composition"),
        ("remaining", "no total: nothing bounds what fits without a ledger spend" if summary.get("tracking")
         else f"ε = {_f(remaining['epsilon'])} (at the ledger's δ = {_f(summary['budget']['delta'], 3)})"),
        ("what spent means", spent_meaning(summary)),
    ]


def ledger_to_markdown(summary: dict[str, Any]) -> str:
    _, line = _ledger_status(summary)
    return "\n".join([
        f"**{line}**", "", "# Ledger report", "", f"Journal: `{summary.get('journal') or 'none (in memory)'}` · relation `{summary.get('relation')}`", "",
        _md_table(("", "value"), _ledger_rows(summary)),
        "", "## Runs", "", _md_table(RUN_HEADERS, _run_rows(summary)), "",
    ])


def ledger_to_html(summary: dict[str, Any]) -> str:
    worst, line = _ledger_status(summary)
    runs = [r for r in summary["runs"] if r.get("spent_by_run")]
    body = (
        "<h1>Ledger report</h1>"
        f"<p class='meta'>Journal {html.escape(str(summary.get('journal')))} · relation {html.escape(str(summary.get('relation')))}</p>"
        + _html_table(("", "value"), _ledger_rows(summary))
    )
    if runs:
        png = budget_chart_png([r["run_id"][:8] + " " + str(r.get("algorithm", "")) for r in runs],
                               [r["spent_by_run"]["epsilon"] for r in runs], "ε spent per run (each run alone)")
        body += f"<h2>Spent per run</h2><img id='budget-chart' alt='epsilon per run' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
    body += "<h2>Runs</h2>" + _html_table(RUN_HEADERS, _run_rows(summary))
    return _page("privsdr ledger report", worst, line, body)
