"""The fork server of the party processes (``privsdr.secure.forks``): every guarantee of a ``subprocess.Popen`` party
holds for a forked one. Each test starts the processes it checks and ends exactly those (by PID or process group);
the fork server of this test process is one of them (``forks.shutdown`` ends it; it also dies with this process).
A launcher killed with forked parties leaves neither them nor its server: ``test_secure_fail_clean.py``."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from privsdr.secure import AggregationJob, NodeJob, forks, launch
from privsdr.secure.launch import Parties
from privsdr.secure.party import EXIT_LAUNCHER_GONE, LAUNCHER_ENV

pytestmark = pytest.mark.skipif(not forks.available(), reason="parties are forked on Linux only")

#: each party's input: numbers whose float64 bytes occur nowhere else (a party's memory is searched for the others')
INPUTS = {"a": {"v": np.array([1.2345678901234567, -2.718281828459045, 3.141592653589793])},
          "b": {"v": np.array([-4.669201609102990, 0.5772156649015329, 1.6180339887498949])}}


def job(parties=("s", "a", "b"), tls=False) -> AggregationJob:
    return AggregationJob(list(parties), ["a", "b"], 1, [NodeJob("v", 3, 0.5, (1, 1), 10.0)], 60.0, tls=tls).with_addresses()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


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
                    held = {int(fd): _pipe(os.readlink(f"/proc/{proc.pid}/fd/{fd}"), ours)
                            for fd in os.listdir(f"/proc/{proc.pid}/fd")}
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
