"""Reproductions of the papers' tables: ``privsdr reproduce --list``."""
from . import dpsir_tables

REPRODUCTIONS = {name: (dpsir_tables, title) for name, (_, _, title) in dpsir_tables.TABLES.items()}

__all__ = ["REPRODUCTIONS", "dpsir_tables"]
