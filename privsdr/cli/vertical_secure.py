"""``privsdr vertical ... --secure``: regression on vertically partitioned data from X^T X and X^T y computed inside
a secure computation (``SecureVerticalRegression``; MPyC, one process per party on 127.0.0.1).

    privsdr vertical config shared.json --secure --party alice=5 bob=5 --rows N --label alice --epsilon 1 \\
        --row-bound 3 --label-bound 10 [--addresses H:P ...]   # default: free ports on 127.0.0.1, in the file
    privsdr secure keys keys --config shared.json             # a CA, and keys/<party>/ for every party
    privsdr vertical helper --config shared.json --certs keys/helper  # two data parties need a helper (no data)
    privsdr vertical party --secure --config shared.json --name alice --data alice.csv --target y --certs keys/alice
    privsdr vertical party --secure --config shared.json --name bob --data bob.csv --certs keys/bob
    privsdr vertical fit --secure --config shared.json --data alice=alice.csv bob=bob.csv --target y   # all here

Contract: the configuration file is ``{"format": "privsdr.vertical-secure-run", "estimator", "accountant", "budget",
"layout", "addresses"}`` (``estimator`` holds ``addresses`` and ``tls`` too); every party reads the same file.
Channels are mutual TLS unless the configuration was written with ``--plaintext``; a party then needs its own
certificate folder (``--certs``). A file of an earlier version with ``ports`` reads as those ports on 127.0.0.1. Each party spends exactly the configured budget on its own
journal (``--journal``; one with less left is refused before the run), and only once every party has confirmed that
it holds the same public configuration (``SecureVerticalRegression.fit_party``); every party ends with the same
opened statistics and prints the same model.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ._common import Outputs, commit_report, write_report
from ._own_party import check_own_party, journal_opener, preflight, progress
from ._parties import add_network_options, load_parties, load_party, read_tagged

SECURE = "privsdr.vertical-secure-run"
HELPER_CHOICES = {"auto": "auto", "yes": True, "no": False}


def estimator_params(args: argparse.Namespace, row_bound: Any) -> dict[str, Any]:
    if args.row_bound is None or args.label_bound is None:
        raise ValidationError("--secure needs the public bounds --row-bound (per party) and --label-bound")
    return {"row_bound": row_bound, "label_bound": args.label_bound, "y_center": args.y_center, "n_components": args.components,
            "colluders": args.colluders, "helper": args.helper, "timeout": args.timeout}


def write_config(args: argparse.Namespace, row_bound: Any, budget: Budget, layout: Any) -> None:
    """``vertical config --secure``: the public configuration, with every party's address (checked: ports 1..65535,
    no address twice); default a free port on 127.0.0.1 for every party."""
    from ..network.addresses import check_addresses, is_loopback, loopback_addresses

    if budget.is_infinite:
        raise ValidationError("--secure is certified only: give --epsilon (and --delta)")
    if args.addresses and args.ports:
        raise ValidationError("give --addresses HOST:PORT ... or --ports PORT ... (on 127.0.0.1), not both")
    params = estimator_params(args, row_bound)
    est = _estimator(params, budget, None)
    addresses: tuple[str, ...] = ()
    if layout is not None:
        parties = est.parties_for(layout)
        est.build_plan({p.name: p.n_columns for p in layout.parties})  # checks every public parameter now
        given = args.addresses or ([f"127.0.0.1:{port}" for port in args.ports] if args.ports else None)
        addresses = check_addresses(given, parties) if given else loopback_addresses(len(parties))
    elif args.addresses or args.ports:
        raise ValidationError("--addresses need the layout (--party NAME=N ... --rows N --label NAME): one address per party")
    else:
        parties = []
    params = {**params, "addresses": list(addresses) or None, "tls": not args.plaintext}
    shared = {"format": SECURE, "estimator": params, "accountant": args.accountant,
              "budget": {"epsilon": budget.epsilon, "delta": budget.delta}, "layout": None if layout is None else layout.to_dict(),
              "addresses": list(addresses)}
    Path(args.out).write_text(json.dumps(shared, indent=2))
    where = f" (parties {', '.join(f'{p} at {a}' for p, a in zip(parties, addresses, strict=True))})" if layout else ""
    channels = ("plaintext TCP channels (--plaintext)" if args.plaintext else
                "mutual TLS: every party needs its certificate folder (`privsdr secure keys DIR --config " + str(args.out) + "`)")
    print(f"wrote {args.out}: give it to every party; secure vertical regression{where}; {channels}")
    if args.plaintext and not all(is_loopback(a) for a in addresses):
        print("note: plaintext to network addresses: anyone on the path reads every share, and anyone who reaches a party's "
              "address first can claim to be another party", file=sys.stderr)


def read_config(path: str) -> dict[str, Any]:
    from ..vertical import Layout

    shared = read_tagged(path, SECURE, "secure vertical", " (write one with `privsdr vertical config ... --secure`)")
    if "addresses" not in shared and shared.get("ports"):  # an earlier version's file: ports on 127.0.0.1
        shared["addresses"] = [f"127.0.0.1:{int(port)}" for port in shared["ports"]]
    shared["estimator"] = {**shared["estimator"], "addresses": shared.get("addresses") or None,
                           "tls": shared["estimator"].get("tls", True)}  # no "tls": never plaintext
    shared["budget"] = Budget(shared["budget"]["epsilon"], shared["budget"]["delta"])
    shared["layout"] = None if shared.get("layout") is None else Layout.from_dict(shared["layout"])
    return shared


def _helper(params: dict[str, Any]) -> Any:
    """The estimator's ``helper`` for a configuration's ``--helper`` choice (auto / yes / no, or a number)."""
    return HELPER_CHOICES.get(params["helper"], params["helper"])


def _estimator(params: dict[str, Any], budget: Budget, ledger: Ledger | None, accountant: str = "best", *,
               whole: bool = False) -> Any:
    """The configured run (the configured budget, exactly): one party's (``vertical.secure_run``: no scikit-learn, so a
    party process starts without it), or, ``whole``, the estimator that runs every party here (``vertical fit --secure``)."""
    run_class: type[Any]
    if whole:
        from ..vertical.secure_regression import SecureVerticalRegression as run_class
    else:
        from ..vertical.secure_run import SecureRegressionRun as run_class

    return run_class(**{**params, "helper": _helper(params)}, budget=budget, ledger=ledger, accountant=accountant)


def configured_parties(shared: dict[str, Any]) -> list[str]:
    """The MPyC parties of a configuration, as ``SecureRegressionRun.parties_for`` orders them, without building the
    run (``vertical.secure_parties``)."""
    from ..vertical.secure_parties import regression_parties

    params = shared["estimator"]
    return regression_parties([p.name for p in shared["layout"].parties], params["colluders"], _helper(params))[0]


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
    if layout is None or not shared.get("addresses"):
        raise ValidationError("the configuration has no layout: write it with `privsdr vertical config ... --secure --party NAME=N ... "
                              "--rows N --label NAME`")
    budget, accountant = shared["budget"], shared["accountant"]
    est = _estimator(shared["estimator"], budget, None, accountant)
    parties, addresses = est.parties_for(layout), list(shared["addresses"])
    if not holds_data and name not in parties:
        raise ValidationError("this configuration has no helper: its parties are " + ", ".join(parties))
    certificates = check_own_party(name, parties, addresses, shared["estimator"].get("tls", True), getattr(args, "certs", None))

    def decline(why: str) -> None:
        est.decline_party(layout, name, addresses, why, progress, certificates)

    with Outputs() as outputs, journal_opener(args.journal, budget, accountant) as open_journal:
        report_path, ledger, data = preflight(
            outputs, getattr(args, "report", None), open_journal,
            lambda: load_party(name, args.data, args.target, args.columns) if holds_data else None, decline)
        est.ledger = ledger
        est.fit_party(layout, name, data, addresses, progress=progress, certificates=certificates)
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
    est = _estimator(shared["estimator"], budget, None, accountant, whole=True)
    if getattr(args, "certs", None):
        est.set_params(certificates=args.certs)
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
    add_network_options(conf)


def add_helper(vsub: Any) -> None:
    helper = vsub.add_parser("helper", help="run the helper of a --secure fit (it holds no data, adds a noise share, sees shares only)")
    helper.add_argument("--config", required=True, help="the shared configuration (from `config --secure`)")
    helper.add_argument("--certs", default=None, metavar="DIR",
                        help="the helper's certificate folder (or the folder `privsdr secure keys` wrote); needed with TLS")
    helper.add_argument("--journal", default=None, help="charge this ledger journal (the helper's own account of the run)")
    helper.add_argument("--report", default=None, help="write the privacy report (.html, .md or .json)")
    helper.add_argument("--json", action="store_true", help="print the result as JSON")
    helper.set_defaults(func=lambda args: party(args, "helper", False), data=None, target=None, columns=None)
