"""``privsdr vertical ... --secure``: a shared configuration with loopback addresses, certificates from ``privsdr
secure keys`` (mutual TLS by default), the helper and the parties as separate CLI processes (started and ended by process group here), the one-machine fit, refusals and timeouts, and
the agreement before any charge (issue 33)."""
from __future__ import annotations

import json
import os
import re
import signal

import numpy as np
import pytest
from conftest import run_cli

from privsdr import Budget, Ledger

pytest.importorskip("mpyc")

def write_csvs(folder, n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * 0.5
    y = X @ np.array([1.0, -1.0, 0.5, 0.2]) + 0.3 * rng.normal(size=n) + 1.0
    alice, bob = folder / "alice.csv", folder / "bob.csv"
    np.savetxt(alice, np.column_stack([X[:, :2], y]), delimiter=",", header="a1,a2,y", comments="")
    np.savetxt(bob, X[:, 2:], delimiter=",", header="b1,b2", comments="")
    return X, y, alice, bob


def config(tmp_path, *extra, rows=400):
    cfg = tmp_path / "shared.json"
    done = run_cli("vertical", "config", cfg, "--secure", "--party", "alice=2", "bob=2", "--rows", rows, "--label", "alice",
                   "--epsilon", 4, "--row-bound", 2, "--label-bound", 4, "--y-center", 1, *extra)
    assert done.returncode == 0, done.stderr
    if not (tmp_path / "keys").exists():  # one CA and a folder per party (issue 36: TLS by default)
        keys = run_cli("secure", "keys", tmp_path / "keys", "--config", cfg)
        assert keys.returncode == 0, keys.stderr
    return cfg


def test_the_help_leads_to_the_secure_estimator_and_the_docs_table():
    done = run_cli("vertical", "--help")
    assert "--secure" in done.stdout and "Which estimator for vertically partitioned data?" in done.stdout


def run_three(warm_cli, tmp_path, configs, timeout=180):
    """The helper, bob and alice as their own CLI processes (each with its configuration and journal), ended by
    process group (their party processes run in it) also when the test fails: {name: (returncode, stdout, stderr)}."""
    _, _, alice, bob = write_csvs(tmp_path)
    commands = {
        "helper": ["vertical", "helper", "--config", configs["helper"], "--json", "--journal", tmp_path / "helper.jsonl",
                   "--certs", tmp_path / "keys" / "helper"],
        "bob": ["vertical", "party", "--secure", "--config", configs["bob"], "--name", "bob", "--data", bob, "--json",
                "--journal", tmp_path / "bob.jsonl", "--certs", tmp_path / "keys"],
        "alice": ["vertical", "party", "--secure", "--config", configs["alice"], "--name", "alice", "--data", alice, "--target", "y",
                  "--json", "--journal", tmp_path / "alice.jsonl", "--report", tmp_path / "alice.md", "--certs", tmp_path / "keys"],
    }
    procs = {}
    try:
        for name, args in commands.items():
            procs[name] = warm_cli.start(args)  # its own session (tests/warm_cli.py: forked with scikit-learn imported)
        outputs = {name: p.communicate(timeout=timeout) for name, p in procs.items()}
    finally:
        for p in procs.values():  # exactly the processes started here, with the party processes they started
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return {name: (procs[name].returncode, *outputs[name]) for name in procs}


def charges(path):
    return [c.label for c in Ledger.open(path).charges] if path.exists() else []


def test_every_party_as_its_own_process_prints_the_same_model_and_charges_exactly_the_configured_budget(tmp_path, warm_cli):
    cfg = config(tmp_path)
    shared = json.loads(cfg.read_text())
    assert len(shared["addresses"]) == 3 and shared["format"] == "privsdr.vertical-secure-run" and shared["estimator"]["tls"]
    Ledger(Budget(10.0, 1e-6), journal=tmp_path / "alice.jsonl")  # alice's journal holds more than the run's epsilon = 4
    done = run_three(warm_cli, tmp_path, {"helper": cfg, "bob": cfg, "alice": cfg})
    results = {}
    for name, (code, out, err) in done.items():
        assert code == 0, err
        results[name] = json.JSONDecoder().raw_decode(out)[0]  # the JSON, then the line naming the report
    coefs = [results[n]["coefficients"] for n in ("helper", "alice", "bob")]
    assert coefs[0] == coefs[1] == coefs[2] and list(coefs[0]) == ["alice.x0", "alice.x1", "bob.x0", "bob.x1"]
    for name in ("helper", "alice", "bob"):
        ledger = Ledger.open(tmp_path / f"{name}.jsonl")
        assert [c.label for c in ledger.charges] == ["xtx", "xty"] and ledger.spent.epsilon == pytest.approx(4.0, rel=1e-3)
        assert results[name]["report"]["budget"]["spent_by_run"]["epsilon"] == pytest.approx(4.0, rel=1e-3)
    # issue 33: alice spent the configured epsilon = 4, not the 10 her journal holds (the rest is hers to keep)
    assert Ledger.open(tmp_path / "alice.jsonl").remaining[0] == pytest.approx(6.0, rel=1e-3)
    assert "Trust model" in (tmp_path / "alice.md").read_text()
    assert results["alice"]["report"]["trust_model"]["parties"] == ["helper", "alice", "bob"]


@pytest.mark.parametrize("case", ["an edited configuration", "a journal with less left"], ids=["edited-config", "poor-journal"])
def test_parties_that_do_not_agree_all_stop_before_anything_is_charged_anywhere(tmp_path, case, warm_cli):
    """Issue 33: every party checks over MPyC's channels that all hold the same public job and are ready before its
    first charge. Two parties given a configuration edited to epsilon = 100 and one given the original; or bob's
    journal with less left than the run's epsilon = 4: every party stops with a message and no journal is charged."""
    cfg = config(tmp_path, "--timeout", 90)
    configs = {"helper": cfg, "bob": cfg, "alice": cfg}
    if case == "an edited configuration":
        edited = json.loads(cfg.read_text())
        edited["budget"]["epsilon"] = 100.0
        configs["alice"] = configs["bob"] = tmp_path / "edited.json"
        configs["alice"].write_text(json.dumps(edited))
    else:
        Ledger(Budget(1.0, 1e-6), journal=tmp_path / "bob.jsonl")
    done = run_three(warm_cli, tmp_path, configs)
    for name, (code, _, err) in done.items():
        assert code != 0 and re.search("nothing (was|is) (charged|spent)", err), (name, err)
        assert charges(tmp_path / f"{name}.jsonl") == [], name  # nothing charged anywhere
    if case == "an edited configuration":
        assert all("holds another public configuration" in err for _, _, err in done.values()), done
    else:
        assert "only (epsilon=1, delta=1e-06) remains" in done["bob"][2]  # bob says why: his journal
        assert all("'bob' is not ready (BudgetExceededError" in done[n][2] for n in ("alice", "helper"))


def test_the_one_machine_fit_runs_every_party_and_prints_what_each_party_sees(tmp_path):
    X, y, alice, bob = write_csvs(tmp_path, n=3000)
    cfg = config(tmp_path, rows=3000)
    done = run_cli("vertical", "fit", "--secure", "--config", cfg, "--data", f"alice={alice}", f"bob={bob}", "--target", "y",
                   "--report-dir", tmp_path / "reports")
    assert done.returncode == 0, done.stderr
    assert "CERTIFIED (secure aggregation, <= 1 colluding parties)" in done.stdout
    assert "what each party sees" in done.stdout and "holds no data" in done.stdout
    assert "a1" in done.stdout and "b2" in done.stdout and (tmp_path / "reports" / "report.html").exists()


def test_a_party_whose_data_do_not_match_the_layout_is_refused_before_anything_is_charged(tmp_path):
    _, _, alice, bob = write_csvs(tmp_path, n=399)
    cfg = config(tmp_path, "--timeout", 1)  # the layout says 400 rows; bob tells the others (none here) within 1 s
    journal = tmp_path / "bob.jsonl"
    done = run_cli("vertical", "party", "--secure", "--config", cfg, "--name", "bob", "--data", bob, "--journal", journal,
                   "--certs", tmp_path / "keys")
    assert done.returncode != 0 and "400 rows" in done.stderr
    assert not journal.exists() or not Ledger.open(journal).charges


def test_a_party_alone_times_out_ends_its_process_and_charges_nothing(tmp_path):
    _, _, _, bob = write_csvs(tmp_path)
    cfg = config(tmp_path, "--timeout", 0.5)
    journal = tmp_path / "bob.jsonl"
    done = run_cli("vertical", "party", "--secure", "--config", cfg, "--name", "bob", "--data", bob, "--journal", journal,
                   "--certs", tmp_path / "keys")
    assert done.returncode != 0 and "timed out waiting for the other parties" in done.stderr and "nothing was charged" in done.stderr
    assert charges(journal) == []  # charged only once every party has agreed on the public job (issue 33)


def test_a_config_without_a_helper_has_no_helper_to_run(tmp_path):
    cfg = tmp_path / "three.json"
    done = run_cli("vertical", "config", cfg, "--secure", "--party", "a=1", "b=1", "c=1", "--rows", 50, "--label", "a",
                   "--epsilon", 1, "--row-bound", 1, "--label-bound", 1)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(cfg.read_text())["addresses"]) == 3  # three data parties: an honest majority without a helper
    refused = run_cli("vertical", "helper", "--config", cfg)
    assert refused.returncode != 0 and "no helper" in refused.stderr


def test_secure_needs_its_bounds_and_a_budget(tmp_path):
    done = run_cli("vertical", "config", tmp_path / "c.json", "--secure", "--party", "a=1", "b=1", "--rows", 50, "--label", "a",
                   "--epsilon", 1)
    assert done.returncode != 0 and "--row-bound" in done.stderr
    done = run_cli("vertical", "config", tmp_path / "c.json", "--secure", "--row-bound", 1, "--label-bound", 1)
    assert done.returncode != 0 and "--epsilon" in done.stderr
