"""Linkage of CSV files: read a party's table, link it by its identifier column, write its rows in the common order.

The output has the same columns without the identifier column, the linked rows in the common order, every value
copied as written (no number is parsed or rounded): it is the ``--data`` of ``privsdr vertical party --secure``
(or a ``Party`` of ``SecureVerticalRegression``), and N is its number of rows.
"""
from __future__ import annotations

import csv
import io
import ssl
from dataclasses import dataclass
from pathlib import Path

from .._io import PendingFile
from ..errors import ValidationError
from .normalise import normalise_ids
from .psi import Linkage, LinkageConfig, link
from .refusal import tell_others


@dataclass(frozen=True)
class Table:
    """A CSV as strings: its header and its data rows."""

    header: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> list[str]:
        if name not in self.header:
            raise ValidationError(f"no identifier column {name!r}; the columns are {self.header}")
        j = self.header.index(name)
        return [row[j] for row in self.rows]

    def without(self, name: str, order: list[int]) -> str:
        """The CSV text of the rows ``order`` (in that order), without the column ``name``."""
        j = self.header.index(name)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.header[:j] + self.header[j + 1:])
        writer.writerows(self.rows[i][:j] + self.rows[i][j + 1:] for i in order)
        return out.getvalue()


def read_table(path: str | Path) -> Table:
    """A CSV with a header; every data row must have as many fields as the header (refused with the rows if not)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(f"{path}: cannot read it as a UTF-8 CSV ({exc})") from None
    if not lines or not lines[0]:
        raise ValidationError(f"{path}: no header")
    header, rows = lines[0], [r for r in lines[1:] if r]
    bad = [i + 1 for i, r in enumerate(rows) if len(r) != len(header)]
    if bad:
        raise ValidationError(f"{path}: rows {bad[:10]} do not have the header's {len(header)} fields (1-based data rows)")
    if len(set(header)) != len(header):
        raise ValidationError(f"{path}: repeated column names in the header {header}")
    return Table(header, rows)


def check_csv(path: str | Path, id_column: str, config: LinkageConfig) -> Table:
    """The table, its identifier column checked as the linkage will check it (before anything is sent)."""
    table = read_table(path)
    ids = table.column(id_column)
    normalise_ids(ids, casefold=config.casefold, pattern=config.pattern, what=f"identifier ({path}, column {id_column})")
    if len(table.header) < 2:
        raise ValidationError(f"{path}: no column besides the identifier {id_column!r}")
    return table


def link_csv(path: str | Path, id_column: str, out: str | Path, config: LinkageConfig, name: str, *,
             server_context: ssl.SSLContext | None = None, client_context: ssl.SSLContext | None = None,
             allow_plaintext: bool = False, timeout: float = 300.0, workers: int = 1) -> Linkage:
    """Link this party's CSV and write its linked rows to ``out`` (reserved before the linkage, written after it);
    ``workers``: threads for this party's group operations (``link``)."""
    try:  # this party's CSV, identifiers and output, before anything is sent; a refusal is told to the others
        table = check_csv(path, id_column, config)
        if Path(out).resolve() == Path(path).resolve():
            raise ValidationError(f"the output {out} would overwrite the input")
        pending = PendingFile(out)
        try:
            pending.open()
        except OSError as exc:
            raise ValidationError(f"{out}: cannot create a file there ({exc.strerror})") from None
    except ValidationError as exc:
        tell_others(exc, config, name, server_context=server_context, client_context=client_context,
                    allow_plaintext=allow_plaintext, timeout=timeout)
        raise
    try:
        result = link(table.column(id_column), config, name, server_context=server_context, client_context=client_context,
                      allow_plaintext=allow_plaintext, timeout=timeout, workers=workers)
        pending.commit(table.without(id_column, result.order.tolist()))
    finally:
        pending.discard()
    return result
