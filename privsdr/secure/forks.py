"""Party processes that cost a fork, not an interpreter start: one fork server per launching process (this module is
the launcher's side; the server's program is ``fork_server``).

A party process (``python -m privsdr.secure.party``) spends ~0.3 s of CPU starting an interpreter and importing
numpy, gmpy2, asyncio, ssl and privsdr's party modules before it does anything. When a launcher starts more than one
party (``launch.Parties`` with ``own_group``: every party of a one-machine run), it starts instead, once, a *fresh*
interpreter (``python -m privsdr.secure.forks``, never a fork of the launcher, whose memory holds private data) that
imports those public modules (``PRELOAD``; no module of MPyC: ``mpyc`` parses ``sys.argv`` and writes
``os.environ`` when imported, so the party imports it itself after its argv is set, as before) and then forks one
child per party on request. The server receives argv, a working directory, an environment and four file descriptors
per party, nothing else: never a row, a statistic or a key (a party's job and input reach the child on its stdin,
straight from the launcher, as in a fresh process). A forked child therefore holds only public modules and what its
own stdin brings; every random number it draws comes from the operating system (``secrets``), never from state
inherited from the server (Python's ``random`` reseeds itself at fork, numpy's legacy global generator is reseeded from
OS entropy in the child, ``_fresh_random_state``: nothing in a party uses it today); it shares the server's string-hash
seed, which protects no data.

Each child is what ``subprocess.Popen`` would have started (``ForkedProcess`` has the part of Popen's interface the
launcher uses: ``pid``, ``stdin``/``stdout``/``stderr`` pipes, ``poll``, ``wait(timeout)``, ``returncode``, ``kill``):
  - its stdin, stdout and stderr are pipes to the launcher, its working directory the party's folder, its environment
    the one the launcher sends (os.environ of the launcher at the request, ``LAUNCHER_ENV``, ``PYTHONPATH``), its
    ``sys.argv``/``sys.path[0]`` those of ``python -m privsdr.secure.party`` in that folder; it runs ``party.main``
    (what is read from the environment only when a process starts or a module is imported is the server's: the
    launcher's environment when the server started: ``PYTHON*`` variables, ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``
    for numpy's BLAS, the locale of ``LANG``/``LC_*`` and the time zone of ``TZ`` as the C library set them);
  - it leads a session and process group of its own before its PID reaches the launcher (the server waits for the
    child's ``setsid`` before it answers), so the launcher ends it by group exactly as a ``start_new_session`` child;
  - its exit status is the real one (``EXIT_*`` codes, ``-signal``): the server learns it with ``waitid(WNOWAIT)``,
    writes it on a pipe of the launcher's and reaps the child only when the launcher has read it (a ``release``
    request, ``ForkServer.ended``, answered once it is reaped, as ``Popen.wait`` returns; a broken server reaps its
    children when it exits), so the PID and group the launcher may signal cannot be reused before then (and the
    launcher checks and signals under the lock it reads the status under: ``ForkedProcess.send_signal``);
  - the parent-death chain: the child asks ``PR_SET_PDEATHSIG`` against the server (``LAUNCHER_ENV`` carries the
    server's PID: ``party.die_with_launcher`` checks it), and the server dies with the launcher: when the launcher's
    end of their socket closes (the launcher exited or was killed; a fork of the launcher closes its copy at once,
    ``os.register_at_fork``, also while the server is still starting), the server SIGKILLs every child still running,
    by group, and exits. A party whose stdin closes stops, as before.

Requests are numbered and every answer echoes its request's number; a server that does not answer in time (or answers
another request) is never asked again, but its socket stays open while a party it forked still runs (closing it
would kill that party, which another launch may be using): the next launch gets a new server, and the old one is
closed once the launcher has read the exit status of its last party (``ForkServer.retire``), or at exit.

The server lives in the launcher's process group, ignoring SIGINT, SIGTERM, SIGHUP and SIGQUIT (a Ctrl-C or a
SIGTERM to the group is the launcher's to handle: its ``finally``, ``launch.interrupts``, ends the parties in order;
the server ends on its socket's EOF), and is ended by the launcher at exit (``atexit``): it is a process the launcher
started, and nothing is left once the launcher is gone. ``python=`` (another interpreter), a launcher's own party
in the caller's process group (``own_group=False``: ``run_own_party``, the per-host CLIs), one party alone when no
server is up yet, platforms other than Linux, and ``PRIVSDR_FORK_PARTIES=0`` keep ``subprocess.Popen`` of a fresh
interpreter.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: "0" in the launcher's environment: every party from a fresh interpreter
SWITCH = "PRIVSDR_FORK_PARTIES"
#: the longest the launcher waits for the server to import ``PRELOAD`` and say it is ready (seconds)
START_TIMEOUT = 120.0
#: the longest a wait for a party's exit status sleeps before it looks again (another thread may have read it)
_SLICE = 0.5
#: how the server is started (its socket's fd number is appended)
_SERVER_COMMAND = (sys.executable, "-m", "privsdr.secure.fork_server")


def available() -> bool:
    """Whether parties may be forked here (Linux, and not switched off)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")
            and os.environ.get(SWITCH, "1") != "0")


# -- the launcher's side -----------------------------------------------------------------------------------------------
class ForkServer:
    """The launcher's handle on its server process (module docstring); ``start(argv, cwd, env)`` forks one party.

    Every request carries a number the server echoes: an answer with another number, a socket error or no answer in
    ``START_TIMEOUT`` seconds marks the server ``broken`` (no request is sent to it again). A broken server is not
    closed while a party it forked still runs (closing it would SIGKILL that party, which another launch may be
    using): ``server_for`` starts a new one for the next launches, and the broken one is closed once the exit status
    of every party it forked has been read (``ended``), or at the launcher's exit."""

    def __init__(self, pythonpath: str) -> None:
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        _launcher_ends.add(self._sock)  # before the server starts: a fork of the launcher closes it (``_forget_in_child``)
        env = {**os.environ, "PYTHONPATH": pythonpath}
        try:
            self.proc = subprocess.Popen([*_SERVER_COMMAND, str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         cwd="/", env=env)
        except BaseException:
            self._forget_socket()
            raise
        finally:
            theirs.close()
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self._sock.settimeout(START_TIMEOUT)  # and for every answer: a server that gives none in time is not used again
        self.broken = False
        self._number = 0  #: the last request's number
        self._running = 0  #: parties forked here whose exit status the launcher has not read yet
        try:
            ready = self._sock.recv(64)
        except OSError:
            ready = b""
        if ready != b"ready":
            self.close()
            raise RuntimeError("the party fork server did not start (its error is on stderr)")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.owner == os.getpid() and not self.broken and self.proc.poll() is None

    def start(self, argv: Sequence[str], cwd: str | Path, env: Mapping[str, str]) -> ForkedProcess:
        return ForkedProcess(self, argv, cwd, env)

    def _ask(self, request: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        """Send ``request`` (numbered) and return the server's answer to it; any failure marks the server broken
        (held: ``self._lock``)."""
        if self.broken:
            raise OSError("the party fork server did not answer a request as asked (in time, to that request); it is not "
                          "used again")
        self._number += 1
        try:
            socket.send_fds(self._sock, [json.dumps({**request, "n": self._number}).encode()], list(fds))
            answer = json.loads(self._sock.recv(1 << 16) or b"{}")
            if answer.get("n") != self._number:  # not the answer to this request (or none: the server is gone)
                raise OSError(f"the party fork server's answer is not the answer to request {self._number}")
        except (OSError, ValueError):  # no answer in time, a late one, or none at all: never used again
            self.broken = True
            raise
        return dict(answer)

    def fork(self, request: Mapping[str, Any], fds: Sequence[int]) -> int:
        with self._lock:
            answer = self._ask(dict(request), fds)
            if "pid" in answer:
                self._running += 1
        if "pid" not in answer:
            raise OSError(f"the party fork server could not fork: {answer.get('error', 'it is gone')}")
        return int(answer["pid"])

    def ended(self, pid: int, released: bool) -> None:
        """The launcher has read ``pid``'s exit status (``released``: the server wrote it; otherwise the server died).
        The server reaps it and answers once it has (so that, as with ``Popen.wait``, no trace of the process is left
        when the launcher's ``wait`` or ``poll`` returns); a broken server is closed after its last party."""
        with self._lock:
            self._running -= 1
            if released:
                with contextlib.suppress(OSError, ValueError):  # marked broken: not asked again
                    self._ask({"release": pid})
            last = self.broken and self._running == 0
        if last:
            self.close(1.0)

    def close(self, timeout: float = 5.0) -> None:
        """End the server (it SIGKILLs its children still running) and reap it."""
        self._forget_socket()
        _retired.discard(self)
        if self.owner != os.getpid():
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def retire(self) -> None:
        """Not used for new parties any more (broken, or its server died): closed now unless a party it forked may
        still run (then by ``ended`` after the last one, or at exit)."""
        self.broken = True
        with self._lock:
            idle = self._running == 0
        if idle:
            self.close(1.0)
        else:
            _retired.add(self)

    def _forget_socket(self) -> None:
        _launcher_ends.discard(self._sock)
        with contextlib.suppress(OSError):
            self._sock.close()


class ForkedProcess:
    """One party forked by the server: the part of ``subprocess.Popen``'s interface the launcher uses (binary pipes)."""

    def __init__(self, server: ForkServer, argv: Sequence[str], cwd: str | Path, env: Mapping[str, str]) -> None:
        self.args, self._server = list(argv), server
        self.returncode: int | None = None
        self._lock = threading.Lock()
        ours: list[int] = []  # stdin's write end; stdout's, stderr's and the exit status's read ends
        theirs: list[int] = []  # the other ends: the child's stdin, stdout, stderr; the server's status pipe
        try:
            for direction in ("in", "out", "err", "status"):
                r, w = os.pipe()
                ours.append(w if direction == "in" else r)
                theirs.append(r if direction == "in" else w)
            self.pid = server.fork({"argv": self.args, "cwd": str(cwd), "env": dict(env)}, theirs)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self.stdin: IO[bytes] | None = open(ours[0], "wb")  # noqa: SIM115 - closed by the launcher (PartyProcess.end)
        self.stdout: IO[bytes] | None = open(ours[1], "rb")  # noqa: SIM115
        self.stderr: IO[bytes] | None = open(ours[2], "rb")  # noqa: SIM115
        self._status: int | None = ours[3]

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._collect(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
        assert self.returncode is not None
        return self.returncode

    def _collect(self, timeout: float | None) -> bool:
        """Read the exit status once the server writes it (within ``timeout`` s); True when it is known. Waits by
        ``select.poll`` (any fd number; ``select.select`` fails from 1024 on), in slices of at most ``_SLICE`` s: another
        thread may read the status and close its fd meanwhile (its number may then be reused)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            status = self._status
            if status is None:
                break
            left = _SLICE if deadline is None else min(_SLICE, max(0.0, deadline - time.monotonic()))
            poller = select.poll()
            poller.register(status, select.POLLIN)
            if poller.poll(left * 1000.0):
                with self._lock:
                    if self.returncode is None and self._status == status:
                        raw = os.read(status, 64)
                        # no status: the server itself was killed, and its children with it (PR_SET_PDEATHSIG)
                        self._server.ended(self.pid, released=bool(raw))  # reaped before any thread sees the code
                        self.returncode = int(raw) if raw else -signal.SIGKILL
                        self._status = None
                        os.close(status)
            elif deadline is not None and time.monotonic() >= deadline:
                break
        return self.returncode is not None

    def send_signal(self, sig: int) -> None:
        """Signal the party unless its exit status was read (then the server may have reaped it and its PID may be
        another process's); checked and sent under the lock its status is read under, so no release comes between."""
        with self._lock:
            if self.returncode is None:
                os.kill(self.pid, sig)

    def signal_group(self, sig: int) -> None:
        """``send_signal`` to the party's whole process group (it leads its own)."""
        with self._lock:
            if self.returncode is None:
                os.killpg(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __del__(self) -> None:
        status, self._status = getattr(self, "_status", None), None
        if status is not None:
            with contextlib.suppress(OSError):
                os.close(status)


_server: ForkServer | None = None
_server_lock = threading.Lock()
#: servers no longer used for new parties whose parties may still run (``ForkServer.retire``)
_retired: set[ForkServer] = set()
#: the launcher's end of every server's socket, from before the server starts (``_forget_in_child`` closes them)
_launcher_ends: set[socket.socket] = set()


def server_for(parties: int, pythonpath: str) -> ForkServer | None:
    """The fork server to start ``parties`` party processes from, started now when there are several and none is up;
    None: start them as fresh interpreters (``available``, module docstring)."""
    global _server
    if not available():
        return None
    with _server_lock:
        if _server is not None and not _server.alive():
            _server.retire()
            _server = None
        if _server is None and parties > 1:
            try:
                _server = ForkServer(pythonpath)
            except (OSError, RuntimeError):
                return None  # fresh interpreters, as without a server
        return _server


def running() -> ForkServer | None:
    """This process's fork server, if one is up."""
    server = _server
    return server if server is not None and server.alive() else None


def shutdown() -> None:
    """End this process's fork servers, if any is up (their children still running are SIGKILLed); run at exit."""
    global _server
    with _server_lock:
        for server in [*_retired, *([_server] if _server is not None else [])]:
            if server.owner == os.getpid():
                server.close()
        _retired.clear()
        _server = None


def _forget_in_child() -> None:
    """A fork of the launcher neither uses nor keeps its parent's server: the server must see EOF when the launcher dies."""
    global _server, _server_lock
    _server_lock = threading.Lock()
    for end in list(_launcher_ends):  # also a server's that is still starting (``ForkServer.__init__``)
        with contextlib.suppress(OSError):
            end.close()
    _launcher_ends.clear()
    _retired.clear()
    _server = None


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
