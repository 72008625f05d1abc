"""Shared output helpers of the reproductions."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any


def output_dir(out_dir: "str | Path") -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_csv(rows: list[dict[str, Any]], path: Path) -> Path:
    """One row per dict, the first row's keys as the header."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
