"""Private record linkage for vertically partitioned data (issue 36): align the parties' rows by an identifier
column without revealing the identifiers that are not in common (``psi``: DH-based PSI on ristretto255 through
libsodium; ``channel``: TCP/TLS framed messages; ``normalise``: identifier checks; ``files``: CSV in, CSV out).

It spends no privacy budget and is outside the differential-privacy guarantee (what it reveals: ``psi`` docstring,
``docs/linkage.md``). It imports no privacy code.
"""
from __future__ import annotations

from .channel import LinkageError, Peer, tls_contexts
from .files import link_csv, read_table
from .normalise import IdentifierError, normalise_ids
from .psi import Linkage, LinkageConfig, link

__all__ = ["IdentifierError", "Linkage", "LinkageConfig", "LinkageError", "Peer", "link", "link_csv", "normalise_ids",
           "read_table", "tls_contexts"]
