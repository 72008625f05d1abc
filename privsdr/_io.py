"""Atomic file output: a reader sees the old file or the new one, never half of either.

``atomic_write_bytes(path, data)`` writes a temp file in the same folder, fsyncs it, renames it
over ``path`` and fsyncs the folder. ``PendingFile`` splits that in two: ``open`` creates the temp
file *now* (so a folder that cannot take the file is refused before any budget is spent) and
``commit(data)`` fills and renames it later; ``discard`` removes it. A process killed in between (``kill -9``)
leaves its temp file behind: the name carries the host and the PID, and ``open`` removes the ones beside the same
path that this host's dead processes left (``remove_stale_temp_files``).
"""
from __future__ import annotations

import os
import re
import socket
from pathlib import Path


def _host() -> str:
    """This host's name as it appears in temp file names (dots and separators replaced)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"


def process_alive(pid: int) -> bool:
    """Whether a process of this host with this PID exists (someone else's live process counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temp_files(path: Path) -> list[Path]:
    """Remove the temp files beside ``path`` that a process of this host left when it died before committing (the
    ``PendingFile`` names of ``path`` whose PID is not alive; other hosts' files are left alone). Returns them."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.{re.escape(_host())}\.(\d+)\.[0-9a-f]+\.tmp$")
    removed: list[Path] = []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return removed
    for sibling in siblings:
        match = pattern.match(sibling.name)
        if match and int(match.group(1)) != os.getpid() and not process_alive(int(match.group(1))):
            try:
                sibling.unlink()
                removed.append(sibling)
            except OSError:
                pass
    return removed


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


class PendingFile:
    """A temp file beside ``path``, created on ``open()``; ``commit(data)`` renames it over ``path``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{_host()}.{os.getpid()}.{id(self):x}.tmp")
        self._fd: int | None = None

    def open(self) -> PendingFile:
        remove_stale_temp_files(self.path)
        self._fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        return self

    def commit(self, data: bytes | str) -> None:
        if self._fd is None:
            self.open()
        assert self._fd is not None
        payload = data.encode("utf-8") if isinstance(data, str) else data
        try:
            view = memoryview(payload)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except BaseException:
            self.discard()
            raise
        os.close(self._fd)
        self._fd = None
        os.replace(self.tmp, self.path)
        _fsync_dir(self.path.parent)

    def discard(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass

    @property
    def pending(self) -> bool:
        return self._fd is not None


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename, fsync of the folder)."""
    PendingFile(path).commit(data)
