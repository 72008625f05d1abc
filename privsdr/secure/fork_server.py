"""The party fork server's own program (``python -m privsdr.secure.fork_server FD``), started by ``forks.ForkServer``.

It imports ``PRELOAD`` (public modules only, never ``mpyc``), says ``ready`` on its socket (fd ``FD``, the launcher's
other end) and then, per numbered request (argv, cwd, env and four fds: never a row, a statistic or a key), forks a
child that leads a session of its own, becomes ``python -m privsdr.secure.party ARGV`` (``take_request``, ``_child``)
and exits with ``party.main``'s code (``exit_code_of``); it reports each child's exit status (``waitid(WNOWAIT)``),
reaps it when the launcher releases it, ignores the group signals a launcher handles, and when the launcher's end of
its socket closes, SIGKILLs the children left and exits. The process model and what a child holds: ``forks``'
module docstring.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: the public modules a party imports before it reads its stdin (never ``mpyc``: ``forks``' module docstring)
PRELOAD = ("numpy", "gmpy2", "asyncio", "ssl", "privsdr.secure.party")
_PR_SET_PDEATHSIG = 1


def _die_with_parent(prctl: Any) -> None:
    """``PR_SET_PDEATHSIG``: SIGKILL this process when the one that forked it dies (``prctl`` looked up before the fork)."""
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


#: the signals the server ignores: a Ctrl-C, a SIGTERM or SIGHUP to the launcher's group is the launcher's to handle
#: (``launch.interrupts``: it ends its parties in order); the server ends when the launcher's end of its socket closes
_IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def serve(fd: int) -> int:
    """The server's loop (module docstring): import ``PRELOAD``, say ``ready``, fork a party per request, report each
    exit status, reap a child once released; when the launcher's end closes, SIGKILL the children left and return.
    Each answer carries the request's number (``n``)."""
    for sig in _IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # the preloaded objects stay out of the children's collections (their pages stay shared)
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None
    sock = socket.socket(fileno=os.dup(fd))  # a low fd number: the launcher's may be any
    os.close(fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)
    children: dict[int, int | None] = {}  # pid -> the write end of its status pipe (None once written)
    server = (sock.fileno(), wake_r, wake_w)
    poller = select.poll()  # any fd number (``select.select`` fails from 1024 on)
    for watched in server[:2]:
        poller.register(watched, select.POLLIN)
    try:
        sock.sendall(b"ready")
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
            _report(children)
            if server[0] not in ready:
                continue
            try:
                message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
            except (ConnectionResetError, BrokenPipeError):  # it closed its end with an answer unread (broken)
                break
            if not message:  # the launcher is gone (exited, killed): so are its parties
                break
            request = json.loads(message)
            number = request.get("n")
            if "release" in request:
                pid = int(request["release"])
                if pid in children and children[pid] is None:
                    del children[pid]
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, 0)
                if not _answer(sock, {"n": number, "released": pid}):
                    break
                continue
            try:
                pid = _fork(request, fds, server, children, prctl)
            except OSError as exc:
                for passed in fds:
                    os.close(passed)
                if not _answer(sock, {"n": number, "error": str(exc)}):
                    break
                continue
            children[pid] = fds[3]
            if not _answer(sock, {"n": number, "pid": pid}):
                break
    finally:  # whatever ended the loop (EOF, a broken pipe, a bad request): no child outlives it
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # each leads its own group (``_fork``); a zombie ignores it
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return 0


def _answer(sock: socket.socket, answer: Mapping[str, Any]) -> bool:
    """Send ``answer`` to the launcher; False when its end is closed (it is gone, or gave up on this server)."""
    try:
        sock.send(json.dumps(answer).encode())
    except (ConnectionResetError, BrokenPipeError):
        return False
    return True


def _report(children: dict[int, int | None]) -> None:
    """Write the exit status of every child that ended (not reaped: its PID stays reserved until released)."""
    for pid, out in list(children.items()):
        if out is None:
            continue
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = None
        if info is None:
            continue
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        with contextlib.suppress(OSError):
            os.write(out, str(code).encode())
        os.close(out)
        children[pid] = None


def _fork(request: Mapping[str, Any], fds: Sequence[int], server: Sequence[int], children: Mapping[int, int | None],
          prctl: Any = None) -> int:
    """Fork one party; return its PID once it leads a session of its own. The server's copies of ``fds`` except the
    status pipe are closed here."""
    if len(fds) != 4:
        raise OSError(f"a party needs 4 file descriptors, got {len(fds)}")
    me = os.getpid()
    started_r, started_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: nothing below returns
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, *_IGNORED[1:]):
                signal.signal(sig, signal.SIG_DFL)  # as in a fresh interpreter
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.close(started_r)
            os.setsid()
            _die_with_parent(prctl)
            if os.getppid() != me:  # its server was gone before it could ask to die with it
                from .party import EXIT_LAUNCHER_GONE  # preloaded (``PRELOAD``)

                os._exit(EXIT_LAUNCHER_GONE)
            os.close(started_w)  # the server answers the launcher now
            for inherited in [*server, *(out for out in children.values() if out is not None)]:
                os.close(inherited)
            _fresh_random_state()
            _child(request, fds)
        except BaseException:  # noqa: BLE001 - before the party's own code ran (e.g. its folder is gone)
            traceback.print_exc()
        finally:
            os._exit(1)
    os.close(started_w)
    os.read(started_r, 1)  # EOF: the child has its own session (or is gone already)
    os.close(started_r)
    for passed in fds[:3]:
        os.close(passed)
    return pid


def _fresh_random_state() -> None:
    """A forked child draws from the operating system, never from state it shares with its siblings: numpy's legacy
    global ``RandomState`` (seeded once, when the server imported numpy) is reseeded from OS entropy (Python's
    ``random`` reseeds itself at fork; ``secrets`` reads the OS)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def take_request(request: Mapping[str, Any], fds: Sequence[int]) -> None:
    """Make this forked child the process a request describes: the passed fds as its stdin, stdout and stderr (the
    passed copies closed), the request's working directory and environment (``TMPDIR`` read again, as a fresh
    process reads it). Also what the tests' warm CLI server does to its forked children (tests/warm_cli.py)."""
    import tempfile

    for target, passed in zip((0, 1, 2), fds[:3], strict=True):
        os.dup2(passed, target)
    for passed in fds:
        os.close(passed)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None


def _child(request: Mapping[str, Any], fds: Sequence[int]) -> None:
    """``python -m privsdr.secure.party ARGV`` in ``cwd`` with ``env``, from here on (module docstring)."""
    take_request(request, fds)
    from . import party

    sys.argv = [str(party.__file__), *request["argv"]]
    if sys.path:
        sys.path[0] = os.getcwd()  # as ``python -m`` puts it
    party.exit_now(exit_code_of(party.main, request["argv"]))


def exit_code_of(main: Callable[[list[str]], Any], argv: list[str]) -> int:
    """``main(argv)``'s exit code as the interpreter gives a program's: its return value or ``SystemExit``'s code (a
    code that is not an integer printed on stderr, then 1), an uncaught exception printed with code 1, and an
    uncaught ``KeyboardInterrupt`` the end by SIGINT. Also the tests' warm CLI server's (tests/warm_cli.py)."""
    try:
        code: Any = main(argv)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as the interpreter ends on an uncaught KeyboardInterrupt
        code = 1
    except BaseException:  # noqa: BLE001 - printed and exit code 1, as the interpreter does
        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    return code or 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
