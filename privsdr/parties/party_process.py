"""One party's side of a protocol as its own process, talking to the others through a ``Mailbox``.

``run_party`` is what ``privsdr vertical party`` runs on each party's machine: it validates its
own data against the public layout, prices the global plan and reserves its own part on its own
ledger (before reading data for anything else), then walks the public schedule: for each of its
actions it waits for the messages it reads, charges the action's nodes, computes and posts its
messages. The other parties' actions are theirs; nothing but messages crosses the folder (or the network:
``transport.NetworkMailbox``, the same messages over mutual TLS, nothing on disk). If the protocol aborts, the
aborting party posts an ``abort`` message that stops everyone.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ..accounting import Budget, Ledger, make_accountant
from ..errors import PrivsdrError, ValidationError
from ..report import PrivacyReport
from .engine import PartySession, ProtocolAbort, ProtocolAborted, VerticalProtocol, check_ledger_reuse, split_plan
from .layout import Layout, Party, check_party
from .messages import Mailbox, PartyMessage, backoff, message_id
from .transport import PROGRESS_EVERY, NetworkMailbox


@attrs.frozen(eq=False)
class PartyOutcome:
    """What one party knows at the end: the messages it sent and received, its state and report."""

    name: str
    result: Any
    sent: tuple[PartyMessage, ...]
    received: tuple[PartyMessage, ...]
    state: Any
    report: PrivacyReport


DEFAULT_TIMEOUT = 300.0  #: seconds a party waits for one message before it aborts the run (``--timeout``)


class AbortWatchingMailbox(Mailbox):
    """Fetch that stops waiting when any party has posted an abort, and says every ``PROGRESS_EVERY`` seconds what it
    waits for (``progress``: a callable taking one line, e.g. printing to stderr)."""

    def __init__(self, folder: str | Path, *, poll: float = 0.05, timeout: float = DEFAULT_TIMEOUT,
                 progress: Callable[[str], None] | None = None) -> None:
        super().__init__(folder, poll=poll, timeout=timeout)
        self.progress = progress

    def check_aborts(self) -> None:
        """Raise ``ProtocolAborted`` if any party has posted an abort (before every charge and every read)."""
        aborts = sorted(self.folder.glob("*-abort.npz"))
        if aborts:
            note = PartyMessage.load(aborts[0])
            raise ProtocolAborted(f"party {note.sender!r} aborted the protocol: {note.meta.get('why', '')} (an abort left by an "
                                  "earlier run stops this one too: give each run a fresh folder)", stage=note.stage,
                                  party=note.sender, messages=(), reports={})

    def fetch(self, mid: str, **kwargs: Any) -> PartyMessage:
        import time

        start = time.monotonic()
        deadline, said = start + self.timeout, start
        path = self.path(mid)
        sleeps = backoff(self.poll)
        self.check_aborts()  # also when the message is there already: an abort posted after it still stops the run
        while not path.exists():
            now = time.monotonic()
            if self.progress is not None and now - said >= PROGRESS_EVERY:
                self.progress(f"waiting for message {mid} ({now - start:.0f} s of {self.timeout:g} s)")
                said = now
            self.check_aborts()
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {mid} did not arrive in {self.folder} within {self.timeout:g} s")
            time.sleep(next(sleeps))
        return PartyMessage.load(path, **kwargs)


def run_party(protocol: VerticalProtocol, party: Party, layout: Layout, budget: Budget, mailbox: Mailbox | NetworkMailbox | str | Path, *,
              ledger: Ledger | None = None, accountant: str = "best", random_state: Any = None,
              allow_uncertified: bool = False, project: Ledger | None = None, timeout: float | None = None,
              progress: Callable[[str], None] | None = None) -> PartyOutcome:
    """Play ``party``'s side of ``protocol`` (see the module docstring). ``project``: the project's per-record
    ledger shared by every party (a journal); this party's part is charged to it too. Declare the run's parts
    there first (``commit_parts``) so that they compose non-adaptively; otherwise each part enters its filter
    as a run of its own (valid, more conservative).

    Before its first charge the party posts ``ready`` and waits for every other party's (the configuration digest
    checked), so a party whose data or budget is refused stops everyone with nothing charged. Any failure posts an
    ``abort`` that stops the others; a wait longer than ``timeout`` seconds (default ``DEFAULT_TIMEOUT``) fails (and aborts). ``progress`` gets one
    line per stage and one per ``PROGRESS_EVERY`` seconds of waiting. A failed run closes its journal run as failed:
    what it charged stays charged (``accounting.ledger``)."""
    name = getattr(party, "name", "?")
    box: AbortWatchingMailbox | NetworkMailbox
    if isinstance(mailbox, NetworkMailbox):  # the network: connect (names, certificates, configuration) before any reservation
        box = mailbox
        if timeout is not None:
            box.timeout = float(timeout)
        box.progress = progress or box.progress
        box.open()
    else:
        folder = mailbox.folder if isinstance(mailbox, Mailbox) else Path(mailbox)
        wait = timeout if timeout is not None else (mailbox.timeout if isinstance(mailbox, Mailbox) else DEFAULT_TIMEOUT)
        box = mailbox if isinstance(mailbox, AbortWatchingMailbox) else AbortWatchingMailbox(folder, timeout=wait, progress=progress)
        if any(box.folder.glob(f"*-{name}-ready.npz")) or any(box.folder.glob(f"*-{name}-abort.npz")):
            # this party's messages of an earlier run would stand in for this run's (another party's abort may be of this
            # run: a peer that failed before this party started; the first read stops on it)
            raise ValidationError(f"mailbox {box.folder} holds messages of an earlier run of {name!r}: give each run a fresh "
                                  "folder; nothing was charged")
    failed = True
    try:
        outcome = _play(protocol, party, layout, budget, box, protocol.digest(layout), ledger=ledger, accountant=accountant,
                        random_state=random_state, allow_uncertified=allow_uncertified, project=project,
                        progress=progress or (lambda line: None))
        failed = False
        return outcome
    except ProtocolAborted:
        raise  # posted already: by this party (its own abort) or by the party that stopped it
    except BaseException as exc:  # tell the others, so that nobody waits for this party until its timeout
        post_abort(box, protocol, layout, name, exc)
        raise
    finally:
        if isinstance(box, NetworkMailbox):
            box.close(failed=failed)


def post_abort(mailbox: Mailbox | NetworkMailbox | str | Path, protocol: VerticalProtocol, layout: Layout, name: str,
               exc: BaseException) -> None:
    """Tell the other parties that ``name`` stopped. The note names the kind of failure only: an exception's text may
    describe this party's data (e.g. where a value is missing), which no noise covers; the details stay in its log.
    Over the network, a party not yet connected connects first (within its timeout) to say so; if it cannot, the
    others stop at their own timeout, naming it."""
    if isinstance(mailbox, NetworkMailbox):
        try:
            mailbox.open()
        except PrivsdrError:
            return
    box = mailbox if isinstance(mailbox, (Mailbox, NetworkMailbox)) else Mailbox(mailbox)
    why = f"{type(exc).__name__} at party {name!r} (its own output says why)"
    box.post(PartyMessage(protocol.name, protocol.version, protocol.digest(layout), name, tuple(n for n in layout.names if n != name),
                          "abort", 0, {}, {"why": why}))


def _play(protocol: VerticalProtocol, party: Party, layout: Layout, budget: Budget, box: AbortWatchingMailbox | NetworkMailbox,
          digest: str, *,
          ledger: Ledger | None, accountant: str, random_state: Any, allow_uncertified: bool, project: Ledger | None,
          progress: Callable[[str], None]) -> PartyOutcome:
    party = check_party(party)
    if party.name not in layout.names:
        raise ValidationError(f"party {party.name!r} is not in the layout ({', '.join(layout.names)})")
    info = layout.party(party.name)
    if party.X.shape != (layout.n_rows, info.n_columns) or party.holds_label != info.holds_label:
        raise ValidationError(f"party {party.name!r} holds X {party.X.shape} and {'a' if party.holds_label else 'no'} label; the layout "
                              f"says ({layout.n_rows}, {info.n_columns}) and {'a' if info.holds_label else 'no'} label")
    party = protocol.prepare(party)
    acct = make_accountant(accountant, budget.delta)
    plan = protocol.build_plan(layout, budget)
    calibrated = plan.allocate(budget, accountant=acct, **protocol.allocation())
    part = split_plan(calibrated, layout, acct).get(party.name)
    if part is None:
        raise ValidationError(f"party {party.name!r} releases nothing in this protocol")
    if ledger is not None:
        check_ledger_reuse(calibrated, {party.name: ledger}, project)
    session = PartySession(party.name, part, ledger or Ledger(part.budget, accountant=acct, relation=part.relation), random_state,
                           protocol=protocol, digest=digest, data_shape=party.X.shape, allow_uncertified=allow_uncertified,
                           message_reports=True, project=None if budget.is_infinite else project)
    kw = {"protocol": protocol.name, "version": protocol.version}
    state = protocol.initial_state(party.name, layout)
    sent: list[PartyMessage] = []
    received: dict[str, PartyMessage] = {}
    with session:  # reserved (the budget fits), nothing charged yet
        others = tuple(n for n in layout.names if n != party.name)
        # every party checks its data, configuration and budget before anyone charges: a party that cannot take part
        # posts an abort instead of "ready", and the others stop with nothing spent
        box.post(PartyMessage(protocol.name, protocol.version, digest, party.name, others, "ready", 0, {},
                              {"rows": int(party.X.shape[0]), "columns": int(party.X.shape[1])}))
        for other in others:
            _checked(box.fetch(message_id(0, other, "ready"), protocol=protocol.name, version=protocol.version), digest, party.name)
        progress(f"every party is ready ({', '.join(layout.names)})")
        try:
            for stage in protocol.schedule(layout):
                for action in stage.actions:
                    if action.party != party.name:
                        continue
                    inbox = {mid: _checked(box.fetch(mid, **kw), digest, party.name) for mid in action.reads}
                    box.check_aborts()  # nobody charges after another party has stopped
                    received.update(inbox)
                    if protocol.has_precheck(action):
                        protocol.precheck(action, party, state, inbox)
                    result = protocol.act(action, party, state, inbox, session.issue(action))
                    state = result.state
                    for message in session.complete(action, stage.index, result):
                        box.post(message)
                        sent.append(message)
                    progress(f"stage {stage.index}: sent {', '.join(m.id for m in sent if m.stage == stage.index) or 'nothing'}")
            for mid in protocol.final_reads(layout, party.name):
                received[mid] = _checked(box.fetch(mid, **kw), digest, party.name)
        except ProtocolAbort as exc:
            box.post(PartyMessage(protocol.name, protocol.version, digest, party.name, layout.names, "abort", stage.index, {},
                                  {"why": str(exc)}))
            raise ProtocolAborted(f"{protocol.name} aborted at stage {stage.index} ({party.name}): {exc}; charges made stay on the "
                                  "ledger, nothing was published", stage=stage.index, party=party.name, messages=tuple(sent),
                                  reports={}) from exc
    assert session.run.report is not None
    everything = sorted(sent + list(received.values()), key=lambda m: (m.stage, m.sender))
    return PartyOutcome(party.name, protocol.finish(layout, {party.name: state}, everything), tuple(sent),
                        tuple(received.values()), state, session.run.report)


def _checked(message: PartyMessage, digest: str, me: str) -> PartyMessage:
    if message.config_digest != digest:
        raise ValidationError(f"message {message.id} was computed under another configuration (digest {message.config_digest} != {digest})")
    if me not in message.recipients:
        raise ValidationError(f"message {message.id} is not addressed to {me!r}")
    return message


__all__ = ["DEFAULT_TIMEOUT", "AbortWatchingMailbox", "PartyOutcome", "message_id", "post_abort", "run_party"]
