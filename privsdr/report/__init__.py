"""Privacy reports: versioned JSON, Markdown, self-contained HTML; ledger-level summaries."""
from .render import ledger_to_html, ledger_to_markdown, to_html, to_markdown
from .report import PLAIN_UNITS, SCHEMA, SCHEMA_VERSION, NodeReport, PrivacyReport, released_estimate

__all__ = ["PLAIN_UNITS", "released_estimate", "SCHEMA", "SCHEMA_VERSION", "NodeReport", "PrivacyReport", "ledger_to_html", "ledger_to_markdown", "to_html", "to_markdown"]
