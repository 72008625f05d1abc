"""Private record linkage: Diffie-Hellman private set intersection on ristretto255 among k >= 2 parties.

The group and its operations are libsodium's, through ``rbcl`` (ristretto255, RFC 9496: a prime-order group of
order L ~ 2^252). Each party i normalises its identifiers (``normalise``), hashes each one to the group,
H(x) = from_hash(SHA-512(DOMAIN || x)), and draws one secret scalar a_i per run (``scalar_random``). Every element
that leaves a party is blinded by at least one secret scalar; the comparison value of an identifier is
F(x) = H(x)^(a_1 ... a_k), which no one can compute for a guess without every party's scalar (DDH in ristretto255,
H a random oracle). This is the DH-based matching of Meadows (1986) and Huberman, Franklin & Hogg (1999), carried
to k parties by passing the blinded sets around a ring.

Protocol (parties in the configured order P_0..P_{k-1}; the label holder is the linker; the helper of a secure fit
takes no part):

1. **Own list.** P_i shuffles its rows with a secret uniform permutation and sends H(x)^s_i of every identifier to
   P_{i+1}, where s_i = a_i for k = 2 and a fresh one-time scalar r_i for k >= 3.
2. **Ring, k rounds.** In each round every party sends one list to the next party and receives one from the previous.
   A foreign list is raised to the receiver's a_j and passed on in the same order; after k hops a list is back
   at its owner, blinded by every other party's scalar: for k >= 3 the owner raises it to a_i r_i^-1 (so no one
   but the owner ever holds its F values in its order, and no other party learns pairwise overlaps), for k = 2 it
   is F already. The owner undoes its permutation and knows F(x) of each of its own rows.
3. **Intersection.** Every other party sends its F values, sorted (an order that says nothing), to the label holder,
   who intersects them with its own and sends the sorted intersection back to each.
4. **Common order.** Every party orders its rows of the intersection by F value: the same pseudorandom order at
   every party, N = the intersection size.

What it reveals (also ``Linkage.revealed``): every party learns every set size and which of its own rows are in
the intersection of all sets (and so that every other party holds them); the label holder also learns, from the
others' F sets, for each of its own rows which parties hold it and the size of every overlap among the other
parties' sets. Nothing else, for semi-honest parties that do not collude. It is outside the differential-privacy
guarantee of the fit, which is a guarantee for the N linked rows.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import ssl
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import numpy as np
import rbcl

from ..errors import ValidationError
from .channel import Channel, LinkageError, Peer, check_addresses, connect
from .normalise import IdentifierError, normalise_ids
from .refusal import tell_others

# rbcl writes its bundled libsodium to a temporary file on import, loads it, and never removes it (5.5 MB in the temp
# folder per importing process). Once loaded the file is not needed (a loaded library stays mapped after its file is
# unlinked), so the linkage removes it: a linkage party leaves no file behind.
with contextlib.suppress(OSError, AttributeError):
    os.unlink(sys.modules["rbcl._sodium"].lib_path)

DOMAIN = b"privsdr.linkage.v1/ristretto255/sha512\x00"
#: the public cap on identifiers per party (every list received is checked against it)
MAX_IDS = 2**24
#: below this many elements per thread, ``workers`` > 1 is not worth a thread
MIN_SHARE = 256

_In = TypeVar("_In")
_Out = TypeVar("_Out")


def hash_to_group(identifier: str) -> bytes:
    """H(x): libsodium's ristretto255 from_hash of SHA-512(DOMAIN || UTF-8 of the normalised identifier)."""
    return bytes(rbcl.crypto_core_ristretto255_from_hash(hashlib.sha512(DOMAIN + identifier.encode("utf-8")).digest()))


def new_scalar() -> bytes:
    """A uniform secret scalar in [1, L) (libsodium's ``crypto_core_ristretto255_scalar_random``)."""
    return bytes(rbcl.crypto_core_ristretto255_scalar_random())


def hash_all(identifiers: Sequence[str], workers: int = 1) -> list[bytes]:
    """H(x) of every identifier, in order, computed by ``workers`` threads (``in_threads``)."""
    return in_threads(_hash_share, identifiers, workers)


def _hash_share(identifiers: Sequence[str]) -> list[bytes]:
    return [hash_to_group(x) for x in identifiers]


def blind(elements: Iterable[bytes], scalar: bytes, peer: str = "a peer", workers: int = 1) -> list[bytes]:
    """Every element raised to ``scalar`` (libsodium refuses a non-canonical encoding or the identity element),
    computed by ``workers`` threads, each on a contiguous share (``in_threads``); the order is kept."""
    try:
        return in_threads(partial(_blind_share, scalar), list(elements), workers)
    except (RuntimeError, ValueError, TypeError):
        raise LinkageError(f"{peer} sent something that is not a ristretto255 element") from None


def _blind_share(scalar: bytes, elements: Sequence[bytes]) -> list[bytes]:
    multiply = rbcl.crypto_scalarmult_ristretto255  # returns a new bytes object (no copy needed)
    return [multiply(scalar, e) for e in elements]


def in_threads(work: Callable[[Sequence[_In]], list[_Out]], items: Sequence[_In], workers: int) -> list[_Out]:
    """``work`` on ``workers`` contiguous shares of ``items`` in threads, results concatenated in order.

    Threads run in parallel here because the time is spent in libsodium, which ``rbcl`` calls through ``ctypes``:
    ctypes releases the GIL for every foreign call (a scalar multiplication is ~75 us of C, its Python wrapper ~3 us).
    """
    if workers <= 1 or len(items) < 2 * MIN_SHARE:
        return work(items)
    step = -(-len(items) // min(workers, len(items) // MIN_SHARE))
    with ThreadPoolExecutor(-(-len(items) // step), thread_name_prefix="privsdr-linkage") as pool:
        shares = list(pool.map(work, [items[i:i + step] for i in range(0, len(items), step)]))
    return [x for share in shares for x in share]


def unmask(scalar: bytes, mask: bytes) -> bytes:
    """scalar * mask^-1 mod L."""
    return bytes(rbcl.crypto_core_ristretto255_scalar_mul(scalar, rbcl.crypto_core_ristretto255_scalar_invert(mask)))


def secret_permutation(n: int) -> list[int]:
    """A uniform permutation of range(n) drawn from the operating system's CSPRNG."""
    order = list(range(n))
    secrets.SystemRandom().shuffle(order)
    return order


@dataclass(frozen=True)
class LinkageConfig:
    """The public configuration every party must hold alike (checked by digest before any element is sent)."""

    parties: tuple[Peer, ...]
    label: str
    casefold: bool = False
    pattern: str | None = None
    max_ids: int = MAX_IDS

    def __post_init__(self) -> None:
        if len(self.parties) < 2:
            raise ValidationError("linkage needs at least two parties")
        if self.label not in [p.name for p in self.parties]:
            raise ValidationError(f"the label holder {self.label!r} is not one of the parties {[p.name for p in self.parties]}")
        if isinstance(self.max_ids, bool) or not isinstance(self.max_ids, int) or self.max_ids < 1:
            raise ValidationError(f"max_ids must be a positive integer, got {self.max_ids!r}")

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parties]

    def digest(self) -> str:
        public = {"protocol": "privsdr.linkage", "version": 1, "domain": DOMAIN.decode(), "group": "ristretto255",
                  "parties": [[p.name, p.host, p.port] for p in self.parties], "label": self.label,
                  "casefold": self.casefold, "pattern": self.pattern, "max_ids": self.max_ids}
        return hashlib.sha256(json.dumps(public, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Linkage:
    """One party's result: ``order[j]`` is the index of its row at position j of the common order (N = ``n``)."""

    party: str
    order: np.ndarray
    set_sizes: dict[str, int]
    label: str
    tls: bool
    revealed: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.order)


def revealed_sentences(name: str, label: str, k: int) -> list[str]:
    """What the linkage revealed to this party (the trust statement, per party)."""
    out = ["every party's number of identifiers (set sizes) and N, the size of the intersection of all sets",
           "which of its own rows are in the intersection, and that every other party holds those rows"]
    if name == label and k >= 3:
        out.append("for each of its own rows, which of the other parties hold it, and the size of every overlap among the "
                   "other parties' sets (it receives their fully blinded sets)")
    out.append("nothing about the identifiers outside the intersection beyond this (semi-honest, non-colluding parties); "
               "the linkage is outside the differential-privacy guarantee, which covers the N linked rows")
    return out


def link(ids: Sequence[object], config: LinkageConfig, name: str, *, server_context: ssl.SSLContext | None = None,
         client_context: ssl.SSLContext | None = None, allow_plaintext: bool = False, timeout: float = 300.0,
         workers: int = 1) -> Linkage:
    """Run this party's side of the linkage (module docstring) and return its rows' common order.

    ``ids`` are this party's identifiers, one per row; they are normalised and checked (missing, malformed or duplicate
    identifiers are refused with their row numbers) before anything is sent. ``server_context`` and ``client_context``
    turn on TLS (both verifying the peer; its certificate must name the expected party); without them every address
    must be loopback unless ``allow_plaintext``. ``timeout`` bounds every wait (connecting, each message: it must
    exceed the time the slowest party needs to blind one list, about 100 us per identifier on one core).
    ``workers`` threads share this party's hashing and scalar multiplications (``in_threads``): give the number of
    cores the party has to itself; the protocol and every message are the same for any value.
    """
    try:
        normalised = normalise_ids(ids, casefold=config.casefold, pattern=config.pattern)
    except IdentifierError as exc:  # the others hear the kind of refusal (never a row or an identifier) and stop at once
        tell_others(exc, config, name, server_context=server_context, client_context=client_context,
                    allow_plaintext=allow_plaintext, timeout=timeout)
        raise
    names = config.names
    if name not in names:
        raise ValidationError(f"{name!r} is not one of the parties {names}")
    if len(normalised) > config.max_ids:
        raise ValidationError(f"{len(normalised)} identifiers is over the public cap max_ids = {config.max_ids}")
    if not timeout > 0:
        raise ValidationError(f"timeout must be positive, got {timeout!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValidationError(f"workers must be a positive integer, got {workers!r}")
    check_addresses(config.parties, server_context is not None, allow_plaintext)
    k, p = len(names), names.index(name)
    after, before = names[(p + 1) % k], names[(p - 1) % k]
    scalar = new_scalar()
    mask = scalar if k == 2 else new_scalar()
    permutation = secret_permutation(len(normalised))
    # connect first: a party with another configuration is found before anyone hashes or blinds
    channels = connect(name, config.parties, config.digest(), server_context=server_context, client_context=client_context,
                       allow_plaintext=allow_plaintext, timeout=timeout)
    try:
        sizes = {name: len(normalised)}
        current = blind(hash_all([normalised[j] for j in permutation], workers), mask, workers=workers)
        for rnd in range(1, k + 1):
            if p == 0:  # one party receives first, so the ring's sends never wait on one another in a cycle
                incoming = channels[before].recv_elements(config.max_ids)
                channels[after].send_elements(current)
            else:
                channels[after].send_elements(current)
                incoming = channels[before].recv_elements(config.max_ids)
            owner = names[(p - rnd) % k]
            if rnd < k:
                sizes[owner] = len(incoming)
                current = blind(incoming, scalar, before, workers)
        if len(incoming) != len(normalised):
            raise LinkageError(f"{before} returned {len(incoming)} elements of this party's {len(normalised)}")
        final = incoming if k == 2 else blind(incoming, unmask(scalar, mask), before, workers)
        row_of = dict(zip(final, permutation, strict=True))
        if len(row_of) != len(final):
            raise LinkageError("two identifiers of this party have one blinded value (the ring was broken)")
        common = _intersect(channels, name, config, sorted(row_of), sizes)
        missing = [f for f in common if f not in row_of]
        if missing or common != sorted(set(common)):
            raise LinkageError(f"the label holder {config.label} sent an intersection that is not a sorted subset of this party's set")
    except BaseException as exc:
        for channel in channels.values():
            channel.abort(f"{name} stopped: {exc}" if isinstance(exc, LinkageError) else f"{name} stopped")
        raise
    finally:
        for channel in channels.values():
            channel.close()
    order = np.fromiter((row_of[f] for f in common), dtype=np.int64, count=len(common))
    return Linkage(name, order, dict(sorted(sizes.items())), config.label, server_context is not None,
                   revealed_sentences(name, config.label, k))


def _intersect(chans: dict[str, Channel], name: str, config: LinkageConfig, own: list[bytes],
               sizes: dict[str, int]) -> list[bytes]:
    """Step 3: the others send their sorted F sets to the label holder, who returns the sorted intersection."""
    if name != config.label:
        chans[config.label].send_elements(own)
        return chans[config.label].recv_elements(len(own))
    common = set(own)
    for other in config.names:
        if other != name:
            theirs = chans[other].recv_elements(config.max_ids)
            if len(theirs) != sizes[other] or theirs != sorted(set(theirs)):
                raise LinkageError(f"{other} sent {len(theirs)} blinded values, not its {sizes[other]} distinct ones, sorted")
            common &= set(theirs)
    result = sorted(common)
    for other in config.names:
        if other != name:
            chans[other].send_elements(result)
    return result
