"""A TCP relay for the tests of the parties' channels: what a machine between two parties sees."""
from __future__ import annotations

import socket
import threading
import time

#: the real dial, taken before any test patches ``socket.create_connection`` to route a party through a relay
_CONNECT = socket.create_connection


class Relay:
    """A TCP relay on ``host`` to ``target`` (host:port), keeping every byte each way (``up``: to the target); it
    accepts one connection and dials the target until it listens (at most ``wait`` seconds), as the dialer would."""

    def __init__(self, target: str, host: str = "127.0.0.5", wait: float = 60.0) -> None:
        target_host, target_port = target.split(":")
        self.target = (target_host, int(target_port))
        self.server = socket.create_server((host, 0))
        self.address = f"{host}:{self.server.getsockname()[1]}"
        self.wait = wait
        self.up, self.down = bytearray(), bytearray()
        self.threads = [threading.Thread(target=self._serve, daemon=True)]
        self.threads[0].start()

    def _serve(self) -> None:
        try:
            client, _ = self.server.accept()
        except OSError:
            return
        deadline = time.monotonic() + self.wait
        while True:  # the target may not listen yet: wait for it, as its dialer would
            try:
                upstream = _CONNECT(self.target)
                break
            except OSError:
                if time.monotonic() > deadline:
                    client.close()
                    return
                time.sleep(0.05)
        for sock in (client, upstream):  # forward each chunk at once, as a router does (Nagle here stalled TLS records)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for src, dst, kept in ((client, upstream, self.up), (upstream, client, self.down)):
            t = threading.Thread(target=self._pipe, args=(src, dst, kept), daemon=True)
            t.start()
            self.threads.append(t)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, kept: bytearray) -> None:
        try:
            while chunk := src.recv(65536):
                kept.extend(chunk)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
        for t in self.threads[1:]:
            t.join(timeout=5)


def tls_records(data: bytes) -> list[int]:
    """The content types of the TLS records ``data`` consists of; AssertionError if it is anything else."""
    types, at = [], 0
    while at < len(data):
        assert at + 5 <= len(data) and data[at] in (20, 21, 22, 23) and data[at + 1] == 3, f"not a TLS record at byte {at}"
        types.append(data[at])
        at += 5 + int.from_bytes(data[at + 3:at + 5], "big")
    return types
