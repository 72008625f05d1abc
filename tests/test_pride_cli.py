"""``privsdr pride``: a shared configuration, parties from their own CSVs, a mailbox folder, refusals."""
import csv
import json
import os
import signal
import subprocess
import sys

import numpy as np
from conftest import run_cli

from privsdr import Ledger

CLI = [sys.executable, "-m", "privsdr"]


def run(*args, cwd=None):
    """The command in this process (``conftest.run_cli``); ``subprocess_run`` where the process itself matters."""
    return run_cli(*args, cwd=cwd)


def subprocess_run(*args, cwd=None):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def write_csvs(folder, n=120, label=("alice", "bob")):
    rng = np.random.default_rng(3)
    blocks = {"alice": rng.uniform(-1, 1, (n, 4)), "bob": rng.uniform(-1, 1, (n, 3))}
    y = blocks["alice"] @ [1.0, -1.0, 0.5, 0.2] + blocks["bob"] @ [0.3, 0.7, -0.4] + 0.1 * rng.standard_normal(n)
    paths = {}
    for name, X in blocks.items():
        holds = name in label
        header = [f"{name}_{j}" for j in range(X.shape[1])] + (["y"] if holds else [])
        rows = np.column_stack([X, y]) if holds else X
        paths[name] = folder / f"{name}.csv"
        with open(paths[name], "w", newline="") as fh:
            csv.writer(fh).writerows([header, *rows.tolist()])
    return paths


def test_config_and_fit_from_each_partys_csv(tmp_path):
    paths = write_csvs(tmp_path)
    cfg = tmp_path / "run.json"
    assert run("pride", "config", cfg, "--epsilon", 1, "--bounds", -1, 1, "--sketch-dim", 2).returncode == 0
    data = ["--data", f"alice={paths['alice']}", f"bob={paths['bob']}", "--target", "y"]
    out = run("pride", "fit", "--config", cfg, *data, "--report-dir", tmp_path / "reports")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("CERTIFIED: per record (1, 1e-06)-DP") and "replace_entry; parallel" in out.stdout
    assert "alice/sketch" in out.stdout and "bob_2" in out.stdout and "lambda:" in out.stdout
    protocol = json.loads((tmp_path / "reports" / "protocol.json").read_text())
    assert protocol["status"] == "certified" and [r["kind"] for r in protocol["revealed"]] == ["sketch", "sketch"]
    assert "held-out test (alice): one-sided p = " in out.stdout  # the certified fallback's test, each label holder
    assert "held-out test of the party" in (tmp_path / "reports" / "alice.html").read_text()  # in the report filed
    js = json.loads(run("pride", "fit", "--config", cfg, *data, "--json").stdout)
    assert set(js["coefficients"]) == {"alice", "bob"} and len(js["coefficients"]["bob"]) == 3
    assert set(js["held_out_p"]) == set(js["held_out_gain"]) == set(js["fell_back"]) == {"alice", "bob"}
    # per-party ranges, fixed lambda, row relation
    cfg2 = tmp_path / "row.json"
    assert run("pride", "config", cfg2, "--epsilon", 2, "--bounds", "alice=-1:1", "bob=-2:2", "--lam", 0.1, "--relation", "row").returncode == 0
    row = run("pride", "fit", "--config", cfg2, *data)
    assert row.returncode == 0 and "replace_one; sequential" in row.stdout, row.stderr


def test_a_fit_the_held_out_errors_cannot_tell_from_the_mean_is_set_to_0_and_warned(tmp_path):
    paths = write_csvs(tmp_path, n=60)
    for name in ("alice", "bob"):  # y replaced by noise: nothing to find
        rows = list(csv.reader(open(paths[name])))
        rng = np.random.default_rng(5)
        rows = [rows[0]] + [r[:-1] + [str(v)] for r, v in zip(rows[1:], rng.standard_normal(60), strict=True)]
        with open(paths[name], "w", newline="") as fh:
            csv.writer(fh).writerows(rows)
    cfg = tmp_path / "run.json"
    assert run("pride", "config", cfg, "--epsilon", 0.5, "--bounds", -1, 1).returncode == 0
    out = run("pride", "fit", "--config", cfg, "--data", f"alice={paths['alice']}", f"bob={paths['bob']}", "--target", "y",
              "--seed", 0)
    assert out.returncode == 0, out.stderr  # seeded: the held-out tests that decide the fallback depend on the noise draw
    assert "coefficients set to 0" in out.stdout and "warning: the held-out errors of alice, bob" in out.stderr


def test_two_party_processes_talk_through_a_mailbox_and_only_the_label_holder_estimates(tmp_path, warm_cli):
    paths = write_csvs(tmp_path, label=("alice",))
    cfg = tmp_path / "run.json"
    assert run("pride", "config", cfg, "--epsilon", 1, "--bounds", -1, 1, "--lam", 0.05, "--party", "alice=4", "bob=3", "--rows", 120,
               "--label", "alice").returncode == 0
    journal = tmp_path / "bob.jsonl"
    assert run("ledger", "init", journal, "--epsilon", 3, "--delta", 1e-5).returncode == 0
    box = tmp_path / "box"
    alice = warm_cli.start(["pride", "party", "--config", cfg, "--name", "alice", "--data", paths["alice"], "--target", "y",
                            "--mailbox", box, "--json"])  # its own process (tests/warm_cli.py)
    try:
        bob = run("pride", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--mailbox", box, "--journal", journal,
                  "--json")
        a_out, a_err = alice.communicate(timeout=120)
    finally:
        if alice.poll() is None:  # exactly the process started here (its own process group)
            os.killpg(alice.pid, signal.SIGKILL)
        alice.wait()
    assert alice.returncode == 0 and bob.returncode == 0, (a_err, bob.stderr)
    a, b = json.loads(a_out), json.loads(bob.stdout)
    assert list(a["coefficients"]) == ["alice"] and b["coefficients"] == {}  # bob holds no y: it only sends its sketch
    assert a["report"]["status"] == b["report"]["status"] == "certified"
    assert 0.5 < Ledger.open(journal).spent.epsilon <= 1.0  # (1, 1e-6) read at the journal's delta 1e-5
    assert sorted(p.name for p in box.iterdir()) == ["0000-alice-ready.npz", "0000-alice-sketch.npz", "0000-bob-ready.npz",
                                                     "0000-bob-sketch.npz"]
    again = run("pride", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--mailbox", box)
    assert again.returncode == 2 and "earlier run" in again.stderr  # a finished run's folder would stand in for a new run's


def test_refusals_are_one_line_and_spend_nothing(tmp_path):
    paths = write_csvs(tmp_path)
    data = ["--data", f"alice={paths['alice']}", f"bob={paths['bob']}", "--target", "y"]
    paper = tmp_path / "paper.json"
    assert run("pride", "config", paper, "--mode", "paper", "--epsilon", 1, "--lam", 0.1).returncode == 0
    out = run("pride", "fit", "--config", paper, *data)
    errors = [line for line in out.stderr.strip().splitlines() if line.startswith("privsdr: error")]
    assert out.returncode == 2 and len(errors) == 1 and "--allow-uncertified" in errors[0]
    ok = run("pride", "fit", "--config", paper, *data, "--allow-uncertified")
    assert ok.returncode == 0 and ok.stdout.startswith("CLAIMED") and "kenthapadi" not in ok.stderr
    assert "delta = 0.05 >= 1/n" in ok.stderr  # the paper's delta, with a warning
    bad = run("pride", "config", tmp_path / "x.json", "--epsilon", 1)
    assert bad.returncode == 2 and "bounds" in bad.stderr
    bad = run("pride", "config", tmp_path / "x.json", "--epsilon", 1, "--bounds", -1, 1, "--sketch-dim", 9, "--party", "a=4", "b=3",
              "--rows", 50)
    assert bad.returncode == 2 and "sketch_dim" in bad.stderr
    assert run("pride", "fit", "--config", paths["alice"], *data).returncode == 2
    journal = tmp_path / "poor.jsonl"
    assert run("ledger", "init", journal, "--epsilon", 0.5, "--delta", 1e-5).returncode == 0
    cfg = tmp_path / "run.json"
    assert run("pride", "config", cfg, "--epsilon", 1, "--bounds", -1, 1, "--lam", 0.1, "--party", "alice=4", "bob=3", "--rows", 120).returncode == 0
    poor = run("pride", "party", "--config", cfg, "--name", "bob", "--data", paths["bob"], "--target", "y", "--mailbox", tmp_path / "box",
               "--journal", journal)
    assert poor.returncode == 3 and "nothing spent" in poor.stderr
    assert Ledger.open(journal).spent == (0.0, 0.0)
