"""Real ``privsdr`` CLI processes without an interpreter start and a scikit-learn import each (~2.5 s of CPU apiece).

A CLI party process (``vertical party --secure``, ``vertical helper``, ``fsir party``, ``vertical party``) spends most
of its CPU importing scikit-learn (its estimator's base), SciPy's statistics, pandas and dp-accounting before it does
anything of its own, and one that writes an HTML report (``--report NAME.html``) imports matplotlib for its chart. ``WarmCli`` starts one server process per test session (``python warm_cli.py``) that imports
``privsdr.cli`` and those third-party libraries only (no module of privsdr beyond what ``python -m privsdr`` imports at
start, so a missing import in privsdr still fails as in a fresh process), then forks one child per request. Each
child is a real process in a session and process group of its own (``start_new_session=True``), with its own stdin,
stdout and stderr (pipes to the test), working directory and environment, and runs ``privsdr.cli.main(argv)`` and
the interpreter's normal exit, exactly as ``python -m privsdr ARGS`` does after its imports. Its party processes
(``python -m privsdr.secure.party``) are started by it as before: fresh interpreters.

``CliProcess`` is what the tests hold: ``pid``, ``poll()``, ``wait(timeout)``, ``communicate(timeout)``,
``send_signal``, ``returncode`` as ``subprocess.Popen`` has them (text mode). The server reaps its children and
passes each one's exit status back on a pipe of its own. The tests end their CLI processes by process group as
before; the server is ended by the fixture that started it (and dies with the test process: ``PR_SET_PDEATHSIG``).
The documented one-line run (``test_secure_fail_clean.py``) keeps starting ``privsdr`` from a fresh interpreter.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: what a CLI party imports before it does anything of its own (third-party only: see the module docstring)
PRELOAD = ("privsdr.cli", "sklearn.base", "scipy.stats", "dp_accounting", "cryptography.x509", "matplotlib.figure",
           "matplotlib.backends.backend_agg")


class CliProcess:
    """One CLI process forked by the server: the parts of ``subprocess.Popen``'s interface the tests use (text mode)."""

    def __init__(self, server: WarmCli, args: Sequence[Any], cwd: Any = None, env: Mapping[str, str] | None = None) -> None:
        self.args = ["privsdr", *map(str, args)]
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        request = {"argv": self.args[1:], "cwd": str(cwd) if cwd is not None else os.getcwd(),
                   "env": dict(os.environ if env is None else env)}
        try:
            self.pid = server.fork(request, [devnull, out_w, err_w, status_w])
        finally:
            for fd in (devnull, out_w, err_w, status_w):
                os.close(fd)
        self.returncode: int | None = None
        self._status = status_r
        self._streams = {out_r: bytearray(), err_r: bytearray()}
        self._open = [out_r, err_r]
        self._out, self._err = out_r, err_r

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read stdout and stderr to their end, then wait: (stdout, stderr); ``TimeoutExpired`` after ``timeout`` s
        (what was read so far is kept for the next call, as with ``Popen``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._open:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            ready = select.select(self._open, [], [], left)[0]
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    self._streams[fd] += chunk
                else:
                    self._open.remove(fd)
                    os.close(fd)
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        return self._streams[self._out].decode(errors="replace"), self._streams[self._err].decode(errors="replace")

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def _read_status(self) -> None:
        raw = os.read(self._status, 64)
        os.close(self._status)
        self.returncode = int(raw) if raw else -signal.SIGKILL  # no status: the server itself was killed

    def __del__(self) -> None:
        for fd in [*self._open, *([self._status] if self.returncode is None else [])]:
            try:
                os.close(fd)
            except OSError:
                pass


class WarmCli:
    """The server process (module docstring); ``start(args, cwd=, env=)`` forks one CLI process."""

    def __init__(self) -> None:
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        theirs.close()
        self._sock.settimeout(300)
        ready = self._sock.recv(64)
        if ready != b"ready":
            raise RuntimeError(f"the warm CLI server did not start: {self.proc.stderr.read().decode(errors='replace')[-2000:]}")

    def fork(self, request: Mapping[str, Any], fds: Sequence[int]) -> int:
        socket.send_fds(self._sock, [json.dumps(request).encode()], list(fds))
        return int(json.loads(self._sock.recv(256))["pid"])

    def start(self, args: Sequence[Any], *, cwd: Any = None, env: Mapping[str, str] | None = None) -> CliProcess:
        return CliProcess(self, args, cwd, env)

    def close(self) -> None:
        """End the server (by its PID: exactly the process started here) and reap it."""
        self._sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


# -- the server ----------------------------------------------------------------------------------------------------------
def _serve(fd: int) -> int:
    import ctypes
    import gc

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the test process
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # the preloaded objects stay out of every child's garbage collection (no copy-on-write of their pages)
    sock = socket.socket(fileno=fd)
    sock.sendall(b"ready")
    children: dict[int, int] = {}  # pid -> the write end of its status pipe
    while True:
        _reap(children)
        if not select.select([sock], [], [], 0.05)[0]:
            continue
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
        if not message:  # the test process closed its end
            return 0
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            for status in children.values():
                os.close(status)
            _child(request, fds)
        for passed in fds[:3]:
            os.close(passed)
        children[pid] = fds[3]
        sock.sendall(json.dumps({"pid": pid}).encode())


def _reap(children: dict[int, int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            out = children.pop(pid)
            os.write(out, str(os.waitstatus_to_exitcode(status)).encode())
            os.close(out)


def _child(request: Mapping[str, Any], fds: Sequence[int]) -> None:
    """As ``python -m privsdr ARGV`` in a new session, from here on; it exits as the interpreter does (non-daemon
    threads joined, ``atexit`` run, stdout and stderr flushed), without tearing down the preloaded modules one
    object at a time (that touches every inherited page: seconds of copy-on-write for nothing)."""
    import atexit
    import threading

    from privsdr.secure.fork_server import exit_code_of, take_request

    os.setsid()
    take_request(request, fds)
    sys.argv = ["privsdr", *request["argv"]]
    from privsdr.cli import main

    code = exit_code_of(main, request["argv"])
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's exit does first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1])))
