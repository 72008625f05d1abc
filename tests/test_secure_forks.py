"""The fork server of the party processes (``privsdr.secure.forks``): every guarantee of a ``subprocess.Popen`` party
holds for a forked one. Each test starts the processes it checks and ends exactly those (by PID or process group);
the fork server of this test process is one of them (``forks.shutdown`` ends it; it also dies with this process).
A launcher killed with forked parties leaves neither them nor its server: ``test_secure_fail_clean.py``."""
from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import alive

from privsdr.secure import AggregationJob, NodeJob, forks, launch
from privsdr.secure.launch import Parties
from privsdr.secure.party import EXIT_LAUNCHER_GONE, LAUNCHER_ENV

pytestmark = pytest.mark.skipif(not forks.available(), reason="parties are forked on Linux only")

#: each party's input: numbers whose float64 bytes occur nowhere else (a party's memory is searched for the others')
INPUTS = {"a": {"v": np.array([1.2345678901234567, -2.718281828459045, 3.141592653589793])},
          "b": {"v": np.array([-4.669201609102990, 0.5772156649015329, 1.6180339887498949])}}


def job(parties=("s", "a", "b"), tls=False) -> AggregationJob:
    return AggregationJob(list(parties), ["a", "b"], 1, [NodeJob("v", 3, 0.5, (1, 1), 10.0)], 60.0, tls=tls).with_addresses()



def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def memory_holds(pid: int, needles: dict[str, bytes]) -> set[str]:
    """The names of ``needles`` found anywhere in the readable memory of process ``pid`` (a descendant of this one)."""
    found: set[str] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms or line.rstrip().endswith("[vvar]"):
                continue
            lo, hi = (int(a, 16) for a in span.split("-"))
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, OverflowError):
                continue
            found |= {name for name, needle in needles.items() if needle in chunk}
    return found


@pytest.fixture
def fresh_server():
    """No fork server in this process when the test starts (the next one starts inside the test); ended after it."""
    forks.shutdown()
    yield
    forks.shutdown()


def test_forked_parties_hold_nothing_private_of_the_launcher_or_of_each_other(fresh_server):
    """The fork server starts once the launcher holds a secret, a module-level marker and both contributors' inputs;
    it is a fresh interpreter, so its memory holds none of them (a server forked from the launcher would hold all).
    Three parties forked from it (their parent), once each has read its job and input: none holds the secret or the
    marker, and none holds another party's input (each holds its own: it came on its stdin)."""
    secret = os.urandom(24)
    launch._fork_test_marker = b"module state of the launcher " + os.urandom(16)  # type: ignore[attr-defined]
    inputs = {k: {"v": v["v"].copy()} for k, v in INPUTS.items()}
    own = {name: inputs[name]["v"].tobytes() for name in inputs}
    needles = {"secret": secret, "marker": launch._fork_test_marker, **own}  # type: ignore[attr-defined]
    try:
        server = forks.server_for(3, launch._pythonpath())  # as ``Parties`` starts it: once the launcher holds all that
        assert server is not None and parent(server.pid) == os.getpid()
        try:
            assert memory_holds(server.pid, needles) == set()
        except PermissionError:
            pytest.skip("this system does not let a process read its descendants' memory")
        with Parties(job(), inputs, ["s", "a", "b"]) as parties:
            assert forks.running() is server and all(parent(pid) == server.pid for pid in parties.pids)
            deadline = time.monotonic() + 60  # every party has read its job and input (its first stage)
            while (not all("started" in p.stages or p.proc.poll() is not None for p in parties.procs.values())
                   and time.monotonic() < deadline):
                time.sleep(0.02)
            assert all("started" in p.stages or p.proc.poll() is not None for p in parties.procs.values())
            held = {name: memory_holds(proc.pid, needles) for name, proc in parties.procs.items()}
            held["server"] = memory_holds(server.pid, needles)
            assert held == {"s": set(), "a": {"a"}, "b": {"b"}, "server": set()}
    finally:
        del launch._fork_test_marker  # type: ignore[attr-defined]


def test_a_forked_party_leads_its_own_group_when_its_pid_is_returned(tmp_path):
    """Whatever the scheduling, a forked party is already the leader of a new session and process group when its PID
    reaches the launcher (``os.killpg(pid)`` then ends it and nothing else); its exit status is the signal's, and it
    has been reaped by the time ``wait`` returns (the server has no child left)."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    procs = []
    try:
        for _ in range(25):
            proc = server.start(["--index", "0"], tmp_path, {**os.environ, LAUNCHER_ENV: str(server.pid)})
            procs.append(proc)
            assert (os.getsid(proc.pid), os.getpgid(proc.pid)) == (proc.pid, proc.pid)
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
        assert [proc.wait(30) for proc in procs] == [-signal.SIGKILL] * len(procs)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(30)
    assert children(server.pid) == []  # reaped by the time ``wait`` returned, as with Popen: no zombie, no PID in use


def _both(tmp_path, argv, env=None, stdin=b"", sig=None):
    """The same party program started both ways (a fresh interpreter, forked by the server): each one's exit code,
    stderr, and its working directory and open file descriptors (fd -> pipe it is, by which of our ends) as the
    process held them when it had read its stdin to the end or been signalled."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    results = {}
    for how, via in (("fresh", None), ("forked", server)):
        workdir = tmp_path / how
        workdir.mkdir(parents=True)
        old = dict(os.environ)
        try:
            os.environ.update(env or {})
            proc = launch._start(list(argv), workdir, None, True, via)
        finally:
            os.environ.clear()
            os.environ.update(old)
        assert isinstance(proc, subprocess.Popen) == (via is None)
        try:
            ours = {os.fstat(f.fileno()).st_ino: name for name, f in (("stdin", proc.stdin), ("stdout", proc.stdout),
                                                                      ("stderr", proc.stderr))}
            held: dict[int, str] = {}
            if sig is not None:  # a party waiting for its job: what it holds then, then the signal
                deadline = time.monotonic() + 60
                # until its channel to us (fd 3) is open and its fd 1 is stderr: ``party.main`` waits for its job then
                while (held.get(3) != "stdout" or held.get(1) != "stderr") and time.monotonic() < deadline:
                    held = _fds(proc.pid, ours)
                    time.sleep(0.02)
                assert held.get(3) == "stdout" and held.get(1) == "stderr", held
                cwd = os.readlink(f"/proc/{proc.pid}/cwd")
                proc.send_signal(sig)
            else:
                cwd = str(workdir)
            proc.stdin.write(stdin)
            proc.stdin.close()
            err = proc.stderr.read().decode()
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
            for stream in (proc.stdout, proc.stderr):
                stream.close()
        results[how] = (code, err.replace(str(workdir), "WORKDIR"), cwd.replace(str(workdir), "WORKDIR"), held)
    return results


def _fds(pid: int, ours: dict[int, str]) -> dict[int, str]:
    """The open fds of process ``pid`` -> which of our pipes each is (``_pipe``); one closed while read is left out."""
    held = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):  # closed meanwhile (the child is still closing the server's)
            held[int(fd)] = _pipe(os.readlink(f"/proc/{pid}/fd/{fd}"), ours)
    return held


def _pipe(target: str, ours: dict[int, str]) -> str:
    """Which of our pipes ``target`` (a /proc/PID/fd link) is, else the link itself."""
    return ours.get(int(target[len("pipe:["):-1]), target) if target.startswith("pipe:") else target


def test_a_forked_party_gets_the_pipes_folder_and_exit_codes_of_a_fresh_one(tmp_path):
    """The same failures, both ways: the same exit code and the same error (no job on stdin: 2; an MPyC option on the
    command line: 2; SIGTERM while it waits for its job: -SIGTERM, in its private folder, holding exactly its three
    pipes to the launcher and its channel, a copy of its stdout: fds 0-3, nothing of the server's)."""
    no_job = _both(tmp_path / "a", ["--index", "0"])
    assert no_job["fresh"] == no_job["forked"] and no_job["fresh"][0] == 2 and "no job on stdin" in no_job["fresh"][1]
    option = _both(tmp_path / "b", ["--index", "0", "-M", "3"])
    assert option["fresh"] == option["forked"] and option["fresh"][0] == 2 and "MPyC's options" in option["fresh"][1]
    waiting = _both(tmp_path / "c", ["--index", "0"], sig=signal.SIGTERM)
    assert waiting["fresh"] == waiting["forked"], waiting
    assert waiting["forked"][0] == -signal.SIGTERM and waiting["forked"][2] == "WORKDIR"
    assert waiting["forked"][3] == {0: "stdin", 1: "stderr", 2: "stderr", 3: "stdout"}


def test_a_forked_party_reads_the_environment_of_the_request_not_the_servers(fresh_server, tmp_path):
    """The server started while the launcher's environment named PID 1 as the parties' launcher; the environment
    sent with a request replaces the server's: without that variable the party waits for its job, with a launcher
    that is not its parent it stops at once (``party.die_with_launcher``: exit code 8), as a fresh one does."""
    os.environ[LAUNCHER_ENV] = "1"
    try:
        server = forks.server_for(2, launch._pythonpath())
    finally:
        del os.environ[LAUNCHER_ENV]
    assert server is not None
    waits = server.start(["--index", "0"], tmp_path, dict(os.environ))
    gone = server.start(["--index", "0"], tmp_path, {**os.environ, LAUNCHER_ENV: str(os.getpid())})
    try:
        assert gone.wait(30) == EXIT_LAUNCHER_GONE
        with pytest.raises(subprocess.TimeoutExpired):
            waits.wait(1.0)
    finally:
        for proc in (waits, gone):
            proc.kill()
            proc.wait(30)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()


def test_forked_parties_die_with_their_server_even_when_their_stdin_stays_open(fresh_server, tmp_path):
    """The server killed outright while the launcher lives and keeps the parties' stdin open: Linux ends the parties
    (``PR_SET_PDEATHSIG`` against the server), the launcher sees them killed, and the next launch starts a new server."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    procs = [server.start(["--index", "0"], tmp_path, {**os.environ, LAUNCHER_ENV: str(server.pid)}) for _ in range(2)]
    try:
        os.kill(server.pid, signal.SIGKILL)
        assert [proc.wait(30) for proc in procs] == [-signal.SIGKILL] * 2
        deadline = time.monotonic() + 20
        while any(alive(p.pid) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p.pid for p in procs if alive(p.pid)]
        again = forks.server_for(2, launch._pythonpath())
        assert again is not None and again.pid != server.pid and again.alive()
    finally:
        for proc in procs:
            if alive(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()


def test_which_launches_fork(fresh_server, monkeypatch):
    """A one-party launcher with no server up, a launcher's own party (in the caller's group), another interpreter
    (``python=``) and ``PRIVSDR_FORK_PARTIES=0`` start fresh interpreters; several parties fork, and so does one party
    once a server is up."""
    assert forks.server_for(1, launch._pythonpath()) is None and forks.running() is None
    with Parties(job(), INPUTS, ["s", "a", "b"]) as parties:
        server = forks.running()
        assert server is not None and all(parent(pid) == server.pid for pid in parties.pids)
    assert forks.server_for(1, launch._pythonpath()) is server
    monkeypatch.setenv(forks.SWITCH, "0")
    assert forks.server_for(3, launch._pythonpath()) is None
    monkeypatch.delenv(forks.SWITCH)
    with Parties(job(), INPUTS, ["a"], python=sys.executable) as parties:
        assert all(isinstance(p.proc, subprocess.Popen) for p in parties.procs.values())
    with Parties(job(), INPUTS, ["a"], own_group=False) as parties:
        assert all(isinstance(p.proc, subprocess.Popen) for p in parties.procs.values())


MANY_FDS = textwrap.dedent("""
    import os, resource, signal, sys
    from privsdr.secure import forks, launch
    from privsdr.secure.party import LAUNCHER_ENV
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(4096, hard)), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]   # a launcher with many files open
    server = forks.server_for(2, launch._pythonpath())   # its socket's fd number is above 1023 here and in the server
    proc = server.start(["--index", "0"], os.getcwd(), {**os.environ, LAUNCHER_ENV: str(server.pid)})
    assert proc._status >= 1024, proc._status
    os.killpg(proc.pid, signal.SIGKILL)
    print(proc.wait(20), server.alive(), flush=True)
""")


def _run(script: str, tmp_path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``script`` in a launcher process of its own (its own session: ended by group here whatever happens)."""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_launcher_holding_more_than_1024_files_gets_its_forked_partys_exit_status(tmp_path):
    """``select.select`` fails on fd numbers from 1024 on: a launcher with ~1100 files open (its status pipe's fd and
    the server's socket fd both above 1023) still learns the killed party's exit status, and its server lives."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 1200:
        pytest.skip("the hard limit on open files is below 1200")
    done = _run(MANY_FDS, tmp_path)
    assert done.returncode == 0 and done.stdout.split() == [str(-signal.SIGKILL), "True"], done.stderr


@contextlib.contextmanager
def _stopped(server: forks.ForkServer) -> Iterator[None]:
    """The server stopped (SIGSTOP) while inside, continued after."""
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if server.proc.poll() is None:  # not ended meanwhile (a broken server is, after its last party)
            os.kill(server.pid, signal.SIGCONT)


def test_a_release_without_an_answer_in_time_is_never_answered_by_the_next_fork(fresh_server, tmp_path):
    """A server that does not answer a release in time (stopped here; 0.5 s stands for ``START_TIMEOUT``) is broken: its
    late answer is never read as the next fork's, which fails (and a launch starts that party afresh)."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    env = {**os.environ, LAUNCHER_ENV: str(server.pid)}
    first = server.start(["--index", "0"], tmp_path, env)
    server._sock.settimeout(0.5)
    os.killpg(first.pid, signal.SIGKILL)
    while not select.select([first._status], [], [], 10)[0]:  # the server has written its exit status
        pass
    with _stopped(server):
        assert first.wait(10) == -signal.SIGKILL  # its release times out
    assert server.broken and not server.alive()
    with pytest.raises(OSError):
        server.start(["--index", "0"], tmp_path, env)
    assert forks.server_for(2, launch._pythonpath()) is not server


def test_an_answer_to_another_request_breaks_the_server(fresh_server, tmp_path):
    """Requests are numbered and the server echoes the number: a stray answer (a request sent here without reading
    its answer) is never taken for the fork's; the fork fails and the server is not used again."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    server._sock.send(json.dumps({"n": 0, "release": 1}).encode())  # its answer is still unread
    with pytest.raises(OSError, match="not the answer"):
        server.start(["--index", "0"], tmp_path, {**os.environ, LAUNCHER_ENV: str(server.pid)})
    assert server.broken


def test_a_fork_that_times_out_leaves_the_parties_other_launches_use_running(fresh_server, tmp_path):
    """A fork without an answer in time breaks the server, but the party it forked before (another launch's, or an
    earlier one of this launch) keeps running: the next launch gets a new server, and the broken one is ended once
    the exit status of its last party has been read."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    env = {**os.environ, LAUNCHER_ENV: str(server.pid)}
    running = server.start(["--index", "0"], tmp_path, env)
    try:
        server._sock.settimeout(0.5)
        with _stopped(server), pytest.raises(OSError):
            server.start(["--index", "0"], tmp_path, env)
        assert server.broken
        again = forks.server_for(2, launch._pythonpath())
        assert again is not None and again is not server and again.alive()
        time.sleep(0.5)  # what closing the old server's socket would have done by now: SIGKILL its parties
        assert running.poll() is None and alive(running.pid) and server.proc.poll() is None
        os.killpg(running.pid, signal.SIGKILL)
        assert running.wait(20) == -signal.SIGKILL
        assert server.proc.wait(20) == 0  # its last party's status was read: the broken server was ended
    finally:
        running.kill()
        running.wait(30)
        for stream in (running.stdin, running.stdout, running.stderr):
            stream.close()


FORK_WHILE_STARTING = textwrap.dedent("""
    import os, threading, time
    from privsdr.secure import forks, launch

    def sockets():
        links = {}
        for fd in os.listdir("/proc/self/fd"):
            with __import__("contextlib").suppress(OSError):
                links[fd] = os.readlink(f"/proc/self/fd/{fd}")
        return {link for link in links.values() if link.startswith("socket:")}

    starting = threading.Thread(target=forks.server_for, args=(2, launch._pythonpath()))
    starting.start()
    def started():
        me = os.getpid()
        return any(open(f"/proc/{me}/task/{t}/children").read().split() for t in os.listdir(f"/proc/{me}/task"))

    while not started():   # the server process exists: it is starting (importing numpy ...), not ready yet
        time.sleep(0.001)
    read, write = os.pipe()
    kid = os.fork()
    if kid == 0:   # a fork of the launcher (a multiprocessing or joblib worker) while the server starts
        os.write(write, " ".join(sorted(sockets())).encode())
        os._exit(0)
    os.close(write)
    held = os.read(read, 1 << 16).decode().split()
    os.waitpid(kid, 0)
    starting.join()
    server = forks.running()
    print(server is not None and server.proc.poll() is None, f"socket:[{os.fstat(server._sock.fileno()).st_ino}]" in held)
""")


def test_a_fork_of_the_launcher_while_its_server_starts_holds_no_end_of_its_socket(tmp_path):
    """The launcher's end of the server's socket is closed in a fork of the launcher even when the fork comes while the
    server is still starting (otherwise the fork would keep the server, and so its parties, alive after the launcher)."""
    done = _run(FORK_WHILE_STARTING, tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["True", "False"], (done.stdout, done.stderr)


SIGNALLED = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from privsdr.secure import AggregationJob, NodeJob, forks
    from privsdr.secure.launch import Interrupted, Parties

    job = AggregationJob(["s", "a", "b"], ["a", "b"], 1, [NodeJob("v", 3, 0.5, (1, 1), 10.0)], 60.0).with_addresses()
    inputs = {"a": {"v": np.array([1.0, 2.0, 3.0])}, "b": {"v": np.array([4.0, 5.0, 6.0])}}
    with Parties(job, inputs, job.parties) as parties:
        parties.agree()
        try:   # the signal may come as soon as the line is out
            print(json.dumps([*parties.pids, forks.running().pid]), flush=True)
            time.sleep(60)
        except Interrupted as exc:   # the launcher's handler ran; a moment later, its parties and server still run
            time.sleep(0.5)
            print(exc, [p.proc.poll() for p in parties.procs.values()], forks.running() is not None, flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_launchers_group_is_handled_by_the_launcher_not_by_its_server(tmp_path, sig):
    """SIGTERM or SIGHUP to the launcher's whole process group (a shell's job control, a service manager): the server
    ignores it (dying, it would kill every forked party at once), so the launcher's own handler ends the run in order,
    as with fresh parties; then nothing is left."""
    launcher = subprocess.Popen([sys.executable, "-c", SIGNALLED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path, start_new_session=True)
    pids: list[int] = []
    try:
        line = launcher.stdout.readline()
        assert line, launcher.stderr.read()
        pids = json.loads(line)
        os.killpg(launcher.pid, sig)
        out, err = launcher.communicate(timeout=30)
        assert out.strip() == f"stopped by {signal.Signals(sig).name} [None, None, None] True", err
        assert launcher.returncode == 0, err
        deadline = time.monotonic() + 20
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if alive(p)]
    finally:
        for pid in [launcher.pid, *pids]:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        launcher.wait()


DRAWS = textwrap.dedent("""
    import os, random, secrets, sys
    import numpy as np
    from privsdr.secure import fork_server

    def draw(request, fds):   # the party's program replaced by one that prints what it draws (fds: the launcher's pipes)
        os.write(fds[1], f"{np.random.random()!r} {random.random()!r} {secrets.token_hex(16)}".encode())
        os._exit(0)

    np.random.get_state()   # a preloaded module that touches numpy's global generator: its state is fixed in the server
    fork_server._child = draw
    sys.exit(fork_server.serve(int(sys.argv[-1])))
""")


def test_sibling_forked_parties_draw_different_random_numbers(fresh_server, monkeypatch, tmp_path):
    """Two children of one server draw different numbers from numpy's legacy global generator (its state fixed in the
    server once anything there touched it), from ``random`` and from ``secrets``: nothing a party might draw is shared
    with a sibling."""
    monkeypatch.setattr(forks, "_SERVER_COMMAND", (sys.executable, "-c", DRAWS))
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    draws = []
    for _ in range(2):
        proc = server.start([], tmp_path, dict(os.environ))
        try:
            draws.append(proc.stdout.read().decode().split())
            assert proc.wait(20) == 0
        finally:
            proc.kill()
            proc.wait(20)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()
    assert [len(d) for d in draws] == [3, 3]
    assert [a != b for a, b in zip(*draws, strict=True)] == [True, True, True], draws


@pytest.mark.parametrize("how", ["send_signal", "signal_group"])
def test_a_forked_partys_pid_is_not_released_between_the_check_and_the_signal(tmp_path, monkeypatch, how):
    """The launcher signals a forked party only while its PID is still the server's child: the party ends just after
    the check (killed here, its status written) and another thread waits for it (as the launcher's reader does); that
    wait cannot read the status and release the PID (the server reaps it; it may then be reused) before the signal
    is sent."""
    server = forks.server_for(2, launch._pythonpath())
    assert server is not None
    proc = server.start(["--index", "0"], tmp_path, {**os.environ, LAUNCHER_ENV: str(server.pid)})
    name = "kill" if how == "send_signal" else "killpg"
    real, killpg = getattr(os, name), os.killpg
    waiter = threading.Thread(target=proc.wait, args=(30,))
    seen: list[int | None] = []

    def late(pid: int, sig: int) -> None:  # the checks are done: now the party ends and a reader waits for it
        killpg(proc.pid, signal.SIGKILL)
        select.select([proc._status], [], [], 10)
        waiter.start()
        waiter.join(1.0)
        seen.append(proc.returncode)  # None: the status is not read yet, so the PID is not released
        real(pid, sig)

    try:
        monkeypatch.setattr(os, name, late)
        getattr(proc, how)(signal.SIGTERM)
        monkeypatch.undo()
        waiter.join(30)
        assert seen == [None] and proc.returncode == -signal.SIGKILL
    finally:
        monkeypatch.undo()
        proc.kill()
        proc.wait(30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
