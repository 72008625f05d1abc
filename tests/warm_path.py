"""A ``privsdr`` on PATH that runs each command through the warm CLI server (``tests/warm_cli.py``).

The docs pages start their parties in the background (``privsdr vertical party ... & b=$!; ...; wait $b``); each
such line runs in ``bash``, and each ``privsdr`` in it was a fresh interpreter importing scikit-learn, SciPy and
dp-accounting (~2 s of CPU) before doing anything of its own. ``WarmPath`` puts a folder first on PATH whose
``privsdr`` is a stdlib-only script (``python -I -S``, ~20 ms): it passes its own stdin, stdout and stderr, its
arguments, working directory and environment to this test process, which asks the warm server to fork the command
with exactly those (``WarmCli.fork``); it passes SIGTERM, SIGINT and SIGHUP on to the command and exits with the
command's exit status. So the page's lines run exactly
as a user pastes them (the same text, the same redirections, ``$!`` and ``wait`` on a process that ends when the
command ends with its status); only the interpreter start and the imports are shared.

Every command forked here is a process group of its own; when the page is done (or fails), ``close`` kills the
groups of the commands that have not ended (by their PID: only processes started here).
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

SHIM = '''\
#!{python} -IS
"""privsdr, forked by the docs test's warm server (tests/warm_path.py): same arguments, streams, folder, environment."""
import json, os, signal, socket, sys

pid, pending = 0, []


def forward(signum, frame):  # `kill $!` reaches the command, as without the shim (held until its PID is known)
    os.kill(pid, signum) if pid else pending.append(signum)


for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, forward)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sock.connect(os.environ["PRIVSDR_WARM_PATH_SOCKET"])
status_r, status_w = os.pipe()
request = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}
socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2, status_w])
os.close(status_w)
pid = int(sock.recv(64) or 0)
for signum in pending if pid else ():
    os.kill(pid, signum)
raw = b""
while chunk := os.read(status_r, 64):
    raw += chunk
code = int(raw) if raw else -9
sys.exit(code if code >= 0 else 128 - code)
'''


class WarmPath:
    """``env()``: the environment whose ``privsdr`` is the shim; ``close()``: stop relaying, end what is still running."""

    def __init__(self, warm: Any) -> None:
        self._warm = warm
        self._folder = Path(tempfile.mkdtemp(prefix="privsdr-docs-"))  # short: a socket path has ~100 bytes at most
        shim = self._folder / "privsdr"
        shim.write_text(SHIM.format(python=sys.executable))
        shim.chmod(0o755)
        self._address = str(self._folder / "socket")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(self._address)
        self._listener.listen()
        self._wake_r, self._wake_w = os.pipe()
        self.error: Exception | None = None
        self._running: dict[int, tuple[int, int]] = {}  # our status pipe's read end -> (pid, the shim's status pipe)
        self._thread = threading.Thread(target=self._relay, name="warm-path", daemon=True)
        self._thread.start()

    @staticmethod
    def usable() -> bool:
        """Whether this interpreter can be named on a ``#!`` line (no space, within the kernel's length limit)."""
        return " " not in sys.executable and len(sys.executable) < 120

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PATH": f"{self._folder}{os.pathsep}{base.get('PATH', '')}", "PRIVSDR_WARM_PATH_SOCKET": self._address}

    def running(self) -> list[int]:
        """The PIDs of the commands forked here that have not ended."""
        return [pid for pid, _ in self._running.copy().values()]

    def _relay(self) -> None:
        while True:
            ready = select.select([self._wake_r, self._listener, *self._running], [], [])[0]
            if self._wake_r in ready:
                return
            for fd in ready:
                if fd is self._listener:
                    self._start()
                else:
                    self._finish(fd)

    def _start(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 4)
            ours_r, ours_w = os.pipe()
            try:
                pid = self._warm.fork(json.loads(message), [*fds[:3], ours_w])
            except Exception as exc:  # noqa: BLE001 - the shim exits 127 and close() raises it
                self.error = exc
                os.close(ours_r)
                os.write(fds[3], b"127")
                os.close(fds[3])
                return
            finally:
                for fd in (*fds[:3], ours_w):
                    os.close(fd)
            self._running[ours_r] = (pid, fds[3])
            conn.send(str(pid).encode())

    def _finish(self, ours_r: int) -> None:
        pid, theirs_w = self._running.pop(ours_r)
        raw = os.read(ours_r, 64)
        os.close(ours_r)
        try:
            os.write(theirs_w, raw)
        except BrokenPipeError:  # the shim was killed; its command has ended anyway
            pass
        os.close(theirs_w)

    def close(self) -> None:
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=30)
        for ours_r, (pid, theirs_w) in list(self._running.items()):
            try:
                os.killpg(pid, signal.SIGKILL)  # a session of its own: its group is its PID
            except ProcessLookupError:
                pass
            select.select([ours_r], [], [], 30)  # the server writes its status here once it has reaped it
            os.close(ours_r)
            os.close(theirs_w)
        self._running.clear()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._listener.close()
        shutil.rmtree(self._folder, ignore_errors=True)
        if self.error is not None:
            raise self.error
