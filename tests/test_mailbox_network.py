"""Issue 36 item 1 for the mailbox protocols: DP-BCD and PRIDE over TCP with mutual TLS (``privsdr.parties.transport``).

Two parties on 127.0.0.2 and 127.0.0.3 (both loopback on Linux), each in a thread of this process with its own
``NetworkMailbox`` (its own asyncio loop and sockets), so every test is a few seconds: the network run gives the folder
run's model and writes nothing to disk; an impostor (another party's certificate, another CA's) is refused before any
journal changes; a relay between the two sees TLS records only; plaintext to a network address is refused; a peer that
vanishes is named. One CLI run checks the wiring of ``config --addresses`` and ``party --certs``.
"""
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import run_cli
from relay import Relay, tls_records

from privsdr import Budget, Ledger, ValidationError
from privsdr.cli._parties import with_channels
from privsdr.datasets import dpbcd_synthetic
from privsdr.network.addresses import free_ports
from privsdr.network.certificates import load_credentials, make_keys
from privsdr.parties import transport as transport_module
from privsdr.parties.engine import ProtocolAborted
from privsdr.parties.messages import PartyMessage
from privsdr.parties.transport import ConnectRefused, NetworkMailbox, PeerVanished, message_cap
from privsdr.vertical import DPBCDConfig, DPBCDProtocol, Layout, Party, PartyInfo, PRIDEConfig, PRIDEProtocol, run_party

TIMEOUT = 20.0
N = 200
LAYOUT = Layout(N, (PartyInfo("alice", 2, True), PartyInfo("bob", 3)))
DPBCD = DPBCDConfig(mode="certified", row_bound=8.0, label_bound=60.0, coef_bound=20.0)


@pytest.fixture(scope="module")
def data():
    d = dpbcd_synthetic(N, 5, seed=1)
    return {"alice": Party("alice", d.blocks[0], d.y), "bob": Party("bob", d.blocks[1])}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """``privsdr secure keys``' CA with alice, bob and carol, and another CA with its own alice and bob."""
    folder = tmp_path_factory.mktemp("pki")
    return {"ca": make_keys(folder / "ca", ["alice", "bob", "carol"]), "other": make_keys(folder / "other", ["alice", "bob"])}


def addresses():
    return {"alice": f"127.0.0.2:{free_ports(1, '127.0.0.2')[0]}", "bob": f"127.0.0.3:{free_ports(1, '127.0.0.3')[0]}"}


def box(name, where, pki=None, tls=True, timeout=TIMEOUT, digest="d"):
    return NetworkMailbox(name, where, digest, certificates=pki["ca"][name] if tls else None, tls=tls, timeout=timeout,
                          max_message=message_cap(LAYOUT))


def play(boxes, data, protocol, budget, ledgers=None, seed=1, timeout=TIMEOUT):
    """Run every party of ``boxes`` (name -> mailbox or folder) in its own thread; name -> outcome or exception."""
    out = {}

    def one(name):
        try:
            out[name] = run_party(protocol, data[name], LAYOUT, budget, boxes[name], ledger=(ledgers or {}).get(name),
                                  random_state=seed, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out[name] = exc

    threads = [threading.Thread(target=one, args=(name,), daemon=True) for name in boxes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3 * TIMEOUT)
    assert not any(t.is_alive() for t in threads)
    return out


@pytest.mark.parametrize(("protocol", "budget"), [
    (DPBCDProtocol(DPBCD), Budget.infinite()),  # noise off
    (PRIDEProtocol(PRIDEConfig(mode="certified", bounds=(-8.0, 8.0), sketch_dim="full", lam=1.0)), Budget(2.0, 1e-6)),  # seeded
], ids=["dpbcd-noise-off", "pride-seeded"])
def test_the_network_run_gives_the_folder_runs_model_and_writes_nothing(pki, data, protocol, budget, tmp_path, monkeypatch):
    folder = play({n: tmp_path / "box" for n in data}, data, protocol, budget)
    monkeypatch.chdir(tmp_path / "box")  # nothing may be written here, nor saved anywhere, on the network path
    monkeypatch.setattr(PartyMessage, "save", lambda *a, **k: (_ for _ in ()).throw(AssertionError("a message was written")))
    before = sorted(p.name for p in (tmp_path / "box").iterdir())
    where = addresses()
    net = play({n: box(n, where, pki) for n in data}, data, protocol, budget)
    assert all(not isinstance(r, Exception) for r in [*folder.values(), *net.values()]), (folder, net)
    for name in data:
        a, b = folder[name].result, net[name].result
        assert a.coef_blocks.keys() == b.coef_blocks.keys()  # PRIDE: bob holds no label and estimates nothing
        for k in a.coef_blocks:
            np.testing.assert_allclose(b.coef_blocks[k], a.coef_blocks[k], rtol=1e-12, atol=1e-12)
        assert [m.id for m in net[name].sent] == [m.id for m in folder[name].sent]  # the same messages
    assert folder["alice"].result.coef_blocks  # the label holder's model was compared
    assert sorted(p.name for p in (tmp_path / "box").iterdir()) == before


def impostor(name, pki, cert_of, ca, where):
    """A party program that claims to be ``name`` but holds ``cert_of``'s certificate of CA ``ca`` (the local check of its
    own folder skipped: a malicious program would not run it)."""
    from privsdr.network.certificates import client_context, server_context

    fake = box(name, where, pki)
    folder = pki[ca][cert_of]
    creds = load_credentials(folder, next(int(p.stem.split("_")[1]) for p in folder.glob("party_*.crt")))
    fake._server_ctx, fake._client_ctx = server_context(creds), client_context(creds)
    return fake


IMPOSTORS = [  # (the impostor, whose certificate it holds, of which CA)
    ("bob", "carol", "ca"),     # dials alice with another party's certificate of the parties' CA
    ("alice", "carol", "ca"),   # listens as alice with it: bob dials the impostor
    ("bob", "bob", "other"),    # dials with a certificate naming bob, from another CA
    ("alice", "alice", "other"),  # listens with a certificate naming alice, from another CA
]


def refuse_impostor(pki, data, fake, cert_of, ca, where, folder):
    real = "alice" if fake == "bob" else "bob"
    journal = folder / f"{real}.jsonl"
    Ledger(Budget(5.0, 1e-5), journal=journal)
    before = journal.read_bytes()
    boxes = {real: box(real, where, pki, timeout=1.5), fake: impostor(fake, pki, cert_of, ca, where)}
    out = play(boxes, data, DPBCDProtocol(DPBCD), Budget(2.0, 1e-6), ledgers={real: Ledger.open(journal)}, timeout=1.5)
    assert isinstance(out[real], ConnectRefused), out
    assert journal.read_bytes() == before  # not even a reservation: the run was never opened
    text = str(out[real])
    if ca == "ca" and fake == "bob":  # the listening alice says whom the certificate names
        assert "a certificate naming" in text and "carol" in text and "cannot be party 'bob'" in text
    else:
        assert "refused" in text


def test_an_impostor_is_refused_before_anything_is_charged(pki, data, tmp_path):
    """Each case of ``IMPOSTORS`` on its own two addresses and journal. A refused party (or the impostor) waits its
    whole 1.5 s timeout for the peer it expects, so the four cases run at once rather than one timeout after another."""
    ports = {host: free_ports(len(IMPOSTORS), host) for host in ("127.0.0.2", "127.0.0.3")}
    cases = {}
    for i, (fake, cert_of, ca) in enumerate(IMPOSTORS):
        where = {"alice": f"127.0.0.2:{ports['127.0.0.2'][i]}", "bob": f"127.0.0.3:{ports['127.0.0.3'][i]}"}
        (tmp_path / str(i)).mkdir()
        cases[f"{fake} with {cert_of}'s certificate of {ca}"] = (fake, cert_of, ca, where, tmp_path / str(i))
    with ThreadPoolExecutor(len(cases)) as pool:
        futures = {case: pool.submit(refuse_impostor, pki, data, *args) for case, args in cases.items()}
        failed = {case: f.exception(timeout=4 * TIMEOUT) for case, f in futures.items()}
    failures = [f"{case}: {exc!r}" for case, exc in failed.items() if exc is not None]
    assert not failures, "\n".join(failures)


def test_each_partys_channels_trust_the_parties_ca_and_no_other(pki):
    """Both contexts of a party (listening and dialling) verify the peer against the parties' CA alone: not also the
    system's public CAs, which would accept any certificate a public CA signed for a name equal to a party's."""
    mailbox = box("alice", addresses(), pki)
    for context in (mailbox._server_ctx, mailbox._client_ctx):
        assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
        trusted = [dict(rdn[0] for rdn in ca["subject"]) for ca in context.get_ca_certs()]
        assert trusted == [{"commonName": "privsdr MPyC CA"}], trusted
        assert context.cert_store_stats()["x509_ca"] == 1


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext-control"])
def test_a_relay_between_the_two_parties_sees_only_tls_records(pki, data, tls, monkeypatch):
    """Bob dials alice through a relay that keeps every byte: with TLS they are all TLS records, and neither a released
    array nor the message format appears; the plaintext run is the control that the relay sees both in the clear."""
    where = addresses()
    relay = Relay(where["alice"], host="127.0.0.5", wait=TIMEOUT)
    dial = socket.create_connection
    target = tuple(where["alice"].split(":"))
    relayed = ("127.0.0.5", int(relay.address.rsplit(":", 1)[1]))

    def via_relay(address, *args, **kw):
        return dial(relayed if (address[0], str(address[1])) == target else address, *args, **kw)

    monkeypatch.setattr(transport_module.socket, "create_connection", via_relay)
    try:
        boxes = {n: box(n, where, pki, tls=tls) for n in data}
        out = play(boxes, data, DPBCDProtocol(DPBCD), Budget(2.0, 1e-6))  # the budget of the other DP-BCD runs here: one calibration
    finally:
        relay.close()
    assert all(not isinstance(r, Exception) for r in out.values()), out
    traffic = bytes(relay.up) + b"|" + bytes(relay.down)
    sent = [m for r in out.values() for m in r.sent if m.arrays]
    arrays = [np.asarray(a).tobytes()[:64] for m in sent for a in m.arrays.values()]
    secrets = [b"privsdr.vertical-message"] + [a for a in arrays if len(set(a)) > 16]  # not a block of zeros
    assert len(secrets) > 5 and len(relay.up) > 1000 and len(relay.down) > 1000
    if tls:
        assert 23 in tls_records(bytes(relay.up)) and 23 in tls_records(bytes(relay.down))  # application data, all TLS
        assert not [s for s in secrets if s in traffic]
    else:
        assert all(s in traffic for s in secrets)  # the instrument sees what travels in the clear
    report = with_channels(out["alice"].report, boxes["alice"])  # what the CLI files: the channels, in the report
    assert report.status_line.endswith("(plaintext channels)") != tls and "channels: " in report.notes[-1]


def test_plaintext_to_a_network_address_is_refused_without_the_flag(tmp_path, monkeypatch):
    """A configuration with network addresses is TLS (--plaintext is refused there); a party given one by hand is
    refused before it dials or listens anywhere; plaintext stays possible on loopback, asked for."""
    monkeypatch.setattr(transport_module.socket, "create_connection", lambda *a, **k: pytest.fail("dialled"))
    network = {"alice": "127.0.0.2:17001", "bob": "192.0.2.7:17002"}
    with pytest.raises(ValidationError, match="192.0.2.7:17002, not loopback: TLS is required"):
        NetworkMailbox("alice", network, "d", tls=False)
    with pytest.raises(ValidationError, match="needs its certificate folder"):
        NetworkMailbox("alice", network, "d")  # TLS without certificates: refused too
    NetworkMailbox("alice", {"alice": "127.0.0.2:17001", "bob": "127.0.0.3:17002"}, "d", tls=False)  # loopback, asked for
    args = ["--party", "alice=2", "bob=3", "--rows", N, "--label", "alice", "--epsilon", 1, "--row-bound", 8, "--label-bound", 60,
            "--coef-bound", 20]
    refused = run_cli("vertical", "config", tmp_path / "p.json", *args, "--addresses", *network.values(), "--plaintext")
    assert refused.returncode == 2 and "loopback only" in refused.stderr and not (tmp_path / "p.json").exists()
    assert run_cli("vertical", "config", tmp_path / "t.json", *args, "--addresses", *network.values()).returncode == 0
    assert '"tls": true' in (tmp_path / "t.json").read_text()
    pride = run_cli("pride", "config", tmp_path / "q.json", "--bounds", -8, 8, "--epsilon", 1, "--party", "alice=2", "bob=3",
                    "--rows", N, "--addresses", *network.values(), "--plaintext")
    assert pride.returncode == 2 and "loopback only" in pride.stderr


def test_a_peer_that_vanishes_is_named_and_the_journal_closes_the_run_as_failed(pki, data, tmp_path):
    """Bob connects, says he is ready, then his connection drops (as when his process is killed: the kernel resets it):
    alice, after her first charge, stops at her next wait naming him; her journal closes the run as failed."""
    where = addresses()
    journal = tmp_path / "alice.jsonl"
    alice = box("alice", where, pki)
    bob = box("bob", where, pki)
    out = {}
    thread = threading.Thread(target=lambda: out.update(alice=_catch(run_party, DPBCDProtocol(DPBCD), data["alice"], LAYOUT,
                                                                       Budget(2.0, 1e-6), alice, ledger=Ledger(Budget(5.0, 1e-5), journal=journal))))
    thread.start()
    try:
        bob.open()
        digest = DPBCDProtocol(DPBCD).digest(LAYOUT)
        bob.post(PartyMessage("privsdr.dpbcd", 1, digest, "bob", ("alice",), "ready", 0, {}, {"rows": N, "columns": 3}))
        bob.fetch("0001-alice-remainder")  # alice has charged and sent her first release
        for writer in bob._writers.values():  # the process is gone: its connections are reset
            bob._loop.call_soon_threadsafe(writer.transport.abort)
    finally:
        thread.join(TIMEOUT)
        bob._stop()
    assert isinstance(out["alice"], PeerVanished) and "party 'bob' at 127.0.0.3" in str(out["alice"]), out
    ledger = Ledger.open(journal)
    [run] = ledger.runs
    assert ledger.spent.epsilon > 0 and run.closed and run.summary["failed"] and "PeerVanished" in run.summary["why"]


def test_each_party_listens_on_its_own_address_only_and_the_last_nowhere(pki):
    """Alice listens on her configured host and port only (not on every interface), until bob has dialled her; bob, last
    in the layout, only dials (read off this process's own /proc/PID/net/tcp)."""
    import os
    import time

    from test_secure_tls import listening  # the sockets a process listens on, by inode

    where = addresses()
    alice, bob = box("alice", where, pki, timeout=5.0), box("bob", where, pki, timeout=5.0)
    ports = {int(a.rsplit(":", 1)[1]) for a in where.values()}
    opener = threading.Thread(target=alice.open)
    opener.start()
    try:
        seen: set = set()
        for _ in range(100):  # alice is listening (she waits for bob)
            seen = {s for s in listening(os.getpid()) if s[1] in ports}
            if seen:
                break
            time.sleep(0.05)
        assert seen == {("127.0.0.2", int(where["alice"].rsplit(":", 1)[1]))}
        bob.open()
        opener.join(TIMEOUT)
        assert alice.opened and not {s for s in listening(os.getpid()) if s[1] in ports}  # everyone connected: nobody listens
    finally:
        bob._stop()
        alice._stop()


def test_a_message_signed_with_another_senders_name_stops_the_run(pki):
    """The channel is authenticated: bob cannot pass off a message as alice's (nor one not addressed to its reader)."""
    where = addresses()
    alice, bob = box("alice", where, pki, timeout=5.0), box("bob", where, pki, timeout=5.0)
    opener = threading.Thread(target=alice.open)
    opener.start()
    try:
        bob.open()
        opener.join(TIMEOUT)
        bob.post(PartyMessage("privsdr.dpbcd", 1, "d", "alice", ("alice",), "ready", 0, {}, {}))  # bob signs as alice
        with pytest.raises(PeerVanished, match="broke the protocol: bob sent message 0000-alice-ready from 'alice'"):
            alice.fetch("0000-bob-ready")
    finally:
        bob._stop()
        alice._stop()


def test_a_peer_that_stops_answering_is_named_at_the_timeout(pki, data):
    where = addresses()
    alice, bob = box("alice", where, pki, timeout=1.5), box("bob", where, pki, timeout=1.5)
    out = {}
    thread = threading.Thread(target=lambda: out.update(alice=_catch(run_party, DPBCDProtocol(DPBCD), data["alice"], LAYOUT,
                                                                       Budget(2.0, 1e-6), alice)))
    thread.start()
    try:
        bob.open()  # connected, then silent: a host that vanished without closing anything
        with bob._cond:  # alice stops at her timeout and tells bob
            bob._cond.wait_for(lambda: bob._aborts, TIMEOUT)
        with pytest.raises(ProtocolAborted, match="TimeoutError at party 'alice'"):
            bob.check_aborts()
        bob.close(failed=True)  # only now does bob answer: his goodbye ends alice's wait for it (else 2 s more)
        thread.join(TIMEOUT)
    finally:
        bob._stop()
    assert not thread.is_alive()
    assert isinstance(out["alice"], TimeoutError) and "from 'bob' at 127.0.0.3" in str(out["alice"]), out


def _catch(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the test looks at it
        return exc


def test_the_cli_runs_two_parties_over_tls_from_the_configurations_addresses(tmp_path, warm_cli):
    """``config --addresses`` writes them (and tls) into the file, whose digest the parties compare; ``party --certs``
    runs over TLS with nothing on disk but the reports; --mailbox with addresses and a party without certificates are
    refused before anything is charged."""
    import csv

    d = dpbcd_synthetic(N, 5, seed=9)
    for name, block, y in (("alice", d.blocks[0], d.y), ("bob", d.blocks[1], None)):
        with open(tmp_path / f"{name}.csv", "w", newline="") as fh:
            rows = np.column_stack([block, y]) if y is not None else block
            csv.writer(fh).writerows([[f"{name}_{j}" for j in range(block.shape[1])] + (["y"] if y is not None else []), *rows.tolist()])
    make_keys(tmp_path / "keys", ["alice", "bob"])
    where = addresses()
    cfg = tmp_path / "net.json"
    done = run_cli("vertical", "config", cfg, "--party", "alice=2", "bob=3", "--rows", N, "--label", "alice", "--epsilon", 4,
                   "--row-bound", 8, "--label-bound", 60, "--coef-bound", 20, "--addresses", where["alice"], where["bob"])
    assert done.returncode == 0 and "mutual TLS" in done.stdout
    journal = tmp_path / "alice.jsonl"
    assert run_cli("ledger", "init", journal, "--epsilon", 5, "--delta", 1e-5).returncode == 0
    before = journal.read_bytes()
    common = ["vertical", "party", "--config", cfg, "--name", "alice", "--data", tmp_path / "alice.csv", "--target", "y", "--json"]
    refused = run_cli(*common, "--journal", journal, "--mailbox", tmp_path / "box", "--certs", tmp_path / "keys")
    assert refused.returncode == 2 and "drop it" in refused.stderr
    refused = run_cli(*common, "--journal", journal)
    assert refused.returncode == 2 and "certificate folder" in refused.stderr and journal.read_bytes() == before
    bob = warm_cli.start(["vertical", "party", "--config", cfg, "--name", "bob", "--data", tmp_path / "bob.csv", "--certs",
                          tmp_path / "keys", "--json", "--timeout", TIMEOUT], cwd=tmp_path)  # its own session (tests/warm_cli.py)
    try:
        alice = run_cli(*common, "--journal", journal, "--certs", tmp_path / "keys", "--timeout", TIMEOUT, cwd=tmp_path)
        b_out, b_err = bob.communicate(timeout=3 * TIMEOUT)
    finally:
        if bob.poll() is None:
            import os
            import signal

            os.killpg(bob.pid, signal.SIGKILL)
            bob.wait()
    assert alice.returncode == 0 and bob.returncode == 0, (alice.stderr, b_err)
    import json

    a, b = json.loads(alice.stdout), json.loads(b_out)
    assert a["coefficients"] == b["coefficients"] and a["report"]["status"] == "certified"
    assert "over mutual TLS" in alice.stderr and "over mutual TLS" in b_err
    assert any(n.startswith("channels: the messages went over mutual TLS") for n in a["report"]["notes"])
    assert Ledger.open(journal).spent.epsilon > 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".npz") == []


def test_sigterm_stops_a_cli_party_which_tells_the_others_and_closes_its_journal_run(tmp_path, pki, warm_cli):
    """Bob's `vertical party` process, ready and waiting for alice's first release, gets SIGTERM: it tells alice (an
    abort naming the kind of failure), exits 130, and his journal closes the run as failed (his stage-0 release, charged
    after the ready point, stays charged)."""
    import json
    import os
    import signal
    import time

    from privsdr._json import parse_json
    from privsdr.cli._parties import shared_digest
    from privsdr.cli.vertical import _read_shared

    d = dpbcd_synthetic(N, 5, seed=9)
    np.savetxt(tmp_path / "bob.csv", d.blocks[1], delimiter=",", header="b0,b1,b2", comments="")
    where = addresses()
    cfg = tmp_path / "net.json"
    assert run_cli("vertical", "config", cfg, "--party", "alice=2", "bob=3", "--rows", N, "--label", "alice", "--epsilon", 4,
                   "--row-bound", 8, "--label-bound", 60, "--coef-bound", 20, "--addresses", where["alice"], where["bob"]).returncode == 0
    journal = tmp_path / "bob.jsonl"
    assert run_cli("ledger", "init", journal, "--epsilon", 5, "--delta", 1e-5).returncode == 0
    config, _, _, layout = _read_shared(str(cfg))
    alice = box("alice", where, pki, digest=shared_digest(parse_json(cfg.read_text())))
    opener = threading.Thread(target=alice.open)
    opener.start()
    bob = warm_cli.start(["vertical", "party", "--config", cfg, "--name", "bob", "--data", tmp_path / "bob.csv", "--certs",
                          pki["ca"]["bob"], "--journal", journal, "--timeout", TIMEOUT])  # its own session (tests/warm_cli.py)
    try:
        opener.join(TIMEOUT)
        alice.post(PartyMessage("privsdr.dpbcd", 1, DPBCDProtocol(config).digest(layout), "alice", ("bob",), "ready", 0, {},
                                {"rows": N, "columns": 2}))
        alice.fetch("0000-bob-ready")  # bob is ready: he charges his stage-0 release, then waits for alice's first
        deadline = time.monotonic() + TIMEOUT
        while not ((runs := Ledger.open(journal).runs) and runs[0].charged) and time.monotonic() < deadline:
            time.sleep(0.02)
        bob.send_signal(signal.SIGTERM)
        _, err = bob.communicate(timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while not alice._aborts and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ProtocolAborted, match="Interrupted at party 'bob'"):
            alice.check_aborts()
    finally:
        if bob.poll() is None:
            os.killpg(bob.pid, signal.SIGKILL)
            bob.wait()
        alice._stop()
    assert bob.returncode == 130, err
    ledger = Ledger.open(journal)
    [run] = ledger.runs
    assert run.closed and run.summary["failed"] and "SIGTERM" in run.summary["why"], json.dumps(run.summary)
    assert run.charged and ledger.spent.epsilon > 0  # what he charged after the ready point stays charged
