"""Issue 36: one FSIR party per host (``privsdr fsir config --secure`` / ``privsdr secure keys`` / ``privsdr fsir party``),
and the one-machine launchers opening their run only after every party has agreed.

Real processes, loopback only (127.0.0.2-127.0.0.4, mutual TLS), bounded by timeouts and ended by process group also
when a test fails: two sites and a server with the noise off give the one-machine secure fit's directions; a bad CSV
at one site stops every party at once with a message, and leaves every journal byte for byte as it was. The
one-machine launchers (``FederatedSIR(aggregation="secure")``, ``privsdr fsir secure``, ``SecureVerticalRegression``)
whose party cannot listen leave their journal byte for byte unchanged (on main they wrote a reserve and a failed
close before the parties had agreed).
"""
from __future__ import annotations

import json
import os
import signal
import socket

import numpy as np
import pytest
from conftest import run_cli

from privsdr import Budget, Ledger
from privsdr.federated import FederatedSIR
from privsdr.network.addresses import free_ports
from privsdr.secure import SecureAggregationError

pytest.importorskip("mpyc")

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]  # server, site1, site2: all loopback on Linux
ROWS = {"site1": 150, "site2": 130}
CUTS = ("-1", "0", "1")


def write_sites(folder, nan_at=None):
    rng = np.random.default_rng(3)
    data = {}
    for name, n in ROWS.items():
        X = rng.normal(size=(n, 3)) + 0.2
        y = X @ np.array([1.0, -1.0, 0.5]) + 0.2 * rng.normal(size=n)
        data[name] = (X, y)
        table = np.column_stack([X, y])
        if name == nan_at:
            table[7, 1] = np.nan
        np.savetxt(folder / f"{name}.csv", table, delimiter=",", header="x1,x2,x3,y", comments="")
    return data


def configure(folder, epsilon, timeout):
    addresses = [f"{host}:{free_ports(1, host)[0]}" for host in HOSTS]
    done = run_cli("fsir", "config", folder / "shared.json", "--bound", 3, "--columns", "x1", "x2", "x3", "--cut-points", *CUTS,
                   "--secure", "--sites", *(f"{k}={n}" for k, n in ROWS.items()), "--epsilon", epsilon, "--timeout", timeout,
                   "--addresses", *addresses)
    assert done.returncode == 0, done.stderr
    keys = run_cli("secure", "keys", folder / "keys", "--config", folder / "shared.json")
    assert keys.returncode == 0, keys.stderr
    return folder / "shared.json"


def run_parties(warm_cli, folder, cfg, extra=()):
    """Each party as its own `privsdr fsir party` process (own process group, ended by group whatever happens;
    ``tests/warm_cli.py``: forked with scikit-learn imported, its party process a fresh interpreter)."""
    commands = {"server": ["--name", "server"]}
    for name in ROWS:
        commands[name] = ["--name", name, "--data", folder / f"{name}.csv", "--target", "y"]
    procs = {}
    try:
        for name, args in commands.items():
            procs[name] = warm_cli.start(["fsir", "party", "--config", cfg, *args, "--certs", folder / "keys", "--journal",
                                          folder / f"{name}.jsonl", "--out", folder / f"{name}.json", *extra])
        done = {name: p.communicate(timeout=150) for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return {name: (procs[name].returncode, out, err) for name, (out, err) in done.items()}


def journals(folder):
    return {n: (folder / f"{n}.jsonl").read_bytes() if (folder / f"{n}.jsonl").exists() else None for n in ("server", *ROWS)}


def test_two_sites_and_a_server_on_three_hosts_with_the_noise_off_give_the_one_machine_fit(tmp_path, warm_cli):
    data = write_sites(tmp_path)
    cfg = configure(tmp_path, "inf", 60)
    results = run_parties(warm_cli, tmp_path, cfg, ["--allow-uncertified"])
    assert all(code == 0 for code, _, _ in results.values()), {n: err[-600:] for n, (_, _, err) in results.items()}
    outs = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in results}
    one_machine = FederatedSIR(1, bound=3.0, cut_points=[float(c) for c in CUTS], aggregation="secure", budget=Budget.infinite(),
                               allow_uncertified=True, timeout=60.0).fit([data[name] for name in ROWS])
    for name, out in outs.items():  # every party, the server included, ends with the one-machine directions
        assert np.allclose(out["directions"], one_machine.directions_, atol=1e-9), name
        assert np.allclose(out["center"], one_machine.center_, atol=1e-9), name
        assert out["n_total"] == sum(ROWS.values())
    assert set(outs["server"]["trust_model"]["what_each_party_sees"]) == {"server", *ROWS}


def test_a_bad_csv_at_one_site_stops_every_party_at_once_and_leaves_every_journal_unchanged(tmp_path, warm_cli):
    write_sites(tmp_path, nan_at="site2")
    cfg = configure(tmp_path, 1, 90)  # the decline, not the timeout, must stop the others
    Ledger(Budget(10.0, 1e-6), journal=tmp_path / "site1.jsonl")  # an existing journal, with budget left
    before = journals(tmp_path)
    results = run_parties(warm_cli, tmp_path, cfg)
    assert journals(tmp_path) == before  # nothing charged, nothing reserved, no journal created
    errs = {name: err for name, (_, _, err) in results.items()}
    assert all(code not in (0, None) for code, _, _ in results.values()), errs
    assert "nothing was charged anywhere" in errs["site2"], errs["site2"]
    for name in ("server", "site1"):
        assert "'site2' is not ready" in errs[name] and "nothing was charged" in errs[name], (name, errs[name])
        assert "timed out" not in errs[name], (name, errs[name])
    assert not any((tmp_path / f"{name}.json").exists() for name in results)


# -- the one-machine launchers: every party agrees before the run (and its journal) is opened -------------------
def taken_address():
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held, f"127.0.0.1:{held.getsockname()[1]}"


def fsir_clients():
    rng = np.random.default_rng(0)
    out = []
    for n in (60, 70):
        X = rng.normal(size=(n, 3))
        out.append((X, X[:, 0] + 0.1 * rng.normal(size=n)))
    return out


def _launcher(name: str, ledger: Ledger, addresses: list[str]):
    """(estimator, fit arguments) of a one-machine launcher whose third party (index 2) is at ``addresses[2]``."""
    if name == "FederatedSIR":
        return (FederatedSIR(1, bound=3.0, cut_points=[0.0], aggregation="secure", budget=Budget(1.0, 1e-6), ledger=ledger,
                             timeout=20.0, addresses=addresses), (fsir_clients(),))
    if name == "SecureSites":
        from privsdr import AdaSSPRegression
        from privsdr.federated import SecureSites

        return (SecureSites(AdaSSPRegression(bound_x=3.0, bound_y=3.0, budget=Budget(1.0, 1e-6), ledger=ledger), colluders=1,
                            timeout=20.0, addresses=addresses), (fsir_clients(),))
    from privsdr.vertical.secure_regression import SecureVerticalRegression

    X = np.random.default_rng(1).normal(size=(80, 2)) * 0.5
    return (SecureVerticalRegression(2.0, 4.0, n_parties=2, budget=Budget(1.0, 1e-6), ledger=ledger, timeout=20.0,
                                     addresses=addresses), (X, X[:, 0] - X[:, 1]))


@pytest.mark.parametrize("launcher", ["FederatedSIR", "SecureVerticalRegression", "SecureSites"])
def test_a_launcher_whose_party_cannot_listen_leaves_its_journal_byte_for_byte_unchanged(tmp_path, launcher):
    """Every party agrees before the launcher opens its run: a party that cannot listen costs nothing and writes
    nothing to the journal (no reserve, no failed close)."""
    journal = tmp_path / "j.jsonl"
    Ledger(Budget(5.0, 1e-6), journal=journal)
    before = journal.read_bytes()
    held, address = taken_address()
    try:
        est, args = _launcher(launcher, Ledger.open(journal), [f"127.0.0.1:{p}" for p in free_ports(2)] + [address])
        with pytest.raises(SecureAggregationError) as err:
            est.fit(*args)
    finally:
        held.close()
    assert not err.value.charged and "nothing was charged" in str(err.value)
    assert journal.read_bytes() == before


def test_the_fsir_secure_command_whose_party_cannot_listen_leaves_its_journal_byte_for_byte_unchanged(tmp_path):
    for k, (X, y) in enumerate(fsir_clients()):
        np.savetxt(tmp_path / f"c{k}.csv", np.column_stack([X, y]), delimiter=",", header="x1,x2,x3,y", comments="")
    assert run_cli("fsir", "config", tmp_path / "c.json", "--bound", 3, "--cut-points", 0).returncode == 0
    journal = tmp_path / "j.jsonl"
    Ledger(Budget(5.0, 1e-6), journal=journal)
    before = journal.read_bytes()
    held, address = taken_address()
    try:
        done = run_cli("fsir", "secure", "--config", tmp_path / "c.json", "--data", tmp_path / "c0.csv", tmp_path / "c1.csv",
                       "--target", "y", "--journal", journal, "--timeout", 20,
                       "--addresses", *(f"127.0.0.1:{p}" for p in free_ports(1)), address, f"127.0.0.1:{free_ports(1)[0]}")
    finally:
        held.close()
    assert done.returncode != 0 and "nothing was charged" in done.stderr, done.stderr
    assert journal.read_bytes() == before


# -- after the ready point: one party's ledger refuses the charge ---------------------------------------------------
def test_a_charge_refused_at_one_party_after_the_ready_point_stops_every_party_before_any_noise_share(tmp_path):
    """Issue 36 item 4: the three parties agree; then site2's journal refuses its charge (an OSError on the write).
    The charged round tells the others at once: every party stops before drawing a noise share, nothing is released,
    the server and site1 say what they spent (their journals close the run as failed, charged) and name site2, and
    site2 says that nothing was charged on its ledger (its journal closes the run as failed, uncharged)."""
    import threading

    from privsdr.federated import FSIRConfig
    from privsdr.federated.client import check_client_data
    from privsdr.federated.secure_fit import fit_secure_party

    config = FSIRConfig(bound=3.0, cut_points=(0.0,), columns=("x1", "x2", "x3"))
    data = dict(zip(ROWS, (check_client_data(X, y, config, name) for name, (X, y) in zip(ROWS, [
        (np.random.default_rng(k).normal(size=(n, 3)), np.random.default_rng(k + 9).normal(size=n)) for k, n in enumerate(ROWS.values())
    ], strict=True)), strict=True))
    addresses = [f"127.0.0.1:{p}" for p in free_ports(3)]
    ledgers = {name: Ledger(Budget(5.0, 1e-6), journal=tmp_path / f"{name}.jsonl") for name in ("server", *ROWS)}

    def refuse(*args, **kwargs):
        raise OSError("No space left on device")

    ledgers["site2"]._charge = refuse  # its journal refuses the write of the charge
    outcome: dict = {}

    def party(name):
        try:
            fit_secure_party(config, name, data.get(name), ROWS, 3, Budget(1.0, 1e-6), ledgers[name], colluders=1, timeout=40.0,
                             addresses=addresses, tls=False)
            outcome[name] = None
        except BaseException as exc:  # noqa: BLE001 - recorded and asserted below
            outcome[name] = exc

    threads = [threading.Thread(target=party, args=(name,)) for name in ("server", *ROWS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert set(outcome) == {"server", *ROWS} and all(isinstance(e, SecureAggregationError) for e in outcome.values()), outcome
    own = str(outcome["site2"])
    assert "could not charge its ledger" in own and "nothing was released" in own and "nothing was charged on this party's" in own
    for name in ("server", "site1"):
        message = str(outcome[name])
        assert "'site2' could not charge its ledger" in message and "nothing was released" in message, message
        assert "spent epsilon=1, delta=1e-06" in message and "timed out" not in message, message
        assert outcome[name].charged and outcome[name].party == "site2"
        assert Ledger.open(tmp_path / f"{name}.jsonl").spent.epsilon == pytest.approx(1.0, rel=1e-3)
    closes = [json.loads(line) for line in (tmp_path / "site2.jsonl").read_text().splitlines() if '"close"' in line]
    assert closes and closes[-1]["summary"]["failed"] is True
    assert Ledger.open(tmp_path / "site2.jsonl").spent.epsilon == 0
