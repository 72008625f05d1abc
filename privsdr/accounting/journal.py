"""Append-only, hash-chained, sealed and file-locked journal of a ledger.

One JSON object per line. Every record carries ``prev`` (the hash of the record before it) and
``hash`` = sha256 (or, with a key, HMAC-SHA256) of ``prev`` and the canonical JSON of the record's
other fields, so an edit, a reordering or a deletion anywhere before the last record breaks the
chain and is detected when the journal is opened. Each append is flushed and fsync'd before the
call returns (the ledger appends a charge before the noise is drawn). Writers hold an exclusive
``fcntl.flock`` on a sidecar ``PATH.lock`` file, so several processes on one machine share one budget.

**Sealed head** (format version 2). After every append the writer seals the record count and the
last hash into the sidecar ``PATH.head`` (two fixed-size slots written alternately and fsync'd, so
a torn write loses at most the newest seal). Opening and ``verify`` check that the file still holds
that record with that hash, so deleting records from the end is detected too. A crash between the
append and the head update leaves the head one record behind, which is accepted (and sealed by the
next append); nothing else is. A new journal's head is sealed before its header is written, and an
emptied journal whose head remains is refused rather than created anew.

**Key** (optional). With a secret key (``key=``, or the environment variable
``PRIVSDR_JOURNAL_KEY`` holding it, or ``PRIVSDR_JOURNAL_KEY_FILE`` naming a file that holds it) the
chain and the head are HMAC-SHA256 under that key: someone without the key cannot rewrite the
whole file (or its head) consistently. The header records a key fingerprint, never the key.

Records: ``header`` (budget, accountant, relation), ``reserve`` (a run's planned charges),
``charge`` (one node, before its noise; ``at_close``: charged when a run that released something ended),
``close`` (the run ended; a run that charged nothing gets its reservation back).
``repair`` removes a torn last line left by a crash mid-write (the record was never acknowledged,
so no noise depends on it) and re-seals the head; it refuses anything else.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import hmac
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from .._io import atomic_write_bytes
from ..errors import PrivsdrError

FORMAT = "privsdr.ledger-journal"
FORMAT_VERSION = 2  #: 2 = sealed head; version-1 journals are read (their head is optional)
HEAD_FORMAT = "privsdr.ledger-head"
HEAD_SLOT = 256  #: PATH.head holds two fixed-size slots, written alternately
GENESIS = "0" * 64
MAC = "hmac-sha256"
KEY_ENV, KEY_FILE_ENV = "PRIVSDR_JOURNAL_KEY", "PRIVSDR_JOURNAL_KEY_FILE"


class JournalError(PrivsdrError, ValueError):
    """The journal is corrupt, tampered with, or does not match the ledger opening it."""


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "hash"}, sort_keys=True, separators=(",", ":"))


def record_hash(record: dict[str, Any], key: bytes | None = None) -> str:
    message = (record["prev"] + _canonical(record)).encode()
    if key is None:
        return hashlib.sha256(message).hexdigest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def key_id(key: bytes) -> str:
    """A fingerprint of the key (HMAC of a fixed label): tells keys apart, reveals nothing usable."""
    return hmac.new(key, b"privsdr journal key id", hashlib.sha256).hexdigest()[:16]


def key_from_environment() -> bytes | None:
    """The journal key from ``PRIVSDR_JOURNAL_KEY`` (its text) or ``PRIVSDR_JOURNAL_KEY_FILE`` (a file)."""
    text, file = os.environ.get(KEY_ENV), os.environ.get(KEY_FILE_ENV)
    if text and file:
        raise JournalError(f"set {KEY_ENV} or {KEY_FILE_ENV}, not both")
    if file:
        try:
            key = Path(file).read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise JournalError(f"cannot read the journal key file {file}: {exc.strerror}") from None
        if not key:
            raise JournalError(f"the journal key file {file} is empty")
        return key
    return text.encode() if text else None


def _resolve_key(key: bytes | str | None | bool) -> bytes | None:
    """``None``: from the environment; ``False``: no key; bytes/str: that key."""
    if key is False:
        return None
    if key is None:
        return key_from_environment()
    key = key.encode() if isinstance(key, str) else bytes(key)
    if not key:
        raise JournalError("the journal key is empty")
    return key


def head_path(path: str | os.PathLike[str]) -> Path:
    return Path(str(path) + ".head")


@attrs.define
class Journal:
    path: Path
    records: list[dict[str, Any]] = attrs.field(factory=list)
    key: bytes | None = None
    _offset: int = 0
    _lock_fd: int | None = None
    _depth: int = 0
    _lock_writable: bool = True

    @classmethod
    def create(cls, path: str | os.PathLike[str], header: dict[str, Any], *, key: bytes | str | None | bool = None) -> Journal:
        journal = cls(Path(path), key=_resolve_key(key))
        with journal.locked():
            if journal.records:
                raise JournalError(f"journal {journal.path} already exists")
            journal.append(journal._header_record(header))
        return journal

    @classmethod
    def open_or_create(cls, path: str | os.PathLike[str], header: dict[str, Any], *,
                       key: bytes | str | None | bool = None) -> tuple[Journal, bool]:
        """Open the journal, or create it with ``header`` if missing or empty: one atomic step under
        the lock, so processes starting together on a missing journal all get the same one."""
        journal = cls(Path(path), key=_resolve_key(key))
        with journal.locked():
            created = not journal.records
            if created:
                journal.append(journal._header_record(header))
        journal.check_header()
        return journal, created

    def check_header(self) -> None:
        if not self.records or self.records[0].get("type") != "header" or self.records[0].get("format") != FORMAT:
            raise JournalError(f"{self.path} is not a privsdr ledger journal")

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, key: bytes | str | None | bool = None) -> Journal:
        journal = cls(Path(path), key=_resolve_key(key))
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

    @property
    def keyed(self) -> bool:
        return bool(self.records) and self.records[0].get("mac") == MAC

    @property
    def sealed(self) -> bool:
        return bool(self.records) and int(self.records[0].get("format_version", 1)) >= 2

    def _header_record(self, header: dict[str, Any]) -> dict[str, Any]:
        record = {"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION, **header}
        if self.key is not None:
            record.update(mac=MAC, key_id=key_id(self.key))
        return record

    # -- locking and syncing ------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, *, sync: bool = True) -> Iterator[Journal]:
        """Hold the inter-process lock and (``sync=True``) bring ``records`` up to date with the file."""
        import fcntl

        if self._depth == 0:
            self._lock_fd = self._open_lock()
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX if self._lock_writable else fcntl.LOCK_SH)
        self._depth += 1
        try:
            if sync:
                self.sync()
            yield self
        finally:
            self._depth -= 1
            if self._depth == 0 and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def _open_lock(self) -> int | None:
        """The lock file, for writing; on storage this process cannot write (an archived journal), the existing lock
        file read-only (a shared lock) or none: nothing can append through this path, so reading needs no more.
        Anything that would append then fails on the journal itself."""
        lock = str(self.path) + ".lock"
        self._lock_writable = True
        try:
            return os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM) or os.access(self.path, os.W_OK):
                raise
        self._lock_writable = False
        try:
            return os.open(lock, os.O_RDONLY)
        except OSError:
            return None

    def sync(self) -> list[dict[str, Any]]:
        """Read and verify the records appended since the last sync, then the sealed head; return them."""
        if not self.path.exists():
            if self.records:
                raise JournalError(f"journal {self.path} was removed")
            self._check_not_emptied()
            return []
        with open(self.path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size < self._offset:
                raise JournalError(f"journal {self.path} shrank: records were removed")
            fh.seek(self._offset)
            data = fh.read()
        if size == 0 and not self.records:
            self._check_not_emptied()
        if data and not data.endswith(b"\n"):
            raise JournalError(f"journal {self.path} ends with an incomplete record (a crash during a write, or an edit); "
                               f"`privsdr ledger repair {self.path}` removes a torn last line")
        new = self._read_records(data)
        self._check_head()
        return new

    def _read_records(self, data: bytes) -> list[dict[str, Any]]:
        """Parse and chain-check the complete records in ``data`` (which follows ``_offset``); keep
        them only if all pass."""
        new: list[dict[str, Any]] = []
        prev = self.last_hash
        for line in data.split(b"\n")[:-1] if data else []:
            number = len(self.records) + len(new) + 1
            record = _parse(line, number, self.path)
            if number == 1:
                self._check_key(record)
            header = self.records[0] if self.records else (new[0] if new else record)
            keyed = isinstance(header, dict) and header.get("mac") == MAC
            _check(record, prev, number, self.path, self.key if keyed else None)
            prev = record["hash"]
            new.append(record)
        self.records.extend(new)
        self._offset += len(data)
        return new

    def _check_key(self, header: Any) -> None:
        if not isinstance(header, dict):
            return  # reported as malformed by _check
        if header.get("mac") == MAC:
            if self.key is None:
                raise JournalError(f"journal {self.path} is keyed (HMAC chain): set {KEY_ENV} or {KEY_FILE_ENV} to open it")
            if header.get("key_id") != key_id(self.key):
                raise JournalError(f"journal {self.path} was sealed with another key (key id {header.get('key_id')})")
        elif self.key is not None:
            raise JournalError(f"a journal key is set but {self.path} is not keyed: it may have been rewritten without "
                               f"the key (unset {KEY_ENV}/{KEY_FILE_ENV} to open an unkeyed journal)")

    # -- sealed head ----------------------------------------------------------------------------------
    def _read_head(self) -> dict[str, Any] | None:
        """The valid head slot with the highest count; None if there is no head file."""
        hp = head_path(self.path)
        try:
            data = hp.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JournalError(f"the sealed head {hp} is unreadable ({exc.strerror})") from None
        key = self.key if self.keyed else None
        valid = [h for h in (_parse_head(data[i:i + HEAD_SLOT], key) for i in range(0, len(data), HEAD_SLOT)) if h is not None]
        if not valid:
            raise JournalError(f"the sealed head {hp} is unreadable, malformed or not sealed with this journal's key")
        return max(valid, key=lambda h: h["count"])

    def _check_not_emptied(self) -> None:
        """A missing or empty journal whose head names two or more records was emptied, not created
        (a crash while creating one leaves a head that names only the header)."""
        try:
            data = head_path(self.path).read_bytes()
        except FileNotFoundError:
            return
        counts = []
        for i in range(0, len(data), HEAD_SLOT):
            try:
                counts.append(int(json.loads(data[i:i + HEAD_SLOT].strip(b"\x00 \n").decode("utf-8"))["count"]))
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                continue
        if counts and max(counts) >= 2:
            raise JournalError(f"journal {self.path} is missing or empty but its sealed head {head_path(self.path)} names "
                               f"{max(counts)} records: it was emptied, not created")

    def _check_head(self) -> None:
        if not self.records:
            return
        head = self._read_head()
        n = len(self.records)
        if head is None:
            if self.sealed:
                raise JournalError(f"journal {self.path}: its sealed head {head_path(self.path)} is missing "
                                   "(deleted, or the journal was copied without it)")
            return
        count = head["count"]
        if count > n:
            raise JournalError(f"journal {self.path}: records were removed from its end (the sealed head says {count} "
                               f"records, the file holds {n})")
        if count < 1 or self.records[count - 1]["hash"] != head["last_hash"]:
            raise JournalError(f"journal {self.path} does not match its sealed head (record {count} differs)")
        if n - count > 1:
            raise JournalError(f"journal {self.path}: {n - count} records after its sealed head (a crash leaves at most one)")

    def _write_head(self, count: int, last_hash: str, key: bytes | None) -> None:
        """Seal ``count`` and ``last_hash`` into slot (count mod 2) of ``PATH.head``, fsync'd. The
        other slot keeps the previous seal, so a torn write loses at most the newest one."""
        slot = head_line(count, last_hash, key).encode().ljust(HEAD_SLOT - 1) + b"\n"
        hp = head_path(self.path)
        fd = os.open(hp, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if count == 1:
                os.ftruncate(fd, 0)
                os.write(fd, slot * 2)  # a new journal: both slots hold this seal
            else:
                os.pwrite(fd, slot, (count % 2) * HEAD_SLOT)
            os.fsync(fd)
        finally:
            os.close(fd)
        if count == 1:
            _fsync_folder(hp.parent)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one record (caller holds ``locked()``): write, flush, fsync; then re-seal the head.

        The header is the exception: its seal is written *before* it, so that no moment exists at
        which a journal holds records but no head (a journal emptied down to its header and
        stripped of its head is refused, not mistaken for a new one)."""
        if self._depth == 0:
            raise RuntimeError("append() needs the journal lock")
        record = {**record, "prev": self.last_hash}
        keyed = self.keyed or (not self.records and record.get("mac") == MAC)
        key = self.key if keyed else None
        record["hash"] = record_hash(record, key)
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
        first = not self.records
        if first:
            self._write_head(1, record["hash"], key)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if first:
            _fsync_folder(self.path.parent)
        self.records.append(record)
        self._offset += len(line)
        if not first:
            self._write_head(len(self.records), record["hash"], key)
        return record


def _head_seal(count: int, last_hash: str, key: bytes | None) -> str:
    message = f"{HEAD_FORMAT}:{count}:{last_hash}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest() if key is not None else hashlib.sha256(message).hexdigest()


def head_line(count: int, last_hash: str, key: bytes | None = None) -> str:
    """One slot of the sealed head: count, last hash and their seal (sha256, or HMAC under the key;
    the seal also tells a torn slot from a whole one)."""
    return json.dumps({"format": HEAD_FORMAT, "count": count, "last_hash": last_hash,
                       "seal": _head_seal(count, last_hash, key)}, sort_keys=True)


def _parse_head(raw: bytes, key: bytes | None) -> dict[str, Any] | None:
    try:
        head = json.loads(raw.strip(b"\x00 \n").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not (isinstance(head, dict) and head.get("format") == HEAD_FORMAT and isinstance(head.get("count"), int)
            and not isinstance(head.get("count"), bool) and isinstance(head.get("last_hash"), str)):
        return None
    if not hmac.compare_digest(str(head.get("seal", "")), _head_seal(head["count"], head["last_hash"], key)):
        return None
    return head


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(line: bytes, number: int, path: Path) -> Any:
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise JournalError(f"journal {path}: record {number} is not valid JSON") from None


def _check(record: Any, prev: str, number: int, path: Path, key: bytes | None) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("hash"), str) or not isinstance(record.get("prev"), str):
        raise JournalError(f"journal {path}: record {number} is malformed")
    if record["prev"] != prev:
        raise JournalError(f"journal {path}: record {number} does not follow record {number - 1} (reordered, removed or inserted records)")
    if not hmac.compare_digest(record_hash(record, key), record["hash"]):
        raise JournalError(f"journal {path}: record {number} was modified (hash mismatch)")


def verify(path: str | os.PathLike[str], *, key: bytes | str | None | bool = None) -> tuple[bool, str, int]:
    """(ok, message, number of records) for ``privsdr ledger verify``."""
    try:
        journal = Journal.open(path, key=key)
    except JournalError as exc:
        return False, str(exc), 0
    n = len(journal.records)
    if head_path(path).exists():
        seal = "sealed head matches"
    elif journal.sealed:
        seal = "nothing to seal yet (header only)"
    else:
        seal = "format version 1 without a sealed head: removal of the last records cannot be detected"
    chain = "HMAC chain (keyed) intact" if journal.keyed else "hash chain intact"
    return True, f"{path}: {n} records, {chain}, {seal}", n


def repair(path: str | os.PathLike[str], *, key: bytes | str | None | bool = None) -> str:
    """Remove a torn last line (a crash in the middle of an append) and re-seal the head.

    The torn record was never acknowledged (``append`` returns only after the fsync), so no
    noise was drawn on its account: removing it never lowers what was spent. The torn bytes are
    kept in ``PATH.torn-<UTC time>``. Anything else (an edited record, a missing tail, a bad head)
    is refused: repair is not a way around tamper detection.
    """
    path = Path(path)
    if not path.is_file():
        raise JournalError(f"no journal at {path}")
    journal = Journal(path, key=_resolve_key(key))
    with journal.locked(sync=False):
        data = path.read_bytes()
        cut = data.rfind(b"\n") + 1
        torn = data[cut:]
        if not torn:
            journal.sync()
            journal.check_header()
            return f"{path}: nothing to repair ({len(journal.records)} records, chain and head intact)"
        if cut == 0:
            raise JournalError(f"{path}: even the header record is torn, so nothing was ever charged to it; remove it "
                               "and create the journal again with `privsdr ledger init`")
        journal._read_records(data[:cut])
        journal.check_header()
        head = journal._read_head()
        if head is not None and head["count"] > len(journal.records):
            raise JournalError(f"{path}: the sealed head says {head['count']} records but only {len(journal.records)} "
                               "are complete: the torn record had been sealed, so this is not a crash; refusing to repair")
        journal._check_head()
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        backup = path.with_name(f"{path.name}.torn-{stamp}")
        atomic_write_bytes(backup, torn)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, cut)
            os.fsync(fd)
        finally:
            os.close(fd)
        journal._write_head(len(journal.records), journal.last_hash, journal.key if journal.keyed else None)
        return (f"{path}: removed a torn last line of {len(torn)} bytes (kept in {backup.name}); "
                f"{len(journal.records)} complete records kept, head re-sealed")
