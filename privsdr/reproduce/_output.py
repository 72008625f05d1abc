"""Shared output helpers of the reproductions."""
from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any


def output_dir(out_dir: str | Path) -> Path:
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


def write_table(rows: list[dict[str, Any]], out_dir: str | Path, to_markdown: Callable[[list[dict[str, Any]]], str]) -> tuple[Path, Path]:
    """``<table>.csv`` and ``<table>.md`` (our values beside the paper's) in ``out_dir``."""
    out = output_dir(out_dir)
    table = rows[0]["table"]
    csv_path, md_path = out / f"{table}.csv", out / f"{table}.md"
    write_csv(rows, csv_path)
    md_path.write_text(to_markdown(rows))
    return csv_path, md_path
