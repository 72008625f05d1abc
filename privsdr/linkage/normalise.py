"""Identifiers as the linkage hashes them: normalised, checked, refused with their row numbers.

Normalisation (documented in ``docs/linkage.md``): Unicode NFC, surrounding whitespace stripped; case is kept unless
``casefold=True`` (then ``str.casefold``). Nothing else is changed: ``"00123"`` and ``"123"`` are different
identifiers. Refused, before anything leaves the party or any budget is spent: a missing identifier (empty after
stripping, or one of the tokens CSV tools write for a missing value, :data:`MISSING`), one that does not match the
optional ``pattern`` (a differently formatted identifier), one with control characters, and duplicates (after
normalisation: two rows with one identifier cannot be linked to one row of another party).
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence

from ..errors import ValidationError

#: values treated as missing (compared case-insensitively after stripping)
MISSING = frozenset({"", "nan", "na", "n/a", "null", "none", "<na>", "nat"})
#: how many row numbers an error lists before "..."
SHOWN = 10


class IdentifierError(ValidationError):
    """Identifiers that cannot be linked (missing, duplicated, wrongly formatted); ``rows`` are 1-based data rows."""

    def __init__(self, message: str, rows: Sequence[int], kind: str = "unusable identifiers") -> None:
        super().__init__(message)
        self.rows = list(rows)
        self.kind = kind  #: what is wrong, without a row or a value (what a refusal tells the other parties)


def _listed(rows: Sequence[int]) -> str:
    shown = ", ".join(map(str, rows[:SHOWN]))
    return shown + (f", ... ({len(rows)} rows)" if len(rows) > SHOWN else "")


def normalise_one(value: object, casefold: bool = False) -> str | None:
    """The normalised identifier, or ``None`` when it is missing (NaN, ``None``, empty or a :data:`MISSING` token)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = unicodedata.normalize("NFC", str(value)).strip()
    if text.lower() in MISSING:
        return None
    return text.casefold() if casefold else text


def has_control(text: str) -> bool:
    """Whether ``text`` has a character of Unicode category C (control, format, surrogate, private use, unassigned).

    ASCII text takes a fast path: its only category-C characters are 0-31 and 127, exactly the ones
    ``str.isprintable`` calls unprintable.
    """
    if text.isascii():
        return not text.isprintable()
    return any(unicodedata.category(c).startswith("C") for c in text)


def normalise_ids(values: Iterable[object], *, casefold: bool = False, pattern: str | None = None,
                  what: str = "identifier") -> list[str]:
    """Normalised identifiers, one per row, or :class:`IdentifierError` naming every bad row (1-based data rows).

    Checks in order: missing, control characters, ``pattern`` (a full match, after normalisation), duplicates.
    """
    out: list[str | None] = [normalise_one(v, casefold) for v in values]
    missing = [i + 1 for i, v in enumerate(out) if v is None]
    if missing:
        raise IdentifierError(f"missing {what} (empty, NaN or a missing-value token) in rows {_listed(missing)}", missing,
                              "missing identifiers")
    ids = [v for v in out if v is not None]
    control = [i + 1 for i, v in enumerate(ids) if has_control(v)]
    if control:
        raise IdentifierError(f"{what} with control characters in rows {_listed(control)}", control,
                              "identifiers with control characters")
    if pattern is not None:
        regex = re.compile(pattern)
        bad = [i + 1 for i, v in enumerate(ids) if regex.fullmatch(v) is None]
        if bad:
            raise IdentifierError(f"{what} not of the format {pattern!r} in rows {_listed(bad)}", bad,
                                  "identifiers not of the configured format")
    first: dict[str, int] = {}
    duplicated: list[int] = []
    for i, v in enumerate(ids):
        if v in first:
            duplicated += [first[v], i + 1] if first[v] not in duplicated else [i + 1]
        else:
            first[v] = i + 1
    if duplicated:
        rows = sorted(set(duplicated))
        raise IdentifierError(f"duplicate {what} (after normalisation) in rows {_listed(rows)}", rows, "duplicate identifiers")
    if not ids:
        raise IdentifierError(f"no {what}s to link", [], "no identifiers")
    return ids
