"""``privsdr vertical ... --secure``: regression on vertically partitioned data from X^T X and X^T y computed inside
a secure computation (``SecureVerticalRegression``; MPyC, one process per party on 127.0.0.1).

    privsdr vertical config shared.json --secure --party alice=5 bob=5 --rows N --label alice --epsilon 1 \\
        --row-bound 3 --label-bound 10            # ports for every party on 127.0.0.1 are written into the file
    privsdr vertical helper --config shared.json  # two data parties need a helper (it holds no data)
    privsdr vertical party --secure --config shared.json --name alice --data alice.csv --target y
    privsdr vertical party --secure --config shared.json --name bob --data bob.csv
    privsdr vertical fit --secure --config shared.json --data alice=alice.csv bob=bob.csv --target y   # all here

Contract: the configuration file is ``{"format": "privsdr.vertical-secure-run", "estimator", "accountant", "budget",
"layout", "ports"}``; every party reads the same file. Each party spends exactly the configured budget on its own
journal (``--journal``; one with less left is refused before the run), and only once every party has confirmed that
it holds the same public configuration (``SecureVerticalRegression.fit_party``); every party ends with the same
opened statistics and prints the same model.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..accounting import Budget, Ledger
from ..errors import PrivsdrError, ValidationError
from ._common import REPORT_SUFFIXES, Outputs, check_output, commit_report, open_ledger, write_report
from ._parties import load_parties, load_party, read_tagged

SECURE = "privsdr.vertical-secure-run"
HELPER_CHOICES = {"auto": "auto", "yes": True, "no": False}


def estimator_params(args: argparse.Namespace, row_bound: Any) -> dict[str, Any]:
    if args.row_bound is None or args.label_bound is None:
        raise ValidationError("--secure needs the public bounds --row-bound (per party) and --label-bound")
    return {"row_bound": row_bound, "label_bound": args.label_bound, "y_center": args.y_center, "n_components": args.components,
            "colluders": args.colluders, "helper": args.helper, "timeout": args.timeout}


def write_config(args: argparse.Namespace, row_bound: Any, budget: Budget, layout: Any) -> None:
    """``vertical config --secure``: the public configuration, with a free port on 127.0.0.1 for every party."""
    from ..secure.launch import free_ports

    if budget.is_infinite:
        raise ValidationError("--secure is certified only: give --epsilon (and --delta)")
    params = estimator_params(args, row_bound)
    est = _estimator(params, budget, None)
    if layout is not None:
        parties = est.parties_for(layout)
        est.build_plan({p.name: p.n_columns for p in layout.parties})  # checks every public parameter now
        ports = list(args.ports) if args.ports else free_ports(len(parties))
        if len(ports) != len(parties):
            raise ValidationError(f"--ports needs one port per party ({', '.join(parties)}), got {len(ports)}")
        if any(not 1 <= int(port) <= 65535 for port in ports) or len(set(ports)) != len(ports):
            raise ValidationError(f"--ports needs {len(parties)} distinct ports in 1..65535 (one per party), got {ports}")
    else:
        parties, ports = [], []
    shared = {"format": SECURE, "estimator": params, "accountant": args.accountant,
              "budget": {"epsilon": budget.epsilon, "delta": budget.delta}, "layout": None if layout is None else layout.to_dict(),
              "ports": ports}
    Path(args.out).write_text(json.dumps(shared, indent=2))
    where = f" (parties {', '.join(parties)} on 127.0.0.1 ports {', '.join(map(str, ports))})" if layout else ""
    print(f"wrote {args.out}: give it to every party; secure vertical regression{where}")


def read_config(path: str) -> dict[str, Any]:
    from ..vertical import Layout

    shared = read_tagged(path, SECURE, "secure vertical", " (write one with `privsdr vertical config ... --secure`)")
    shared["budget"] = Budget(shared["budget"]["epsilon"], shared["budget"]["delta"])
    shared["layout"] = None if shared.get("layout") is None else Layout.from_dict(shared["layout"])
    return shared


def _estimator(params: dict[str, Any], budget: Budget, ledger: Ledger | None, accountant: str = "best") -> Any:
    from ..vertical.secure_regression import SecureVerticalRegression

    return SecureVerticalRegression(**{**params, "helper": HELPER_CHOICES.get(params["helper"], params["helper"])},
                                    budget=budget, ledger=ledger, accountant=accountant)  # the configured budget, exactly


@contextlib.contextmanager
def _journal(journal: str | None, budget: Budget, accountant: str) -> Iterator[Callable[[], Ledger | None]]:
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


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _can_listen(port: int) -> None:
    """This party's port on 127.0.0.1 takes a listening socket now (as MPyC's does: address reuse on)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", int(port)))
        except OSError as exc:
            raise ValidationError(f"port {port} on 127.0.0.1 is taken ({exc.strerror}): this party cannot listen there, so "
                                  "the other parties will wait for it until their timeout; nothing was charged anywhere; "
                                  "free the port or write a new configuration") from None


def party(args: argparse.Namespace, name: str, holds_data: bool) -> int:
    """``vertical party --secure`` (``holds_data``) and ``vertical helper``: run this party's process only. SIGTERM
    and SIGHUP end it through every ``with`` block (``launch.interrupts``)."""
    from ..secure.launch import interrupts

    with interrupts():
        return _party(args, name, holds_data)


def _party(args: argparse.Namespace, name: str, holds_data: bool) -> int:
    """Pre-flight (issue 36), then the run: this party's report path, journal, data and port are checked before it
    joins the agreement; a failure among them tells the other parties this party is not ready (every party then
    stops with nothing charged), except a taken port (it cannot join at all: the others time out, nothing charged)."""
    shared = read_config(args.config)
    layout = shared["layout"]
    if layout is None or not shared["ports"]:
        raise ValidationError("the configuration has no layout: write it with `privsdr vertical config ... --secure --party NAME=N ... "
                              "--rows N --label NAME`")
    budget, accountant = shared["budget"], shared["accountant"]
    est = _estimator(shared["estimator"], budget, None, accountant)
    parties, ports = est.parties_for(layout), list(shared["ports"])
    if not holds_data and name not in parties:
        raise ValidationError("this configuration has no helper: its parties are " + ", ".join(parties))
    if name in parties and parties.index(name) > 0:  # MPyC's party 0 only dials the others; every other party listens
        _can_listen(ports[parties.index(name)])
    with Outputs() as outputs, _journal(args.journal, budget, accountant) as open_journal:
        what = "--report"
        try:  # the report's path is checked and reserved before the run (issue 33)
            report_path = outputs.add(getattr(args, "report", None), "--report", REPORT_SUFFIXES)
            what = "--journal"
            ledger = open_journal()
            what = "--data"
            data = load_party(name, args.data, args.target, args.columns) if holds_data else None
        except (PrivsdrError, OSError, ValueError) as exc:
            if name in parties:
                est.decline_party(layout, name, ports, f"its {what} cannot be used ({type(exc).__name__}; its own output says why)",
                                  _progress)
                if exc.args and isinstance(exc.args[0], str):
                    exc.args = (f"{exc.args[0]}; this party told the others it is not ready: nothing was charged anywhere",
                                *exc.args[1:])
            raise
        est.ledger = ledger
        est.fit_party(layout, name, data, ports, progress=_progress)
        _print_result(args, est, name)
        commit_report(outputs, est.privacy_report_, report_path)
    return 0


def fit(args: argparse.Namespace) -> int:
    """``vertical fit --secure``: every party (and the helper) as its own process on this machine."""
    from ..secure.launch import interrupts

    with interrupts():
        return _fit(args)


def _fit(args: argparse.Namespace) -> int:
    shared = read_config(args.config)
    budget, accountant = shared["budget"], shared["accountant"]
    est = _estimator(shared["estimator"], budget, None, accountant)
    est.fit(load_parties(args.data, args.target))
    _print_result(args, est, None)
    return 0


def _print_result(args: argparse.Namespace, est: Any, name: str | None) -> None:
    report = est.privacy_report_
    columns = [c for p in est.layout_.parties for c in (p.columns or [f"{p.name}.x{j}" for j in range(p.n_columns)])]
    if getattr(args, "json", False):
        print(json.dumps({"coefficients": dict(zip(columns, est.coef_.tolist(), strict=True)), "intercept": est.intercept_,
                          "party": name, "report": report.to_dict()}, indent=2, default=str))
    else:
        print(report.summary())
        print("\nwhat each party sees (nothing else is revealed to anyone):")
        for who, what in report.trust_model["what_each_party_sees"].items():
            print(f"  {who:<12} {what}")
        print("\npublished coefficients:")
        for col, value in zip(columns, est.coef_, strict=True):
            print(f"  {col:<24} {value: .6g}")
        print(f"  {'(intercept)':<24} {est.intercept_: .6g}")
    if getattr(args, "report_dir", None):
        Path(args.report_dir).mkdir(parents=True, exist_ok=True)
        write_report(report, str(Path(args.report_dir) / "report.html"))


def add_config_options(conf: argparse.ArgumentParser) -> None:
    conf.add_argument("--secure", action="store_true",
                      help="secure vertical regression: X^T X and X^T y computed inside MPyC, released once (central rate); "
                      "needs --row-bound, --label-bound, --epsilon")
    conf.add_argument("--colluders", type=int, default=1, help="--secure: collusion threshold t (t < parties/2; default 1)")
    conf.add_argument("--helper", choices=tuple(HELPER_CHOICES), default="auto",
                      help="--secure: add a helper party that holds no data (auto: when fewer than 3 data parties)")
    conf.add_argument("--components", type=int, default=None, help="--secure: fit PLS with this many components (default: ridge)")
    conf.add_argument("--timeout", type=float, default=120.0, help="--secure: seconds a party waits for the others (default 120)")
    conf.add_argument("--y-center", type=float, default=0.0, help="public centre of y: labels are clipped to centre +- --label-bound (--secure and DP-BCD)")
    conf.add_argument("--ports", nargs="+", type=int, default=None,
                      help="--secure: one port on 127.0.0.1 per party in MPyC's order, helper first (default: free ports now)")


def add_helper(vsub: Any) -> None:
    helper = vsub.add_parser("helper", help="run the helper of a --secure fit (it holds no data, adds a noise share, sees shares only)")
    helper.add_argument("--config", required=True, help="the shared configuration (from `config --secure`)")
    helper.add_argument("--journal", default=None, help="charge this ledger journal (the helper's own account of the run)")
    helper.add_argument("--report", default=None, help="write the privacy report (.html, .md or .json)")
    helper.add_argument("--json", action="store_true", help="print the result as JSON")
    helper.set_defaults(func=lambda args: party(args, "helper", False), data=None, target=None, columns=None)
