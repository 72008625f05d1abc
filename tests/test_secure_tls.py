"""Issue 36, items 1-2: the parties' addresses and mutual TLS between them.

Three parties on distinct loopback addresses with TLS open what one host opens; an impostor (a certificate for
another party, or from another CA) is refused before any party agrees, so before anything is charged; a relay
between two parties sees TLS records only (the job's digest and the shares it carries never appear); plaintext
to a network address is never chosen without the flag; each party listens on its configured address only; key
files others may read are refused. Every test starts its party processes itself, bounds their time and ends
exactly those (by process group), also when it fails. Only loopback addresses are ever connected to.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import struct
import sys
import time
from pathlib import Path

import attrs
import numpy as np
import pytest
from conftest import gone, run_cli
from relay import Relay, tls_records

from privsdr import Budget, Ledger
from privsdr.errors import PrivsdrError, ValidationError
from privsdr.network.addresses import check_addresses, free_ports, is_loopback
from privsdr.network.certificates import Credentials, load_credentials, make_keys, private_config
from privsdr.secure import launch
from privsdr.secure.job import AggregationJob, NodeJob
from privsdr.secure.party import mpc_arguments
from privsdr.vertical.secure_regression import gram_layout

pytest.importorskip("mpyc")
pytest.importorskip("cryptography")

PARTIES = ["helper", "party0", "party1"]
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
N = 16
WAIT = 20.0  # seconds any test here waits for its party processes at most


def gram_job(addresses=(), tls=True, timeout=WAIT) -> AggregationJob:
    """A secure Gram of two data parties and a helper, noise off (share variance 0)."""
    products = gram_layout(N, [("party0", 1), ("party1", 2)], "party0", -10, 0)
    nodes = (NodeJob("xtx", 6, 4.0**-10, (0, 1), 128.0, 3), NodeJob("xty", 3, 4.0**-10, (0, 1), 128.0))
    return AggregationJob(PARTIES, PARTIES, 1, nodes, timeout, products, addresses=addresses, tls=tls)


def gram_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"party0": {"block": rng.integers(-40, 40, size=(N, 1)), "label": rng.integers(-40, 40, size=N)},
            "party1": {"block": rng.integers(-40, 40, size=(N, 2))}}


def spread_addresses() -> tuple[str, ...]:
    return tuple(f"{host}:{free_ports(1, host)[0]}" for host in HOSTS)


# -- addresses ---------------------------------------------------------------------------------------------------------
def test_three_parties_on_distinct_loopback_addresses_with_tls_open_what_one_host_opens():
    """Noise off, the three parties on three addresses open the exact integer Gram, as on one host (127.0.0.1, checked
    exact in ``tests/test_secure_vertical.py``'s noise-off test); a second run here on 127.0.0.1 only repeated that."""
    inputs = gram_inputs()
    spread = launch.run_parties(gram_job(spread_addresses()), inputs)
    Z = np.column_stack([inputs["party0"]["block"], inputs["party1"]["block"]]).astype(np.int64)
    xtx = (Z.T @ Z)[np.triu_indices(3)]
    assert np.array_equal(spread.aggregate, np.concatenate([xtx, Z.T @ inputs["party0"]["label"]]))  # noise off: exact
    assert all(held["tls"] for held in spread.channels.values()) and gone(spread.pids)
    # a dialing party trusts the run's CA only (``party.trust_own_files``), not the operating system's CA store
    assert all(held["trusted_cas"] == ["privsdr MPyC CA"] for held in spread.channels.values()), spread.channels


@pytest.mark.parametrize("ports", [["0", "70000", "-1"], ["7001", "7001", "7001"], ["x", "7002", "7003"]])
def test_ports_and_addresses_are_checked_when_the_configuration_is_written(tmp_path, ports):
    cfg = tmp_path / "shared.json"
    done = run_cli("vertical", "config", cfg, "--secure", "--party", "alice=2", "bob=2", "--rows", 40, "--label", "alice",
                   "--epsilon", 1, "--row-bound", 1, "--label-bound", 1, "--addresses", *[f"127.0.0.1:{p}" for p in ports])
    assert done.returncode != 0 and not cfg.exists()
    assert re.search(r"outside 1\.\.65535|the same address|host:port", done.stderr), done.stderr
    if ports[0] != "x":  # the same numbers as --ports (on 127.0.0.1): refused too
        by_port = run_cli("vertical", "config", cfg, "--secure", "--party", "alice=2", "bob=2", "--rows", 40, "--label", "alice",
                          "--epsilon", 1, "--row-bound", 1, "--label-bound", 1, "--ports", *ports)
        assert by_port.returncode != 0 and not cfg.exists(), by_port.stdout
    with pytest.raises(ValidationError):
        check_addresses([f"127.0.0.1:{p}" for p in ports], PARTIES)
    with pytest.raises(ValidationError, match="same address"):
        check_addresses(["127.0.0.2:7001", "localhost:7002", "127.0.0.2:7001"], PARTIES)
    assert check_addresses(["127.0.0.2:7001", "127.0.0.3:7001", "db.example.org:7001"], PARTIES)[2] == "db.example.org:7001"
    assert is_loopback("127.0.0.9:1") and is_loopback("localhost:2") and not is_loopback("10.0.0.1:3")


def listening(pid: int) -> set[tuple[str, int]]:
    """The TCP sockets process ``pid`` listens on (its own /proc/PID/net/tcp, matched by its socket inodes)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # state LISTEN
                address, port = fields[1].split(":")
                ip = socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(address, 16))) if table == "tcp" else address
                found.add((ip, int(port, 16)))
    return found


def test_each_party_listens_on_its_configured_address_only(tmp_path):
    """Parties 1 and 2 started without party 0 keep listening for it: each listens on its own host and port only."""
    job = gram_job(spread_addresses())
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    creds = launch.credentials_for(job, None, folder)
    procs = []
    try:
        for i in (1, 2):
            procs.append((i, launch.PartyProcess(job, i, gram_inputs()[PARTIES[i]], private_config(creds[PARTIES[i]], folder / f"p{i}"))))
        deadline = time.monotonic() + WAIT
        seen: dict[int, set] = {}
        while time.monotonic() < deadline and not all(seen.get(i) for i, _ in procs):
            for i, proc in procs:
                assert proc.proc.poll() is None, proc.why()
                seen[i] = listening(proc.pid)
            time.sleep(0.1)
        for i, _ in procs:
            host, port = job.addresses[i].split(":")
            assert seen[i] == {(host, int(port))}, (i, seen[i])
    finally:
        for _, proc in procs:
            proc.end()
    assert gone([proc.pid for _, proc in procs])


# -- TLS ------------------------------------------------------------------------------------------------------------
IMPOSTOR = """import sys
import privsdr.secure.party as party
party.server_context = lambda *a, **k: None  # an impostor skips the honest party's check of its own files
sys.exit(party.main(sys.argv[3:]))
"""


IMPOSTOR_CASES = ("another party's certificate", "another CA's certificate", "a listener with another's certificate")


def start_impostor_case(folder, case: str, creds: dict, timeout: float) -> tuple[int, dict]:
    """The three parties of ``case`` (their own addresses and job): the impostor's index and {index: PartyProcess}."""
    job = gram_job(spread_addresses(), timeout=timeout)
    run = folder / "run"
    run.mkdir(mode=0o700, parents=True)
    fake_index = 2 if case.startswith("a listener") else 0
    if case == "another CA's certificate":
        other = make_keys(folder / "other", PARTIES)
        fake = Credentials(0, other["helper"] / "mpyc_ca.crt", other["helper"] / "party_0.crt", other["helper"] / "party_0.key")
    else:  # party0's own files: "MPyC party 1", signed by the run's CA
        fake = Credentials(fake_index, creds["party0"].ca, creds["party0"].certificate, creds["party0"].key)
    impostor = folder / "impostor"
    impostor.write_text(f"#!{sys.executable}\n{IMPOSTOR}")
    impostor.chmod(0o700)
    inputs = gram_inputs()
    procs = {fake_index: launch.PartyProcess(job, fake_index, inputs.get(PARTIES[fake_index]),
                                             private_config(fake, run / f"p{fake_index}"), python=str(impostor))}
    for i in range(3):
        if i != fake_index:
            procs[i] = launch.PartyProcess(job, i, inputs.get(PARTIES[i]), private_config(creds[PARTIES[i]], run / f"p{i}"))
    return fake_index, procs


def test_an_impostor_is_refused_before_any_party_agrees_so_before_anything_is_charged(tmp_path):
    """An impostor runs the honest protocol with a certificate that is not its party's. Party 0 only dials (MPyC: the
    lower id connects), so only the listening parties 1 and 2 can check it: as party 0 with party 1's own key and
    certificate (signed by the run's CA) it is refused by the name check, with a certificate naming "MPyC party 0"
    from another CA by TLS itself. Party 2 only listens: as party 2 with party 1's certificate it is refused by the
    dialing parties' check of the server's name. No party reaches the agreement (the launcher charges only after
    every party has agreed), and every process is ended. The three cases run at once, each with its own addresses
    (their parties wait out the same timeout together instead of one after the other)."""
    timeout = 6.0
    keys = make_keys(tmp_path / "keys", PARTIES)
    creds = {name: load_credentials(keys[name], i) for i, name in enumerate(PARTIES)}
    cases: dict[str, tuple[int, dict]] = {}
    try:
        for k, case in enumerate(IMPOSTOR_CASES):
            cases[case] = start_impostor_case(tmp_path / f"case{k}", case, creds, timeout)
        deadline = time.monotonic() + timeout + launch.GRACE
        while time.monotonic() < deadline and any(procs[i].proc.poll() is None for fake_index, procs in cases.values()
                                                  for i in procs if i != fake_index):
            time.sleep(0.1)
        for case, (fake_index, procs) in cases.items():
            honest = [i for i in procs if i != fake_index]
            for proc in procs.values():
                proc.settle()
            stages = {i: procs[i].stages for i in range(3)}
            assert not any("agreed" in s for s in stages.values()), (case, stages)
            assert all(procs[i].proc.poll() is not None for i in honest), case  # stopped (their watchdog, or a peer gone)
            for i in honest:  # no honest party ever held a connection from the impostor
                assert PARTIES[fake_index] not in procs[i].channels().get("peer_certificates", {}), (case, i)
            if case == "another party's certificate":  # the name check refused it (MPyC checks the CA only)
                refusals = [why for i in honest for why in procs[i].refusals()]
                assert refusals and all("claiming to be party 0" in why and "MPyC party 1" in why for why in refusals), refusals
    finally:
        for _, procs in cases.values():
            for proc in procs.values():
                proc.end()
    assert len(cases) == 3 and gone([p.pid for _, procs in cases.values() for p in procs.values()])


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext-control"])
def test_a_relay_between_two_parties_sees_only_tls_records(tls):
    """The helper (party 0) dials party 1 through a relay. With TLS every byte it carries is a TLS record and neither
    the job's digest (sent at the agreement) nor any share party 1 received from the helper appears in them; the
    plaintext run is the control that the relay does see both when they travel in the clear."""
    job = gram_job(spread_addresses(), tls=tls)
    relay = Relay(job.addresses[1])
    try:
        opened = launch.run_parties(job, gram_inputs(), record_view=True, routes={"helper": {1: relay.address}})
    finally:
        relay.close()
    assert gone(opened.pids)
    traffic = bytes(relay.up) + b"|" + bytes(relay.down)
    shares = [int(v) for v in opened.views["party0"]["helper"]]  # what party0 (index 1) received from the helper
    secrets = [job.digest().encode()] + [v.to_bytes((v.bit_length() + 7) // 8, "little") for v in shares if v.bit_length() > 48]
    assert len(secrets) > 3 and len(relay.up) > 1000
    if tls:
        assert 23 in tls_records(bytes(relay.up)) and 23 in tls_records(bytes(relay.down))  # application data, all TLS
        assert not [s for s in secrets if s in traffic]
    else:
        assert all(s in traffic for s in secrets)  # the instrument sees what travels in the clear


def test_plaintext_to_a_network_address_is_never_chosen_without_the_flag(tmp_path):
    """TLS is the default everywhere: a configuration with network addresses is TLS unless written with --plaintext,
    MPyC gets --ssl, a party without its certificates is refused before it connects anywhere or charges anything, and
    a simulated fit to network addresses needs real certificates (a CA made for the run is for loopback only)."""
    network = ["10.11.12.13:7001", "10.11.12.14:7001", "10.11.12.15:7001"]
    cfg = tmp_path / "shared.json"
    done = run_cli("vertical", "config", cfg, "--secure", "--party", "alice=2", "bob=2", "--rows", 40, "--label", "alice",
                   "--epsilon", 1, "--row-bound", 1, "--label-bound", 1, "--addresses", *network)
    assert done.returncode == 0, done.stderr
    shared = json.loads(cfg.read_text())
    assert shared["estimator"]["tls"] is True and shared["addresses"] == network
    job = attrs.evolve(gram_job(network))
    assert "--ssl" in mpc_arguments(job, 1, {})
    record = json.loads(job.to_json())
    del record["tls"]  # a job file without the field: TLS, never plaintext
    assert AggregationJob.from_json(json.dumps(record)).tls is True
    rng = np.random.default_rng(0)
    (tmp_path / "bob.csv").write_text("b1,b2\n" + "\n".join(f"{a},{b}" for a, b in rng.normal(size=(40, 2))))
    journal = tmp_path / "bob.jsonl"
    refused = run_cli("vertical", "party", "--secure", "--config", cfg, "--name", "bob", "--data", tmp_path / "bob.csv",
                      "--journal", journal)
    assert refused.returncode != 0 and "needs its certificate folder" in refused.stderr and "nothing was charged" in refused.stderr
    assert not journal.exists() or not Ledger.open(journal).charges  # refused before the run, not after a wait
    with pytest.raises(PrivsdrError, match="TLS to network addresses needs the parties' own certificates"):
        launch.run_parties(job, gram_inputs())
    plaintext = run_cli("vertical", "config", tmp_path / "plain.json", "--secure", "--party", "alice=2", "bob=2", "--rows", 40,
                        "--label", "alice", "--epsilon", 1, "--row-bound", 1, "--label-bound", 1, "--addresses", *network,
                        "--plaintext")
    assert plaintext.returncode == 0 and json.loads((tmp_path / "plain.json").read_text())["estimator"]["tls"] is False
    assert "--ssl" not in mpc_arguments(attrs.evolve(job, tls=False), 1, {}) and "plaintext to network addresses" in plaintext.stderr


def test_the_python_estimators_take_addresses_and_refuse_bad_ones_before_anything_is_charged():
    from privsdr import FederatedSIR, SecureVerticalRegression

    ledger = Ledger(Budget(1.0, 1e-6))
    X = np.random.default_rng(0).normal(size=(30, 3))
    with pytest.raises(ValidationError, match="one address host:port per party"):
        SecureVerticalRegression(1.0, 1.0, addresses=["127.0.0.2:7001"], n_parties=2, ledger=ledger, budget=Budget(1.0, 1e-6)).fit(X, X[:, 0])
    with pytest.raises(ValidationError, match="outside 1..65535"):
        FederatedSIR(bound=1.0, cut_points=[0.0], aggregation="secure", addresses=["127.0.0.1:0", "127.0.0.1:2", "127.0.0.1:3"],
                     ledger=ledger, budget=Budget(1.0, 1e-6)).fit([(X[:15], X[:15, 0]), (X[15:], X[15:, 0])])
    with pytest.raises(PrivsdrError, match="own certificates"):
        SecureVerticalRegression(1.0, 1.0, addresses=["10.0.0.1:7001", "10.0.0.2:7001", "10.0.0.3:7001"], n_parties=2,
                                 ledger=ledger, budget=Budget(1.0, 1e-6)).fit(X, X[:, 0])
    assert ledger.spent.epsilon == 0


# -- keys -----------------------------------------------------------------------------------------------------------
def test_secure_keys_writes_private_keys_and_key_files_others_may_read_are_refused(tmp_path):
    done = run_cli("secure", "keys", tmp_path / "keys", "--parties", *PARTIES)
    assert done.returncode == 0, done.stderr
    assert "PRIVATE" not in done.stdout + done.stderr
    for i, name in enumerate(PARTIES):
        folder = tmp_path / "keys" / name
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and sorted(p.name for p in folder.iterdir()) == [
            "mpyc_ca.crt", f"party_{i}.crt", f"party_{i}.key"]
        assert stat.S_IMODE((folder / f"party_{i}.key").stat().st_mode) == 0o600
        load_credentials(folder, i)
    assert stat.S_IMODE((tmp_path / "keys" / "ca" / "mpyc_ca.key").stat().st_mode) == 0o600
    again = run_cli("secure", "keys", tmp_path / "keys", "--parties", *PARTIES)
    assert again.returncode != 0 and "already holds a CA" in again.stderr
    renamed = tmp_path / "renamed"  # party0's (party 1's) certificate and key, offered as party 2's
    renamed.mkdir(mode=0o700)
    for suffix in ("crt", "key"):
        shutil.copy2(tmp_path / "keys" / "party0" / f"party_1.{suffix}", renamed / f"party_2.{suffix}")
    shutil.copy2(tmp_path / "keys" / "ca" / "mpyc_ca.crt", renamed / "mpyc_ca.crt")
    with pytest.raises(ValidationError, match=r"names \['MPyC party 1', 'party0'\], not 'MPyC party 2'"):
        load_credentials(renamed, 2)
    key = tmp_path / "keys" / "party1" / "party_2.key"
    for mode in (0o640, 0o604, 0o644):
        key.chmod(mode)
        with pytest.raises(ValidationError, match=f"mode {mode:04o}: a key must be readable by its owner only") as info:
            load_credentials(key.parent, 2)
        assert "PRIVATE" not in str(info.value)
    # a party given that folder is refused before it starts anything
    cfg = tmp_path / "shared.json"
    assert run_cli("vertical", "config", cfg, "--secure", "--party", "alice=2", "bob=2", "--rows", 40, "--label", "alice",
                   "--epsilon", 1, "--row-bound", 1, "--label-bound", 1).returncode == 0
    shutil.copytree(tmp_path / "keys" / "party1", tmp_path / "bob")  # bob is party 2 of helper, alice, bob
    (tmp_path / "bob" / "party_2.key").chmod(0o644)
    helper = run_cli("vertical", "helper", "--config", cfg, "--certs", tmp_path / "bob")
    assert helper.returncode != 0 and "no key file" in helper.stderr  # the helper is party 0: its key is not there
    rng = np.random.default_rng(0)
    (tmp_path / "bob.csv").write_text("b1,b2\n" + "\n".join(f"{a},{b}" for a, b in rng.normal(size=(40, 2))))
    bob = run_cli("vertical", "party", "--secure", "--config", cfg, "--name", "bob", "--data", tmp_path / "bob.csv",
                  "--certs", tmp_path / "bob")
    assert bob.returncode != 0 and "readable by its owner only" in bob.stderr and "PRIVATE" not in bob.stderr

