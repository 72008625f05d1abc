"""Loading user tables (CSV) with clear errors: UTF-8 text, a header row, numeric columns only, no
missing values. Every error names the file (and the line and column where it can)."""
from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ValidationError


def _text(path: Path) -> str:
    if not path.is_file():
        raise ValidationError(f"data file not found: {path}")
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                              "save it as UTF-8 (\"CSV UTF-8\" in spreadsheet programs)") from None


def _rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    reader = csv.reader(io.StringIO(_text(path), newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValidationError(f"{path} is empty") from None
    except csv.Error as exc:
        raise ValidationError(f"{path}: not a readable CSV ({exc})") from None
    if any(not h for h in header):
        raise ValidationError(f"{path}: the header row has an empty column name")
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise ValidationError(f"{path}: the header names {', '.join(map(repr, duplicates))} more than once")
    try:
        rows = [(reader.line_num, row) for row in reader if row]
    except csv.Error as exc:
        raise ValidationError(f"{path}, line {reader.line_num}: not a readable CSV ({exc})") from None
    return header, rows


def csv_header(path: str | Path) -> list[str]:
    """The column names of a CSV file (its header row)."""
    return _rows(Path(path))[0]


def load_csv(path: str | Path, target: str | None = None, columns: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """``(X, y, feature_names)`` from a CSV with a header row. ``y`` is the ``target`` column (or None)."""
    path = Path(path)
    if columns is not None:
        repeated = sorted({c for c in columns if list(columns).count(c) > 1})
        if repeated:
            raise ValidationError(f"--columns lists {', '.join(map(repr, repeated))} more than once")
        if target is not None and target in columns:
            raise ValidationError(f"the target {target!r} is also listed among the feature --columns: it would be fitted on itself")
        if not columns:
            raise ValidationError("--columns needs at least one column")
    header, rows = _rows(path)
    if not rows:
        raise ValidationError(f"{path} has a header but no rows")
    wanted = list(columns) if columns else [h for h in header if h != target]
    for name in wanted + ([target] if target else []):
        if name not in header:
            raise ValidationError(f"column {name!r} is not in {path} (columns: {', '.join(header)})")
    if not wanted:
        raise ValidationError(f"{path} has no feature columns besides the target {target!r}")
    index = {h: i for i, h in enumerate(header)}
    for line, row in rows:  # a row with more or fewer fields than the header would be read into the wrong columns
        if len(row) != len(header):
            raise ValidationError(f"{path}, line {line}: {len(row)} field{'' if len(row) == 1 else 's'}, but the header has "
                                  f"{len(header)}; every row needs one value per column")

    def column(name: str) -> np.ndarray:
        values = []
        for line, row in rows:
            try:
                value = float(row[index[name]])
            except (ValueError, IndexError):
                raise ValidationError(f"{path}, line {line}: column {name!r} is not numeric ({row[index[name]] if index[name] < len(row) else 'missing'!r})") from None
            if not math.isfinite(value):
                raise ValidationError(f"{path}, line {line}: column {name!r} has a missing or infinite value")
            values.append(value)
        return np.asarray(values)

    X = np.column_stack([column(c) for c in wanted])
    y = column(target) if target else None
    return X, y, wanted
