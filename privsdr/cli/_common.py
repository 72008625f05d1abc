"""What every ``privsdr`` command shares: exit codes, one-line usage errors, budget options, and
the input/output checks that run before the first charge.

Contract for a command that spends budget: build an ``Outputs`` first and ``add`` every output
(suffix known, folder exists and takes a new file: a temp file is created there *now*), check
every input with ``input_file``/``distinct``, open the ledger with ``open_ledger`` (journal verified,
accountant consistent), load and check the data; only then fit. Results are written with
``Outputs.commit`` (temp file, fsync, rename), so a reader never sees half a file, and leaving the
``with`` block removes every temp file that was not committed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._io import PendingFile
from .._json import parse_json
from ..accounting import Ledger
from ..errors import ValidationError
from ..report import PrivacyReport, released_estimate

EXIT_ERROR, EXIT_REFUSED, EXIT_FAILED = 2, 3, 1
EXIT_INTERRUPTED = 130  #: stopped by SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as shells report it)
FORMATTER = argparse.RawDescriptionHelpFormatter
REPORT_SUFFIXES = (".html", ".htm", ".md", ".json")
MODEL_SUFFIXES = (".json",)


class Parser(argparse.ArgumentParser):
    """Usage errors are one line (plus exit code 2), like every other bad-input error. A negative number in
    exponent form (``--delta -1e-6``) is read as a value, as ``-0.5`` is, and then refused by its own check
    (argparse's default took it for an unknown option)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"privsdr: error: {self.prog}: {message} (see --help)\n")


def budget_options(p: argparse.ArgumentParser, epsilon: float | None = 1.0, delta: float | None = 1e-6, what: str = "this fit") -> None:
    default = "" if epsilon is None else f" (default {epsilon})"
    p.add_argument("--epsilon", type=float, default=epsilon, required=epsilon is None, help=f"epsilon of {what}{default}")
    default = "" if delta is None else f" (default {delta})"
    p.add_argument("--delta", type=float, default=delta, required=delta is None, help=f"delta of {what}{default}")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def finite_float(text: str) -> float:
    """argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (a timeout in seconds)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


# -- inputs -------------------------------------------------------------------------------------------
def optional_input_file(path: str | None, option: str) -> Path | None:
    """``input_file`` for an option that may be absent (None passes through)."""
    return None if path is None else input_file(path, option)


def input_file(path: str, option: str) -> Path:
    """An existing, readable regular file."""
    p = Path(path)
    if not p.exists():
        raise ValidationError(f"{option} {path}: no such file")
    if not p.is_file():
        raise ValidationError(f"{option} {path}: not a regular file")
    if not os.access(p, os.R_OK):
        raise ValidationError(f"{option} {path}: not readable")
    return p


def read_text(path: Path, option: str) -> str:
    """The file's text as UTF-8, with an error that names the file and the encoding."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{option} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                              "save it as UTF-8") from None


def distinct(paths: Iterable[tuple[str, str | Path | None]]) -> None:
    """No file named by two options (an output that would overwrite an input, two outputs in one file)."""
    seen: dict[str, str] = {}
    for option, path in paths:
        if path is None:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise ValidationError(f"{option} and {seen[key]} name the same file {path}")
        seen[key] = option


def open_ledger(journal: str | None, accountant: str | None = None) -> Ledger | None:
    """The journal's ledger (chain and head verified), refusing an explicit ``--accountant`` that
    differs from the one the journal was created with (the journal's is always the one used)."""
    if journal is None:
        return None
    input_file(journal, "--journal")
    ledger = Ledger.open(journal)
    if accountant is not None and accountant != ledger.accountant.name:
        raise ValidationError(f"--accountant {accountant} differs from the journal's accountant {ledger.accountant.name!r}; "
                              "a journal always composes with the accountant it was created with (omit --accountant)")
    return ledger


# -- outputs ------------------------------------------------------------------------------------------
def check_output(path: str, option: str, suffixes: Sequence[str] | None = None) -> Path:
    """A path a new file can be written to: known suffix, existing folder, not a folder itself."""
    if not path:
        raise ValidationError(f"{option}: empty path")
    p = Path(path)
    if suffixes is not None and p.suffix.lower() not in suffixes:
        shown = p.suffix or "no extension"
        raise ValidationError(f"{option} {path}: unknown extension ({shown}); use {', '.join(suffixes)}")
    if p.is_dir():
        raise ValidationError(f"{option} {path} is a folder, not a file")
    folder = p.parent
    if not folder.is_dir():
        raise ValidationError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValidationError(f"{option} {path}: not writable")
    return p


def check_output_dir(path: str, option: str) -> Path:
    """A folder that exists and is writable, or can be created (its nearest existing ancestor is writable)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValidationError(f"{option} {path} is a file, not a folder")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ValidationError(f"{option} {path}: {probe} is not a writable folder")
    return p


class Outputs:
    """The outputs of one command, checked and reserved (a temp file each) before any budget is spent."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingFile] = {}

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, *exc: object) -> None:
        for pending in self._pending.values():
            pending.discard()
        self._pending.clear()

    def add(self, path: str | None, option: str, suffixes: Sequence[str] | None = None) -> Path | None:
        if path is None:
            return None
        p = check_output(path, option, suffixes)
        pending = PendingFile(p)
        try:
            pending.open()
        except OSError as exc:
            raise ValidationError(f"{option} {path}: cannot create a file there ({exc.strerror})") from None
        self._pending[option] = pending
        return p

    def commit(self, option: str, data: str | bytes) -> Path:
        pending = self._pending.pop(option)
        pending.commit(data)
        return pending.path


def ledger_for(args: argparse.Namespace, budget: Any = None) -> Ledger | None:
    """The ledger of ``--journal`` (verified), or None. Kept for commands written before
    ``open_ledger``; new commands call ``open_ledger(args.journal, args.accountant)`` before loading data."""
    return open_ledger(getattr(args, "journal", None))


def write_report(report: PrivacyReport, out: str | None) -> None:
    """Write a report by suffix, atomically. New commands reserve the output with ``Outputs.add``
    *before* fitting (so a bad path spends nothing) and write it with ``commit_report``."""
    if not out:
        return
    with Outputs() as outputs:
        path = outputs.add(out, "--report", REPORT_SUFFIXES)
        commit_report(outputs, report, path)


def report_text(report: PrivacyReport, path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        return report.to_html()
    return report.to_markdown() if suffix == ".md" else report.to_json()


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in blocks (the data digest of a filed report)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def filing(args: argparse.Namespace, data: str | Path | None) -> dict[str, Any]:
    """What a command files beside its report, read before anything is charged: ``--purpose``, the data file's name
    and, with ``--data-digest``, the sha256 of its bytes (the file the fit reads next)."""
    digest = file_sha256(data) if data is not None and getattr(args, "data_digest", False) else None
    return {"purpose": getattr(args, "purpose", None), "data_file": None if data is None else Path(data).name, "data_sha256": digest}


def filed(report: PrivacyReport, estimate: Any, context: dict[str, Any]) -> PrivacyReport:
    """The report as the CLI files it: the released estimate (a fitted estimator's ``released_estimate``, or a
    name -> numbers mapping) and the ``filing`` context."""
    estimate = dict(estimate) if isinstance(estimate, dict) else released_estimate(estimate)
    return report.with_filing(estimate=estimate, **context)


def purpose_option(parser: argparse.ArgumentParser, *, digest: bool = True) -> None:
    """``--purpose`` and (for a command that reads one data file) ``--data-digest``: what a report's filing section
    holds beside the estimate."""
    parser.add_argument("--purpose", default=None, metavar="TEXT",
                        help="why the data is released (written in the report's filing section beside the estimate)")
    if digest:
        parser.add_argument("--data-digest", action="store_true",
                            help="also file the sha256 of the data file: it identifies the file exactly, so anyone holding "
                            "a candidate file can check it; it is not covered by the privacy guarantee (file it, do not "
                            "publish it)")


def commit_report(outputs: Outputs, report: PrivacyReport, path: Path | None, option: str = "--report", *,
                  json_output: bool = False) -> None:
    """Write the reserved report; the line saying so goes to stderr when stdout carries ``--json``."""
    if path is None:
        return
    outputs.commit(option, report_text(report, path))
    print(f"wrote the privacy report to {path}", file=sys.stderr if json_output else sys.stdout)


# -- per-column bounds ----------------------------------------------------------------------------------
def load_bounds(path: Path, names: Sequence[str], header: Sequence[str] | None = None) -> np.ndarray:
    """Per-column bounds from a JSON object ``{"column": c, "other": [lo, hi], ...}``.

    ``c`` declares |x| <= c; a range ``[lo, hi]`` declares lo <= x <= hi, which the estimators use
    as |x| <= max(|lo|, |hi|) (they assume data centred at a public location). Every feature column
    needs a bound; names that are not columns of the table are refused (a typo would be silent).
    """
    return load_ranges(path, names, header, as_ranges=False)[1]


def load_ranges(path: Path, names: Sequence[str], header: Sequence[str] | None = None, *,
                as_ranges: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(centres, half-widths) per column from the same JSON (``load_bounds``): ``c`` is the range [-c, c]; with
    ``as_ranges`` a range [lo, hi] is its centre (lo + hi)/2 and half-width (hi - lo)/2 (the sensitivity then comes
    from the width), else the centre 0 and max(|lo|, |hi|)."""
    try:
        data = parse_json(read_text(path, "--bounds"))
    except json.JSONDecodeError as exc:
        raise ValidationError(f"--bounds {path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not data:
        raise ValidationError(f"--bounds {path}: expected an object mapping column names to a bound c or a range [lo, hi]")
    known = set(header) if header is not None else set(names)
    unknown = sorted(k for k in data if k not in known)
    if unknown:
        raise ValidationError(f"--bounds {path}: {', '.join(map(repr, unknown))} {'is not a column' if len(unknown) == 1 else 'are not columns'} of the data")
    missing = [n for n in names if n not in data]
    if missing:
        raise ValidationError(f"--bounds {path}: no bound for column(s) {', '.join(map(repr, missing))}")
    out, centres = [], []
    for name in names:
        value = data[name]
        centre = 0.0
        if isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value) and value[0] < value[1]:
            lo, hi = float(value[0]), float(value[1])
            c = (hi - lo) / 2.0 if as_ranges else max(abs(lo), abs(hi))
            centre = (lo + hi) / 2.0 if as_ranges else 0.0
        elif _is_number(value):
            c = float(value)
        else:
            raise ValidationError(f"--bounds {path}: column {name!r} needs a positive number c or a range [lo, hi] with lo < hi, got {value!r}")
        if not (math.isfinite(c) and c > 0):
            raise ValidationError(f"--bounds {path}: column {name!r} needs a positive finite bound, got {value!r}")
        out.append(c)
        centres.append(centre)
    return np.asarray(centres), np.asarray(out)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
