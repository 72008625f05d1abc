"""Message channels between linkage parties: TCP, optional TLS (Python's ``ssl``), versioned length-prefixed frames.

Every frame is ``MAGIC (4 bytes) | version (1) | type (1) | length (4, big-endian) | body``
(``privsdr.network.frames``); a body longer than :data:`MAX_FRAME` is refused, so is an unknown magic, version or type. There is no pickle: a hello is UTF-8 JSON,
a list of group elements is a ``POINTS`` frame (its count, 8 bytes) followed by ``CHUNK`` frames of 32-byte elements.

One connection per pair of parties (the party later in the configured order dials the earlier one, as MPyC does);
each party listens only on its own configured address. With TLS (a server and a client ``ssl.SSLContext``, both
verifying the peer against the parties' CA) each side checks that the peer's certificate names the party it expects
(subjectAltName DNS entry or common name); without TLS every address must be loopback unless the caller passes
``allow_plaintext=True``. Every wait (connect, handshake, each frame) is bounded by ``timeout`` seconds.
"""
from __future__ import annotations

import json
import socket
import ssl
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PrivsdrError, ValidationError
from ..network.addresses import is_loopback_host
from ..network.certificates import check_key_file
from ..network.frames import HEADER, FrameError, Framing

MAGIC = b"PSDL"
VERSION = 1
HELLO, POINTS, CHUNK, ABORT = 1, 2, 3, 4
KINDS = {HELLO: "hello", POINTS: "points", CHUNK: "chunk", ABORT: "abort"}
#: the largest frame body accepted (bytes)
MAX_FRAME = 4 * 2**20
#: group elements are 32 bytes (ristretto255)
ELEMENT = 32
CHUNK_ELEMENTS = MAX_FRAME // ELEMENT // 2
PROTOCOL = "privsdr.linkage"
#: the frames (``privsdr.network.frames``, shared with the mailbox protocols' network transport)
FRAMES = Framing(PROTOCOL, MAGIC, VERSION, KINDS, MAX_FRAME)


class LinkageError(PrivsdrError, RuntimeError):
    """The linkage could not run: a peer refused, vanished, timed out or broke the protocol. Nothing was linked."""


@dataclass(frozen=True)
class Peer:
    """A party of the linkage and its public address."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Peer:
        """``NAME=HOST:PORT``."""
        name, sep, address = text.partition("=")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not name or not host:
            raise ValidationError(f"a party is NAME=HOST:PORT, got {text!r}")
        try:
            number = int(port)
        except ValueError:
            raise ValidationError(f"the port of {text!r} is not a number") from None
        if not 1 <= number <= 65535:
            raise ValidationError(f"the port of {text!r} is not in 1..65535")
        return cls(name, host.strip("[]"), number)

    def __str__(self) -> str:
        return f"{self.name}={self.host}:{self.port}"


def check_addresses(peers: Sequence[Peer], tls: bool, allow_plaintext: bool) -> None:
    """Refuse plaintext to a non-loopback address unless ``allow_plaintext``; refuse repeated names or addresses."""
    names = [p.name for p in peers]
    if len(set(names)) != len(names):
        raise ValidationError(f"party names must differ, got {names}")
    addresses = [(p.host, p.port) for p in peers]
    if len(set(addresses)) != len(addresses):
        raise ValidationError(f"every party needs its own address, got {[str(p) for p in peers]}")
    remote = [str(p) for p in peers if not is_loopback_host(p.host)]
    if remote and not tls and not allow_plaintext:
        raise ValidationError(f"{', '.join(remote)} not loopback: TLS is required (give the certificates), or pass the "
                              "explicit plaintext flag (--plaintext, allow_plaintext=True) to send blinded elements unencrypted and unauthenticated")


def certificate_names(cert: Mapping[str, Any]) -> set[str]:
    """The DNS names of a verified peer certificate (``SSLSocket.getpeercert()``) and its common names."""
    names = {value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"}
    for rdn in cert.get("subject", ()):
        names |= {value for key, value in rdn if key == "commonName"}
    return names


def tls_contexts(ca_file: str, cert_file: str, key_file: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) contexts of one party: its certificate and key, the peers verified against ``ca_file``.

    The key file must be its owner's alone (0600, ``certificates.check_key_file``), as for ssh keys.
    """
    for path in (ca_file, cert_file, key_file):
        if not Path(path).is_file():
            raise ValidationError(f"{path}: no such file")
    check_key_file(Path(key_file))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False  # the peer is checked by party name (certificate_names), not by host name
    for context in (server, client):
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.verify_mode = ssl.CERT_REQUIRED
        try:
            context.load_verify_locations(ca_file)
            context.load_cert_chain(cert_file, key_file)
        except (ssl.SSLError, OSError) as exc:
            raise ValidationError(f"cannot load the certificates ({exc})") from None
    return server, client


class Channel:
    """One connection to one named peer: framed, versioned messages, each wait bounded by ``timeout``."""

    def __init__(self, sock: socket.socket, peer: str, timeout: float) -> None:
        self.sock = sock
        self.peer = peer
        self.timeout = timeout
        sock.settimeout(timeout)

    # every byte this party sends passes through _write (the tests record it here)
    def _write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, size: int) -> bytes:
        parts, left = [], size
        while left:
            try:
                part = self.sock.recv(min(left, 2**20))
            except TimeoutError:
                raise LinkageError(f"{self.peer} sent nothing for {self.timeout:g} s") from None
            except OSError as exc:
                raise LinkageError(f"the connection to {self.peer} failed ({exc})") from None
            if not part:
                raise LinkageError(f"{self.peer} closed the connection")
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def send(self, kind: int, body: bytes) -> None:
        try:
            frame = FRAMES.pack(kind, body)
        except FrameError as exc:
            raise LinkageError(str(exc)) from None
        try:
            self._write(frame)
        except TimeoutError:
            raise LinkageError(f"{self.peer} read nothing for {self.timeout:g} s") from None
        except OSError as exc:
            raise LinkageError(f"the connection to {self.peer} failed ({exc})") from None

    def recv(self, kind: int) -> bytes:
        try:
            got, length = FRAMES.unpack(self._read(HEADER.size), self.peer)
        except FrameError as exc:
            raise LinkageError(str(exc)) from None
        body = self._read(length)
        if got == ABORT:
            raise LinkageError(f"{self.peer} stopped the linkage: {body.decode('utf-8', 'replace')}")
        if got != kind:
            raise LinkageError(f"{self.peer} sent a {KINDS[got]} frame where a {KINDS[kind]} frame was due")
        return body

    def send_json(self, kind: int, message: Mapping[str, Any]) -> None:
        self.send(kind, json.dumps(message, sort_keys=True).encode("utf-8"))

    def recv_json(self, kind: int) -> dict[str, Any]:
        try:
            message = json.loads(self.recv(kind).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise LinkageError(f"{self.peer} sent a message that is not JSON") from None
        if not isinstance(message, dict):
            raise LinkageError(f"{self.peer} sent a message that is not a JSON object")
        return message

    def send_elements(self, elements: Sequence[bytes]) -> None:
        """A list of 32-byte group elements: its count, then chunks."""
        self.send(POINTS, struct.pack(">Q", len(elements)))
        for start in range(0, len(elements), CHUNK_ELEMENTS):
            self.send(CHUNK, b"".join(elements[start:start + CHUNK_ELEMENTS]))

    def recv_elements(self, max_count: int) -> list[bytes]:
        (count,) = struct.unpack(">Q", self.recv(POINTS))
        if count > max_count:
            raise LinkageError(f"{self.peer} announced {count} elements, over the cap of {max_count}")
        out: list[bytes] = []
        while len(out) < count:
            body = self.recv(CHUNK)
            if len(body) % ELEMENT or not body or len(out) + len(body) // ELEMENT > count:
                raise LinkageError(f"{self.peer} sent a malformed chunk of {len(body)} bytes")
            out += [body[i:i + ELEMENT] for i in range(0, len(body), ELEMENT)]
        return out

    def abort(self, reason: str) -> None:
        try:
            self.send(ABORT, reason.encode("utf-8")[:1000])
        except LinkageError:
            pass

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def drain(self, deadline: float) -> bool:
        """Read and discard until the peer closes (True) or ``deadline`` (``time.monotonic``) passes (False)."""
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(max(left, 0.05))
                if not self.sock.recv(2**16):
                    return True
        except (OSError, ValueError):  # a reset, a TLS alert or the timeout: the peer is gone or silent
            return False
        return False


def _no_delay(sock: socket.socket) -> None:
    """Send each frame at once (TCP_NODELAY). A list is a small ``POINTS`` frame then its ``CHUNK`` frames, each one
    write: with Nagle's algorithm the chunk waits for the peer's delayed ACK of the count (~40 ms on Linux, an RTT
    or more between hosts) at every hop of the ring."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _tls_check(sock: socket.socket, expected: str) -> None:
    if isinstance(sock, ssl.SSLSocket):
        cert = sock.getpeercert()
        names = certificate_names(cert or {})
        if expected not in names:
            raise LinkageError(f"the peer's certificate names {sorted(names) or 'nobody'}, not {expected!r}")


def _hello(me: str, to: str, digest: str) -> dict[str, Any]:
    return {"protocol": PROTOCOL, "version": VERSION, "party": me, "to": to, "digest": digest}


def _check_hello(hello: Mapping[str, Any], me: str, expected: Sequence[str], digest: str) -> str:
    if hello.get("protocol") != PROTOCOL or hello.get("version") != VERSION:
        raise LinkageError(f"a peer speaks {hello.get('protocol')!r} version {hello.get('version')!r}, not {PROTOCOL} {VERSION}")
    name = hello.get("party")
    if name not in expected or hello.get("to") != me:
        raise LinkageError(f"a peer calls itself {name!r} and dials {hello.get('to')!r}; expected one of {list(expected)} dialling {me!r}")
    if hello.get("digest") != digest:
        raise LinkageError(f"{name} holds another linkage configuration (digest {str(hello.get('digest'))[:12]}..., "
                           f"ours {digest[:12]}...): every party must give the same parties, order, label and options")
    return str(name)


def _dial(me: str, peer: Peer, digest: str, context: ssl.SSLContext | None, deadline: float, timeout: float) -> Channel:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            raw = socket.create_connection((peer.host, peer.port), timeout=min(timeout, max(deadline - time.monotonic(), 0.1)))
        except OSError as exc:
            last = exc
            time.sleep(0.1)
            continue
        try:
            raw.settimeout(timeout)
            _no_delay(raw)
            sock = context.wrap_socket(raw, server_hostname=peer.name if context.check_hostname else None) if context else raw
            _tls_check(sock, peer.name)
        except (ssl.SSLError, OSError, LinkageError) as exc:
            raw.close()
            raise LinkageError(f"TLS with {peer.name} at {peer.host}:{peer.port} refused: {exc}") from None
        channel = Channel(sock, peer.name, timeout)
        try:
            channel.send_json(HELLO, _hello(me, peer.name, digest))
            _check_hello(channel.recv_json(HELLO), me, [peer.name], digest)
        except LinkageError:
            channel.close()
            raise
        return channel
    raise LinkageError(f"could not reach {peer.name} at {peer.host}:{peer.port} within the timeout ({last})")


def _accept(me: Peer, expected: Sequence[str], digest: str, context: ssl.SSLContext | None, deadline: float,
            timeout: float) -> dict[str, Channel]:
    listener = socket.socket(socket.AF_INET6 if ":" in me.host else socket.AF_INET, socket.SOCK_STREAM)
    channels: dict[str, Channel] = {}
    refused: list[str] = []
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((me.host, me.port))
        except OSError as exc:
            raise LinkageError(f"cannot listen on {me.host}:{me.port} ({exc.strerror})") from None
        listener.listen(len(expected) + 4)
        listener.settimeout(0.2)
        while len(channels) < len(expected):
            if time.monotonic() >= deadline:
                missing = [n for n in expected if n not in channels]
                raise LinkageError(f"{', '.join(missing)} did not connect within the timeout"
                                   + (f" (refused: {'; '.join(refused)})" if refused else ""))
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(timeout)
            channel: Channel | None = None
            try:
                _no_delay(raw)
                sock = context.wrap_socket(raw, server_side=True) if context else raw
                channel = Channel(sock, "a connecting peer", timeout)
                hello = channel.recv_json(HELLO)
                name = _check_hello(hello, me.name, [n for n in expected if n not in channels], digest)
                _tls_check(sock, name)
                channel.peer = name
                channel.send_json(HELLO, _hello(me.name, name, digest))
                channels[name] = channel
            except (ssl.SSLError, OSError, LinkageError) as exc:
                refused.append(str(exc))
                if channel is not None:
                    channel.abort(f"refused by {me.name}: {exc}")
                    channel.close()
                else:
                    raw.close()
    except BaseException:
        for channel in channels.values():
            channel.close()
        raise
    finally:
        listener.close()
    return channels


def connect(me: str, peers: Sequence[Peer], digest: str, *, server_context: ssl.SSLContext | None = None,
            client_context: ssl.SSLContext | None = None, allow_plaintext: bool = False, timeout: float = 300.0) -> dict[str, Channel]:
    """A channel to every other party (by name), after each pair has checked names, certificates and ``digest``."""
    if (server_context is None) != (client_context is None):
        raise ValidationError("TLS needs both contexts: the server one (for the parties that dial this one) and the client one")
    tls = server_context is not None
    for context in (server_context, client_context):
        if context is not None and context.verify_mode != ssl.CERT_REQUIRED:
            raise ValidationError("a TLS context must verify the peer's certificate (verify_mode CERT_REQUIRED)")
    check_addresses(peers, tls, allow_plaintext)
    names = [p.name for p in peers]
    if me not in names:
        raise ValidationError(f"{me!r} is not one of the parties {names}")
    index = names.index(me)
    deadline = time.monotonic() + timeout
    channels: dict[str, Channel] = {}
    try:
        for peer in peers[:index]:  # dial the parties before this one
            channels[peer.name] = _dial(me, peer, digest, client_context, deadline, timeout)
        later = names[index + 1:]
        if later:  # and wait for the parties after it
            channels.update(_accept(peers[index], later, digest, server_context, deadline, timeout))
    except BaseException:
        for channel in channels.values():
            channel.close()
        raise
    return channels


def refuse(me: str, peers: Sequence[Peer], digest: str, reason: str, *, server_context: ssl.SSLContext | None = None,
           client_context: ssl.SSLContext | None = None, allow_plaintext: bool = False, timeout: float = 300.0) -> bool:
    """Tell every other party that ``me`` cannot take part, so that each stops at once, naming it, instead of at its
    timeout (issue 36): connect as the linkage does (names, certificates and the configuration's digest checked both
    ways), send an ``ABORT`` frame carrying ``reason`` (the kind of failure, never an identifier) on every channel,
    and wait until each peer has closed (at most ``timeout``). Nothing else is sent. Returns whether every peer was
    told; a failure to connect returns False (the caller raises its own error)."""
    try:
        channels = connect(me, peers, digest, server_context=server_context, client_context=client_context,
                           allow_plaintext=allow_plaintext, timeout=timeout)
    except (LinkageError, ValidationError, OSError):
        return False
    deadline = time.monotonic() + timeout
    try:
        for channel in channels.values():
            channel.abort(reason)
        return all([channel.drain(deadline) for channel in channels.values()])
    finally:
        for channel in channels.values():
            channel.close()


def refused_note(told: bool) -> str:
    """What the refusing party adds to its own error."""
    return ("; this party told the other parties, which stop at once; nothing was sent" if told else
            "; the other parties could not be told (they stop at their timeout); nothing was sent")
