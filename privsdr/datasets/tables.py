"""Loading user tables (CSV) with clear errors: numeric columns only, no missing values."""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ValidationError


def load_csv(path: "str | Path", target: str | None = None, columns: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """``(X, y, feature_names)`` from a CSV with a header row. ``y`` is the ``target`` column (or None)."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"data file not found: {path}")
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise ValidationError(f"{path} is empty") from None
        rows = [row for row in reader if row]
    if not rows:
        raise ValidationError(f"{path} has a header but no rows")
    wanted = list(columns) if columns else [h for h in header if h != target]
    for name in wanted + ([target] if target else []):
        if name not in header:
            raise ValidationError(f"column {name!r} is not in {path} (columns: {', '.join(header)})")
    index = {h: i for i, h in enumerate(header)}

    def column(name: str) -> np.ndarray:
        values = []
        for line, row in enumerate(rows, start=2):
            try:
                value = float(row[index[name]])
            except (ValueError, IndexError):
                raise ValidationError(f"{path}, line {line}: column {name!r} is not numeric ({row[index[name]] if index[name] < len(row) else 'missing'!r})") from None
            if not math.isfinite(value):
                raise ValidationError(f"{path}, line {line}: column {name!r} has a missing or infinite value")
            values.append(value)
        return np.asarray(values)

    X = np.column_stack([column(c) for c in wanted]) if wanted else np.empty((len(rows), 0))
    y = column(target) if target else None
    return X, y, wanted
