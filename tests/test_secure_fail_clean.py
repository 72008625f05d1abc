"""Issue 36 items 4-5: nothing charged until every party can run, and runs that fail clean.

In this process (cheap): MPyC's unpickler in a party builds plain values only; the agreement travels as JSON bytes;
SIGTERM and SIGHUP become ``Interrupted`` in a launcher; a journal a party creates is gone again when nothing was
written to it; a taken port is found before the run; a failure after the charge says what this party spent and that
nothing was released, and its journal closes the run as failed.

With real processes (bounded, ended by PID or process group also when a test fails): three CLI parties where one
has a NaN in its CSV, a bad ``--report`` path or a taken port leave every journal byte for byte as it was, with a
message at every party; a launcher ended by SIGTERM or SIGKILL leaves no party process and no file; a party whose
peer vanishes after the charge stops naming it.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import alive, run_cli

from privsdr import Budget, Ledger
from privsdr.errors import ValidationError
from privsdr.network.certificates import make_keys
from privsdr.secure import AggregationJob, NodeJob, forks
from privsdr.secure.launch import Interrupted, PartyFailed, _charged_note, free_ports, interrupts, own_party
from privsdr.secure.party import SafePickle, agreement_message, disagreements, read_agreement

pytest.importorskip("mpyc")

# -- in this process -----------------------------------------------------------------------------------------
class Smuggled:
    def __reduce__(self):
        return (os.getpid, ())


@pytest.mark.parametrize("value", [3, b"abc", [1, "x", None], np.array([2**70, -5], dtype=object), np.arange(4)])
def test_what_a_peer_sends_is_read_as_plain_values(value):
    back = SafePickle.loads(pickle.dumps(value))
    assert np.array_equal(np.asarray(back), np.asarray(value)) if isinstance(value, np.ndarray) else back == value


def test_a_pickled_call_from_a_peer_is_refused():
    with pytest.raises(pickle.UnpicklingError, match="refused"):
        SafePickle.loads(pickle.dumps(Smuggled()))


def test_the_agreement_is_canonical_json_bytes():
    job = AggregationJob(["a", "b", "c"], ["a", "b"], 1, [NodeJob("v", 2, 0.5, (1, 1), 1.0)], 5.0)
    sent = agreement_message(job.digest(), None, job.record())
    assert json.loads(sent) == [job.digest(), None, job.record()]
    assert disagreements(job, job.digest(), [read_agreement(sent)] * 3) == []
    assert disagreements(job, job.digest(), [read_agreement(sent), read_agreement(b"\x80junk"), read_agreement(sent)]) == [
        "'b' sent no configuration digest"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_become_an_interruption_in_a_launcher(sig):
    def swallow(signum, frame):  # without interrupts() the signal is swallowed here and the test fails (not pytest)
        pass

    previous = signal.signal(sig, swallow)
    try:
        with pytest.raises(Interrupted, match=signal.Signals(sig).name), interrupts():
            os.kill(os.getpid(), sig)
            time.sleep(2)  # the handler raises here
        assert signal.getsignal(sig) is swallow  # restored on the way out
    finally:
        signal.signal(sig, previous)


def test_a_journal_the_party_created_is_gone_when_nothing_was_written_to_it(tmp_path):
    from privsdr.cli._own_party import journal_opener as _journal

    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    Ledger(Budget(5.0, 1e-6), journal=old)
    kept = old.read_bytes()
    with pytest.raises(ValidationError), _journal(str(new), Budget(1.0, 1e-6), "best") as open_new, \
            _journal(str(old), Budget(1.0, 1e-6), "best") as open_old:
        assert open_new() is not None and new.exists() and open_old() is not None
        raise ValidationError("a later check failed before every party was ready")
    assert not new.exists() and old.read_bytes() == kept


def test_a_taken_port_is_found_before_the_run():
    from privsdr.cli._own_party import can_listen as _can_listen

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(ValidationError, match="is taken"):
            _can_listen(f"127.0.0.1:{held.getsockname()[1]}")
    _can_listen(f"127.0.0.1:{free_ports(1)[0]}")


@pytest.mark.parametrize("ports", [["0", "70000", "-1"], ["5001", "5001", "5001"]], ids=["out-of-range", "repeated"])
def test_ports_are_validated_when_the_configuration_is_written(tmp_path, ports):
    done = run_cli("vertical", "config", tmp_path / "c.json", "--secure", "--party", "alice=2", "bob=2", "--rows", 50, "--label",
                   "alice", "--epsilon", 1, "--row-bound", 1, "--label-bound", 1, "--ports", *ports)
    assert done.returncode == 2 and re.search(r"outside 1\.\.65535|the same address", done.stderr), done.stderr
    assert not (tmp_path / "c.json").exists()


def test_a_failure_after_the_charge_says_what_was_spent_and_the_journal_closes_the_run_as_failed(tmp_path):
    from privsdr.plan import Run
    from privsdr.secure.aggregate import SecureAggregationError, _run, gram_job
    from privsdr.vertical import Layout, PartyInfo
    from privsdr.vertical.secure_regression import SecureVerticalRegression, _gram_shape

    layout = Layout(50, (PartyInfo("alice", 1, True), PartyInfo("bob", 1, False)))
    journal = tmp_path / "alice.jsonl"
    ledger = Ledger(Budget(3.0, 1e-6), journal=journal)
    est = SecureVerticalRegression(1.0, 1.0, budget=Budget(1.0, 1e-6), ledger=ledger)
    calibrated = est.plan({"alice": 1, "bob": 1})
    c = est._checked(["alice", "bob"], [1, 1])
    products, bound = _gram_shape(c, layout)
    job = gram_job(calibrated, products, parties=c["parties"], threshold=1, bound=bound, timeout=5)

    def vanished(j, charge):  # the peers agreed, this party charged, then a peer's host went away
        charge()
        raise PartyFailed("party 'alice' did not finish (lost the connection to party 'bob')" + _charged_note(True), "alice", (), True)

    with pytest.raises(SecureAggregationError) as err, Run(calibrated, ledger, algorithm="SecureVerticalRegression") as run:
        _run(run, job, vanished, None, "helper")
    assert err.value.charged and "spent epsilon=1, delta=1e-06" in str(err.value) and "nothing was released" in str(err.value)
    closes = [json.loads(line) for line in journal.read_text().splitlines() if '"close"' in line]
    assert closes and closes[-1]["summary"]["failed"] is True
    assert Ledger.open(journal).spent.epsilon == pytest.approx(1.0, rel=1e-3)


# -- real processes ------------------------------------------------------------------------------------------
def write_csvs(folder, n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * 0.5
    y = X @ np.array([1.0, -1.0, 0.5, 0.2]) + 0.3 * rng.normal(size=n)
    np.savetxt(folder / "alice.csv", np.column_stack([X[:, :2], y]), delimiter=",", header="a1,a2,y", comments="")
    np.savetxt(folder / "bob.csv", X[:, 2:], delimiter=",", header="b1,b2", comments="")


def config(folder, timeout, rows=120):
    cfg = folder / "shared.json"
    done = run_cli("vertical", "config", cfg, "--secure", "--party", "alice=2", "bob=2", "--rows", rows, "--label", "alice",
                   "--epsilon", 1, "--row-bound", 2, "--label-bound", 4, "--timeout", timeout)
    assert done.returncode == 0, done.stderr
    keys = run_cli("secure", "keys", folder / "keys", "--config", cfg)  # keys/helper, keys/alice, keys/bob (mutual TLS)
    assert keys.returncode == 0, keys.stderr
    return cfg


def start(warm_cli, args, env=None):
    """``privsdr ARGS`` as its own process in a session of its own (``tests/warm_cli.py``: forked with scikit-learn
    imported; its party processes are fresh interpreters)."""
    return warm_cli.start(args, env=env)


def end_groups(procs):
    for p in procs:  # exactly the processes started here, with the party processes they started
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def journals(folder):
    return {n: (folder / f"{n}.jsonl").read_bytes() if (folder / f"{n}.jsonl").exists() else None for n in ("helper", "bob", "alice")}


CASES = ("bad --report at alice", "bob's port taken")


def test_one_party_that_cannot_run_leaves_every_journal_as_it_was(tmp_path, warm_cli):
    """Issue 36 item 4 (three CLI parties, one fault): every party stops with a message, every journal is byte for
    byte what it was (alice's existing journal unchanged; the journals the others would create never appear). A NaN
    in bob's CSV: ``test_the_documented_one_line_run_exits_non_zero_when_a_party_fails``. The two cases run at once,
    each in its own folder on its own ports: the others' wait for bob whose port is taken (its whole 5 s deadline)
    covers the other case's run."""
    setups, procs = {}, []
    try:
        for k, case in enumerate(CASES):
            folder = tmp_path / f"case{k}"
            folder.mkdir()
            setups[case] = _cannot_run_setup(folder, case)
        for setup in setups.values():
            setup["procs"] = {name: start(warm_cli, args) for name, args in setup["commands"].items()}
            procs += setup["procs"].values()
        for setup in setups.values():
            setup["done"] = {name: p.communicate(timeout=120) for name, p in setup["procs"].items()}
    finally:
        end_groups(procs)
        for setup in setups.values():
            if setup["held"] is not None:
                setup["held"].close()
    for case, setup in setups.items():
        _check_cannot_run(case, setup)


def _cannot_run_setup(tmp_path, case):
    write_csvs(tmp_path)
    cfg = config(tmp_path, timeout=5 if case == "bob's port taken" else 60)
    Ledger(Budget(10.0, 1e-6), journal=tmp_path / "alice.jsonl")
    report = tmp_path / "alice.md"
    held = None
    if case == "bad --report at alice":
        report = tmp_path / "no-such-folder" / "alice.md"
    else:
        held = socket.socket()
        held.bind(("127.0.0.1", int(json.loads(cfg.read_text())["addresses"][2].rsplit(":", 1)[1])))  # helper, alice, bob
        held.listen()
    commands = {"helper": ["vertical", "helper", "--config", cfg, "--journal", tmp_path / "helper.jsonl"],
                "bob": ["vertical", "party", "--secure", "--config", cfg, "--name", "bob", "--data", tmp_path / "bob.csv",
                        "--journal", tmp_path / "bob.jsonl"],
                "alice": ["vertical", "party", "--secure", "--config", cfg, "--name", "alice", "--data", tmp_path / "alice.csv",
                          "--target", "y", "--journal", tmp_path / "alice.jsonl", "--report", report]}
    for name, args in commands.items():
        args += ["--certs", tmp_path / "keys" / name]
    return {"folder": tmp_path, "held": held, "commands": commands, "before": journals(tmp_path)}


def _check_cannot_run(case, setup):
    procs, done = setup["procs"], setup["done"]
    assert journals(setup["folder"]) == setup["before"]  # nothing charged, nothing reserved, nothing created
    errs = {name: err for name, (_, err) in done.items()}
    assert all(procs[n].returncode not in (0, None) for n in procs), errs
    culprit = "alice" if case == "bad --report at alice" else "bob"
    own = {"bad --report at alice": "does not exist", "bob's port taken": "is taken"}[case]
    assert own in errs[culprit] and "nothing was charged anywhere" in errs[culprit], errs[culprit]
    for name in set(procs) - {culprit}:
        assert "nothing was charged" in errs[name], (name, errs[name])
        if case == "bob's port taken":  # bob cannot listen, so it cannot take part: the others name it when they give up
            assert re.search(r"waiting for party .*'bob'", errs[name]), errs[name]
        else:
            assert f"'{culprit}' is not ready" in errs[name], (name, errs[name])


LAUNCHER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from privsdr.secure import AggregationJob, NodeJob, forks
    from privsdr.secure.launch import Parties

    job = AggregationJob(["s", "a", "b"], ["a", "b"], 1, [NodeJob("v", 3, 0.5, (1, 1), 10.0)], 60.0).with_addresses()
    inputs = {"a": {"v": np.array([1.0, 2.0, 3.0])}, "b": {"v": np.array([4.0, 5.0, 6.0])}}
    with Parties(job, inputs, job.parties) as parties:  # TLS, with a CA made for the run (its folder goes at the agreement)
        parties.agree()
        server = forks.running()  # the parties' parent: the launcher's fork server (privsdr.secure.forks)
        print(json.dumps([*parties.pids, *([server.pid] if server is not None else [])]), flush=True)
        time.sleep(60)   # as if charging took long: the processes wait at their gate
""")



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_launcher_ended_by_a_signal_leaves_no_party_process_and_no_file(tmp_path, sig):
    """Issue 36 item 5: the launcher holds three agreed party processes (their statistics went through pipes), forked
    by its fork server; it is sent SIGTERM (its handlers end them, its exit ends the server) or SIGKILL (the server sees
    the launcher's end of its socket close, ends them and exits; Linux ends them too: PR_SET_PDEATHSIG). No process,
    the server included, and no file (its temp folder is this test's) is left."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=temp, env={**os.environ, "TMPDIR": str(temp)}, start_new_session=True)
    pids: list[int] = []
    try:
        line = launcher.stdout.readline()
        assert line, launcher.stderr.read()
        pids = json.loads(line)
        assert len(pids) == (4 if forks.available() else 3) and all(alive(p) for p in pids)
        os.kill(launcher.pid, sig)
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 20
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in pids), [p for p in pids if alive(p)]
        assert list(temp.iterdir()) == []  # no job, no statistic, no status file
    finally:
        for pid in [launcher.pid, *pids]:  # exactly the processes started here (each party leads a group of its own)
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        launcher.wait()


MIDDLE = textwrap.dedent("""
    import os, subprocess, sys, time
    armed = "from privsdr.secure.party import die_with_launcher; import time; die_with_launcher(); print(1, flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", armed], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PRIVSDR_LAUNCHER_PID": str(os.getpid())})
    child.stdout.readline()
    print(child.pid, flush=True)
    time.sleep(60)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_party_process_dies_with_its_launcher_even_when_its_stdin_is_not_the_launchers():
    """The parent-death signal alone (the child's stdin is /dev/null, so no end of a pipe tells it): SIGKILL of the
    launcher ends the child; a child whose launcher is already gone when it starts stops at once."""
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = None
    try:
        child = int(middle.stdout.readline())
        os.kill(middle.pid, signal.SIGKILL)
        middle.wait(timeout=10)
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        for pid in (middle.pid, child):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        middle.wait()
    orphan = subprocess.run([sys.executable, "-c", "from privsdr.secure.party import die_with_launcher; die_with_launcher(); print('on')"],
                            capture_output=True, text=True, timeout=30, env={**os.environ, "PRIVSDR_LAUNCHER_PID": "1"})
    assert orphan.returncode == 8 and "on" not in orphan.stdout


def test_a_party_cli_stopped_by_sigterm_ends_its_process_and_leaves_no_journal_behind(tmp_path, warm_cli):
    """A party waiting for the others is sent SIGTERM: it says so, its MPC process is ended, and the journal it
    created for the run is gone again (nothing was charged)."""
    write_csvs(tmp_path)
    cfg = config(tmp_path, timeout=60)
    journal = tmp_path / "bob.jsonl"
    proc = start(warm_cli, ["vertical", "party", "--secure", "--config", cfg, "--name", "bob", "--data", tmp_path / "bob.csv",
                            "--journal", journal, "--certs", tmp_path / "keys" / "bob"], env={**os.environ, "TMPDIR": str(tmp_path)})
    children: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not children and time.monotonic() < deadline and proc.poll() is None:
            children = [int(c) for c in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
            time.sleep(0.02)
        assert children, "the party process never started"
        time.sleep(0.2)  # its MPC process runs: the party waits for the others
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130 and "stopped by SIGTERM" in err and "nothing was charged" in err, err
        assert not any(alive(c) for c in children) and not journal.exists()
        assert not list(tmp_path.glob("privsdr-secure-*"))
    finally:
        end_groups([proc])


def test_a_party_whose_peer_vanishes_after_the_charge_stops_at_once_naming_it(tmp_path):
    """Three parties agree; bob's process is then killed (its host gone). The others, charged, stop with a message
    naming bob instead of waiting for their timeout."""
    job = AggregationJob(["s", "a", "bob"], ["a", "bob"], 1, [NodeJob("v", 3, 0.5, (1, 1), 10.0)], 30.0).with_addresses()
    keys = make_keys(tmp_path / "keys", job.parties)
    inputs = {"s": None, "a": {"v": np.array([1.0, 2.0, 3.0])}, "bob": {"v": np.array([4.0, 5.0, 6.0])}}
    sessions = {name: own_party(job, name, inputs[name], certificates=keys[name]) for name in job.parties}
    try:
        for session in sessions.values():
            session.__enter__()
        for session in sessions.values():
            session.agree()
        sessions["bob"].close()  # bob vanishes after every party was ready
        for name in ("s", "a"):  # the lost connection, not the watchdog ("timed out"), ends them
            with pytest.raises(PartyFailed) as err:
                sessions[name].finish(lambda: None)
            assert err.value.charged and "lost the connection to party 'bob'" in str(err.value), str(err.value)
            assert "nothing was released" in str(err.value) and "timed out" not in str(err.value)
    finally:
        for session in sessions.values():
            session.__exit__(None, None, None)


def test_the_documented_one_line_run_exits_non_zero_when_a_party_fails(tmp_path):
    """Issue 36 items 4 and 6: docs/vertical.md's line that starts the three parties, with a NaN in bob's CSV. Bob
    says why and tells the others he is not ready; they say so; nothing is charged (alice's journal is byte for byte
    as it was) and the line exits non-zero (it ended in a bare ``wait``, which exits 0)."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "vertical.md").read_text()
    line = next(text for text in page.splitlines() if text.startswith("privsdr vertical helper --config shared.json"))
    write_csvs(tmp_path, n=120)
    lines = (tmp_path / "bob.csv").read_text().splitlines()
    lines[3] = "nan," + lines[3].split(",")[1]
    (tmp_path / "bob.csv").write_text("\n".join(lines) + "\n")
    config(tmp_path, timeout=60)
    Ledger(Budget(10.0, 1e-6), journal=tmp_path / "alice.jsonl")
    before = (tmp_path / "alice.jsonl").read_bytes()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen(["bash", "-c", line], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        end_groups([proc])
    assert proc.returncode != 0, err
    assert (tmp_path / "alice.jsonl").read_bytes() == before and not (tmp_path / "alice.html").exists()
    assert "missing or infinite value" in err and "told the others it is not ready: nothing was charged anywhere" in err, err
    assert err.count("'bob' is not ready") == 2 and err.count("nothing was charged anywhere") == 3, err  # helper, alice, bob
