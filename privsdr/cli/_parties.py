"""What ``privsdr vertical`` and ``privsdr pride`` share: the public configuration file every party gets,
each party's CSV, what a party sent, coefficients, and the per-party reports of a simulated run.

Contract: the configuration file is ``{"format", "config", "accountant", "budget", "layout", "addresses", "tls"}`` with
a protocol-specific ``format`` tag; reading it refuses anything else with one clear line. ``addresses`` (one
``host:port`` per party of the layout, or null) selects the network transport (``privsdr.parties.transport``: mutual
TLS unless ``tls`` is false, which only loopback addresses allow); without them the parties share a ``--mailbox``
folder. The parties compare the digest of the whole file (``shared_digest``) when they connect.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .._json import parse_json
from ..accounting import Budget
from ..datasets import load_csv
from ..errors import ValidationError
from ._common import positive_float, purpose_option, write_report


def write_shared(path: str, tag: str, config: Any, accountant: str, budget: Budget, layout: Any,
                 addresses: list[str] | None = None, tls: bool = True) -> None:
    shared = {"format": tag, "config": json.loads(config.to_json()), "accountant": accountant,
              "budget": None if budget.is_infinite else {"epsilon": budget.epsilon, "delta": budget.delta},
              "layout": None if layout is None else layout.to_dict(), "addresses": addresses, "tls": bool(tls)}
    Path(path).write_text(json.dumps(shared, indent=2))


def configured_addresses(args: argparse.Namespace, layout: Any) -> tuple[list[str] | None, bool]:
    """``config``'s ``--addresses HOST:PORT ...`` (or ``--ports`` on 127.0.0.1) for the layout's parties, checked (ports
    1..65535, no address twice), and whether the channels are TLS: plaintext (``--plaintext``) only on loopback."""
    from ..network.addresses import check_addresses, is_loopback

    given = args.addresses or ([f"127.0.0.1:{port}" for port in args.ports] if args.ports else None)
    if args.addresses and args.ports:
        raise ValidationError("give --addresses HOST:PORT ... or --ports PORT ... (on 127.0.0.1), not both")
    if not given:
        if args.plaintext:
            raise ValidationError("--plaintext is for network runs: give --addresses (without them the parties share a --mailbox folder)")
        return None, True
    if layout is None:
        raise ValidationError("--addresses need the layout (--party NAME=N ... --rows N): one address per party, in its order")
    addresses = list(check_addresses(given, list(layout.names)))
    remote = [a for a in addresses if not is_loopback(a)]
    if args.plaintext and remote:
        raise ValidationError(f"--plaintext with network addresses ({', '.join(remote)}): plaintext channels are allowed on "
                              "loopback only; between hosts the parties use mutual TLS (`privsdr secure keys`)")
    return addresses, not args.plaintext


def add_network_options(conf: argparse.ArgumentParser) -> None:
    """``config``'s network options (``vertical config`` shares them with ``--secure``)."""
    conf.add_argument("--addresses", nargs="+", default=None, metavar="HOST:PORT",
                      help="one address per party in the layout's order (--secure: MPyC's order, helper first); each party listens "
                      "on its own and dials the others over mutual TLS (`privsdr secure keys`, `party --certs`). Without it: "
                      "a --mailbox folder (--secure: free ports on 127.0.0.1)")
    conf.add_argument("--ports", nargs="+", type=int, default=None,
                      help="one port on 127.0.0.1 per party, in the same order (instead of --addresses)")
    conf.add_argument("--plaintext", action="store_true",
                      help="plaintext TCP between the parties instead of mutual TLS (mailbox protocols: loopback addresses only; "
                      "--secure: the reports say so)")


def network_note(addresses: list[str] | None, tls: bool, layout: Any) -> str:
    """What ``config`` says about the channels it wrote."""
    if not addresses:
        return "; messages through a shared --mailbox folder"
    where = ", ".join(f"{n} at {a}" for n, a in zip(layout.names, addresses, strict=True))
    return f"; {where}; " + ("mutual TLS: every party needs its certificate folder (`privsdr secure keys DIR --parties "
                             + " ".join(layout.names) + "`)" if tls else "plaintext TCP on loopback (--plaintext)")


def shared_digest(shared: dict[str, Any]) -> str:
    """The digest of a whole configuration (protocol, budget, layout, addresses, tls): canonical JSON, SHA-256."""
    import hashlib

    return hashlib.sha256(json.dumps(shared, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_tagged(path: str, tag: str, what: str, hint: str = "") -> dict[str, Any]:
    """The JSON object of a configuration file whose ``format`` is ``tag``; one clear line for anything else."""
    try:
        shared = parse_json(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError(f"not a privsdr {what} configuration: {exc}") from None
    if not isinstance(shared, dict) or shared.get("format") != tag:
        raise ValidationError(f"{path} is not a privsdr {what} configuration{hint}")
    return shared


def read_shared(path: str, tag: str, config_class: Any, what: str, hint: str = "") -> tuple[Any, Budget, str, Any]:
    """(config, budget, accountant, layout or None) of a file written by ``write_shared`` with ``tag``."""
    from ..vertical import Layout

    shared = read_tagged(path, tag, what, hint)
    config = config_class.from_json(json.dumps(shared["config"]))
    budget = Budget.infinite() if shared["budget"] is None else Budget(shared["budget"]["epsilon"], shared["budget"]["delta"])
    layout = None if shared.get("layout") is None else Layout.from_dict(shared["layout"])
    return config, budget, shared.get("accountant", "best"), layout


def _has_column(path: str, column: str | None) -> bool:
    if column is None:
        return False
    with open(path, newline="") as fh:
        header = next(csv.reader(fh), [])
    return column in [h.strip() for h in header]


def load_party(name: str, path: str, target: str | None, columns: list[str] | None = None) -> Any:
    """One party from its CSV; it holds y when its header has the ``target`` column."""
    from ..vertical import Party

    label = target if _has_column(path, target) else None
    X, y, names = load_csv(path, target=label, columns=columns)
    return Party(name, X, y, names)


def load_parties(items: list[str], target: str | None) -> list[Any]:
    """The parties of ``--data NAME=FILE.csv ...``, in protocol order."""
    parties = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            raise ValidationError(f"--data takes NAME=FILE.csv, got {item!r}")
        parties.append(load_party(name, path, target))
    return parties


def sent_by_party(outcome: Any, status: Any) -> dict[str, Any]:
    """What one party's run sent, in the shape ``format_revealed`` prints; ``status(message)`` labels each."""
    from ..vertical import revealed_entry

    return {"revealed": [revealed_entry(m, status(m)) for m in outcome.sent]}


def print_coefficients(layout: Any, coef_blocks: dict[str, np.ndarray], as_json: bool, extra: dict[str, Any],
                       own: Any = None) -> None:
    if as_json:
        print(json.dumps({"coefficients": {k: v.tolist() for k, v in coef_blocks.items()}, **extra}, indent=2, default=str))
        return
    for info in layout.parties:
        names = (own.columns if own is not None and own.name == info.name else None) or info.columns or [f"x{j}" for j in range(info.n_columns)]
        print(f"{info.name}:")
        for col, value in zip(names, coef_blocks[info.name], strict=True):
            print(f"  {col:<24} {value: .6g}")


def write_run_reports(report_dir: str | None, outcome: Any) -> None:
    """One privacy report per party and ``protocol.json`` (what each revealed to whom) in ``report_dir``."""
    if not report_dir:
        return
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, report in outcome.reports.items():
        write_report(report, str(out / f"{name}.html"))
    (out / "protocol.json").write_text(json.dumps(outcome.privacy, indent=2, default=str))


def print_simulated_run(outcome: Any, as_json: bool) -> None:
    """The per-record line, what each party revealed to whom and each party's status (not with --json)."""
    from ..vertical import format_revealed, per_record_line

    if as_json:
        return
    print(per_record_line(outcome.privacy))
    print("\nwhat each party revealed to whom:\n" + format_revealed(outcome.privacy))
    for name, report in outcome.reports.items():
        print(f"\n[{name}] {report.status_line}")



def transport(args: argparse.Namespace, tag: str, layout: Any) -> Any:
    """Where this party's messages go: the network when the configuration has addresses (``NetworkMailbox``: its own
    certificates checked now, before anything is read or charged), else the ``--mailbox`` folder."""
    from ..parties.party_process import DEFAULT_TIMEOUT
    from ..parties.transport import NetworkMailbox, message_cap

    shared = read_tagged(args.config, tag, "party")
    if not shared.get("addresses"):
        if not args.mailbox:
            raise ValidationError("--mailbox is required (a folder every party can read and write), or write the configuration "
                                  "with --addresses to exchange the messages over the network")
        return args.mailbox
    if args.mailbox:
        raise ValidationError("the configuration gives every party an address: the messages go over the network, not through "
                          "--mailbox (drop it)")
    if args.name not in layout.names:
        raise ValidationError(f"party {args.name!r} is not in the layout ({', '.join(layout.names)})")
    tls = shared.get("tls", True) is not False  # no "tls": never plaintext
    return NetworkMailbox(args.name, dict(zip(layout.names, shared["addresses"], strict=True)), shared_digest(shared),
                          certificates=own_certificates(args.certs, args.name) if tls else None, tls=tls,
                          timeout=args.timeout or DEFAULT_TIMEOUT, max_message=message_cap(layout), progress=_progress(args.name))


def own_certificates(certs: str | None, name: str) -> Path | None:
    """This party's certificate folder: ``--certs DIR`` itself, or ``DIR/<name>`` when DIR is the folder
    ``privsdr secure keys`` wrote for every party."""
    if certs is None:
        return None
    folder = Path(certs)
    return folder / name if not any(folder.glob("party_*.crt")) and (folder / name).is_dir() else folder


def _progress(name: str) -> Any:
    return lambda line: print(f"[{name}] {line}", file=sys.stderr, flush=True)


def play_party(args: argparse.Namespace, protocol: Any, layout: Any, budget: Budget, accountant: str, tag: str) -> tuple[Any, Any]:
    """``party`` of a mailbox protocol: this party's CSV and journal, then its side of the run (``run_party``, with
    ``--timeout`` and progress lines on stderr, so that --json stays clean). SIGTERM and SIGHUP stop it as SIGINT does
    (``launch.interrupts``): the others are told, and its journal closes the run as failed. Returns (party, outcome)."""
    from ..secure.launch import interrupts

    with interrupts():
        return _play_party(args, protocol, layout, budget, accountant, tag)


def _play_party(args: argparse.Namespace, protocol: Any, layout: Any, budget: Budget, accountant: str, tag: str) -> tuple[Any, Any]:
    from ..accounting import Ledger
    from ..parties.party_process import post_abort
    from ..vertical import run_party

    box = transport(args, tag, layout)
    try:
        party = load_party(args.name, args.data, args.target, args.columns)
        ledger = Ledger.open(args.journal) if args.journal else None
    except Exception as exc:  # the others would wait for this party until their timeout
        post_abort(box, protocol, layout, args.name, exc)
        if hasattr(box, "close"):
            box.close(failed=True)
        raise
    outcome = run_party(protocol, party, layout, budget, box, ledger=ledger, accountant=accountant,
                        allow_uncertified=args.allow_uncertified, timeout=args.timeout, progress=_progress(args.name))
    if not isinstance(box, (str, Path)):
        outcome = attrs.evolve(outcome, report=with_channels(outcome.report, box))
    return party, outcome


def with_channels(report: Any, box: Any) -> Any:
    """The party's report with a note on how its messages travelled; plaintext also in the status line."""
    peers = ", ".join(f"{p} at {box.addresses[p]}" for p in box.peers)
    if box.tls:
        note = (f"channels: the messages went over mutual TLS to and from {peers}; every certificate was checked against the "
                "parties' CA and for the party it names, and the parties compared the whole configuration's digest first")
        return attrs.evolve(report, notes=[*report.notes, note])
    note = (f"channels: plaintext TCP on loopback with {peers} (asked for with --plaintext): neither encrypted nor "
            "authenticated, so any process of this machine could read the messages or pose as a party")
    return attrs.evolve(report, notes=[*report.notes, note], status_line=f"{report.status_line} (plaintext channels)")


def add_party_and_fit(sub: Any, party_fn: Any, fit_fn: Any, *, party_target_help: str, fit_target_help: str,
                      allow_help: str) -> tuple[Any, Any]:
    """The ``party`` and ``fit`` actions every vertical protocol command has (their options only differ in help)."""
    party = sub.add_parser("party", help="run one party from its own CSV (messages through --mailbox, or over mutual TLS to the "
                           "configured addresses)")
    party.add_argument("--config", required=True, help="the shared configuration (from `config`)")
    party.add_argument("--name", required=True, help="this party's name in the layout")
    party.add_argument("--data", required=True, help="this party's CSV (header row; the same rows in the same order as the others')")
    party.add_argument("--target", default=None, help=party_target_help)
    party.add_argument("--columns", nargs="+", default=None, help="this party's feature columns (default: the layout's)")
    party.add_argument("--mailbox", default=None, help="a folder every party can read and write (when the configuration has "
                       "no --addresses)")
    party.add_argument("--certs", default=None, metavar="DIR",
                       help="this party's certificate folder, or the folder `privsdr secure keys` wrote (needed when the "
                       "configuration has addresses and TLS; with --secure too)")
    party.add_argument("--journal", default=None, help="charge this party's ledger journal")
    party.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                       help="seconds to wait for any one message of the other parties before aborting the run for everyone "
                       "(default 300; with --secure the configuration's timeout applies)")
    party.add_argument("--report", default=None, help="write this party's privacy report (.html, .md or .json), with its "
                       "estimate, its data file's sha256 and the privacy unit in plain language")
    purpose_option(party)
    party.add_argument("--allow-uncertified", action="store_true", help=allow_help)
    party.add_argument("--json", action="store_true", help="print the result as JSON")
    party.set_defaults(func=party_fn)
    fit = sub.add_parser("fit", help="simulate every party in one process, each from its own CSV")
    fit.add_argument("--config", required=True, help="the shared configuration (from `config`)")
    fit.add_argument("--data", nargs="+", required=True, help="NAME=FILE.csv per party, in protocol order")
    fit.add_argument("--target", required=True, help=fit_target_help)
    fit.add_argument("--report-dir", default=None, help="write one privacy report per party and protocol.json here")
    fit.add_argument("--allow-uncertified", action="store_true", help=allow_help)
    fit.add_argument("--json", action="store_true", help="print the result as JSON")
    fit.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    fit.set_defaults(func=fit_fn)
    return party, fit
