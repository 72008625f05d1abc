"""What every command that runs ONE party of a secure computation on its own host shares (``vertical party
--secure``, ``vertical helper``, ``fsir party``): its certificate folder, whether it can listen on its address, its
journal (removed again if this command created it and nothing was written), and the pre-flight of its outputs,
journal and data before the agreement (issue 36: a failure there tells the others this party is not ready, so
every party stops with nothing charged anywhere).
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..accounting import Budget, Ledger
from ..errors import PrivsdrError, ValidationError
from ._common import REPORT_SUFFIXES, Outputs, check_output, open_ledger
from ._parties import own_certificates

NOT_READY = "; this party told the others it is not ready: nothing was charged anywhere"


@contextlib.contextmanager
def journal_opener(journal: str | None, budget: Budget, accountant: str) -> Iterator[Callable[[], Ledger | None]]:
    """The party's ``--journal``, opened (and verified) when the returned function is called. A journal this
    command creates is removed again on the way out if nothing was written to it after its header (the run stopped
    before every party was ready): a failure before that point leaves every journal as it was (issue 36)."""
    created: dict[str, bytes] = {}

    def open_journal() -> Ledger | None:
        if not journal:
            return None
        if Path(journal).exists():
            return open_ledger(journal)
        check_output(journal, "--journal")
        ledger = Ledger(budget, accountant=accountant, journal=journal)
        created["header"] = Path(journal).read_bytes()
        return ledger

    try:
        yield open_journal
    finally:
        if journal and "header" in created:
            with contextlib.suppress(OSError):
                if Path(journal).read_bytes() == created["header"]:
                    Path(journal).unlink()


def progress(line: str) -> None:
    """What a party says while it waits (stderr)."""
    print(line, file=sys.stderr, flush=True)


def check_own_party(name: str, parties: list[str], addresses: list[str], tls: bool, certs: str | None) -> Path | None:
    """This party's certificate folder (checked: key mode, names, CA) and, for every party MPyC makes listen (all but
    party 0, which only dials), that its configured address takes a listening socket now. Returns the folder."""
    if name not in parties:
        raise ValidationError(f"{name!r} is not one of the parties {parties}")
    certificates = own_certificates(certs, name)
    if tls:  # its key and certificate first: without them it cannot connect
        if certificates is None:
            raise ValidationError(f"this run uses TLS: party {name!r} needs its certificate folder (--certs; `privsdr secure keys`), "
                                  "or plaintext asked for explicitly in the shared configuration; nothing was charged")
        from ..network.certificates import load_credentials

        load_credentials(certificates, parties.index(name))
    if parties.index(name) > 0:
        can_listen(addresses[parties.index(name)])
    return certificates


def can_listen(address: str) -> None:
    """This party's configured address takes a listening socket now (as MPyC's does: address reuse on)."""
    import socket

    from ..network.addresses import split_address

    host, port = split_address(address)

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError as exc:
            raise ValidationError(f"address {address} is taken or not this machine's ({exc.strerror}): this party cannot listen there, so "
                                  "the other parties will wait for it until their timeout; nothing was charged anywhere; "
                                  "free the port or write a new configuration") from None


def preflight(outputs: Outputs, report: str | None, open_journal: Callable[[], Ledger | None], load: Callable[[], Any],
              decline: Callable[[str], None] | None) -> tuple[Any, Ledger | None, Any]:
    """(report path, ledger, data): this party's ``--report`` path (checked and reserved), its journal and its data,
    in that order, before the agreement. A failure calls ``decline(why)`` (``why``: which option and the kind of
    failure, never data) so that the others stop at once with nothing charged, and says so in its own message."""
    what = "--report"
    try:
        report_path = outputs.add(report, "--report", REPORT_SUFFIXES)
        what = "--journal"
        ledger = open_journal()
        what = "--data"
        data = load()
    except (PrivsdrError, OSError, ValueError) as exc:
        if decline is not None:
            decline(f"its {what} cannot be used ({type(exc).__name__}; its own output says why)")
            if exc.args and isinstance(exc.args[0], str):
                exc.args = (exc.args[0] + NOT_READY, *exc.args[1:])
        raise
    return report_path, ledger, data
