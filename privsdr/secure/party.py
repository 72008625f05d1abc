"""One party of a secure aggregation, as its own process (the only module that imports ``mpyc.runtime``).

    python -m privsdr.secure.party --job JOB.json --index I --output OUT.npz [--input IN.npz] [--status S.jsonl]
                                   [--digest HEX] [--gate GO] [--decline WHY] [--record-view] [--route J=HOST:PORT]

Agreement before any charge (issue 33): the party checks its input against the public bounds (drawing no noise),
then, once MPyC has connected every party, sends every other party the digest of its public job (``job.digest``:
budget, accountant, relation, bounds, grids, noise shares, layout, parties, t, field size) and whether it is ready
(``--decline``: its launcher cannot take part, e.g. its journal has less left than the run costs), with MPyC's own
transfer of public values. Every party receives the same list; if any party is not ready or holds another digest,
every party stops (exit code 6) and nothing is charged anywhere. Otherwise it reports ``agreed`` and waits for its
launcher to charge the nodes and create the file ``--gate``; only then does it draw its noise shares and compute.

A contributing party rounds each of its statistics to the node's public grid, adds its own exact discrete Gaussian
share (Canonne, Kamath & Steinke 2020 sampler, operating-system randomness) and inputs the integer vector into the
secure computation; every party (contributing or not) inputs the same secure type, MPyC's SecInt of the job's
bit length, so that the parties agree on it; the vectors are added on their Shamir shares and only the sum is
opened, to every party. Nothing else leaves the party: its statistic and its share stay in its process.

A job with ``products`` (a secure Gram of vertically partitioned columns, ``crossproducts``): each data party's
input file holds its integer block (``block``, already clipped and rounded) and, for the label holder, ``label``;
it adds its own diagonal block and its noise shares as above, and also inputs its block as a secret-shared
matrix; the cross-blocks between parties are computed on the shares, and only the noisy total is opened. A helper
(a party without columns) adds a noise share and sees shares only.

Addresses and channels (issue 36). MPyC's options come from the job alone: ``-M/-I/-T``, one ``-P host:port`` per
party from ``job.addresses`` and ``--ssl`` when ``job.tls`` (any other MPyC option on the command line is refused).
MPyC passes no host to its listening socket; this program runs MPyC on an event loop of its own whose
``create_server`` binds this party's configured host (``OwnAddressLoop``), and refuses to start if MPyC runs on
another loop (uvloop, say), so the party listens on its own address only, by construction. With ``--ssl`` MPyC
reads ``.config/`` of the working directory (the launcher runs each party in a private folder holding links to its
own key, certificate and the CA: ``certificates.private_config``); the dialing side checks that the server's
certificate names ``MPyC party j``, and since MPyC's listening side checks only the CA, ``NamedPeer`` closes a
connection whose client certificate does not name the party id the client claims in its first message, before
MPyC sees a byte of it. ``--route J=HOST:PORT`` dials party J there instead (a tunnel or relay; its certificate
is checked all the same). A watchdog ends the process after the job's timeout (exit code 4), so a party whose
peers dropped out never waits for ever.

``--record-view`` also writes what this party received for each other contributor's vector, block and label (its
Shamir shares, a field element per coordinate), and a tally of every message its process received, by peer and by
the MPyC step that asked for it (``receipts``): the tests check that the shares do not depend on that contributor's
data and that the report's "what each party sees" names exactly what the tally holds (``trust.received``).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PrivsdrError
from ..mechanisms import secure as exact
from .addresses import split_address
from .certificates import certificate_names, load_credentials, names_party
from .job import AggregationJob, differences

EXIT_TIMEOUT = 4
EXIT_REFUSED = 5
EXIT_DISAGREED = 6  #: the parties did not all hold the same public job, or one was not ready: nothing was charged
#: the longest reason a party's note of refusal may carry to the others (it names a kind of failure, never data)
WHY_LIMIT = 200


class ShareRefused(RuntimeError):
    """This party refuses to send: its statistic is beyond the public bound, or its own share beyond the tail bound."""


def local_vector(job: AggregationJob, values: Mapping[str, Any]) -> np.ndarray:
    """The integer vector this party sends: per node, round(x / gamma) + its own noise share (module docstring)."""
    return with_shares(job, local_grid(job, values))


def local_grid(job: AggregationJob, values: Mapping[str, Any]) -> np.ndarray:
    """Per node, round(x / gamma) of this party's statistics, checked against the public bounds (no noise yet)."""
    parts = []
    for node in job.nodes:
        if node.name not in values:
            raise ShareRefused(f"no statistic {node.name!r} in this party's input")
        x = np.asarray(values[node.name], dtype=float)
        if node.square is not None:
            if x.shape != (node.square, node.square):
                raise ShareRefused(f"{node.name!r} must be a {node.square} x {node.square} matrix, got {x.shape}")
            x = x[np.triu_indices(node.square)]
        x = x.ravel()
        if x.size != node.dimension or not np.all(np.isfinite(x)):
            raise ShareRefused(f"{node.name!r} must be {node.dimension} finite numbers, got {x.size}")
        if np.any(np.abs(x) > node.bound * (1.0 + 1e-12)):
            raise ShareRefused(f"{node.name!r} exceeds its public bound {node.bound:g}: the statistic must be clipped first")
        parts.append(np.array([round(float(v) / node.gamma) for v in x], dtype=np.int64))
    return np.concatenate(parts).astype(np.int64)


def with_shares(job: AggregationJob, q: np.ndarray) -> np.ndarray:
    """The integer vector ``q`` (every node, concatenated, in grid units) plus this party's own noise shares."""
    parts, at = [], 0
    for node in job.nodes:
        part = np.asarray(q[at:at + node.dimension], dtype=np.int64)
        at += node.dimension
        num, den = node.sigma_local2
        if num > 0:
            e = np.array([exact._discrete_gaussian(num, den) for _ in range(node.dimension)], dtype=object)
            if np.any(np.abs(e) > node.share_bound):  # probability below exp(-800): decided by the noise alone
                raise ShareRefused(f"the noise share of {node.name!r} fell beyond {node.share_bound}; run again")
            part = part + e.astype(np.int64)
        parts.append(part)
    return np.concatenate(parts).astype(np.int64)


def gram_input(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """A secure Gram's party: (its local statistics, its integer block, its integer label), checked (no noise yet)."""
    products = job.products
    assert products is not None
    block = label = None
    if name in products.parties:
        if "block" not in data:
            raise ShareRefused("no column block ('block') in this party's input")
        block = np.asarray(data["block"])
        if block.dtype.kind not in "iu" or block.shape != (products.rows, products.width_of(name)):
            raise ShareRefused(f"the block must be a {products.rows} x {products.width_of(name)} integer matrix on the grid")
        if name == products.label:
            if "label" not in data or np.asarray(data["label"]).dtype.kind not in "iu":
                raise ShareRefused("the label holder's input has no integer 'label'")
            label = np.asarray(data["label"], dtype=np.int64)
        limit = max(n.grid_bound for n in job.nodes)  # no entry beyond sqrt of the largest product bound
        if np.any(np.abs(block) > math.isqrt(limit) + 1) or (label is not None and np.any(np.abs(label) > math.isqrt(limit) + 1)):
            raise ShareRefused("the block exceeds the public bounds: it must be clipped and rounded first (crossproducts.party_block)")
    own = products.local_statistics(name, block, label)
    return np.concatenate([own["xtx"], own["xty"]]).astype(np.int64), block, label


def party_statistics(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """What party ``name`` computes from its data before the agreement, checked and with no noise yet: (its integer
    statistics on the grid, or None for a party that adds nothing; its integer block and label, secure Gram only)."""
    if job.products is not None:
        if name in job.inputs:  # a helper adds a noise share and no statistic
            return gram_input(job, name, data)
        return None, None, None
    if name in job.inputs:
        return local_grid(job, data), None, None
    return None, None, None


def party_input(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """What party ``name`` inputs into the secure computation: ``party_statistics`` with this party's noise shares
    added (``with_shares``, drawn by the party program only after the launcher has charged). The sensitivity and
    contributor probes (``privsdr.audit.secure_probe``) run the party program through this function."""
    q, block, label = party_statistics(job, name, data)
    return (with_shares(job, q) if q is not None else None), block, label


def _status(path: str | None, stage: str, **extra: Any) -> None:
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"stage": stage, "time": time.time(), "pid": os.getpid(), **extra}) + "\n")


class NamedPeer(asyncio.Protocol):
    """The listening side of one connection: MPyC's protocol ``inner`` hears it only once the client's certificate
    (verified against the CA by TLS) names the party id the client claims in its first two bytes, a lower id than
    this party's (MPyC listens for those only). Otherwise the connection is closed and ``refused(why)`` told. In
    plaintext there is no certificate to check: only the id's range is."""

    def __init__(self, inner: Any, own: int, tls: bool, refused: Any) -> None:
        self.inner, self.own, self.tls, self.refused = inner, own, tls, refused
        self.pending = bytearray()
        self.checked = False
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.checked:
            self.inner.data_received(data)
            return
        self.pending.extend(data)
        if len(self.pending) < 2:
            return
        claimed = int.from_bytes(self.pending[:2], "little")
        cert = self.transport.get_extra_info("peercert") if self.tls else None
        if claimed >= self.own or (self.tls and not names_party(cert, claimed)):
            names = certificate_names(cert) if cert else []
            self.refused(f"refused a connection claiming to be party {claimed}: its certificate names {names or 'nothing'}"
                         if self.tls else f"refused a connection claiming to be party {claimed} (this party hears lower ids only)")
            self.transport.abort()
            return
        self.checked = True
        self.inner.data_received(bytes(self.pending))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.checked:  # MPyC never heard of a refused connection
            self.inner.connection_lost(exc)

    def eof_received(self) -> Any:
        return self.inner.eof_received() if self.checked else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def own_address_loop(own_host: str, own: int, tls: bool, refused: Any) -> asyncio.AbstractEventLoop:
    """The event loop MPyC must run on (module docstring): its servers listen on ``own_host`` only, and every incoming
    connection goes through ``NamedPeer``. Installed as the current loop before MPyC is imported."""

    class OwnAddressLoop(asyncio.SelectorEventLoop):
        async def create_server(self, protocol_factory: Any, host: Any = None, port: Any = None, **kwargs: Any) -> Any:
            if host is not None and host != own_host:
                raise RuntimeError(f"MPyC asked to listen on {host!r}, not on this party's address {own_host!r}")
            return await super().create_server(lambda: NamedPeer(protocol_factory(), own, tls, refused), own_host, port, **kwargs)

    loop = OwnAddressLoop()
    asyncio.set_event_loop(loop)
    return loop


def mpc_arguments(job: AggregationJob, index: int, routes: Mapping[int, str]) -> list[str]:
    """MPyC's command line for party ``index`` of ``job``: every option from the job (module docstring); ``routes``
    replaces the address this party dials for some peers (never its own, which it listens on)."""
    argv = ["-M", str(len(job.parties)), "-I", str(index), "-T", str(job.threshold)]
    for j, address in enumerate(job.addresses):
        argv += ["-P", routes.get(j, address) if j != index else address]
    return argv + (["--ssl"] if job.tls else []) + ["--no-log"]


def _routes(items: Sequence[str], job: AggregationJob, index: int) -> dict[int, str]:
    routes = {}
    for item in items:
        peer, sep, address = item.partition("=")
        if not sep or not peer.isdigit() or not 0 <= int(peer) < len(job.parties) or int(peer) == index:
            raise ValueError(f"--route takes J=HOST:PORT for another party J, got {item!r}")
        split_address(address)
        routes[int(peer)] = address
    return routes


def _channels(mpc: Any, job: AggregationJob) -> dict[str, Any]:
    """What the connections are, as this process holds them: TLS or not, and each peer certificate's names."""
    names = {}
    for peer in mpc.parties:
        if peer.pid != mpc.pid and peer.protocol is not None and peer.protocol.transport is not None:
            cert = peer.protocol.transport.get_extra_info("peercert")
            names[job.parties[peer.pid]] = certificate_names(cert) if cert else []
    return {"tls": bool(mpc.options.ssl), "peer_certificates": names}


#: MPyC's steps that receive messages from a peer, by the name the tally gives them (``trust.received``)
RECEIVING_STEPS = {"_distribute": "input", "_reshare": "reshare", "output": "open", "transfer": "sync"}


def _tally_receipts(mpc: Any) -> dict[str, dict[str, int]]:
    """Count every message this process receives, by step (``RECEIVING_STEPS``) and peer index, and the peers whose
    pseudorandom secret-sharing keys it receives at start-up (step "keys"): MPyC's own receiving calls, wrapped."""
    tally: dict[str, dict[str, int]] = {}

    def count(step: str, peer: int) -> None:
        tally.setdefault(step, {}).setdefault(str(peer), 0)
        tally[step][str(peer)] += 1

    receive, keys = mpc._receive_message, mpc._prss_keys_from_peer

    def receive_counted(peer_pid: int) -> Any:
        frame: Any = sys._getframe(1)
        step = None
        while frame is not None and step is None:  # the MPyC step that asked (a comprehension inside it is skipped)
            step = RECEIVING_STEPS.get(frame.f_code.co_name)
            frame = frame.f_back if step is None and frame.f_code.co_name.startswith("<") else None
        count(step or sys._getframe(1).f_code.co_name, peer_pid)
        return receive(peer_pid)

    def keys_counted(peer_pid: int, data: Any = None) -> Any:
        if data is not None:
            count("keys", peer_pid)
        return keys(peer_pid, data)

    mpc._receive_message, mpc._prss_keys_from_peer = receive_counted, keys_counted
    return tally


def disagreements(job: AggregationJob, digest: str, said: Sequence[Any]) -> list[str]:
    """What keeps the parties from going on, from every party's [digest, reason not ready or None, its job's
    ``record()``], in MPyC's order; empty when every party is ready and holds ``digest``."""
    problems = []
    for who, item in zip(job.parties, said, strict=True):
        if not (isinstance(item, (list, tuple)) and len(item) == 3 and isinstance(item[0], str)
                and (item[1] is None or isinstance(item[1], str)) and isinstance(item[2], str)):
            problems.append(f"{who!r} sent no configuration digest")
        elif item[1] is not None:
            problems.append(f"{who!r} is not ready ({item[1][:WHY_LIMIT]})")
        elif item[0] != digest:
            where = ", ".join(differences(job.record(), item[2])[:8]) or "?"
            problems.append(f"{who!r} holds another public configuration (it differs in: {where}; digest {item[0][:16]}, "
                            f"this party's {digest[:16]})")
    return problems


async def agree(mpc: Any, job: AggregationJob, digest: str, why: str | None) -> list[str]:
    """Send every party this party's digest, readiness and public job (MPyC's transfer of public values) and check
    theirs."""
    said = await mpc.transfer([digest, why, job.record()])
    return disagreements(job, digest, said)


async def _gate(path: str) -> None:
    """Wait (serving the other parties meanwhile) until the launcher has charged the nodes and created ``path``."""
    while not os.path.exists(path):
        await asyncio.sleep(0.02)


async def _session(mpc: Any, job: AggregationJob, digest: str, why: str | None, q: np.ndarray | None, args: Any,
                   block: np.ndarray | None, label: np.ndarray | None) -> tuple[np.ndarray, dict[str, np.ndarray], int] | list[str]:
    """Connect, agree, wait for the charge, then draw the shares and aggregate; the disagreements if there are any."""
    tally = _tally_receipts(mpc) if args.record_view else {}
    await mpc.start()
    _status(args.status, "connected", **_channels(mpc, job))
    problems = await agree(mpc, job, digest, why)
    if problems:
        _status(args.status, "disagreed", why="; ".join(problems))
        await mpc.shutdown()
        return problems
    _status(args.status, "agreed", digest=digest)
    if args.gate:
        await _gate(args.gate)
    vector = with_shares(job, q) if q is not None else None  # the noise exists only after the charge
    opened, view, sent = await _aggregate(mpc, job, vector, args.record_view, args.status, block, label)
    for step, peers in tally.items():  # the receipts, by peer name: what this process received, message by message
        view[f"receipts/{step}"] = np.array([f"{job.parties[int(i)]}={n}" for i, n in sorted(peers.items())], dtype=object)
    return opened, view, sent


async def _aggregate(mpc: Any, job: AggregationJob, vector: np.ndarray | None, record_view: bool, status: str | None,
                     block: np.ndarray | None = None, label: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    secint = mpc.SecInt(job.bits)
    d = job.dimension
    mine = secint.array(vector if vector is not None else np.zeros(d, dtype=np.int64))  # same type for every party
    senders = [job.index(name) for name in job.inputs]
    shares = mpc.input(mine, senders=senders)
    view: dict[str, np.ndarray] = {}
    if record_view:
        for name, share in zip(job.inputs, shares, strict=True):
            if job.index(name) != mpc.pid:
                received = await mpc.gather(share.share)
                view[name] = np.array([int(v) for v in np.asarray(received.value).ravel()], dtype=object)
    _status(status, "input")
    total = shares[0]
    for share in shares[1:]:
        total = total + share
    if job.products is not None:
        cross, blocks = _cross_products(mpc, secint, job, block, label)
        total = total + cross
        if record_view:  # what this party holds of the other data parties' blocks and the label: their Shamir shares
            for name, shared in blocks.items():
                if name.removeprefix("label:") != job.parties[mpc.pid]:
                    received = await mpc.gather(shared.share)
                    key = name if name.startswith("label:") else f"block:{name}"
                    view[key] = np.array([int(v) for v in np.asarray(received.value).ravel()], dtype=object)
        _status(status, "products")
    opened = await mpc.output(total)
    _status(status, "opened")
    sent = sum(peer.protocol.nbytes_sent for peer in mpc.parties if peer.protocol is not None and peer.pid != mpc.pid)
    await mpc.shutdown()
    return np.asarray(opened, dtype=np.int64).ravel(), view, int(sent)


def _cross_products(mpc: Any, secint: Any, job: AggregationJob, block: np.ndarray | None,
                    label: np.ndarray | None) -> tuple[Any, dict[str, Any]]:
    """The secure Gram's cross-blocks (``crossproducts``): every data party inputs its integer block (the label
    holder also its label), the products of blocks held by different parties are computed on the shares (MPyC's
    matrix product reshares once per output entry), and public 0/1 matrices place them in the released vector."""
    products = job.products
    assert products is not None
    N = products.rows
    shared = {}
    for name, width in products.blocks:
        own = block if job.index(name) == mpc.pid else None
        shared[name] = mpc.input(secint.array(own if own is not None else np.zeros((N, width), dtype=np.int64)),
                                 senders=job.index(name))
    holder = job.index(products.label)
    y = mpc.input(secint.array(label if label is not None and holder == mpc.pid else np.zeros(N, dtype=np.int64)), senders=holder)
    total = None
    for node, a, b in products.products():
        product = shared[a].T @ (shared[b] if node == "xtx" else y)
        placed = products.scatter(node, a, b) @ product.reshape(-1)
        total = placed if total is None else total + placed
    return (total if total is not None else secint.array(np.zeros(job.dimension, dtype=np.int64))), {**shared, f"label:{products.label}": y}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m privsdr.secure.party", add_help=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--input", default=None)
    parser.add_argument("--status", default=None)
    parser.add_argument("--digest", default=None, help="the launcher's digest of the job (the file must carry all of it)")
    parser.add_argument("--gate", default=None, help="after the agreement, wait for this file (the launcher has charged)")
    parser.add_argument("--decline", default=None, help="take part in the agreement only, as not ready (this reason)")
    parser.add_argument("--record-view", action="store_true")
    parser.add_argument("--route", action="append", default=[], metavar="J=HOST:PORT",
                        help="dial party J at this address instead of its configured one (a tunnel or relay)")
    args, extra = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    if extra:
        parser.error(f"MPyC's options come from the job (its parties, addresses and TLS), not the command line: {' '.join(extra)}")
    job = AggregationJob.from_json(Path(args.job).read_text())
    name = job.parties[args.index]
    if not job.addresses:
        parser.error("the job names no addresses: one host:port per party")
    try:
        routes = _routes(args.route, job, args.index)
        if job.tls:  # the files MPyC's --ssl reads from the working directory, checked here first (key mode, names, CA)
            load_credentials(".config", args.index)
    except (ValueError, PrivsdrError) as exc:
        print(f"party {name!r} cannot start: {exc}", file=sys.stderr)
        return 2
    digest = args.digest or job.digest()
    _status(args.status, "started", party=name)
    def expire() -> None:
        _status(args.status, "timed out")
        os._exit(EXIT_TIMEOUT)

    watchdog = threading.Timer(job.timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    q = block = label = None
    why = args.decline
    if job.digest() != digest:  # a field of the job was lost on its way through the file: not the job the launcher priced
        why = "its job file does not carry the whole public job"
    holds_data = name in job.inputs if job.products is None else name in job.products.parties
    if holds_data and args.input is None and why is None:
        print(f"party {name!r} contributes to this computation: give --input", file=sys.stderr)
        return 2
    try:
        data: dict[str, Any] = {}
        if args.input is not None:
            with np.load(args.input) as stored:
                data = {k: stored[k] for k in stored.files}
        if why is None:
            q, block, label = party_statistics(job, name, data)
    except ShareRefused as exc:  # the others hear the kind of failure only (the text may describe this party's data)
        _status(args.status, "refused", why=str(exc))
        print(f"party {name!r} refused: {exc}", file=sys.stderr)
        why = "it refused its own input"
    os.environ["MPYC_NOUVLOOP"] = "1"
    host = split_address(job.addresses[args.index])[0]

    def refused(why: str) -> None:
        _status(args.status, "refused connection", why=why)
        print(f"party {name!r} {why}", file=sys.stderr, flush=True)

    loop = own_address_loop(host, args.index, job.tls, refused)
    sys.argv = [sys.argv[0], *mpc_arguments(job, args.index, routes)]
    from mpyc.runtime import mpc  # parses sys.argv: -M, -I, -T, -P, --ssl

    if mpc._loop is not loop:  # e.g. uvloop: its listening socket would not be bound to this party's address
        print(f"party {name!r} cannot start: MPyC runs on another event loop than this party's own", file=sys.stderr)
        return 2

    try:
        done = mpc.run(_session(mpc, job, digest, why, q, args, block, label))
    except ShareRefused as exc:  # a share beyond the tail bound (decided by the noise alone)
        _status(args.status, "refused", why=str(exc))
        print(f"party {name!r} refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if isinstance(done, list):
        print(f"party {name!r} stopped before anything was charged: {'; '.join(done)}. Every party received the same "
              "list and stops, so nothing was charged anywhere (give every party the same configuration, and journals "
              "with at least the run's budget left under its accountant)", file=sys.stderr)
        watchdog.cancel()
        return EXIT_DISAGREED
    opened, view, sent = done
    arrays = {"aggregate": opened, "bytes_sent": np.array(sent, dtype=np.int64), **{f"view/{k}": v.astype(str) for k, v in view.items()}}
    tmp = args.output + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, args.output)
    _status(args.status, "done")
    watchdog.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
