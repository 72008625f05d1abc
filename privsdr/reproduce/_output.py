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


def read_csv(path: Path) -> list[dict[str, Any]]:
    """The rows ``write_csv`` wrote, numbers parsed back (int, then float; an empty cell is None)."""
    def parse(text: str) -> Any:
        if text == "":
            return None
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    with open(path, newline="") as fh:
        return [{key: parse(value) for key, value in row.items()} for row in csv.DictReader(fh)]


def merge_secure(secure_rows: list[dict[str, Any]], out_dir: str | Path, is_secure: Callable[[dict[str, Any]], bool],
                 key: Callable[[dict[str, Any]], tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The table already in ``out_dir`` with its secure rows replaced by ``secure_rows`` (``reproduce --secure-only``).
    Its other rows are deterministic for a seed and kept as written; every secure row must belong to a cell of it."""
    table = secure_rows[0]["table"]
    path = Path(out_dir) / f"{table}.csv"
    if not path.exists():
        raise ValueError(f"--secure-only adds the secure column to {path}, which does not exist: run the table first")
    kept = [row for row in read_csv(path) if not is_secure(row)]
    cells = {key(row) for row in kept}
    strays = sorted({key(row) for row in secure_rows} - cells, key=str)
    if strays:
        raise ValueError(f"{path} has no cells {strays}: run the table with the same grid first")
    fields = list(dict.fromkeys([*kept[0], *secure_rows[0]]))  # a column added since the table was written: empty there
    return [{field: row.get(field) for field in fields} for row in kept + secure_rows]
