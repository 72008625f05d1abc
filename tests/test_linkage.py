"""Private record linkage (issue 36 item 3): the parties' rows aligned by an identifier column through DH-PSI on
ristretto255 (``privsdr.linkage``). Every party runs in a thread of this process on its own loopback address
(127.0.0.2-127.0.0.9), every wait is bounded by a timeout, and every socket is closed by the party that opened it."""
from __future__ import annotations

import hashlib
import os
import re
import socket
import struct
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from relay import Relay

from privsdr.cli import main
from privsdr.errors import ValidationError
from privsdr.linkage import IdentifierError, LinkageConfig, LinkageError, Peer, link, normalise_ids, psi, refusal, tls_contexts
from privsdr.linkage import channel as channel_module
from privsdr.linkage.channel import CHUNK, HEADER, MAGIC, Channel

TIMEOUT = 20.0


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def peers(names, first=2):
    return tuple(Peer(n, f"127.0.0.{first + i}", free_port(f"127.0.0.{first + i}")) for i, n in enumerate(names))


def run(id_sets, *, names=None, label=None, configs=None, contexts=None, timeout=TIMEOUT, **kw):
    """Every party's ``link`` in its own thread; each party's result or the exception it raised."""
    names = names or [f"p{i}" for i in range(len(id_sets))]
    config = LinkageConfig(peers(names), label or names[0])
    configs = configs or [config] * len(names)
    contexts = contexts or [(None, None)] * len(names)
    with ThreadPoolExecutor(len(names)) as pool:
        futures = [pool.submit(link, ids, cfg, name, server_context=ctx[0], client_context=ctx[1], timeout=timeout, **kw)
                   for ids, cfg, name, ctx in zip(id_sets, configs, names, contexts, strict=True)]
        out = []
        for f in futures:
            try:
                out.append(f.result(timeout=3 * timeout))
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                out.append(exc)
    return out


def ident(i: int) -> str:
    return f"patient-{i:06d}"


# -- linkage is the set intersection, in one common order -----------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_linkage_is_the_intersection_in_one_order_at_every_party(k, data):
    sets = [data.draw(st.lists(st.integers(0, 40), min_size=1, max_size=30, unique=True), label=f"party {i}") for i in range(k)]
    ids = [[ident(i) for i in s] for s in sets]
    results = run(ids)
    for r in results:
        assert not isinstance(r, Exception), r
    common = set.intersection(*map(set, ids))
    aligned = [[ids[i][j] for j in r.order] for i, r in enumerate(results)]
    assert set(aligned[0]) == common and len(aligned[0]) == len(common)
    assert all(a == aligned[0] for a in aligned)  # the same order at every party
    assert all(r.set_sizes == {f"p{i}": len(s) for i, s in enumerate(ids)} for r in results)


def test_the_common_order_is_pseudorandom_not_the_row_order():
    ids = [ident(i) for i in range(64)]
    a, b = run([ids, ids[::-1]])
    assert sorted(a.order.tolist()) == list(range(64)) and a.order.tolist() != list(range(64))
    assert [ids[j] for j in a.order] == [ids[::-1][j] for j in b.order]


# -- a party's work shared by threads changes nothing but the time ----------------------------------------------------
@pytest.mark.parametrize("k", [2, 3])
def test_parties_with_worker_threads_link_the_intersection_in_one_order(monkeypatch, k):
    monkeypatch.setattr(psi, "MIN_SHARE", 4)  # small lists still split into shares
    ids = [[ident(i) for i in range(j * 7, 50 + j * 7)] for j in range(k)]
    results = run(ids, workers=3)
    assert all(not isinstance(r, Exception) for r in results), results
    aligned = [[ids[i][j] for j in r.order] for i, r in enumerate(results)]
    assert set(aligned[0]) == set.intersection(*map(set, ids)) and all(a == aligned[0] for a in aligned)


def test_blinding_in_threads_keeps_the_order_and_refuses_a_bad_element_in_any_share(monkeypatch):
    monkeypatch.setattr(psi, "MIN_SHARE", 4)
    points = psi.hash_all([ident(i) for i in range(40)], workers=3)
    assert points == [psi.hash_to_group(ident(i)) for i in range(40)]
    scalar = psi.new_scalar()
    assert psi.blind(points, scalar, workers=3) == psi.blind(points, scalar)
    with pytest.raises(LinkageError, match="bob sent something that is not a ristretto255 element"):
        psi.blind(points[:30] + [b"\xff" * 32] + points[30:], scalar, "bob", workers=3)
    with pytest.raises(ValidationError, match="workers"):
        link([ident(1)], LinkageConfig(peers(["alice", "bob"]), "alice"), "alice", workers=0)


def test_the_ascii_fast_path_of_the_control_character_check_agrees_with_the_unicode_categories():
    import unicodedata

    from privsdr.linkage.normalise import has_control

    for text in [chr(c) for c in range(128)] + ["ab\x7f", "a b", "\u00e9t\u00e9", "x\u200by", "\u00a0"]:
        assert has_control(text) == any(unicodedata.category(c).startswith("C") for c in text), repr(text)


# -- nothing but blinded elements leaves a party ---------------------------------------------------------------------
@pytest.fixture
def wire(monkeypatch):
    """Every byte any party sends, with the id of the thread (the party) that sent it."""
    sent: list[tuple[int, bytes]] = []
    lock = threading.Lock()
    write = Channel._write

    def recording(self, data):
        with lock:
            sent.append((threading.get_ident(), bytes(data)))
        write(self, data)

    monkeypatch.setattr(Channel, "_write", recording)
    return sent


@pytest.mark.parametrize("k", [2, 3])
def test_no_identifier_hash_or_unblinded_element_is_ever_sent(wire, k):
    ids = [[ident(i) for i in range(j * 5, 40 + j * 5)] for j in range(k)]
    ids[0] += ["  Case-Sensitive Id  "]
    results = run(ids)
    assert all(not isinstance(r, Exception) for r in results), results
    stream = b"".join(data for _, data in wire)
    assert len(stream) > 32 * 40 * k
    for x in {i.strip() for s in ids for i in s}:
        raw = x.encode()
        digest = hashlib.sha512(psi.DOMAIN + raw).digest()
        forbidden = [raw, digest, hashlib.sha512(raw).digest(), hashlib.sha256(raw).digest(), psi.hash_to_group(x)]
        assert not any(f in stream for f in forbidden), x
        assert digest[:32] not in stream and digest[32:] not in stream


@pytest.fixture
def scalars(monkeypatch):
    """Every secret scalar each party (thread) draws, in order."""
    drawn: dict[int, list[bytes]] = {}
    draw = psi.new_scalar

    def recorded():
        s = draw()
        drawn.setdefault(threading.get_ident(), []).append(s)
        return s

    monkeypatch.setattr(psi, "new_scalar", recorded)
    return drawn


def messages(frames):
    """The element lists in a party's frames, in the order sent."""
    out = []
    for f in frames:
        kind, body = HEADER.unpack(f[:HEADER.size])[2], f[HEADER.size:]
        if kind == channel_module.POINTS:
            out.append([])
        elif kind == CHUNK:
            out[-1] += [body[i:i + 32] for i in range(0, len(body), 32)]
    return out


def test_a_party_sends_its_own_list_blinded_by_its_secret_scalar_and_shuffled(wire, scalars):
    ids = [[ident(i) for i in range(64)], [ident(i) for i in range(32, 96)]]
    results = run(ids)
    assert all(not isinstance(r, Exception) for r in results), results
    assert len(scalars) == 2 and all(len(s) == 1 for s in scalars.values())  # one secret scalar per party per run
    for thread, (scalar,) in scalars.items():
        frames = [data for who, data in wire if who == thread]
        first = next(f for f in frames if HEADER.unpack(f[:HEADER.size])[2] == CHUNK)[HEADER.size:]
        sent = [first[i:i + 32] for i in range(0, len(first), 32)]
        own = next(s for s in ids if set(sent) == {psi.blind([psi.hash_to_group(x)], scalar)[0] for x in s})
        in_row_order = psi.blind([psi.hash_to_group(x) for x in own], scalar)
        assert sent != in_row_order and sorted(sent) == sorted(in_row_order)  # shuffled, blinded by the party's scalar


def test_with_three_parties_no_ring_message_holds_a_fully_blinded_value(wire, scalars):
    """The owner's one-time mask: the last hop of a list never holds its F values, so no party but the label holder
    (who receives the sorted F sets) learns an overlap of two parties' sets."""
    ids = [[ident(i) for i in range(j * 10, 40 + j * 10)] for j in range(3)]
    results = run(ids)
    assert all(not isinstance(r, Exception) for r in results), results
    a = [draws[0] for draws in scalars.values()]  # each party's a_i (its second draw is the mask r_i)
    assert all(len(draws) == 2 for draws in scalars.values())
    full = {psi.blind(psi.blind(psi.blind([psi.hash_to_group(x)], a[0]), a[1]), a[2])[0] for s in ids for x in s}
    for thread in scalars:
        ring = messages([d for who, d in wire if who == thread])[:3]
        assert len(ring) == 3 and not full & {e for m in ring for e in m}


def test_frames_are_versioned_and_capped():
    a, b = socket.socketpair()
    left, right = Channel(a, "left", 2.0), Channel(b, "right", 0.3)
    try:
        left._write(HEADER.pack(MAGIC, 9, CHUNK, 0))
        with pytest.raises(LinkageError, match="version"):
            right.recv(CHUNK)
        left._write(HEADER.pack(MAGIC, 1, CHUNK, channel_module.MAX_FRAME + 1))
        with pytest.raises(LinkageError, match="bad frame"):
            right.recv(CHUNK)
        left.send(channel_module.POINTS, struct.pack(">Q", 10**9))
        with pytest.raises(LinkageError, match="over the cap"):
            right.recv_elements(1000)
        left.send(channel_module.HELLO, b"{}")
        with pytest.raises(LinkageError, match="chunk frame was due"):
            right.recv(CHUNK)
        with pytest.raises(LinkageError, match="sent nothing"):
            right.recv(CHUNK)
    finally:
        left.close()
        right.close()


def test_an_element_off_the_group_is_refused():
    with pytest.raises(LinkageError, match="not a ristretto255 element"):
        psi.blind([b"\xff" * 32], psi.new_scalar(), "bob")


# -- identifiers are checked before anything else --------------------------------------------------------------------
@pytest.mark.parametrize(("ids", "pattern", "match", "rows"), [
    (["a1", "b2", " a1 "], None, "duplicate", [1, 3]),
    (["a1", "", "c3", "nan", "NA"], None, "missing", [2, 4, 5]),
    (["a1", float("nan"), "c3"], None, "missing", [2]),
    (["A-001", "A-002", "a003", "A-4"], r"A-\d{3}", "format", [3, 4]),
    (["a1", "b\x002"], None, "control", [2]),
])
def test_bad_identifiers_are_refused_with_their_rows_before_anything_is_sent(monkeypatch, ids, pattern, match, rows):
    def forbidden(*a, **k):
        raise AssertionError("nothing may be hashed or sent")

    told = []

    def refuse(me, parties, digest, reason, **kw):  # the refusal the others hear (the real one connects and sends it)
        told.append(reason)
        return True

    monkeypatch.setattr(psi, "connect", forbidden)
    monkeypatch.setattr(psi, "hash_to_group", forbidden)
    monkeypatch.setattr(refusal, "refuse", refuse)
    config = LinkageConfig(peers(["alice", "bob"]), "alice", pattern=pattern)
    with pytest.raises(IdentifierError, match=match) as caught:
        link(ids, config, "alice")
    assert caught.value.rows == rows and ", ".join(map(str, rows)) in str(caught.value)
    assert "told the other parties" in str(caught.value)
    # the others hear the kind of refusal only: no row number, no identifier
    assert len(told) == 1 and told[0].startswith(f"alice refused its own {caught.value.kind}") and match in told[0]
    assert not any(ch.isdigit() for ch in told[0]) and not any(str(x) in told[0] for x in ids if str(x).strip() and str(x) != "nan")


def test_normalisation_strips_whitespace_and_folds_case_only_when_asked():
    assert normalise_ids([" Ab ", "ab", "A\u0301"]) == ["Ab", "ab", "\u00c1"]  # NFC; case kept
    with pytest.raises(IdentifierError, match="duplicate"):
        normalise_ids([" Ab ", "ab"], casefold=True)
    assert normalise_ids(["007", "7"]) == ["007", "7"]  # no number parsing: leading zeros are significant


# -- channels: TLS with the expected party's certificate, plaintext only on loopback ---------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """``privsdr secure keys``' CA with certificates for alice, bob, carol and mallory, and a second CA with one for
    bob: each party's (CA, certificate, key) files. A certificate names ``MPyC party i`` and the party's own name."""
    from privsdr.network.certificates import CA_CERT, make_keys

    folder = tmp_path_factory.mktemp("pki")
    out = {}
    for ca_name, names in (("ca", ("alice", "bob", "carol", "mallory")), ("other-ca", ("bob",))):
        for i, (name, own) in enumerate(make_keys(folder / ca_name, names).items()):
            out[(ca_name, name)] = (str(own / CA_CERT), str(own / f"party_{i}.crt"), str(own / f"party_{i}.key"))
    return out


def contexts(pki, name, ca="ca", cert_of=None):
    return tls_contexts(*pki[(ca, cert_of or name)])


def test_tls_linkage_of_three_parties_on_three_loopback_addresses(pki, wire):
    names = ["alice", "bob", "carol"]
    ids = [[ident(i) for i in range(j, 30 + j)] for j in range(3)]
    results = run(ids, names=names, contexts=[contexts(pki, n) for n in names])
    assert all(not isinstance(r, Exception) for r in results), results
    assert [r.n for r in results] == [28] * 3 and all(r.tls for r in results)
    stream = b"".join(d for _, d in wire)
    assert not any(psi.hash_to_group(x) in stream or x.encode() in stream for s in ids for x in s)


@pytest.mark.parametrize("refuser", ["alice", "carol"])
def test_a_party_refused_for_its_identifiers_tells_its_peers_who_stop_at_once_naming_it(pki, refuser):
    """Issue 36: the refusing party connects (TLS, names checked), sends its refusal and closes; the others stop with
    a message naming it and the kind of refusal, not at their timeout (60 s here)."""
    names = ["alice", "bob", "carol"]
    ids = [[ident(i) for i in range(j, 30 + j)] for j in range(3)]
    ids[names.index(refuser)][5] = ""  # a missing identifier
    results = run(ids, names=names, contexts=[contexts(pki, n) for n in names], timeout=60.0)
    assert all(isinstance(r, Exception) for r in results), results
    own = results[names.index(refuser)]
    assert isinstance(own, IdentifierError) and "told the other parties, which stop at once" in str(own), own
    for name, result in zip(names, results, strict=True):
        if name != refuser:
            assert isinstance(result, LinkageError), result
            assert f"{refuser} stopped the linkage: {refuser} refused its own missing identifiers" in str(result), result
            assert "within the timeout" not in str(result) and "sent nothing for" not in str(result), result


REFUSED_CERTIFICATES = [  # (who shows the certificate, whose certificate, of which CA, what an error says)
    ("bob", "mallory", "ca", "names \\[.*'mallory'\\], not 'bob'"),       # the dialling party shows another party's certificate
    ("alice", "mallory", "ca", "names \\[.*'mallory'\\], not 'alice'"),   # the listening party does
    ("bob", "bob", "other-ca", "certificate|TLS"),                       # a certificate for bob from another CA
]


def refuse_certificate(pki, who, cert_of, ca, match):
    names = ["alice", "bob"]
    ctx = [contexts(pki, n, ca if n == who else "ca", cert_of if n == who else None) for n in names]
    results = run([[ident(i) for i in range(10)]] * 2, names=names, contexts=ctx, timeout=1.5)
    assert all(isinstance(r, LinkageError) for r in results), results
    assert any(re.search(match, str(r)) for r in results), [str(r) for r in results]


def test_a_peer_with_another_partys_certificate_or_another_ca_is_refused(pki):
    """Each case of ``REFUSED_CERTIFICATES`` on its own ports. The listening party waits its whole 1.5 s timeout for
    the peer it expects, so the cases run at once rather than one timeout after another."""
    with ThreadPoolExecutor(len(REFUSED_CERTIFICATES)) as pool:
        futures = {case[:3]: pool.submit(refuse_certificate, pki, *case) for case in REFUSED_CERTIFICATES}
        failed = {case: f.exception(timeout=4 * TIMEOUT) for case, f in futures.items()}
    failures = [f"{case}: {exc!r}" for case, exc in failed.items() if exc is not None]
    assert not failures, "\n".join(failures)


def test_a_tls_context_that_does_not_check_the_peer_is_refused(pki):
    import ssl

    server, client = contexts(pki, "alice")
    client.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValidationError, match="CERT_REQUIRED"):
        link([ident(1)], LinkageConfig(peers(["alice", "bob"]), "alice"), "alice", server_context=server, client_context=client,
             timeout=1.0)


def test_a_private_key_others_can_read_is_refused(pki, tmp_path):
    ca, cert, key = pki[("ca", "alice")]
    loose = tmp_path / "loose.key"
    loose.write_bytes(Path(key).read_bytes())
    os.chmod(loose, 0o644)
    with pytest.raises(ValidationError, match="chmod 600"):
        tls_contexts(ca, cert, str(loose))


def test_plaintext_to_a_non_loopback_address_is_refused_without_the_flag(monkeypatch):
    monkeypatch.setattr(psi, "hash_to_group", lambda x: (_ for _ in ()).throw(AssertionError("hashed")))
    config = LinkageConfig((Peer("alice", "127.0.0.2", 47001), Peer("bob", "192.0.2.7", 47002)), "alice")
    with pytest.raises(ValidationError, match="192.0.2.7:47002 not loopback: TLS is required"):
        link([ident(1)], config, "alice", timeout=2.0)
    channel_module.check_addresses(config.parties, tls=False, allow_plaintext=True)  # the explicit flag lets it through
    channel_module.check_addresses(config.parties, tls=True, allow_plaintext=False)


def test_parties_with_different_configurations_are_refused_before_any_element_is_sent(wire):
    ps = peers(["alice", "bob"])
    configs = [LinkageConfig(ps, "alice"), LinkageConfig(ps, "alice", casefold=True)]
    results = run([[ident(1)], [ident(1)]], names=["alice", "bob"], configs=configs, timeout=1.5)
    assert all(isinstance(r, LinkageError) for r in results) and "another linkage configuration" in str(results[0]) + str(results[1])
    assert not any(HEADER.unpack(d[:HEADER.size])[2] == CHUNK for _, d in wire)


# -- the CLI and the secure fit it feeds -----------------------------------------------------------------------------
def _tables(folder: Path, seed=0):
    rng = np.random.default_rng(seed)
    n = 90
    X = rng.normal(size=(n, 4)) * 0.5
    y = X @ np.array([1.0, -0.5, 0.3, 0.8]) + 0.1 * rng.normal(size=n) + 1.0
    keys = [f"K{i:04d}" for i in range(n)]
    a_rows = [i for i in range(n) if i % 7]         # alice lacks every 7th person
    b_rows = [i for i in range(n) if i % 5][::-1]   # bob every 5th, and holds his rows in another order
    (folder / "alice_ids.csv").write_text("id,x1,x2,y\n" + "".join(f" {keys[i]} ,{float(X[i,0])!r},{float(X[i,1])!r},{float(y[i])!r}\n" for i in a_rows))
    (folder / "bob_ids.csv").write_text("x3,id,x4\n" + "".join(f"{float(X[i,2])!r},{keys[i]},{float(X[i,3])!r}\n" for i in b_rows))
    both = [i for i in range(n) if i % 7 and i % 5]
    return X[both], y[both]


def _link_cli(folder: Path, extra=(), own=None, names=("alice", "bob")):
    """``privsdr vertical link`` of each of ``names`` (of alice and bob), each in a thread; their exit codes."""
    ps = peers(["alice", "bob"], first=5)
    common = ["vertical", "link", "--parties", *map(str, ps), "--label", "alice", "--id-column", "id", "--timeout", "20", *extra]
    argv = [[*common, "--name", n, "--data", str(folder / f"{n}_ids.csv"), "--out", str(folder / f"{n}.csv"), *(own or {}).get(n, [])]
            for n in names]
    with ThreadPoolExecutor(len(argv)) as pool:
        return [f.result(timeout=60) for f in [pool.submit(main, a) for a in argv]]


def test_linked_csvs_align_the_rows_so_a_fit_on_them_is_the_fit_on_the_pooled_intersected_rows(tmp_path, capsys):
    """The linked CSVs are the parties' ``--data`` (``vertical party --secure``; docs/hosts.md and docs/linkage.md run
    that chain): same length, one row order, no identifier column, so the least-squares fit on their columns side by
    side is the fit on the pooled rows of the intersection, to rounding. (The secure fit itself is tested against the
    pooled fit on aligned parties in tests/test_secure_vertical.py; starting its three MPC processes here added
    nothing the alignment does not decide.)"""
    X, y = _tables(tmp_path)
    assert _link_cli(tmp_path) == [0, 0]
    out = capsys.readouterr().out
    assert f"linked N = {len(y)} rows" in out and "PLAINTEXT" in out and "outside the DP guarantee" in out
    alice = np.genfromtxt(tmp_path / "alice.csv", delimiter=",", names=True)
    bob = np.genfromtxt(tmp_path / "bob.csv", delimiter=",", names=True)
    assert alice.dtype.names == ("x1", "x2", "y") and bob.dtype.names == ("x3", "x4") and len(alice) == len(bob) == len(y)
    linked = np.column_stack([alice["x1"], alice["x2"], bob["x3"], bob["x4"], np.ones(len(y))])
    pooled = np.column_stack([X, np.ones(len(y))])
    fit = np.linalg.lstsq(linked, alice["y"], rcond=None)[0]
    assert np.allclose(fit, np.linalg.lstsq(pooled, y, rcond=None)[0], rtol=1e-9, atol=1e-9)
    assert not np.allclose(linked[:, :4], pooled[:, :4])  # the common order is not the pooled rows' order


def test_the_cli_refuses_bad_identifiers_with_their_rows_and_writes_nothing(tmp_path, capsys):
    _tables(tmp_path)
    text = (tmp_path / "bob_ids.csv").read_text().splitlines()
    text[4] = text[4].replace(text[4].split(",")[1], text[2].split(",")[1])  # row 4 repeats row 2's identifier
    (tmp_path / "bob_ids.csv").write_text("\n".join(text) + "\n")
    codes = _link_cli(tmp_path)  # --timeout 20: alice must stop because bob told her, not at her timeout
    err = capsys.readouterr().err
    assert codes[1] == 2 and "duplicate identifier" in err and "rows 2, 4" in err
    assert "this party told the other parties, which stop at once" in err
    assert codes[0] != 0  # alice stops at once, naming bob and the kind of refusal
    assert "bob stopped the linkage: bob refused its own duplicate identifiers" in err, err
    assert "within the timeout" not in err and "sent nothing for" not in err, err
    assert not (tmp_path / "bob.csv").exists() and not (tmp_path / "alice.csv").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_the_cli_links_over_tls_with_each_partys_certificate(tmp_path, capsys, pki, monkeypatch):
    _, y = _tables(tmp_path)
    own = {n: ["--ca", pki[("ca", n)][0], "--cert", pki[("ca", n)][1], "--key", pki[("ca", n)][2]] for n in ("alice", "bob")}
    assert _link_cli(tmp_path, own=own) == [0, 0]
    out = capsys.readouterr().out
    assert out.count(f"linked N = {len(y)} rows") == 2 and "channels: TLS" in out and "PLAINTEXT" not in out
    assert (tmp_path / "alice.csv").read_text().count("\n") == len(y) + 1
    folders = {n: ["--certs", str(Path(pki[("ca", n)][1]).parent)] for n in ("alice", "bob")}  # `privsdr secure keys` folders
    monkeypatch.setattr(psi, "MIN_SHARE", 4)  # and each party's group operations in 3 threads
    assert _link_cli(tmp_path, own=folders, extra=["--workers", "3"]) == [0, 0]
    out = capsys.readouterr().out
    assert out.count(f"linked N = {len(y)} rows") == 2 and out.count("channels: TLS") == 2
    own["bob"] = own["bob"][:4]  # a certificate without its key: refused before bob connects (alice would wait her timeout)
    assert _link_cli(tmp_path, own=own, names=["bob"]) == [2]
    assert "--ca, --cert and --key together" in capsys.readouterr().err


def test_a_relay_between_two_tls_parties_sees_only_tls_records(pki, wire, monkeypatch):
    """Bob dials alice through a TCP relay that records every byte both ways: no frame, no element in the clear."""
    dial = socket.create_connection
    ps = peers(["alice", "bob"])
    relay = Relay(f"{ps[0].host}:{ps[0].port}", host="127.0.0.7", wait=TIMEOUT)
    relayed = tuple(relay.address.rsplit(":", 1)[0:1]) + (int(relay.address.rsplit(":", 1)[1]),)

    def via_relay(address, *args, **kw):  # bob dials alice through the relay
        return dial(relayed if tuple(address) == (ps[0].host, ps[0].port) else address, *args, **kw)

    monkeypatch.setattr(channel_module.socket, "create_connection", via_relay)
    try:
        config = LinkageConfig(ps, "alice")
        ids = [[ident(i) for i in range(40)], [ident(i) for i in range(20, 60)]]
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(link, s, config, n, server_context=c[0], client_context=c[1], timeout=TIMEOUT)
                       for s, n, c in zip(ids, ["alice", "bob"], [contexts(pki, "alice"), contexts(pki, "bob")], strict=True)]
            assert [f.result(timeout=3 * TIMEOUT).n for f in futures] == [20, 20]
    finally:
        relay.close()
    seen = [bytes(relay.up), bytes(relay.down)]
    stream = b"".join(seen)
    assert stream[:1] == b"\x16" and len(stream) > 2 * 32 * 40  # a TLS handshake record first, then the whole run
    sent = [d for _, d in wire]
    elements = {d[i:i + 32] for d in sent if HEADER.unpack(d[:HEADER.size])[2] == CHUNK for i in range(HEADER.size, len(d), 32)}
    assert len(elements) >= 80 and MAGIC not in stream and not any(e in stream for e in elements)


def test_importing_the_linkage_leaves_no_file_in_the_temp_folder(tmp_path):
    """rbcl writes its libsodium to a temporary file on import and never removes it; the linkage removes it once
    loaded (and the group operations still work)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = "import privsdr.linkage.psi as p, rbcl; print(len(rbcl.crypto_core_ristretto255_from_hash(bytes(64))))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "32", done.stderr
    assert list(tmp_path.iterdir()) == []
