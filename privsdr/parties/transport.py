"""The mailbox over the network: the same versioned messages over TCP with mutual TLS, party names checked.

``NetworkMailbox`` is what ``run_party`` uses instead of the shared folder when the configuration gives every party an
address (``privsdr vertical party`` / ``privsdr pride party`` with ``--certs``). It posts, fetches and watches for
aborts as the folder does, and it writes nothing to disk: a message lives in this process's memory and on the wire.

- **Addresses.** One ``host:port`` per party (``privsdr.network.addresses``). A party listens only on its own
  configured address (the host is passed to the listening socket), and only while parties later in the layout's order
  still have to dial it; it dials every party before it (as MPyC and record linkage do).
- **TLS.** With ``tls`` (the default) both sides present a certificate signed by the parties' CA (``privsdr secure
  keys``; ``privsdr.network.certificates``), and each checks that the other's certificate names the party it expects
  and no other party of the layout. A dialled party is also checked by TLS hostname verification on its name. Plaintext
  is refused unless every address is loopback.
- **Hello.** Each pair then exchanges a hello (JSON): protocol, version, the sender's name, the name it dials, and the
  digest of the whole shared configuration (addresses and ``tls`` included): a party of another configuration is
  refused before anything is reserved or charged.
- **Frames** (``privsdr.network.frames``): ``HELLO``, ``MESSAGE`` (a ``PartyMessage``'s bytes: npz, no pickle), ``BYE``;
  the cap is public, from the layout (``message_cap``). A message is sent only to its recipients, and a message whose
  sender is not the authenticated peer, or that is not addressed to this party, stops the run.
- **Ends.** A party that finished sends ``BYE`` and waits (at most its timeout) for everyone's, so that no connection
  closes while a peer still sends. A peer whose connection drops without ``BYE`` has vanished: the next fetch or
  charge stops with a message naming it (``PeerVanished``); one that never answers is named when its message does not
  arrive within the timeout.

Sockets run on an asyncio loop in one thread of this process (full duplex: two parties may send large messages to
each other at once); the protocol's thread calls ``post``/``fetch`` and waits.
"""
from __future__ import annotations

import asyncio
import functools
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import PrivsdrError, ValidationError
from ..network.addresses import check_addresses, is_loopback, split_address
from ..network.certificates import certificate_names, client_context, named_credentials, server_context
from ..network.frames import HEADER, FrameError, Framing
from .engine import ProtocolAborted
from .layout import Layout
from .messages import PartyMessage, backoff

PROTOCOL = "privsdr.parties"
VERSION = 1
HELLO, MESSAGE, BYE = 1, 2, 3
KINDS = {HELLO: "hello", MESSAGE: "message", BYE: "bye"}
MAGIC = b"PSDM"
MAX_HELLO = 4096  #: bytes: a hello is read before the peer has said who it is
PROGRESS_EVERY = 10.0  #: seconds between two "still waiting" progress lines


class PeerVanished(PrivsdrError, RuntimeError):
    """A peer's connection dropped before it said it was done (its process or host is gone)."""


class ConnectRefused(PrivsdrError, RuntimeError):
    """The parties could not connect: a peer was unreachable, refused, or not who it claimed to be. Nothing was
    reserved or charged."""


def message_cap(layout: Layout) -> int:
    """The largest message frame accepted (bytes), public: eight bytes per entry of N x (every column + 4), plus 4 MiB
    for the header, metadata and the sender's report. Every message of DP-BCD and PRIDE is below it."""
    columns = sum(p.n_columns for p in layout.parties)
    return 8 * layout.n_rows * (columns + 4) + 4 * 2**20


def _hello(me: str, to: str, digest: str) -> bytes:
    return json.dumps({"protocol": PROTOCOL, "version": VERSION, "party": me, "to": to, "digest": digest}, sort_keys=True).encode()


class NetworkMailbox:
    """The parties' mailbox over TCP (+ mutual TLS): ``post``, ``fetch``, ``check_aborts`` as ``AbortWatchingMailbox``;
    ``open`` connects (before anything is reserved), ``close`` says goodbye. See the module docstring.

    ``addresses``: every party's ``host:port`` in the layout's order; ``digest``: the shared configuration's digest;
    ``certificates``: this party's certificate folder (needed with ``tls``); ``timeout``: seconds for any one wait."""

    def __init__(self, name: str, addresses: Mapping[str, str], digest: str, *, certificates: str | Path | None = None,
                 tls: bool = True, timeout: float = 300.0, max_message: int = 64 * 2**20,
                 progress: Callable[[str], None] | None = None) -> None:
        names = list(addresses)
        if name not in names:
            raise ValidationError(f"party {name!r} has no address in the configuration ({', '.join(names)})")
        self.addresses = dict(zip(names, check_addresses(list(addresses.values()), names), strict=True))
        if not isinstance(tls, bool):
            raise ValidationError(f"tls must be True or False, got {tls!r}")
        remote = [f"{n} at {a}" for n, a in self.addresses.items() if not is_loopback(a)]
        if not tls and remote:
            raise ValidationError(f"plaintext channels to {', '.join(remote)}, not loopback: TLS is required between hosts "
                                  "(write the configuration without --plaintext, give --certs); nothing was sent or charged")
        self.name, self.names, self.digest, self.tls = name, names, str(digest), tls
        self.timeout = float(timeout)
        self.progress = progress
        self.frames = Framing(PROTOCOL, MAGIC, VERSION, KINDS, int(max_message))
        self._server_ctx: ssl.SSLContext | None = None
        self._client_ctx: ssl.SSLContext | None = None
        if tls:
            if certificates is None:
                raise ValidationError(f"this run uses TLS: party {name!r} needs its certificate folder (--certs; `privsdr secure keys "
                                      "DIR --parties ...`), or plaintext on loopback asked for in the configuration; nothing was charged")
            creds = named_credentials(certificates, name)
            self._server_ctx, self._client_ctx = server_context(creds), client_context(creds)
        self._cond = threading.Condition()
        self._inbox: dict[str, bytes] = {}
        self._aborts: list[PartyMessage] = []
        self._gone: dict[str, str] = {}
        self._byes: set[str] = set()
        self._writers: dict[str, asyncio.StreamWriter] = {}
        self._refused: list[str] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._joined = asyncio.Event()  #: set when a peer joins; made anew on each connection phase's loop (``_connect``)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.opened = False

    # ---- the protocol's side (called from the party's thread) ----
    @property
    def peers(self) -> list[str]:
        return [n for n in self.names if n != self.name]

    def open(self) -> None:
        """Connect to every other party (module docstring); ``ConnectRefused`` naming who did not connect, and why."""
        if self.opened:
            return
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_exception)
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"privsdr-mailbox-{self.name}", daemon=True)
        self._thread.start()
        try:
            self._call(self._connect(), self.timeout + 5.0)
        except BaseException:
            self._stop()
            raise
        self.opened = True
        self._say(f"connected to {', '.join(f'{p} at {self.addresses[p]}' for p in self.peers)} over "
                  + ("mutual TLS (certificates checked for each party's name)" if self.tls else "plaintext TCP on loopback (asked for)"))

    def post(self, message: PartyMessage) -> None:
        """Send ``message`` to each of its recipients (only to them); nothing but an abort once a party has stopped."""
        self.open()
        if message.kind != "abort":
            self.check_aborts()
        frame = self.frames.pack(MESSAGE, message.to_bytes())
        for peer in message.recipients:
            if peer == self.name:
                continue
            if peer not in self.peers:
                raise ValidationError(f"message {message.id} is addressed to {peer!r}, not a party of this run")
            try:
                self._call(self._send(peer, frame), self.timeout + 5.0)
            except (PeerVanished, TimeoutError):
                if message.kind != "abort":  # an abort reaches whoever is still there
                    self.check_aborts()  # a peer that stopped and left: its abort is the reason
                    raise

    def fetch(self, mid: str, **kwargs: Any) -> PartyMessage:
        """Wait until message ``mid`` has arrived (at most ``timeout`` s); stop at once on an abort or a vanished peer."""
        self.open()
        sender = self._sender(mid)
        start = time.monotonic()
        said = start
        with self._cond:
            while mid not in self._inbox:
                self._raise_if_stopped()
                now = time.monotonic()
                if now - start > self.timeout:
                    raise TimeoutError(f"message {mid} from {sender!r} at {self.addresses.get(sender, '?')} did not arrive within "
                                       f"{self.timeout:g} s: {sender!r} stopped answering (its process or host may be gone)")
                if now - said >= PROGRESS_EVERY:
                    self._say(f"waiting for message {mid} from {sender} ({now - start:.0f} s of {self.timeout:g} s)")
                    said = now
                self._cond.wait(min(1.0, max(self.timeout - (now - start), 0.01)))
            body = self._inbox[mid]
        return PartyMessage.from_bytes(body, **kwargs)

    def check_aborts(self) -> None:
        """Raise if any party has aborted (``ProtocolAborted``) or vanished (``PeerVanished``)."""
        with self._cond:
            self._raise_if_stopped()

    def close(self, failed: bool = False) -> None:
        """Say ``BYE`` to every peer and wait for theirs (at most the timeout; 2 s after a failure), then disconnect."""
        if self._loop is None:
            return
        try:
            if self.opened:
                for peer in self.peers:
                    try:
                        self._call(self._send(peer, self.frames.pack(BYE, b"")), 10.0)
                    except (PeerVanished, TimeoutError, OSError):
                        pass
                wait = 2.0 if failed else self.timeout
                end = time.monotonic() + wait
                with self._cond:
                    while not all(p in self._byes or p in self._gone for p in self.peers) and time.monotonic() < end:
                        self._cond.wait(0.2)
                late = [p for p in self.peers if p not in self._byes and p not in self._gone]
                if late and not failed:
                    self._say(f"{', '.join(late)} did not say goodbye within {wait:g} s; closing anyway")
        finally:
            self._stop()

    # ---- helpers ----
    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _sender(self, mid: str) -> str:
        """The party whose message ``mid`` is (``message_id``: ``SSSS-<sender>-<kind>``; the longest name that fits)."""
        fits = [p for p in self.peers if mid[5:].startswith(p + "-")]
        if not fits:
            raise ValidationError(f"message {mid} is not from a party of this run ({', '.join(self.peers)})")
        return max(fits, key=len)

    def _raise_if_stopped(self) -> None:
        if self._aborts:
            note = self._aborts[0]
            raise ProtocolAborted(f"party {note.sender!r} aborted the protocol: {note.meta.get('why', '')}", stage=note.stage,
                                  party=note.sender, messages=(), reports={})
        if self._gone:
            peer, why = next(iter(self._gone.items()))
            raise PeerVanished(f"party {peer!r} at {self.addresses[peer]} vanished before the run ended ({why}): this party stops; "
                               "what it charged stays charged and nothing more is released")

    def _call(self, coro: Any, timeout: float) -> Any:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def _stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10.0)
        except Exception:  # noqa: BLE001 - closing: nothing more to say
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(10.0)
        loop.close()
        self._loop = self._thread = None

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's own reports (e.g. a TLS handshake refused on the listening side): kept as refusals, not printed."""
        exc = context.get("exception")
        self._refused.append(f"{context.get('message', 'error')}: {type(exc).__name__}: {exc}" if exc else str(context.get("message")))

    # ---- the loop's side ----
    async def _shutdown(self) -> None:
        for writer in list(self._writers.values()):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)

    async def _connect(self) -> None:
        index = self.names.index(self.name)
        earlier, later = self.names[:index], self.names[index + 1:]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        self._joined = asyncio.Event()
        listener = None
        if later:  # listen on this party's own address only, until every later party has dialled it
            host, port = split_address(self.addresses[self.name])
            try:
                listener = socket.create_server((host, port))  # address reuse on, as MPyC's
            except OSError as exc:
                raise ConnectRefused(f"cannot listen on {self.addresses[self.name]} ({exc.strerror}): nothing was charged") from None
            listener.setblocking(False)
            self._spawn(self._listen(listener, later))
        dials = [self._spawn(self._dial(peer, deadline)) for peer in earlier]
        try:
            while not all(p in self._writers for p in self.peers):
                for task in dials:
                    if task.done() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]  # an exception instance, checked just above
                if loop.time() > deadline:
                    missing = [p for p in self.peers if p not in self._writers]
                    raise ConnectRefused(f"{', '.join(missing)} did not connect within {self.timeout:g} s"
                                         + (f" (refused: {'; '.join(self._refused)})" if self._refused else "")
                                         + "; nothing was charged")
                self._joined.clear()  # woken when a peer joins or a dial ends, else at the deadline
                waiting = [asyncio.ensure_future(self._joined.wait()), *(task for task in dials if not task.done())]
                await asyncio.wait(waiting, timeout=max(deadline - loop.time(), 0.0) + 0.01, return_when=asyncio.FIRST_COMPLETED)
                waiting[0].cancel()
        finally:
            if listener is not None:
                listener.close()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _check_certificate(self, writer: asyncio.StreamWriter, peer: str) -> None:
        """With TLS: the peer's verified certificate names ``peer`` and no other party of the run."""
        if not self.tls:
            return
        names = set(certificate_names(writer.get_extra_info("peercert") or {}))
        others = names & (set(self.names) - {peer})
        if peer not in names or others:
            raise ConnectRefused(f"a certificate naming {sorted(names) or 'nobody'} cannot be party {peer!r}")

    def _check_hello(self, body: bytes, expected: list[str]) -> str:
        try:
            hello = json.loads(body.decode())
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ConnectRefused("a peer's hello is not JSON") from None
        if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL or hello.get("version") != VERSION:
            raise ConnectRefused(f"a peer does not speak {PROTOCOL} version {VERSION}")
        name = hello.get("party")
        if name not in expected or hello.get("to") != self.name:
            raise ConnectRefused(f"a peer calls itself {name!r} and dials {hello.get('to')!r}; expected one of {expected} dialling {self.name!r}")
        if hello.get("digest") != self.digest:
            raise ConnectRefused(f"{name} holds another configuration (digest {str(hello.get('digest'))[:12]}, ours {self.digest[:12]}): "
                                 "every party must run the same configuration file")
        return str(name)

    async def _frame(self, reader: asyncio.StreamReader, peer: str) -> tuple[int, bytes]:
        kind, length = self.frames.unpack(await reader.readexactly(HEADER.size), peer)
        if kind == HELLO and length > MAX_HELLO:  # before the peer is known: a hello is small
            raise FrameError(f"{peer} sent a hello of {length} bytes (at most {MAX_HELLO})")
        return kind, await reader.readexactly(length)

    async def _listen(self, listener: socket.socket, later: list[str]) -> None:
        loop = asyncio.get_running_loop()
        while not all(p in self._writers for p in later):
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError:  # closed: everyone connected, or the connection phase failed
                return
            self._spawn(self._accepted(later, conn))

    async def _accepted(self, later: list[str], conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:  # the TLS handshake (a certificate not signed by the CA fails here, and is kept among the refusals)
            transport, _ = await loop.connect_accepted_socket(lambda: protocol, conn, ssl=self._server_ctx,
                                                              ssl_handshake_timeout=self.timeout if self._server_ctx else None)
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as exc:
            self._refused.append(f"{type(exc).__name__}: {exc}")
            conn.close()
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            kind, body = await asyncio.wait_for(self._frame(reader, "a connecting peer"), self.timeout)
            if kind != HELLO:
                raise ConnectRefused("a connecting peer did not start with a hello")
            peer = self._check_hello(body, [p for p in later if p not in self._writers])
            self._check_certificate(writer, peer)
            writer.write(self.frames.pack(HELLO, _hello(self.name, peer, self.digest)))
            await writer.drain()
        except (ConnectRefused, FrameError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ssl.SSLError) as exc:
            self._refused.append(f"{type(exc).__name__}: {exc}")
            writer.close()
            return
        self._writers[peer] = writer
        self._joined.set()
        await self._read(peer, reader)

    async def _dial(self, peer: str, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        host, port = split_address(self.addresses[peer])
        last: Exception | None = None
        pauses = backoff(0.1, first=0.005)
        while True:  # the peer may not listen yet: dial until it does (soon, then every 0.1 s), within the timeout
            try:
                sock = await loop.run_in_executor(None, functools.partial(socket.create_connection, (host, port), timeout=5.0))
                break
            except OSError as exc:
                last = exc
                if loop.time() > deadline:
                    raise ConnectRefused(f"could not reach {peer} at {self.addresses[peer]} within {self.timeout:g} s ({last}); "
                                         "nothing was charged") from None
                await asyncio.sleep(next(pauses))
        sock.setblocking(False)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                sock=sock, ssl=self._client_ctx, server_hostname=peer if self._client_ctx else None), self.timeout)
            self._check_certificate(writer, peer)
            writer.write(self.frames.pack(HELLO, _hello(self.name, peer, self.digest)))
            await writer.drain()
            kind, body = await asyncio.wait_for(self._frame(reader, peer), self.timeout)
            if kind != HELLO:
                raise ConnectRefused(f"{peer} did not answer with a hello")
            self._check_hello(body, [peer])
        except (ssl.SSLError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, FrameError, ConnectRefused) as exc:
            sock.close()
            raise ConnectRefused(f"{'TLS' if self.tls else 'the connection'} with {peer} at {self.addresses[peer]} refused: "
                                 f"{str(exc) or type(exc).__name__}; nothing was charged") from None
        self._writers[peer] = writer
        self._joined.set()
        self._spawn(self._read(peer, reader))

    async def _read(self, peer: str, reader: asyncio.StreamReader) -> None:
        """Every frame ``peer`` sends, until it is gone: messages into the inbox, aborts and goodbyes noted."""
        try:
            while True:
                kind, body = await self._frame(reader, peer)
                if kind == BYE:
                    with self._cond:
                        self._byes.add(peer)
                        self._cond.notify_all()
                    continue
                if kind != MESSAGE:
                    raise FrameError(f"{peer} sent a {KINDS[kind]} frame after the hello")
                message = PartyMessage.from_bytes(body)
                if message.sender != peer or self.name not in message.recipients:
                    raise FrameError(f"{peer} sent message {message.id} from {message.sender!r} to {list(message.recipients)}")
                with self._cond:
                    if message.kind == "abort":
                        self._aborts.append(message)
                    elif message.id in self._inbox:
                        raise FrameError(f"{peer} sent message {message.id} twice")
                    else:
                        self._inbox[message.id] = body
                    self._cond.notify_all()
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, OSError, ssl.SSLError) as exc:
            why = "its connection closed" if isinstance(exc, asyncio.IncompleteReadError) else f"{type(exc).__name__}: {exc}"
            self._lost(peer, why)
        except (FrameError, ValidationError) as exc:
            self._lost(peer, f"it broke the protocol: {exc}")
            self._writers[peer].close()

    def _lost(self, peer: str, why: str) -> None:
        with self._cond:
            if peer not in self._byes:
                self._gone[peer] = why
            self._cond.notify_all()

    async def _send(self, peer: str, frame: bytes) -> None:
        if peer in self._gone:
            raise PeerVanished(f"party {peer!r} at {self.addresses[peer]} vanished before the run ended ({self._gone[peer]})")
        writer = self._writers[peer]
        try:
            writer.write(frame)
            await asyncio.wait_for(writer.drain(), self.timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            self._lost(peer, f"sending failed: {type(exc).__name__}")
            raise PeerVanished(f"party {peer!r} at {self.addresses[peer]} vanished before the run ended ({type(exc).__name__})") from None


__all__ = ["ConnectRefused", "NetworkMailbox", "PeerVanished", "message_cap"]
