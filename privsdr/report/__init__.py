"""Privacy reports: versioned JSON, Markdown, self-contained HTML; ledger-level summaries."""
from .render import ledger_to_html, ledger_to_markdown, to_html, to_markdown
from .report import SCHEMA, SCHEMA_VERSION, NodeReport, PrivacyReport

__all__ = ["SCHEMA", "SCHEMA_VERSION", "NodeReport", "PrivacyReport", "ledger_to_html", "ledger_to_markdown", "to_html", "to_markdown"]
