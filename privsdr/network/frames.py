"""Versioned, length-prefixed, capped frames: what every channel between the parties sends (no pickle).

A frame is ``magic (4 bytes) | version (1) | type (1) | length (4, big-endian) | body``. Each protocol has its own
``Framing`` (its magic, version, frame types and cap): record linkage (``privsdr.linkage.channel``) and the mailbox
protocols' network transport (``privsdr.parties.transport``). A header with another magic or version, an unknown type
or a body over the cap is refused before the body is read, so a peer cannot make a party allocate more than the cap.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import PrivsdrError

HEADER = struct.Struct(">4sBBI")


class FrameError(PrivsdrError, RuntimeError):
    """A frame that this protocol does not accept (another protocol or version, an unknown type, over the cap)."""


@dataclass(frozen=True)
class Framing:
    """One protocol's frames: ``magic`` (4 bytes), ``version``, ``kinds`` (type number -> name), ``max_frame`` (bytes)."""

    protocol: str
    magic: bytes
    version: int
    kinds: Mapping[int, str]
    max_frame: int

    def pack(self, kind: int, body: bytes) -> bytes:
        """The frame of ``body``; FrameError if it is over the cap."""
        if len(body) > self.max_frame:
            raise FrameError(f"a frame of {len(body)} bytes is over the cap of {self.max_frame}")
        return HEADER.pack(self.magic, self.version, kind, len(body)) + body

    def unpack(self, header: bytes, peer: str) -> tuple[int, int]:
        """(type, body length) of a frame header from ``peer``, checked; FrameError otherwise."""
        magic, version, kind, length = HEADER.unpack(header)
        if magic != self.magic or version != self.version:
            raise FrameError(f"{peer} does not speak {self.protocol} version {self.version}")
        if kind not in self.kinds or length > self.max_frame:
            raise FrameError(f"{peer} sent a bad frame (type {kind}, {length} bytes)")
        return kind, length
