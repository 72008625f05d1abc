"""``privsdr vertical``: a shared configuration, parties from their own CSVs, a mailbox folder, refusals."""
import csv
import hashlib
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import run_cli

from privsdr import Budget, Ledger, ValidationError
from privsdr.datasets import dpbcd_synthetic
from privsdr.vertical import DPBCDConfig, DPBCDProtocol, Layout, Party, PartyInfo, PartyMessage, run_party

CLI = [sys.executable, "-m", "privsdr"]


def run(*args, cwd=None):
    """The command in this process (``conftest.run_cli``); ``subprocess_run`` where the process itself matters."""
    return run_cli(*args, cwd=cwd)


def subprocess_run(*args, cwd=None):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def write_csvs(folder, n=300):
    d = dpbcd_synthetic(n, 5, seed=9)
    paths = {}
    for i, block in enumerate(d.blocks):
        name = ("alice", "bob")[i]
        header = [f"{name}_{j}" for j in range(block.shape[1])] + (["y"] if i == 0 else [])
        rows = np.column_stack([block, d.y]) if i == 0 else block
        paths[name] = folder / f"{name}.csv"
        with open(paths[name], "w", newline="") as fh:
            csv.writer(fh).writerows([header, *rows.tolist()])
    return d, paths


CERT = ["--mode", "certified", "--epsilon", 4, "--row-bound", 8, "--label-bound", 60, "--coef-bound", 20]


def test_fit_runs_every_party_from_its_own_csv(tmp_path):
    _, paths = write_csvs(tmp_path)
    cfg = tmp_path / "cfg.json"
    assert run("vertical", "config", cfg, *CERT).returncode == 0
    out = run("vertical", "fit", "--config", cfg, "--data", f"alice={paths['alice']}", f"bob={paths['bob']}", "--target", "y",
              "--report-dir", tmp_path / "reports", "--seed", 0)
    assert out.returncode == 0, out.stderr  # seeded: the noise diagnostic checked below is read off the noise draw
    assert out.stdout.startswith("CERTIFIED: per record (4, 1e-06)-DP")
    assert "alice/remainder1" in out.stdout and "bob_1" in out.stdout
    assert (tmp_path / "reports" / "alice.html").exists() and json.loads((tmp_path / "reports" / "protocol.json").read_text())["status"] == "certified"
    js = run("vertical", "fit", "--config", cfg, "--data", f"alice={paths['alice']}", f"bob={paths['bob']}", "--target", "y", "--json")
    fitted = json.loads(js.stdout)
    assert set(fitted["coefficients"]) == {"alice", "bob"}
    # the noise diagnostic and the DP intercept: printed, in the JSON and in each party's report
    assert "intercept: " in out.stdout and "the constant prediction" in out.stdout
    assert isinstance(fitted["intercept"], float) and "noise_ratio" in fitted
    assert "the constant prediction" in (tmp_path / "reports" / "alice.html").read_text()


def two_party_run(tmp_path):
    """The party-process tests' setup: the two parties' CSVs, a certified configuration, bob's journal, a mailbox path."""
    _, paths = write_csvs(tmp_path)
    cfg = tmp_path / "cfg.json"
    assert run("vertical", "config", cfg, *CERT, "--party", "alice=2", "bob=3", "--rows", 300, "--label", "alice").returncode == 0
    journal = tmp_path / "bob.jsonl"
    assert run("ledger", "init", journal, "--epsilon", 5, "--delta", 1e-5).returncode == 0
    return paths, cfg, journal, tmp_path / "box"


def test_two_party_processes_talk_through_a_mailbox(tmp_path, warm_cli):
    paths, cfg, journal, box = two_party_run(tmp_path)
    alice = warm_cli.start(["vertical", "party", "--config", cfg, "--name", "alice", "--data", paths["alice"], "--target", "y",
                            "--mailbox", box, "--json"])  # its own process (tests/warm_cli.py)
    try:
        bob = run("vertical", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--mailbox", box, "--journal", journal,
                  "--json", "--report", tmp_path / "bob.json", "--purpose", "a test of the filing", "--data-digest")
        a_out, a_err = alice.communicate(timeout=120)
    finally:
        if alice.poll() is None:  # exactly the process started here (its own process group)
            os.killpg(alice.pid, signal.SIGKILL)
        alice.wait()
    assert alice.returncode == 0 and bob.returncode == 0, (a_err, bob.stderr)
    a, b = json.loads(a_out), json.loads(bob.stdout)
    assert a["coefficients"] == b["coefficients"]  # both hold the same published coefficients
    assert a["intercept"] == b["intercept"] and a["noise_ratio"] == b["noise_ratio"]  # from the published values alone
    assert a["report"]["diagnostics"]["messages"]["noise"] == b["report"]["diagnostics"]["messages"]["noise"]
    assert a["report"]["status"] == b["report"]["status"] == "certified"
    spent = Ledger.open(journal).spent
    assert 0 < spent.epsilon == pytest.approx(b["report"]["budget"]["spent_by_run"]["epsilon"])
    assert sorted(p.name for p in box.iterdir() if "ready" not in p.name)[0] == "0001-alice-remainder.npz"
    # bob's filed report: the purpose, his data file's digest, and the published coefficients as released
    filing = json.loads((tmp_path / "bob.json").read_text())["filing"]
    assert filing["purpose"] == "a test of the filing"
    assert filing["data"]["sha256"] == hashlib.sha256(paths["bob"].read_bytes()).hexdigest()
    assert {k: v for k, v in filing["estimate"].items() if k.startswith("coef_")} == {
        f"coef_ ({name})": values for name, values in b["coefficients"].items()}


def test_refusals_are_one_line_and_spend_nothing(tmp_path):
    _, paths = write_csvs(tmp_path)
    cfg = tmp_path / "paper.json"
    assert run("vertical", "config", cfg, "--mode", "paper", "--epsilon", 2, "--abort-check", "none").returncode == 0
    data = ["--data", f"alice={paths['alice']}", f"bob={paths['bob']}", "--target", "y"]
    out = run("vertical", "fit", "--config", cfg, *data)
    assert out.returncode == 2 and "--allow-uncertified" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    ok = run("vertical", "fit", "--config", cfg, *data, "--allow-uncertified")
    assert ok.returncode == 0 and "LSDP (not standard DP)" in ok.stdout
    bad = run("vertical", "config", tmp_path / "x.json", "--mode", "certified", "--epsilon", 1)
    assert bad.returncode == 2 and "row_bound" in bad.stderr
    journal = tmp_path / "small.jsonl"
    run("ledger", "init", journal, "--epsilon", 0.1, "--delta", 1e-6)
    cfg2 = tmp_path / "cfg2.json"
    run("vertical", "config", cfg2, *CERT, "--party", "alice=2", "bob=3", "--rows", 300, "--label", "alice")
    before = journal.read_bytes()
    refused = run("vertical", "party", "--config", cfg2, "--name", "bob", "--data", paths["bob"], "--mailbox", tmp_path / "b2",
                  "--journal", journal)
    assert refused.returncode == 3 and "nothing spent" in refused.stderr
    assert journal.read_bytes() == before


def test_a_party_refuses_messages_of_another_configuration(tmp_path):
    d = dpbcd_synthetic(200, 5, seed=1)
    layout = Layout(200, (PartyInfo("alice", 2, True), PartyInfo("bob", 3)))
    config = DPBCDConfig(mode="certified", row_bound=8.0, label_bound=60.0, coef_bound=20.0)
    other = PartyMessage("privsdr.dpbcd", 1, "0000000000000000", "alice", ("bob",), "ready", 0, {}, {"rows": 200})
    box = tmp_path / "box"
    box.mkdir()
    other.save(box / f"{other.id}.npz")
    ledger = Ledger(Budget(5.0, 1e-5))
    with pytest.raises(ValidationError, match="another configuration"):
        run_party(DPBCDProtocol(config), Party("bob", d.blocks[1]), layout, Budget(2.0, 1e-6), box, ledger=ledger, timeout=30)
    # issue 25: the mismatch is found in the "ready" handshake, before bob's first charge (bob used to release his gram
    # at stage 0 first); bob's refusal is posted as an abort for alice
    assert ledger.spent.epsilon == 0 and ledger.runs[0].closed
    assert "ValidationError at party 'bob'" in PartyMessage.load(box / "0000-bob-abort.npz").meta["why"]
    with pytest.raises(ValidationError, match="earlier run"):  # the folder holds this run's messages now
        run_party(DPBCDProtocol(config), Party("bob", d.blocks[1]), layout, Budget(2.0, 1e-6), box, ledger=Ledger(Budget(5.0, 1e-5)))
    with pytest.raises(ValidationError, match="layout says"):
        run_party(DPBCDProtocol(config), Party("bob", d.blocks[1][:, :2]), layout, Budget(2.0, 1e-6), tmp_path / "box2",
                  ledger=Ledger(Budget(5.0, 1e-5)))


def test_a_party_whose_peer_refuses_its_input_stops_before_its_first_charge(tmp_path):
    """Issue 25 item 6: bob's 199 rows against the layout's 200 are refused before bob charges anything, bob posts an
    abort, and alice -- who would have charged and sent her first stage -- stops in the "ready" handshake with nothing
    charged; her journal run is closed as failed, with why."""
    import threading

    from privsdr.vertical import ProtocolAborted

    d = dpbcd_synthetic(200, 5, seed=1)
    layout = Layout(200, (PartyInfo("alice", 2, True), PartyInfo("bob", 3)))
    config = DPBCDConfig(mode="certified", row_bound=8.0, label_bound=60.0, coef_bound=20.0)
    box = tmp_path / "box"
    journal = Ledger(Budget(5.0, 1e-5), journal=tmp_path / "alice.jsonl")
    outcome: dict = {}

    def alice():
        try:
            run_party(DPBCDProtocol(config), Party("alice", d.blocks[0], d.y), layout, Budget(2.0, 1e-6), box, ledger=journal,
                      timeout=60)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome["alice"] = exc

    thread = threading.Thread(target=alice)
    thread.start()
    try:
        with pytest.raises(ValidationError, match="layout says"):
            run_party(DPBCDProtocol(config), Party("bob", d.blocks[1][:199]), layout, Budget(2.0, 1e-6), box,
                      ledger=Ledger(Budget(5.0, 1e-5)), timeout=60)
    finally:
        thread.join(60)
    # alice learns that bob stopped and why in kind only: bob's message may describe bob's data
    assert isinstance(outcome.get("alice"), ProtocolAborted) and "ValidationError at party 'bob'" in str(outcome["alice"])
    assert "layout says" not in str(outcome["alice"])
    reopened = Ledger.open(tmp_path / "alice.jsonl")
    assert reopened.spent.epsilon == 0
    [record] = reopened.runs
    assert record.closed and record.summary["failed"] and "ProtocolAborted" in record.summary["why"]


def test_a_party_left_waiting_times_out_says_so_and_aborts(tmp_path, monkeypatch):
    """Issue 25 item 6: --timeout bounds every wait, progress lines say what the party waits for, the timeout posts an
    abort for the others, and the party's journal run is closed as failed with nothing charged."""
    from privsdr.parties import party_process

    monkeypatch.setattr(party_process, "PROGRESS_EVERY", 0.2)
    paths, cfg, journal, box = two_party_run(tmp_path)
    out = run("vertical", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--mailbox", box, "--journal", journal,
              "--timeout", 0.5)  # alice never comes: the timeout is what is tested, so a short one cannot flake
    assert out.returncode == 2 and "0000-alice-ready did not arrive" in out.stderr and "within 0.5 s" in out.stderr
    assert "[bob] waiting for message 0000-alice-ready" in out.stderr
    assert "TimeoutError at party 'bob'" in PartyMessage.load(box / "0000-bob-abort.npz").meta["why"]
    ledger = Ledger.open(journal)
    assert ledger.spent.epsilon == 0 and ledger.runs[0].closed and ledger.runs[0].summary["failed"]
    assert "failed: " in run("ledger", "show", journal).stdout
    assert run("vertical", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--mailbox", tmp_path / "b2",
               "--timeout", 0).returncode == 2  # a timeout must be positive
    again = run("vertical", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--mailbox", box)
    assert again.returncode == 2 and "earlier run" in again.stderr  # the aborted run's folder is not reused


def test_a_peer_that_failed_before_this_party_started_stops_it_with_its_abort(tmp_path):
    """The race of the test above, forced: bob's abort is in the folder before alice starts. Alice stops on it (not on
    "an earlier run", which is only about her own messages), with nothing charged."""
    from privsdr.vertical import ProtocolAborted

    d = dpbcd_synthetic(200, 5, seed=1)
    layout = Layout(200, (PartyInfo("alice", 2, True), PartyInfo("bob", 3)))
    config = DPBCDConfig(mode="certified", row_bound=8.0, label_bound=60.0, coef_bound=20.0)
    box = tmp_path / "box"
    with pytest.raises(ValidationError, match="layout says"):
        run_party(DPBCDProtocol(config), Party("bob", d.blocks[1][:199]), layout, Budget(2.0, 1e-6), box, timeout=30)
    ledger = Ledger(Budget(5.0, 1e-5))
    with pytest.raises(ProtocolAborted, match="ValidationError at party 'bob'"):
        run_party(DPBCDProtocol(config), Party("alice", d.blocks[0], d.y), layout, Budget(2.0, 1e-6), box, ledger=ledger, timeout=30)
    assert ledger.spent.epsilon == 0


def test_a_mailbox_folder_is_looked_at_soon_then_every_poll():
    """``backoff``: the sleeps between looks at a folder start at 2 ms and double up to the poll, never beyond it."""
    from itertools import islice

    from privsdr.parties.messages import backoff

    assert list(islice(backoff(0.05), 8)) == [0.002, 0.004, 0.008, 0.016, 0.032, 0.05, 0.05, 0.05]
    assert list(islice(backoff(0.001), 3)) == [0.001] * 3  # a poll below the first sleep is the poll
