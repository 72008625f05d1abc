"""Messages between parties: serialisable (npz, no pickle), versioned, with the sender's report.

A ``PartyMessage`` carries named arrays and JSON metadata from one sender to its recipients, the
digest of the public configuration it was computed under, the plan nodes whose releases it
carries (everything else in it is post-processing of those), and the sender's privacy report at
the time of sending. ``Mailbox`` is a folder transport: each message is one file, written
atomically, so parties on different machines can share a folder.
"""
from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..errors import ValidationError

FORMAT = "privsdr.vertical-message"
FORMAT_VERSION = 1


def as_names(values: Iterable[str]) -> tuple[str, ...]:
    """attrs converter: names (recipients, plan nodes, message ids) as a tuple."""
    return tuple(values)


def as_dict(values: Mapping[str, Any]) -> dict[str, Any]:
    """attrs converter: a mapping (arrays, metadata) as a dict of its own."""
    return dict(values)


def message_id(stage: int, sender: str, kind: str) -> str:
    """The id of the message ``sender`` sends at ``stage`` (unique within one protocol run)."""
    return f"{stage:04d}-{sender}-{kind}"


@attrs.frozen(eq=False)
class PartyMessage:
    """What one party sends to others. Arrays are releases (``nodes``) or post-processing of them."""

    protocol: str
    version: int
    config_digest: str
    sender: str
    recipients: tuple[str, ...] = attrs.field(converter=as_names)
    kind: str
    stage: int
    arrays: Mapping[str, np.ndarray] = attrs.field(factory=dict, converter=as_dict)
    meta: Mapping[str, Any] = attrs.field(factory=dict, converter=as_dict)
    nodes: tuple[str, ...] = attrs.field(default=(), converter=as_names)
    report_json: str = ""

    @property
    def id(self) -> str:
        return message_id(self.stage, self.sender, self.kind)

    @property
    def payload_bytes(self) -> int:
        """Bytes of the arrays (what grows with N); ``len(to_bytes())`` adds the report and metadata."""
        return int(sum(np.asarray(a).nbytes for a in self.arrays.values()))

    @property
    def report(self) -> Any:
        from ..report import PrivacyReport

        if not self.report_json:
            raise ValidationError(f"message {self.id} carries no privacy report")
        return PrivacyReport.from_json(self.report_json)

    def header(self) -> dict[str, Any]:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "protocol": self.protocol, "version": self.version,
                "config_digest": self.config_digest, "sender": self.sender, "recipients": list(self.recipients),
                "kind": self.kind, "stage": self.stage, "meta": dict(self.meta), "nodes": list(self.nodes),
                "report_json": self.report_json, "arrays": sorted(self.arrays)}

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        header = np.frombuffer(json.dumps(self.header()).encode(), dtype=np.uint8)
        named: dict[str, Any] = {f"a_{k}": np.asarray(v) for k, v in self.arrays.items()}  # Any: savez's own keywords
        np.savez(buffer, __header__=header, **named)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, *, protocol: str | None = None, version: int | None = None) -> PartyMessage:
        """Decode; refuse another format, protocol or protocol version with a clear error."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                header = json.loads(archive["__header__"].tobytes().decode())
                arrays = {k: archive[f"a_{k}"] for k in header["arrays"]}
        except Exception as exc:  # noqa: BLE001 - any decoding failure is a bad message
            raise ValidationError(f"not a readable privsdr vertical message: {exc}") from None
        if header.get("format") != FORMAT or header.get("format_version") != FORMAT_VERSION:
            raise ValidationError(f"not a privsdr vertical message of format version {FORMAT_VERSION}")
        if protocol is not None and header["protocol"] != protocol:
            raise ValidationError(f"message of protocol {header['protocol']!r}, expected {protocol!r}")
        if version is not None and header["version"] != version:
            raise ValidationError(f"{header['protocol']} protocol version {header['version']} is not {version}")
        return cls(header["protocol"], int(header["version"]), header["config_digest"], header["sender"],
                   tuple(header["recipients"]), header["kind"], int(header["stage"]), arrays, header["meta"],
                   tuple(header["nodes"]), header["report_json"])

    def save(self, path: str | Path) -> Path:
        """Write atomically (temporary file, then rename): a reader never sees half a message."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(self.to_bytes())
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> PartyMessage:
        return cls.from_bytes(Path(path).read_bytes(), **kwargs)


def backoff(poll: float, first: float = 0.002) -> Iterator[float]:
    """The pauses between two looks for something that is usually ready soon (a message in a mailbox folder, a peer's
    listening socket): ``first`` s, doubling up to ``poll`` s. What comes soon (the other party's next step, computed
    in milliseconds) is seen within about its own time, not a whole ``poll`` later; a long wait looks every ``poll`` s."""
    wait = min(first, poll)
    while True:
        yield wait
        wait = min(2.0 * wait, poll)


class Mailbox:
    """A shared folder as transport: ``<id>.npz`` per message (ids from ``message_id``)."""

    def __init__(self, folder: str | Path, *, poll: float = 0.05, timeout: float = 3600.0) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.poll = float(poll)
        self.timeout = float(timeout)

    def path(self, mid: str) -> Path:
        return self.folder / f"{mid}.npz"

    def post(self, message: PartyMessage) -> Path:
        return message.save(self.path(message.id))

    def fetch(self, mid: str, **kwargs: Any) -> PartyMessage:
        """Wait (polling, ``backoff``) until message ``mid`` exists, then read it."""
        deadline = time.monotonic() + self.timeout
        path = self.path(mid)
        sleeps = backoff(self.poll)
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {mid} did not arrive in {self.folder} within {self.timeout:g} s")
            time.sleep(next(sleeps))
        return PartyMessage.load(path, **kwargs)
