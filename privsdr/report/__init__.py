"""Privacy reports (versioned JSON; Markdown/HTML rendering arrives with the report issue)."""
from .report import SCHEMA, SCHEMA_VERSION, NodeReport, PrivacyReport

__all__ = ["SCHEMA", "SCHEMA_VERSION", "NodeReport", "PrivacyReport"]
