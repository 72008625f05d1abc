"""One party of a secure aggregation, as its own process (the only module that imports ``mpyc.runtime``).

    python -m privsdr.secure.party --index I [--digest HEX] [--decline WHY] [--record-view] [--route J=HOST:PORT]

Pipes, never files (issue 36): the launcher writes the public job and this party's input on the process's stdin
(one line of JSON, then the input as npz bytes, read with ``allow_pickle=False``; a secure Gram's data party gets its
rows only after ``go``, streamed frame by frame as its cross-products loop reads them: ``FrameReader``, issue 34, so
its memory does not grow with N); the party writes its stages, one
JSON line each, and finally its opened sum on its stdout (anything else a library prints goes to stderr). No
statistic of this party, noised or not, is ever written to disk. The process asks Linux to kill it when its
launcher dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, checked against the launcher's PID in ``PRIVSDR_LAUNCHER_PID``
in case the launcher died first; a party forked by the launcher's fork server, ``forks``, names the server there,
which dies with the launcher), and stops as well when its stdin closes.

Agreement before any charge (issue 33): the party checks its input against the public bounds (drawing no noise),
then, once MPyC has connected every party, sends every other party the digest of its public job (``job.digest``:
budget, accountant, relation, bounds, grids, noise shares, layout, parties, t, field size) and whether it is ready
(``--decline``: its launcher cannot take part, e.g. its journal has less left than the run costs), as canonical JSON
bytes. Every party receives the same list; if any party is not ready or holds another digest, every party stops
(exit code 6) and nothing is charged anywhere. Otherwise it reports ``agreed`` and waits for its launcher to charge
the nodes and write ``go`` on its stdin (or ``uncharged``: its ledger refused the charge). Then every party tells
every other whether its launcher charged (the charged round, canonical JSON bytes); if any did not, every party stops
before drawing a noise share (exit code 9), naming the parties that did not charge, and nothing is released. Only when
every party has charged does it draw its noise shares and compute.

What crosses between parties is never unpickled with classes: MPyC frames its ``transfer`` messages (the agreement,
its own shutdown barrier) and its secure arrays with ``pickle``; this program replaces the unpickler MPyC uses with
one that builds plain values only (ints, strings, bytes, lists, dicts and numpy's integer/object arrays), so a peer
cannot make a party run code (``SafePickle``).

A contributing party rounds each of its statistics to the node's public grid, adds its own exact discrete Gaussian
share (Canonne, Kamath & Steinke 2020 sampler, operating-system randomness) and inputs the integer vector into the
secure computation; every party (contributing or not) inputs the same secure type, MPyC's SecInt of the job's
bit length, so that the parties agree on it; the vectors are added on their Shamir shares and only the sum is
opened, to every party. Nothing else leaves the party: its statistic and its share stay in its process.

A job with ``products`` (a secure Gram of vertically partitioned columns, ``crossproducts``): each data party's
rows hold its integer column groups under the keys the layout declares (``block``, ``label``, ``slices``, ...,
already clipped and rounded; its launcher checked them against the public bounds before the process started, and each
frame is checked again as it arrives); chunk by chunk it inputs each group as a secret-shared matrix and adds up the
entries of the declared blocks it can compute alone; after the last chunk it adds its noise shares to those and
inputs the vector as above; the cross-blocks between parties are computed on the shares, and only the noisy total is
opened. A helper (a party without columns) adds a noise share and sees shares only.

Addresses and channels (issue 36). MPyC's options come from the job alone: ``-M/-I/-T``, one ``-P host:port`` per
party from ``job.addresses`` and ``--ssl`` when ``job.tls`` (any other MPyC option on the command line is refused).
MPyC passes no host to its listening socket; this program runs MPyC on an event loop of its own whose
``create_server`` binds this party's configured host (``OwnAddressLoop``), and refuses to start if MPyC runs on
another loop (uvloop, say), so the party listens on its own address only, by construction. With ``--ssl`` MPyC
reads ``.config/`` of the working directory (the launcher runs each party in a private folder holding links to its
own key, certificate and the CA: ``certificates.private_config``); the dialing side checks that the server's
certificate names ``MPyC party j`` and is signed by the job's CA, the only CA the process trusts (``trust_own_files``:
not the operating system's store), and since MPyC's listening side checks only the CA, ``NamedPeer`` closes a
connection whose client certificate does not name the party id the client claims in its first message, before
MPyC sees a byte of it. ``--route J=HOST:PORT`` dials party J there instead (a tunnel or relay; its certificate
is checked all the same). A watchdog ends the process after the job's timeout (exit code 4), so a party whose
peers dropped out never waits for ever. A peer whose connection drops before the sum is opened ends it
at once (exit code 7), naming that peer.

``--record-view`` also writes what this party received for each other contributor's vector and column groups (its
Shamir shares, a field element per coordinate), and a tally of every message its process received, by peer and by
the MPyC step that asked for it (``receipts``): the tests check that the shares do not depend on that contributor's
data and that the report's "what each party sees" names exactly what the tally holds (``trust.received``).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import ctypes
import io
import json
import math
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PrivsdrError
from ..mechanisms import secure as exact
from ..network.addresses import split_address
from ..network.certificates import Credentials, certificate_names, names_party, server_context
from .crossproducts import ColumnStream
from .job import AggregationJob, differences

EXIT_TIMEOUT = 4
EXIT_REFUSED = 5
EXIT_DISAGREED = 6  #: the parties did not all hold the same public job, or one was not ready: nothing was charged
EXIT_PEER_LOST = 7  #: a peer's connection dropped before the sum was opened (its process or host is gone)
EXIT_LAUNCHER_GONE = 8  #: this party's launcher closed its end of the pipe (it stopped or was killed)
#: after every party was ready, a party's launcher could not charge its ledger: every party stopped before drawing a share
EXIT_UNCHARGED = 9
#: the environment variable that carries the launcher's PID, or its fork server's (the parent-death check)
LAUNCHER_ENV = "PRIVSDR_LAUNCHER_PID"
#: the longest reason a party's note of refusal may carry to the others (it names a kind of failure, never data)
WHY_LIMIT = 200


class LauncherStopped(RuntimeError):
    """The launcher's stream of this party's rows ended early (it stopped, or its rows failed its own checks)."""


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


def row_limit(job: AggregationJob) -> int:
    """No entry of a secure Gram's column group lies beyond sqrt of the largest product bound (grid units)."""
    return math.isqrt(max(n.grid_bound for n in job.nodes)) + 1


def checked_rows(job: AggregationJob, group: Any, value: Any, rows: int) -> np.ndarray:
    """``rows`` rows of ``group`` (an integer matrix on the grid, or ``rows`` numbers when its width is 1), checked
    against the public bounds, as int64 ``rows`` x width; ``ShareRefused`` otherwise. The same check runs on a whole
    input and on each frame of a streamed one (``FrameReader``), and in the launcher before anything starts."""
    value = np.asarray(value)
    if value.dtype.kind not in "iu" or value.shape not in ((rows, group.width),) + (((rows,),) if group.width == 1 else ()):
        raise ShareRefused(f"{group.key!r} must be a {rows} x {group.width} integer matrix on the grid")
    if np.any(np.abs(value) > row_limit(job)):
        raise ShareRefused(f"{group.key!r} exceeds the public bounds: it must be clipped and rounded first (crossproducts.party_block)")
    return value.astype(np.int64, copy=False).reshape(rows, group.width)


def gram_input(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, np.ndarray] | None]:
    """A secure Gram's party, its whole input at once: (its local statistics, its integer column groups by name),
    checked (no noise yet). Each group the layout gives this party is read from its input's ``key``
    (``crossproducts.Group``). The party process reads its rows frame by frame instead (``FrameReader``)."""
    products = job.products
    assert products is not None
    mine = products.owned(name)
    held: dict[str, np.ndarray] | None = None
    if mine:
        held = {}
        for group in mine:
            held[group.name] = checked_rows(job, group, _input_of(group, data), products.rows)
    return products.local_statistics(name, held), held


def _input_of(group: Any, data: Mapping[str, Any]) -> Any:
    """The input a party holds for one of its column groups (under the group's ``key``); ``ShareRefused`` if none."""
    if group.key not in data:
        raise ShareRefused(f"no {group.description} ({group.key!r}) in this party's input")
    return data[group.key]


def check_gram_input(job: AggregationJob, name: str, data: Mapping[str, Any]) -> None:
    """What a secure Gram's launcher checks of party ``name``'s input before its process starts (a streamed party checks
    nothing before the agreement): every group it holds is there, each array within the public bounds
    (``checked_rows``), each ``crossproducts.ColumnStream`` of the declared shape (its chunks were checked by the first
    pass that counted them, and every frame is checked again as the process reads it). ``ShareRefused`` otherwise."""
    products = job.products
    assert products is not None
    for group in products.owned(name):
        value = _input_of(group, data)
        if isinstance(value, ColumnStream):
            if value.shape != (products.rows, group.width):
                raise ShareRefused(f"{group.key!r} must be a {products.rows} x {group.width} integer matrix on the grid")
        else:
            checked_rows(job, group, value, products.rows)


class FrameReader:
    """A data party's rows as its launcher streams them on stdin after ``go`` (``launch.PartyProcess``): for each row
    chunk of the cross-products loop (``share_rows`` rows), every group this party holds, in the layout's order, as
    raw little-endian int64 (rows x width). Each frame is checked (``checked_rows``) and added to this party's own
    statistics (``local``) as it is read; only one frame is held at a time."""

    def __init__(self, fd: int, job: AggregationJob, name: str) -> None:
        assert job.products is not None
        self.fd, self.job, self.name = fd, job, name
        self.groups = job.products.owned(name)
        self.local = np.zeros(job.dimension, dtype=np.int64)
        self.rows = 0

    def read(self, rows: int) -> dict[str, np.ndarray]:
        """The next ``rows`` rows of every group (blocking: run it off the event loop)."""
        assert self.job.products is not None
        frame = {}
        for group in self.groups:
            try:
                raw = read_exactly(self.fd, rows * group.width * 8)
            except (ValueError, OSError) as exc:
                raise LauncherStopped(f"its launcher stopped streaming its rows ({exc})") from None
            frame[group.name] = checked_rows(self.job, group, np.frombuffer(raw, dtype="<i8").reshape(rows, group.width), rows)
        self.local += self.job.products.local_statistics(self.name, frame, rows)
        self.rows += rows
        return frame


Held = dict[str, np.ndarray] | None


def party_statistics(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray | None, Held]:
    """What party ``name`` computes from its data before the agreement, checked and with no noise yet: (its integer
    statistics on the grid, or None for a party that adds nothing; its integer column groups, secure Gram only)."""
    if job.products is not None:
        if name in job.inputs:  # a helper adds a noise share and no statistic
            return gram_input(job, name, data)
        return None, None
    if name in job.inputs:
        return local_grid(job, data), None
    return None, None


class Channel:
    """This party's messages to its launcher: one JSON line each on the process's original stdout (thread-safe)."""

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.last = "none"

    def __call__(self, stage: str, **extra: Any) -> None:
        self.last = stage
        if self._stream is None:
            return
        line = json.dumps({"stage": stage, "time": time.time(), "pid": os.getpid(), **extra}) + "\n"
        with self._lock:
            try:
                self._stream.write(line.encode())
                self._stream.flush()
            except (OSError, ValueError):
                pass  # the launcher is gone: the parent-death signal ends this process


def waiting_for(mpc: Any, job: AggregationJob) -> list[str]:
    """The peers this party is waiting for, by name: those MPyC has not connected, and those a message is awaited
    from (a pending receive of MPyC's ``MessageExchanger``); [] before MPyC has started."""
    if mpc is None or not getattr(mpc, "parties", None):
        return []
    waiting = []
    for peer in mpc.parties:
        if peer.pid == mpc.pid or not 0 <= peer.pid < len(job.parties):
            continue
        buffers = getattr(peer.protocol, "buffers", {}) if peer.protocol is not None else None
        if buffers is None or any(isinstance(v, asyncio.Future) and not v.done() for v in list(buffers.values())):
            waiting.append(job.parties[peer.pid])
    return waiting


def die_with_launcher() -> None:
    """Ask Linux to SIGKILL this process when the launcher that started it (or the launcher's fork server, ``forks``)
    dies (``prctl(PR_SET_PDEATHSIG)``), and stop now if it is already gone (it may have died before the request was
    made). A no-op off Linux."""
    expected = os.environ.get(LAUNCHER_ENV)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if expected is not None and expected.isdigit() and os.getppid() != int(expected):
        os._exit(EXIT_LAUNCHER_GONE)


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain values only: the classes MPyC's secure arrays need (numpy's array reconstruction) and nothing else."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
               ("numpy", "dtype")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a peer sent a pickled {module}.{name}: refused (plain values only)")


class SafePickle:
    """Stands in for the ``pickle`` module inside ``mpyc.runtime``: ``dumps`` as usual, ``loads`` through
    ``_PlainUnpickler`` (module docstring)."""

    dumps = staticmethod(pickle.dumps)

    @staticmethod
    def loads(data: bytes) -> Any:
        return _PlainUnpickler(io.BytesIO(data)).load()


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


def trust_own_files(index: int, folder: str = ".config") -> Credentials:
    """Party ``index``'s files for MPyC's ``--ssl`` (``folder`` of the working directory: links its launcher made
    after ``certificates.load_credentials`` checked them, names, CA signature and dates), checked here to load
    together (key mode 0600, the key matches the certificate, the CA is PEM: ``server_context``; ``cryptography``'s
    checks are the launcher's and the handshake's), and made the only CA this process trusts: MPyC's dialing side
    builds ``ssl.create_default_context``, which also loads OpenSSL's default paths, the operating system's CA store
    (trust no job asked for, and ~50 ms of CPU at every attempt to connect). ``SSL_CERT_FILE`` names the job's CA
    and ``SSL_CERT_DIR`` this folder (no hashed names in it), so the default paths hold the job's CA alone."""
    config = Path(folder).absolute()
    creds = Credentials.in_folder(config, index)
    server_context(creds)
    os.environ["SSL_CERT_FILE"], os.environ["SSL_CERT_DIR"] = str(creds.ca), str(config)
    return creds


def trusted_cas() -> list[str]:
    """The names of the CA certificates a dialing context of this process trusts by default (``trust_own_files``)."""
    import ssl

    return sorted(n for ca in ssl.create_default_context(ssl.Purpose.SERVER_AUTH).get_ca_certs() for n in certificate_names(ca))


def _channels(mpc: Any, job: AggregationJob) -> dict[str, Any]:
    """What the connections are, as this process holds them: TLS or not, each peer certificate's names, and (TLS) the
    CAs its dialing side trusted besides the job's (``trusted_cas``)."""
    names = {}
    for peer in mpc.parties:
        if peer.pid != mpc.pid and peer.protocol is not None and peer.protocol.transport is not None:
            cert = peer.protocol.transport.get_extra_info("peercert")
            names[job.parties[peer.pid]] = certificate_names(cert) if cert else []
    held: dict[str, Any] = {"tls": bool(mpc.options.ssl), "peer_certificates": names}
    if mpc.options.ssl:
        held["trusted_cas"] = trusted_cas()
    return held


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


def agreement_message(digest: str, why: str | None, record: str) -> bytes:
    """What a party sends in the agreement: canonical JSON bytes of [digest, reason not ready or None, job record]."""
    return json.dumps([digest, why, record], sort_keys=True, separators=(",", ":")).encode()


def read_agreement(data: Any) -> Any:
    """A peer's agreement message, or None if it is not one (``disagreements`` then says so)."""
    try:
        return json.loads(bytes(data).decode()) if isinstance(data, (bytes, bytearray)) else None
    except (ValueError, UnicodeDecodeError):
        return None


async def agree(mpc: Any, job: AggregationJob, digest: str, why: str | None) -> list[str]:
    """Send every party this party's digest, readiness and public job (canonical JSON bytes) and check theirs."""
    said = await mpc.transfer(agreement_message(digest, why, job.record()))
    return disagreements(job, digest, [read_agreement(item) for item in said])


def charged_message(charged: bool) -> bytes:
    """What a party sends in the charged round: canonical JSON bytes of ["charged", whether its launcher charged]."""
    return json.dumps(["charged", bool(charged)], separators=(",", ":")).encode()


def uncharged(job: AggregationJob, said: Sequence[Any]) -> list[str]:
    """The parties whose charged-round message does not say that their launcher charged (``charged_message``)."""
    return [who for who, item in zip(job.parties, said, strict=True) if read_agreement(item) != ["charged", True]]


class Launcher:
    """What this party hears from its launcher after the job and its input: ``go`` (the nodes are charged),
    ``uncharged`` (its ledger refused the charge), or the end of its stdin (the launcher is gone). Read by a daemon
    thread, so that nothing waits for it at exit."""

    def __init__(self, fd: int, status: Channel) -> None:
        self._fd, self._status = fd, status
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._wake: Any = None  # set by ``wait``: wakes its event loop from the reader thread
        self._go = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            line = read_line(self._fd)
        except OSError:
            line = b""
        self._go = line.strip() == b"go"
        if not self._go and line.strip() != b"uncharged":
            self._status("launcher gone")
            print("the launcher of this party stopped before the charge: stopping (nothing was drawn)", file=sys.stderr, flush=True)
            os._exit(EXIT_LAUNCHER_GONE)
        with self._lock:
            self._event.set()
            wake = self._wake
        if wake is not None:
            wake()

    async def wait(self) -> bool:
        """Wait (serving the other parties meanwhile) until the launcher has charged the nodes (True) or could not
        (False): the reader thread wakes the event loop when the line arrives (no polling)."""
        loop, heard = asyncio.get_running_loop(), asyncio.Event()
        with self._lock:
            if self._event.is_set():
                return self._go
            self._wake = lambda: loop.call_soon_threadsafe(heard.set)
        await heard.wait()
        return self._go


def watch_peers(mpc: Any, job: AggregationJob, status: Channel) -> dict[str, bool]:
    """End this process at once (exit code 7, naming the peer) when a peer's connection drops before the sum is
    opened; ``state["closing"] = True`` once this party shuts down on its own (then peers close as they finish)."""
    from mpyc import asyncoro

    state = {"closing": False}
    lost = asyncoro.MessageExchanger.connection_lost

    def connection_lost(protocol: Any, exc: Any) -> None:
        peer = getattr(protocol, "peer_pid", None)
        if not state["closing"] and peer is not None and peer != mpc.pid:
            who = job.parties[peer] if 0 <= peer < len(job.parties) else str(peer)
            waiting = [w for w in waiting_for(mpc, job) if w != who]
            status("peer lost", peer=who, waiting=waiting)
            print(f"lost the connection to party {who!r} before the sum was opened (its process or host stopped)"
                  + (f", while waiting for party {', '.join(map(repr, waiting))}" if waiting else "")
                  + ": stopping without releasing anything", file=sys.stderr, flush=True)
            os._exit(EXIT_PEER_LOST)
        try:
            lost(protocol, exc)
        except Exception:  # noqa: BLE001 - MPyC re-raises the cause; the connection is gone either way
            pass

    asyncoro.MessageExchanger.connection_lost = connection_lost
    return state


async def _session(mpc: Any, job: AggregationJob, digest: str, why: str | None, q: np.ndarray | None, args: Any,
                   held: Held, status: Channel, launcher: Launcher | None,
                   frames: FrameReader | None = None) -> tuple[np.ndarray, dict[str, np.ndarray], int] | list[str]:
    """Connect, agree, wait for the charge, then draw the shares and aggregate; the disagreements if there are any."""
    tally = _tally_receipts(mpc) if args.record_view else {}
    peers = watch_peers(mpc, job, status)
    await mpc.start()
    status("connected", **_channels(mpc, job))
    problems = await agree(mpc, job, digest, why)
    if problems:
        status("disagreed", why="; ".join(problems))
        peers["closing"] = True
        await mpc.shutdown()
        return problems
    status("agreed", digest=digest)
    charged = True if launcher is None else await launcher.wait()
    # the charged round: every party learns whether every launcher charged, before any noise share exists
    missing = uncharged(job, await mpc.transfer(charged_message(charged)))
    if missing:
        status("uncharged", parties=missing)
        peers["closing"] = True
        await mpc.shutdown()
        return ["uncharged", *missing]
    vector = with_shares(job, q) if q is not None else None  # the noise exists only after every party charged
    opened, view, sent = await _aggregate(mpc, job, vector, args.record_view, status, held, peers, frames)
    for step, counts in tally.items():  # the receipts, by peer name: what this process received, message by message
        view[f"receipts/{step}"] = np.array([f"{job.parties[int(i)]}={n}" for i, n in sorted(counts.items())], dtype=object)
    return opened, view, sent


async def _aggregate(mpc: Any, job: AggregationJob, vector: np.ndarray | None, record_view: bool, status: Any,
                     held: Held = None, peers: dict[str, bool] | None = None,
                     frames: FrameReader | None = None) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    """Every party's vector input and summed, a secure Gram's cross-products added first (every party in the same
    order), and only the total opened. ``held``: a Gram party's whole groups; ``frames``: its rows streamed instead,
    its vector (its own statistics, accumulated frame by frame, plus its noise shares) drawn after the last frame."""
    status = status or Channel()
    secint = mpc.SecInt(job.bits)
    d = job.dimension
    cross: Any = None
    seen: dict[str, list[Any]] = {}
    if job.products is not None:
        cross, seen = await _cross_products(mpc, secint, job, held, record_view, frames)
        if frames is not None:
            if frames.rows != job.products.rows:
                raise ShareRefused(f"its launcher streamed {frames.rows} rows, the job declares {job.products.rows}")
            vector = with_shares(job, frames.local)  # the noise exists only after every party charged (``_session``)
    mine = secint.array(vector if vector is not None else np.zeros(d, dtype=np.int64))  # same type for every party
    senders = [job.index(name) for name in job.inputs]
    shares = mpc.input(mine, senders=senders)
    view: dict[str, np.ndarray] = {}
    if record_view:
        for name, share in zip(job.inputs, shares, strict=True):
            if job.index(name) != mpc.pid:
                received = await mpc.gather(share.share)
                view[name] = np.array([int(v) for v in np.asarray(received.value).ravel()], dtype=object)
    status("input")
    total = shares[0]
    for share in shares[1:]:
        total = total + share
    if job.products is not None:
        total = total + cross
        if record_view:  # what this party holds of the other data parties' groups (block, label, ...): their Shamir shares
            for group in job.products.groups:
                if not group.constant and group.owner != job.parties[mpc.pid]:
                    values = []
                    for piece in seen[group.name]:
                        received = await mpc.gather(piece.share)
                        values += [int(v) for v in np.asarray(received.value).ravel()]
                    view[f"{group.key}:{group.owner}"] = np.array(values, dtype=object)
        status("products")
    opened = await mpc.output(total)
    status("opened")
    if peers is not None:
        peers["closing"] = True  # the sum is opened: the peers close their connections as they finish
    sent = sum(peer.protocol.nbytes_sent for peer in mpc.parties if peer.protocol is not None and peer.pid != mpc.pid)
    await mpc.shutdown()
    return np.asarray(opened, dtype=np.int64).ravel(), view, int(sent)


async def _cross_products(mpc: Any, secint: Any, job: AggregationJob, held: Held, record_view: bool,
                          frames: FrameReader | None = None) -> tuple[Any, dict[str, list[Any]]]:
    """The secure Gram's cross-blocks (``crossproducts``): row chunk by row chunk (``share_rows`` rows, so that the
    secret-shared copy of a party's columns stays bounded), every data party inputs its integer column groups (from
    ``held``, or the next frame its launcher streams: ``frames``), the products of groups held by different parties
    are computed on the shares (MPyC's matrix product reshares once per output entry and chunk) and summed; public
    0/1 matrices place the sums in the released vector. With ``record_view``: every chunk's shares of every group,
    by group name."""
    products = job.products
    assert products is not None
    N = products.rows
    pairs = products.pairs()
    sums: dict[tuple[str, str], Any] = {}
    seen: dict[str, list[Any]] = {}
    loop = asyncio.get_running_loop()
    for start in range(0, N, products.share_rows):
        stop = min(N, start + products.share_rows)
        chunk = await loop.run_in_executor(None, frames.read, stop - start) if frames is not None else None
        shared = {}
        for group in products.groups:
            if group.constant:
                continue
            own = None
            if job.index(group.owner) == mpc.pid:
                own = chunk[group.name] if chunk is not None else held[group.name][start:stop] if held is not None else None
            shared[group.name] = mpc.input(secint.array(own if own is not None else np.zeros((stop - start, group.width), dtype=np.int64)),
                                           senders=job.index(group.owner))
            if record_view:
                seen.setdefault(group.name, []).append(shared[group.name])
        del chunk
        for g, h in pairs:
            product = shared[g].T @ shared[h]
            sums[(g, h)] = product if (g, h) not in sums else sums[(g, h)] + product
        await mpc.barrier(f"rows {start}-{stop}")  # this chunk's shares are done with before the next is input
    total = None
    for g, h in pairs:
        placed = products.scatter(g, h) @ sums[(g, h)].reshape(-1)
        total = placed if total is None else total + placed
    return (total if total is not None else secint.array(np.zeros(job.dimension, dtype=np.int64))), seen


def read_line(fd: int) -> bytes:
    """One line from the file descriptor, unbuffered (nothing beyond the newline is taken; no lock is held that the
    interpreter's exit would wait for)."""
    out = bytearray()
    while not out.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        out += chunk
    return bytes(out)


def read_exactly(fd: int, size: int) -> bytearray:
    """``size`` bytes from the file descriptor, into one buffer allocated once (a party's input is its whole block)."""
    out = bytearray(size)
    view, got = memoryview(out), 0
    while got < size:
        n = os.readv(fd, [view[got:got + (1 << 20)]])
        if not n:
            raise ValueError("the input on stdin was cut short (the launcher stopped)")
        got += n
    return out


def read_job(fd: int) -> tuple[AggregationJob, dict[str, Any], bool]:
    """The public job, this party's input and whether its launcher streams its rows after ``go`` (a secure Gram's data
    party: ``FrameReader``), as the launcher writes them on stdin (module docstring)."""
    header = json.loads(read_line(fd) or b"null")
    if not isinstance(header, dict) or "job" not in header:
        raise ValueError("no job on stdin (this program is started by privsdr.secure.launch)")
    job = AggregationJob.from_json(json.dumps(header["job"]))
    size = int(header.get("input", 0))
    data: dict[str, Any] = {}
    if size:
        raw = read_exactly(fd, size)
        with np.load(io.BytesIO(raw), allow_pickle=False) as stored:
            data = {k: stored[k] for k in stored.files}
    streamed = header.get("rows") is True
    if streamed and job.products is None:
        raise ValueError("rows are streamed for a secure Gram only")
    return job, data, streamed


def peak_rss_kib() -> int:
    """This process's peak resident memory in KiB since it started (Linux: VmHWM of /proc/self/status, reset at exec;
    getrusage's ru_maxrss would count the launcher's pages the process held between fork and exec; a party forked by
    the fork server, ``forks``, counts from the server's preloaded modules, which it would have imported), or 0 where
    it is unknown. It tells the launcher what the run cost; it carries no data."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _output(opened: np.ndarray, view: Mapping[str, np.ndarray], sent: int) -> str:
    """The opened sum (and a recorded view) as base64 npz text, for the last line to the launcher."""
    arrays: dict[str, Any] = {"aggregate": opened, "bytes_sent": np.array(sent, dtype=np.int64),
                              **{f"view/{k}": v.astype(str) for k, v in view.items()}}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return base64.b64encode(buffer.getvalue()).decode()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m privsdr.secure.party", add_help=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--digest", default=None, help="the launcher's digest of the job (what it sends must carry all of it)")
    parser.add_argument("--decline", default=None, help="take part in the agreement only, as not ready (this reason)")
    parser.add_argument("--record-view", action="store_true")
    parser.add_argument("--route", action="append", default=[], metavar="J=HOST:PORT",
                        help="dial party J at this address instead of its configured one (a tunnel or relay)")
    args, extra = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    if extra:
        parser.error(f"MPyC's options come from the job (its parties, addresses and TLS), not the command line: {' '.join(extra)}")
    die_with_launcher()
    status = Channel(os.fdopen(os.dup(1), "wb"))  # the launcher's channel; what anything else prints goes to stderr
    os.dup2(2, 1)
    stdin = sys.stdin.fileno()
    try:
        job, data, streamed = read_job(stdin)
    except (ValueError, KeyError, TypeError, OSError, PrivsdrError) as exc:
        print(f"party {args.index}: cannot read its job and input: {exc}", file=sys.stderr)
        return 2
    name = job.parties[args.index]
    if not job.addresses:
        print(f"party {name!r} cannot start: the job names no addresses (one host:port per party)", file=sys.stderr)
        return 2
    try:
        routes = _routes(args.route, job, args.index)
        if job.tls:  # the files MPyC's --ssl reads from the working directory, checked here first; its only CA
            trust_own_files(args.index)
    except (ValueError, PrivsdrError) as exc:
        print(f"party {name!r} cannot start: {exc}", file=sys.stderr)
        return 2
    digest = args.digest or job.digest()
    status("started", party=name)

    runtime_of: dict[str, Any] = {}

    def expire() -> None:
        waiting, last = waiting_for(runtime_of.get("mpc"), job), status.last
        status("timed out", waiting=waiting)
        where = (f"waiting for party {', '.join(repr(w) for w in waiting)} (last stage: {last})" if waiting
                 else f"after its last stage ({last})")
        print(f"party {name!r} timed out after {job.timeout:g} s {where}", file=sys.stderr, flush=True)
        os._exit(EXIT_TIMEOUT)

    watchdog = threading.Timer(job.timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    q: np.ndarray | None = None
    held: Held = None
    why = args.decline
    if job.digest() != digest:  # a field of the job was lost on its way through the pipe: not the job the launcher priced
        why = "its job does not carry the whole public job"
    holds_data = name in job.inputs if job.products is None else name in job.products.parties
    if holds_data and not (streamed if job.products is not None else data) and why is None:
        print(f"party {name!r} contributes to this computation: its launcher sent no input", file=sys.stderr)
        return 2
    frames = FrameReader(stdin, job, name) if streamed and why is None else None
    try:
        if why is None and frames is None:
            q, held = party_statistics(job, name, data)
    except ShareRefused as exc:  # the others hear the kind of failure only (the text may describe this party's data)
        status("refused", why=str(exc))
        print(f"party {name!r} refused: {exc}", file=sys.stderr)
        why = "it refused its own input"
    del data
    launcher = Launcher(stdin, status) if why is None else None
    os.environ["MPYC_NOUVLOOP"] = "1"
    host = split_address(job.addresses[args.index])[0]

    def refused(why: str) -> None:
        status("refused connection", why=why)
        print(f"party {name!r} {why}", file=sys.stderr, flush=True)

    loop = own_address_loop(host, args.index, job.tls, refused)
    sys.argv = [sys.argv[0], *mpc_arguments(job, args.index, routes)]
    from mpyc import runtime

    runtime.pickle = SafePickle  # what a peer sends builds plain values only
    mpc = runtime.mpc  # parses sys.argv: -M, -I, -T, -P, --ssl
    runtime_of["mpc"] = mpc
    if mpc._loop is not loop:  # e.g. uvloop: its listening socket would not be bound to this party's address
        print(f"party {name!r} cannot start: MPyC runs on another event loop than this party's own", file=sys.stderr)
        return 2

    try:
        done = mpc.run(_session(mpc, job, digest, why, q, args, held, status, launcher, frames))
    except ShareRefused as exc:  # a share beyond the tail bound (decided by the noise alone), or a streamed frame refused
        status("refused", why=str(exc))
        print(f"party {name!r} refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except LauncherStopped as exc:
        status("launcher gone")
        print(f"party {name!r}: {exc}; stopping (nothing was opened)", file=sys.stderr, flush=True)
        return EXIT_LAUNCHER_GONE
    if isinstance(done, list) and done[:1] == ["uncharged"]:
        who = ", ".join(repr(w) for w in done[1:])
        print(f"party {name!r} stopped after every party was ready: {who} could not charge its ledger, so every party stopped "
              "before drawing a noise share and nothing was released" + (" (this party's own charge failed)" if name in done[1:]
                                                                        else "; this party's launcher had charged its own"),
              file=sys.stderr, flush=True)
        watchdog.cancel()
        return EXIT_UNCHARGED
    if isinstance(done, list):
        print(f"party {name!r} stopped before anything was charged: {'; '.join(done)}. Every party received the same "
              "list and stops, so nothing was charged anywhere (give every party the same configuration, and journals "
              "with at least the run's budget left under its accountant)", file=sys.stderr)
        watchdog.cancel()
        return EXIT_DISAGREED
    opened, view, sent = done
    status("done", output=_output(opened, view, sent), peak_rss_kib=peak_rss_kib())
    watchdog.cancel()
    return 0


def exit_now(code: int) -> None:
    """End this process with ``code`` once what it wrote is flushed (its stages went out line by line: ``Channel``),
    without the interpreter's teardown of numpy, MPyC and asyncio: ~40 ms of CPU per party process that nothing
    needs (MPyC has shut its connections down; no file is open for writing)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
