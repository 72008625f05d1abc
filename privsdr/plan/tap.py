"""Taps: what a replay audit sees of a fit (``privsdr.audit.replay``).

Every release goes through ``Run.release`` or a ``NoiseTicket``, and every party message through the
federated and vertical layers; each calls the active tap, if any:

* ``released(key, value, output, spec, rows) -> output``: ``value`` is the noise-free input of node
  ``key`` (``(run label, node)``), ``output`` the noisy release, ``rows`` the row indices the value read
  (None: every row). The tap returns the output the fit goes on with:
  the same object when recording, a recorded output when replaying (the fit then runs on garbage data
  and must reach the same attributes from the releases alone).
* ``sent(sender, kind, recipients, arrays, nodes, meta)``: a message a party hands to another party or
  to the server, with the release nodes it says it carries and its public metadata.

No tap is active outside an audit: the cost of the hook is one global lookup per release. A tap is
process-wide (threads included; other processes do not see it), so audits run their fits serially.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol


class Tap(Protocol):
    def released(self, key: tuple[str, str], value: Any, output: Any, spec: Any, rows: Any = None) -> Any: ...

    def sent(self, sender: str, kind: str, recipients: Sequence[str], arrays: Mapping[str, Any], nodes: Sequence[str],
             meta: Mapping[str, Any]) -> None: ...


_lock = threading.Lock()
_active: list[Tap] = []


def active() -> Tap | None:
    """The innermost active tap, or None (the normal case)."""
    return _active[-1] if _active else None


@contextmanager
def tapped(tap: Tap) -> Iterator[Tap]:
    """Make ``tap`` see every release and message in this process until the block ends."""
    with _lock:
        _active.append(tap)
    try:
        yield tap
    finally:
        with _lock:
            _active.remove(tap)


def release_seen(key: tuple[str, str], value: Any, output: Any, spec: Any, rows: Any = None) -> Any:
    """Report a release to the active tap (``rows``: the row indices the value read, None for every row);
    returns the output the caller goes on with."""
    tap = active()
    return output if tap is None else tap.released(key, value, output, spec, rows)


def message_sent(sender: str, kind: str, recipients: Sequence[str], arrays: Mapping[str, Any], nodes: Sequence[str] = (),
                 meta: Mapping[str, Any] | None = None) -> None:
    """Report a message (its arrays and its public metadata) to the active tap (nothing happens without one)."""
    tap = active()
    if tap is not None:
        tap.sent(sender, kind, tuple(recipients), dict(arrays), tuple(nodes), dict(meta or {}))
