"""Append-only, hash-chained, file-locked journal of a ledger.

One JSON object per line. Every record carries ``prev`` (the hash of the record before it) and
``hash`` = sha256 of ``prev`` and the canonical JSON of the record's other fields, so an edit,
a reordering or a deletion anywhere before the last record breaks the chain and is detected when
the journal is opened. Each append is flushed and fsync'd before the call returns (the ledger
appends a charge before the noise is drawn). Writers hold an exclusive ``fcntl.flock`` on a
sidecar ``.lock`` file, so several processes on one machine share one budget.

Records: ``header`` (budget, accountant, relation), ``reserve`` (a run's planned charges),
``charge`` (one node, before its noise), ``close`` (the run ended; uncharged nodes returned).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

import attrs

from ..errors import PrivsdrError

FORMAT = "privsdr.ledger-journal"
FORMAT_VERSION = 1
GENESIS = "0" * 64


class JournalError(PrivsdrError, ValueError):
    """The journal is corrupt, tampered with, or does not match the ledger opening it."""


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "hash"}, sort_keys=True, separators=(",", ":"))


def record_hash(record: dict[str, Any]) -> str:
    return hashlib.sha256((record["prev"] + _canonical(record)).encode()).hexdigest()


@attrs.define
class Journal:
    path: Path
    records: list[dict[str, Any]] = attrs.field(factory=list)
    _offset: int = 0
    _lock_fd: int | None = None
    _depth: int = 0

    @classmethod
    def create(cls, path: "str | os.PathLike[str]", header: dict[str, Any]) -> "Journal":
        journal = cls(Path(path))
        with journal.locked():
            if journal.records:
                raise JournalError(f"journal {journal.path} already exists")
            journal.append(header_record(header))
        return journal

    @classmethod
    def open_or_create(cls, path: "str | os.PathLike[str]", header: dict[str, Any]) -> tuple["Journal", bool]:
        """Open the journal, or create it with ``header`` if missing or empty: one atomic step under
        the lock, so processes starting together on a missing journal all get the same one."""
        journal = cls(Path(path))
        with journal.locked():
            created = not journal.records
            if created:
                journal.append(header_record(header))
        journal.check_header()
        return journal, created

    def check_header(self) -> None:
        if not self.records or self.records[0].get("type") != "header" or self.records[0].get("format") != FORMAT:
            raise JournalError(f"{self.path} is not a privsdr ledger journal")

    @classmethod
    def open(cls, path: "str | os.PathLike[str]") -> "Journal":
        journal = cls(Path(path))
        if not journal.path.exists():
            raise JournalError(f"no journal at {journal.path}")
        with journal.locked():
            pass  # locked() syncs and verifies
        journal.check_header()
        return journal

    @property
    def header(self) -> dict[str, Any]:
        return self.records[0]

    @property
    def last_hash(self) -> str:
        return self.records[-1]["hash"] if self.records else GENESIS

    # -- locking and syncing ------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator["Journal"]:
        """Hold the inter-process lock and bring ``records`` up to date with the file."""
        import fcntl

        if self._depth == 0:
            self._lock_fd = os.open(str(self.path) + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._depth += 1
        try:
            self.sync()
            yield self
        finally:
            self._depth -= 1
            if self._depth == 0 and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def sync(self) -> list[dict[str, Any]]:
        """Read and verify the records appended since the last sync; return them."""
        if not self.path.exists():
            return []
        with open(self.path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size < self._offset:
                raise JournalError(f"journal {self.path} shrank: records were removed")
            fh.seek(self._offset)
            data = fh.read()
        if data and not data.endswith(b"\n"):
            raise JournalError(f"journal {self.path} ends with an incomplete record (a crash during a write, or an edit)")
        new = []
        for line in data.split(b"\n")[:-1] if data else []:
            try:
                record = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise JournalError(f"journal {self.path}: record {len(self.records) + len(new) + 1} is not valid JSON") from None
            prev = new[-1]["hash"] if new else self.last_hash
            _check(record, prev, len(self.records) + len(new) + 1, self.path)
            new.append(record)
        self.records.extend(new)
        self._offset += len(data)
        return new

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one record (caller holds ``locked()``): write, flush, fsync."""
        if self._depth == 0:
            raise RuntimeError("append() needs the journal lock")
        record = {**record, "prev": self.last_hash}
        record["hash"] = record_hash(record)
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.records.append(record)
        self._offset += len(line)
        return record


def header_record(header: dict[str, Any]) -> dict[str, Any]:
    return {"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION, **header}


def _check(record: Any, prev: str, number: int, path: Path) -> None:
    if not isinstance(record, dict) or "hash" not in record or "prev" not in record:
        raise JournalError(f"journal {path}: record {number} is malformed")
    if record["prev"] != prev:
        raise JournalError(f"journal {path}: record {number} does not follow record {number - 1} (reordered, removed or inserted records)")
    if record_hash(record) != record["hash"]:
        raise JournalError(f"journal {path}: record {number} was modified (hash mismatch)")


def verify(path: "str | os.PathLike[str]") -> tuple[bool, str, int]:
    """(ok, message, number of records) for ``privsdr ledger verify``."""
    try:
        journal = Journal.open(path)
    except JournalError as exc:
        return False, str(exc), 0
    header = journal.header
    if header.get("format") != FORMAT:
        return False, f"{path} is not a privsdr ledger journal", len(journal.records)
    return True, f"{path}: {len(journal.records)} records, hash chain intact", len(journal.records)
