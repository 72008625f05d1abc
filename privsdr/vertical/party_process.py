"""One party's side of a protocol as its own process, talking to the others through a ``Mailbox``.

``run_party`` is what ``privsdr vertical party`` runs on each party's machine: it validates its
own data against the public layout, prices the global plan and reserves its own part on its own
ledger (before reading data for anything else), then walks the public schedule: for each of its
actions it waits for the messages it reads, charges the action's nodes, computes and posts its
messages. The other parties' actions are theirs; nothing but messages crosses the folder. If the
protocol aborts, the aborting party posts an ``abort`` message that stops everyone.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ..accounting import Budget, Ledger, make_accountant
from ..errors import ValidationError
from ..report import PrivacyReport
from .engine import PartySession, ProtocolAbort, ProtocolAborted, VerticalProtocol, check_ledger_reuse, split_plan
from .layout import Layout, Party, check_party
from .messages import Mailbox, PartyMessage, message_id


@attrs.frozen(eq=False)
class PartyOutcome:
    """What one party knows at the end: the messages it sent and received, its state and report."""

    name: str
    result: Any
    sent: tuple[PartyMessage, ...]
    received: tuple[PartyMessage, ...]
    state: Any
    report: PrivacyReport


class AbortWatchingMailbox(Mailbox):
    """Fetch that stops waiting when any party has posted an abort."""

    def fetch(self, mid: str, **kwargs: Any) -> PartyMessage:
        import time

        deadline = time.monotonic() + self.timeout
        path = self.path(mid)
        while not path.exists():
            aborts = sorted(self.folder.glob("*-abort.npz"))
            if aborts:
                note = PartyMessage.load(aborts[0])
                raise ProtocolAborted(f"party {note.sender!r} aborted the protocol: {note.meta.get('why', '')}", stage=note.stage,
                                      party=note.sender, messages=(), reports={})
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {mid} did not arrive in {self.folder} within {self.timeout:g} s")
            time.sleep(self.poll)
        return PartyMessage.load(path, **kwargs)


def run_party(protocol: VerticalProtocol, party: Party, layout: Layout, budget: Budget, mailbox: Mailbox | str | Path, *,
              ledger: Ledger | None = None, accountant: str = "best", random_state: Any = None,
              allow_uncertified: bool = False, project: Ledger | None = None) -> PartyOutcome:
    """Play ``party``'s side of ``protocol`` (see the module docstring). ``project``: the project's per-record
    ledger shared by every party (a journal); this party's part is charged to it too. Declare the run's parts
    there first (``commit_parts``) so that they compose non-adaptively; otherwise each part enters its filter
    as a run of its own (valid, more conservative)."""
    party = check_party(party)
    if party.name not in layout.names:
        raise ValidationError(f"party {party.name!r} is not in the layout ({', '.join(layout.names)})")
    info = layout.party(party.name)
    if party.X.shape != (layout.n_rows, info.n_columns) or party.holds_label != info.holds_label:
        raise ValidationError(f"party {party.name!r} holds X {party.X.shape} and {'a' if party.holds_label else 'no'} label; the layout "
                              f"says ({layout.n_rows}, {info.n_columns}) and {'a' if info.holds_label else 'no'} label")
    party = protocol.prepare(party)
    box = mailbox if isinstance(mailbox, Mailbox) else AbortWatchingMailbox(mailbox)
    acct = make_accountant(accountant, budget.delta)
    plan = protocol.build_plan(layout, budget)
    calibrated = plan.allocate(budget, accountant=acct, **protocol.allocation())
    part = split_plan(calibrated, layout, acct).get(party.name)
    if part is None:
        raise ValidationError(f"party {party.name!r} releases nothing in this protocol")
    digest = protocol.digest(layout)
    if ledger is not None:
        check_ledger_reuse(calibrated, {party.name: ledger}, project)
    session = PartySession(party.name, part, ledger or Ledger(part.budget, accountant=acct, relation=part.relation), random_state,
                           protocol=protocol, digest=digest, data_shape=party.X.shape, allow_uncertified=allow_uncertified,
                           message_reports=True, project=None if budget.is_infinite else project)
    kw = {"protocol": protocol.name, "version": protocol.version}
    state = protocol.initial_state(party.name, layout)
    sent: list[PartyMessage] = []
    received: dict[str, PartyMessage] = {}
    with session:
        try:
            for stage in protocol.schedule(layout):
                for action in stage.actions:
                    if action.party != party.name:
                        continue
                    inbox = {mid: _checked(box.fetch(mid, **kw), digest, party.name) for mid in action.reads}
                    received.update(inbox)
                    if protocol.has_precheck(action):
                        protocol.precheck(action, party, state, inbox)
                    result = protocol.act(action, party, state, inbox, session.issue(action))
                    state = result.state
                    for message in session.complete(action, stage.index, result):
                        box.post(message)
                        sent.append(message)
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


__all__ = ["AbortWatchingMailbox", "PartyOutcome", "run_party", "message_id"]
