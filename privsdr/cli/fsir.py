"""``privsdr fsir config|client|server|secure``: federated SIR across sites."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..accounting import Budget, Ledger
from ..accounting.accountants import ACCOUNTANT_NAMES
from ..datasets import load_csv
from ..errors import ValidationError
from ._common import (
    FORMATTER,
    REPORT_SUFFIXES,
    Outputs,
    Parser,
    budget_options,
    commit_report,
    distinct,
    filed,
    filing,
    finite_float,
    input_file,
    load_bounds,
    open_ledger,
    positive_int,
    purpose_option,
    read_text,
)

if TYPE_CHECKING:
    from ..federated import FSIRConfig

UPLOAD_SUFFIXES = (".fsir", ".npz")


def _fsir_config(args: argparse.Namespace) -> int:
    from ..federated import FSIRConfig

    if args.bound is not None and args.bounds is not None:
        raise ValidationError("give --bound R (the same for every column) or --bounds FILE.json (one per column), not both")
    if args.bound is None and args.bounds is None:
        raise ValidationError("fsir config needs --bound R (|x_ij| <= R for every column) or --bounds FILE.json with --columns")
    with Outputs() as outputs:
        outputs.add(args.out, "config", (".json",))
        bound, columns = args.bound, args.columns
        if args.bounds is not None:
            if not columns:
                raise ValidationError("--bounds needs --columns: the feature columns, in order, every client will read")
            bound = tuple(load_bounds(input_file(args.bounds, "--bounds"), columns))
        config = FSIRConfig(bound=bound, norm=args.norm, cut_points=args.cut_points, classes=args.classes,
                            mechanism=args.mechanism, cov_mechanism=args.cov_mechanism, calibration=args.calibration,
                            n_directions=args.n_directions, columns=columns, center=_center_arg(args.center),
                            center_share=args.center_share)
        document = json.loads(config.to_json())
        if args.secure:
            document[SECURE] = _secure_section(args, config)
        elif any(getattr(args, option) is not None for option in SECURE_ONLY):
            raise ValidationError("--sites, --epsilon, --delta, --colluders, --timeout, --addresses and --accountant are for --secure "
                                  "(a run with one party per host)")
        elif args.plaintext:
            raise ValidationError("--plaintext is for --secure")
        outputs.commit("config", json.dumps(document, indent=2))
    print(f"wrote {args.out} (configuration digest {config.digest()}); give it to every client and to the server")
    if args.secure:
        section = document[SECURE]
        where = ", ".join(f"{name} at {address}" for name, address in zip(_secure_parties(section), section["addresses"], strict=True))
        print(f"secure aggregation, one party per host: {where}; each runs `privsdr fsir party --config {args.out} --name NAME ...`; "
              + ("plaintext TCP channels (--plaintext)" if args.plaintext else
                 f"mutual TLS: every party needs its certificate folder (`privsdr secure keys DIR --config {args.out}`)"))
    if config.mechanism in ("vgm", "none"):
        print(f"note: mechanism {config.mechanism!r} is not certified; clients and the server must pass --allow-uncertified")
    return 0


SECURE = "secure"  #: the section of a configuration written with --secure: the public run every party shares
SECURE_ONLY = ("sites", "epsilon", "delta", "colluders", "timeout", "addresses", "accountant")


def _secure_section(args: argparse.Namespace, config: FSIRConfig) -> dict[str, Any]:
    """``fsir config --secure``: every site's public row count, the run's budget and accountant, t, the timeout and
    every party's address (the server's first; checked now: ports 1..65535, no address twice; default free ports on
    127.0.0.1), priced now so that a bad parameter is refused before anything is written."""
    from ..accounting import Ledger
    from ..federated.secure_fit import SERVER, check_secure_config, secure_plan, site_rows
    from ..network.addresses import check_addresses, is_loopback, loopback_addresses

    if config.columns is None:
        raise ValidationError("--secure needs --columns: the feature columns, in order, every site reads")
    if not args.sites:
        raise ValidationError("--secure needs --sites NAME=ROWS ...: every site's name and public row count, in order")
    sites: dict[str, int] = {}
    for item in args.sites:
        name, _, rows = item.partition("=")
        if not name or not rows.isdigit() or name in sites:
            raise ValidationError(f"--sites takes distinct NAME=ROWS items (ROWS a whole number), got {item!r}")
        sites[name] = int(rows)
    sites = site_rows(sites)
    epsilon = 1.0 if args.epsilon is None else args.epsilon
    budget = Budget.infinite() if epsilon == float("inf") else Budget(epsilon, 1e-6 if args.delta is None else args.delta)
    if budget.is_infinite:
        print("note: --epsilon inf turns the noise off: not private; every party must pass --allow-uncertified", file=sys.stderr)
    colluders = 1 if args.colluders is None else args.colluders
    accountant = args.accountant or "best"
    check_secure_config(config, len(sites), colluders)
    secure_plan(config, sum(sites.values()), len(config.columns), len(sites), colluders).allocate(
        budget, accountant=Ledger(budget, accountant=accountant).accountant, tight=True)  # every public parameter, checked now
    parties = [SERVER, *sites]
    addresses = check_addresses(args.addresses, parties) if args.addresses else loopback_addresses(len(parties))
    if args.plaintext and not all(is_loopback(a) for a in addresses):
        print("note: plaintext to network addresses: anyone on the path reads every share, and anyone who reaches a party's "
              "address first can claim to be another party", file=sys.stderr)
    timeout = 120.0 if args.timeout is None else args.timeout
    if not 0 < timeout < 3600:
        raise ValidationError(f"--timeout must be in (0, 3600) seconds, got {timeout:g}")
    return {"sites": sites, "budget": _budget_json(budget), "accountant": accountant,
            "colluders": colluders, "timeout": timeout, "addresses": list(addresses), "tls": not args.plaintext}


def _budget_json(budget: Budget) -> dict[str, Any]:
    return {"noise": "off"} if budget.is_infinite else {"epsilon": budget.epsilon, "delta": budget.delta}


def _budget_of(section: Mapping[str, Any]) -> Budget:
    budget = section["budget"]
    return Budget.infinite() if budget.get("noise") == "off" else Budget(budget["epsilon"], budget["delta"])


def _secure_parties(section: Mapping[str, Any]) -> list[str]:
    from ..federated.secure_fit import SERVER

    return [SERVER, *section["sites"]]


def read_secure(path: str) -> tuple[FSIRConfig, dict[str, Any]]:
    """The configuration and its secure section (``fsir config --secure``), or one clear refusal."""
    text = read_text(input_file(path, "--config"), "--config")
    from ..federated import FSIRConfig

    config = FSIRConfig.from_json(text)
    section = json.loads(text).get(SECURE)
    if not isinstance(section, dict) or not {"sites", "budget", "accountant", "colluders", "timeout", "addresses", "tls"} <= set(section):
        raise ValidationError(f"{path} has no secure run (its sites, budget and addresses): write it with `privsdr fsir config ... "
                              "--secure --sites NAME=ROWS ...`")
    return config, section


def _fsir_party(args: argparse.Namespace) -> int:
    """``fsir party``: run ONE party of a secure fit (the server, or one site with its own CSV) on this host. SIGTERM
    and SIGHUP end it through every ``with`` block (``secure.launch.interrupts``)."""
    from ..secure.launch import interrupts

    with interrupts():
        return _run_fsir_party(args)


def _run_fsir_party(args: argparse.Namespace) -> int:
    """Pre-flight (issue 36), then the run: this party's certificates, address, report path, journal and CSV are
    checked before it joins the agreement; a failure among the last three tells the others this party is not ready
    (every party stops with nothing charged anywhere)."""
    from ..federated.client import check_client_data
    from ..federated.secure_fit import SERVER, decline_secure_party, fit_secure_party
    from ._own_party import check_own_party, journal_opener, preflight, progress

    config, section = read_secure(args.config)
    assert config.columns is not None  # --secure wrote them
    name, columns = args.name, list(config.columns)
    parties, addresses, tls = _secure_parties(section), list(section["addresses"]), bool(section["tls"])
    budget, accountant = _budget_of(section), str(section["accountant"])
    run: dict[str, Any] = {"colluders": int(section["colluders"]), "timeout": float(section["timeout"]), "addresses": addresses, "tls": tls}
    if name == SERVER and args.data is not None:
        raise ValidationError("the server holds no data: run it without --data")
    if name != SERVER and (args.data is None or args.target is None):
        raise ValidationError(f"site {name!r} needs its CSV (--data) and its response column (--target)")
    certificates = check_own_party(name, parties, addresses, tls, args.certs)

    def decline(why: str) -> None:
        decline_secure_party(config, name, section["sites"], len(columns), budget, accountant, why, certificates=certificates,
                             progress=progress, **run)

    if budget.is_infinite and not args.allow_uncertified:
        decline("it did not accept a run with the noise off (--allow-uncertified)")
        raise ValidationError(f"{args.config} turns the noise off (not private): pass --allow-uncertified to take part; this "
                              "party told the others it is not ready: nothing was charged anywhere")

    def load() -> tuple[np.ndarray, np.ndarray] | None:
        if name == SERVER:
            return None
        X, y, _ = load_csv(input_file(args.data, "--data"), target=args.target, columns=columns)
        if y is None:
            raise ValidationError(f"{args.data} has no column {args.target!r}")
        return check_client_data(X, y, config, name)

    with Outputs() as outputs, journal_opener(args.journal, budget, accountant) as open_journal:
        out = outputs.add(args.out, "--out", (".json",))
        report_path, ledger, data = preflight(outputs, args.report, open_journal, load, decline)
        result = fit_secure_party(config, name, data, section["sites"], len(columns), budget,
                                  ledger if ledger is not None else Ledger(budget, accountant=accountant), certificates=certificates,
                                  n_directions=config.n_directions, allow_uncertified=args.allow_uncertified, progress=progress, **run)
        trust = result.report.trust_model
        document = {"party": name, "directions": result.directions.tolist(), "n_total": int(sum(section["sites"].values())),
                    "sites": dict(section["sites"]), "columns": columns, "center": result.center.tolist(),
                    "eigenvalues": result.eigenvalues.tolist(), "noise_error": result.noise_error,
                    "random_error": result.random_error, "trust_model": trust}
        if out is not None:
            outputs.commit("--out", json.dumps(document, indent=2, default=str) + "\n")
        commit_report(outputs, result.report, report_path)
    if args.json:
        print(json.dumps(document, indent=2, default=str))
        return 0
    np.set_printoptions(precision=4, suppress=True)
    print(result.report.summary())
    print(f"\nsecure aggregation of {len(section['sites'])} sites, N = {document['n_total']}, at party {name!r}; what each party sees:")
    for who, what in trust["what_each_party_sees"].items():
        print(f"  {who:<12} {what}")
    print(f"{result.n_directions} direction(s) (columns, unit length):")
    print(result.directions)
    print("centred at (public centre + DP mean):", result.center)
    if out is not None:
        print(f"wrote {out}")
    return 0


def _center_arg(values: str | list[str]) -> str | tuple[float, ...]:
    """``--center dp`` / ``--center none`` / ``--center C_1 ... C_p`` (a public centre, one value per column or one for all)."""
    values = [values] if isinstance(values, str) else values
    if len(values) == 1 and values[0] in ("dp", "none"):
        return values[0]
    try:
        numbers = tuple(float(v) for v in values)
    except ValueError:
        raise ValidationError(f"--center takes 'dp', 'none' or numbers (a public centre), got {' '.join(values)}") from None
    if not all(np.isfinite(numbers)):
        raise ValidationError("--center must be finite numbers")
    return numbers


def _load_config(path: str) -> FSIRConfig:
    from ..federated import FSIRConfig

    return FSIRConfig.from_json(read_text(input_file(path, "--config"), "--config"))


def _fsir_client(args: argparse.Namespace) -> int:
    from ..federated import client_message

    budget = Budget(args.epsilon, args.delta)
    with Outputs() as outputs:
        out = outputs.add(args.out, "--out", UPLOAD_SUFFIXES)
        data = input_file(args.data, "--data")
        distinct([("--config", args.config), ("--data", data), ("--journal", args.journal), ("--out", out)])
        config = _load_config(args.config)
        columns = args.columns
        if config.columns is not None:
            if columns is not None and list(columns) != list(config.columns):
                raise ValidationError(f"--columns differ from the configuration's columns {list(config.columns)}")
            columns = list(config.columns)
        ledger = open_ledger(args.journal)
        X, y, names = load_csv(data, target=args.target, columns=columns)
        if config.per_column and config.columns is None:
            raise ValidationError("this configuration has per-column bounds but no column names; recreate it with --columns")
        message = client_message(X, y, config, budget, client_id=args.client_id, ledger=ledger,
                                 allow_uncertified=args.allow_uncertified)
        outputs.commit("--out", message.to_bytes())
    print(message.report.summary())
    print(f"wrote {args.out}: n = {message.n}, p = {message.p}, H = {message.n_slices}; upload it to the server")
    return 0


def _fsir_server(args: argparse.Namespace) -> int:
    from ..federated import ClientMessage, merge

    with Outputs() as outputs:
        out = outputs.add(args.out, "--out", (".json",))
        paths = [input_file(p, "message") for p in args.messages]
        distinct([("--config", args.config), ("--out", out)] + [(f"message {p}", p) for p in paths])
        config = _load_config(args.config)
        messages = [ClientMessage.load(path) for path in paths]
        result = merge(messages, config, psd_floor=args.psd_floor, allow_uncertified=args.allow_uncertified)
        document = {"directions": result.directions.tolist(), "n_total": result.n_total, "clients": list(result.clients),
                    "columns": list(config.columns) if config.columns else None,
                    "center": {"choice": list(config.center) if isinstance(config.center, tuple) else config.center,
                               "location": None if result.center is None else result.center.tolist()},
                    "privacy": result.privacy}
        if out is not None:
            outputs.commit("--out", json.dumps(document, indent=2, default=str) + "\n")
    if args.json:
        print(json.dumps(document, indent=2, default=str))
        return 0
    np.set_printoptions(precision=4, suppress=True)
    print(f"merged {len(messages)} clients, N = {result.n_total}; {result.n_directions} direction(s) (columns, unit length):")
    print(result.directions)
    if config.centred:
        print("centred at (public centre + DP mean of the truncated rows):", result.center)
    else:
        print("not centred (center 'none': the data are assumed centred, as in the paper)")
    per = result.privacy["per_record"]
    print(f"privacy per record ({result.privacy['status']}): epsilon = {per['epsilon']:.4g}, delta = {per['delta']:.3g} "
          f"-- {result.privacy['composition']}")
    if out is not None:
        print(f"wrote {out}")
    return 0


def _fsir_secure(args: argparse.Namespace) -> int:
    """Every client's CSV aggregated securely: one MPyC process per client plus the server, each on its own address
    (default 127.0.0.1), over mutual TLS unless --plaintext. SIGTERM and SIGHUP end it through every ``with`` block, as
    SIGINT does (``secure.launch.interrupts``)."""
    from ..secure.launch import interrupts

    with interrupts():
        return _run_fsir_secure(args)


def _run_fsir_secure(args: argparse.Namespace) -> int:
    import attrs

    from ..federated import FederatedSIR, FSIRConfig

    budget = Budget(args.epsilon, args.delta)
    with Outputs() as outputs:
        out = outputs.add(args.out, "--out", (".json",))
        report_path = outputs.add(args.report, "--report", REPORT_SUFFIXES)
        paths = [input_file(p, "--data") for p in args.data]
        distinct([("--config", args.config), ("--journal", args.journal), ("--out", out), ("--report", report_path)]
                 + [(f"--data {p}", p) for p in paths])
        config = _load_config(args.config)
        if args.addresses is not None:  # checked now, before any file is read or anything charged
            from ..network.addresses import check_addresses

            check_addresses(args.addresses, ["server"] + [f"client-{k}" for k in range(len(paths))])
        columns = list(config.columns) if config.columns is not None else args.columns
        if config.columns is not None and args.columns is not None and list(args.columns) != columns:
            raise ValidationError(f"--columns differ from the configuration's columns {columns}")
        if config.per_column and config.columns is None:
            raise ValidationError("this configuration has per-column bounds but no column names; recreate it with --columns")
        clients: list[tuple[np.ndarray, np.ndarray]] = []
        for path in paths:
            X, y, _ = load_csv(path, target=args.target, columns=columns)
            if y is None:
                raise ValidationError(f"{path} has no column {args.target!r}")
            clients.append((X, y))
        ledger = open_ledger(args.journal)
        accepted = set(FederatedSIR().get_params())
        settings = {f.name: getattr(config, f.name) for f in attrs.fields(FSIRConfig) if f.name in accepted}
        est = FederatedSIR(**settings, budget=budget, ledger=ledger, aggregation="secure", colluders=args.colluders,
                           timeout=args.timeout, allow_uncertified=args.allow_uncertified, addresses=args.addresses,
                           tls=not args.plaintext, certificates=args.certs)
        est.fit(clients)
        report = est.privacy_report_
        assert report is not None
        document = {"directions": np.asarray(est.directions_).tolist(), "n_total": int(sum(len(y) for _, y in clients)),
                    "clients": {cid: str(path) for cid, path in zip(est.privacy_["clients"], paths, strict=True)},
                    "columns": columns, "center": np.asarray(est.center_).tolist(), "eigenvalues": np.asarray(est.eigenvalues_).tolist(),
                    "noise_error": est.noise_error_, "random_error": est.random_error_, "privacy": est.privacy_,
                    "released": est.released_.to_dict()}
        if out is not None:
            outputs.commit("--out", json.dumps(document, indent=2, default=str) + "\n")
        commit_report(outputs, filed(report, est, filing(args, None)), report_path)
    if args.json:
        print(json.dumps({k: v for k, v in document.items() if k != "released"}, indent=2, default=str))
        return 0
    np.set_printoptions(precision=4, suppress=True)
    print(report.summary())
    for cid, path in document["clients"].items():
        print(f"  {cid}: {path}")
    trust = est.privacy_["trust_model"]
    print(f"secure aggregation of {len(clients)} clients, N = {document['n_total']}: {len(trust['parties'])} MPyC parties, at most "
          f"{trust['collusion_threshold']} colluding; the server saw only the opened noisy sums")
    print(trust["assumptions"][2])
    print(f"{est.n_directions_} direction(s) (columns, unit length):")
    print(est.directions_)
    print("centred at (public centre + DP mean):", est.center_)
    print(f"noise error of the directions ~ {est.noise_error_:.3g} (a random subspace: {est.random_error_:.3g})")
    if out is not None:
        print(f"wrote {out}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fsir = sub.add_parser("fsir", help="federated SIR: a shared configuration, client uploads, the server merge",
                          formatter_class=FORMATTER,
                          description="Clients compute private uploads from their own CSV with `fsir client`; the server "
                          "merges the upload files with `fsir server`. Everything after an upload is post-processing. "
                          "`fsir secure` instead adds every client's sums inside a secure computation (MPyC) and releases them "
                          "once for all N rows: the central rate, no per-client noise. "
                          "Uncertified configurations (mechanism vgm or none) need --allow-uncertified on every side.")
    fsub = fsir.add_subparsers(dest="fsir_command", required=True, metavar="ACTION", parser_class=Parser)
    fconf = fsub.add_parser("config", help="write the public configuration every client and the server share")
    fconf.add_argument("out", help="the configuration file to write (.json)")
    fconf.add_argument("--bound", type=finite_float, default=None, help="public truncation: |x_ij| <= R (linf) or ||x|| <= C (l2)")
    fconf.add_argument("--bounds", default=None, metavar="FILE.json", help="per-column bounds (linf), with --columns")
    fconf.add_argument("--columns", nargs="+", default=None, help="the feature columns, in order, every client reads")
    fconf.add_argument("--norm", choices=("linf", "l2"), default="linf", help="how --bound reads: per entry (linf, default) or per row (l2)")
    fconf.add_argument("--cut-points", type=finite_float, nargs="+", default=None, help="public slice boundaries for a continuous y")
    fconf.add_argument("--classes", type=finite_float, nargs="+", default=None, help="the classes of a categorical y")
    fconf.add_argument("--mechanism", choices=("iid", "vgm", "vgm_two_stage", "none"), default="iid",
                       help="noise of the slice means: iid Gaussian (default, certified), vgm (the paper's, claimed), vgm_two_stage "
                       "(certified), none (not private)")
    fconf.add_argument("--cov-mechanism", choices=("modsulq", "analyze_gauss", "none"), default="analyze_gauss",
                       help="noise of the second moment (default analyze_gauss; none: not private)")
    fconf.add_argument("--calibration", choices=("classical", "thm3_exact", "paper_approx", "analytic"), default="analytic",
                       help="Gaussian calibration of the slice means (default analytic, the tightest)")
    fconf.add_argument("--n-directions", type=positive_int, default=1, help="number of directions K (default 1)")
    fconf.add_argument("--center", nargs="+", default="dp", metavar="dp|none|C",
                       help="dp: centre at a DP mean (each client also releases its slice proportions); none: data assumed "
                       "centred (the paper); numbers: a public centre subtracted before truncation, one per column or one for all "
                       "(the DP correction still applies)")
    fconf.add_argument("--center-share", type=finite_float, default=0.1,
                       help="the share of each client's budget spent on the slice proportions (with --center dp or numbers)")
    fconf.add_argument("--secure", action="store_true",
                       help="a secure run with one party per host (`fsir party`): needs --columns and --sites; writes the run's "
                       "budget and every party's address into the file")
    fconf.add_argument("--sites", nargs="+", default=None, metavar="NAME=ROWS",
                       help="--secure: every site's name and public row count, in order (N is their sum)")
    fconf.add_argument("--epsilon", type=float, default=None,
                       help="--secure: epsilon of the whole fit (default 1; inf: noise off, not private)")
    fconf.add_argument("--delta", type=float, default=None, help="--secure: delta of the whole fit (default 1e-6)")
    fconf.add_argument("--accountant", choices=ACCOUNTANT_NAMES, default=None, help="--secure: every party's accountant (default best)")
    fconf.add_argument("--colluders", type=positive_int, default=None, help="--secure: the collusion threshold t (default 1)")
    fconf.add_argument("--timeout", type=finite_float, default=None, help="--secure: seconds a party waits for the others (default 120)")
    fconf.add_argument("--addresses", nargs="+", default=None, metavar="HOST:PORT",
                       help="--secure: one address per party, the server's first, then each site's in --sites order (default: "
                       "free ports on 127.0.0.1)")
    fconf.add_argument("--plaintext", action="store_true", help="--secure: plaintext TCP instead of mutual TLS (the report says so)")
    fconf.set_defaults(func=_fsir_config)
    fcl = fsub.add_parser("client", help="compute one client's private upload from its own CSV")
    fcl.add_argument("--config", required=True, help="the shared configuration (from `fsir config`)")
    fcl.add_argument("--data", required=True, help="this client's CSV (header row)")
    fcl.add_argument("--target", required=True, help="the response column of the CSV")
    fcl.add_argument("--columns", nargs="+", default=None, help="feature columns (default: the configuration's, else all but the target)")
    fcl.add_argument("--client-id", required=True, help="this client's name (in its message and report)")
    budget_options(fcl, what="this client's upload")
    fcl.add_argument("--journal", default=None, help="charge this client's ledger journal")
    fcl.add_argument("--out", required=True, help="the upload file to send to the server (.fsir)")
    fcl.add_argument("--allow-uncertified", action="store_true", help="upload a claimed (vgm) or non-private (none) release")
    fcl.set_defaults(func=_fsir_client)
    fsv = fsub.add_parser("server", help="merge client uploads into the SDR directions")
    fsv.add_argument("messages", nargs="+", help="the clients' message files (.fsir)")
    fsv.add_argument("--config", required=True, help="the shared configuration (from `fsir config`)")
    fsv.add_argument("--psd-floor", type=finite_float, default=None, help="floor the merged second moment's eigenvalues (post-processing)")
    fsv.add_argument("--allow-uncertified", action="store_true", help="merge uploads whose guarantee is claimed or none")
    fsv.add_argument("--out", default=None, metavar="RESULT.json", help="also write the result as JSON")
    fsv.add_argument("--json", action="store_true", help="print the result as JSON")
    fsv.set_defaults(func=_fsir_server)
    fpa = fsub.add_parser("party", formatter_class=FORMATTER,
                          help="run ONE party of a secure fit on this host: the server, or one site with its own CSV",
                          description="A secure fit with one party per host: `fsir config --secure --sites NAME=ROWS ... "
                          "--addresses ...` writes the shared file, `privsdr secure keys DIR --config FILE` the certificates; then "
                          "every party runs `fsir party --config FILE --name NAME` on its own host (the server without data, each "
                          "site with --data and --target). Each checks its certificates, address, --report, --journal and CSV "
                          "first; a failure tells the others it is not ready and nothing is charged anywhere. Once every party "
                          "has agreed on the public job each charges its own journal, and every party ends with the same "
                          "opened noisy sums and directions (docs/hosts.md).")
    fpa.add_argument("--config", required=True, help="the shared configuration (from `fsir config --secure`)")
    fpa.add_argument("--name", required=True, help="this party: server, or one of the configuration's sites")
    fpa.add_argument("--data", default=None, help="a site's CSV (header row; the configuration's columns and --target)")
    fpa.add_argument("--target", default=None, help="a site's response column")
    fpa.add_argument("--certs", default=None, metavar="DIR",
                     help="this party's certificate folder (or the folder `privsdr secure keys` wrote: DIR/NAME is used)")
    fpa.add_argument("--journal", default=None, help="charge this party's ledger journal (created if missing)")
    fpa.add_argument("--report", default=None, help="write the privacy report (.md, .html or .json)")
    fpa.add_argument("--out", default=None, metavar="RESULT.json", help="write the directions as JSON")
    fpa.add_argument("--json", action="store_true", help="print the result as JSON")
    fpa.add_argument("--allow-uncertified", action="store_true", help="accept a non-private run (a configuration with noise off)")
    fpa.set_defaults(func=_fsir_party)
    fse = fsub.add_parser("secure", formatter_class=FORMATTER,
                          help="every client's CSV aggregated securely (MPyC party processes, mutual TLS), released once for all N rows",
                          description="Run the secure-aggregation fit on this machine: one MPyC process per client (reading its own "
                                      "CSV) plus the server, each listening on its own address (default: free ports on 127.0.0.1), "
                                      "over mutual TLS (a CA made for the run, unless --certs) unless --plaintext. The clients' sums are "
                                      "added inside the "
                                      "secure computation, each client adds its own discrete Gaussian share, and only the noisy sum "
                                      "is opened: the central rate for N rows. Needs the configuration's mechanism iid and no "
                                      "screening; the report states the trust model. Install the extra: pip install 'privsdr[secure]'.")
    fse.add_argument("--config", required=True, help="the shared configuration (from `fsir config`)")
    fse.add_argument("--data", nargs="+", required=True, help="one CSV per client (client-0, client-1, ... in this order)")
    fse.add_argument("--target", required=True, help="the response column of every client's CSV")
    fse.add_argument("--columns", nargs="+", default=None, help="feature columns (default: the configuration's, else all but the target)")
    budget_options(fse, what="the whole fit (one central release)")
    fse.add_argument("--colluders", type=positive_int, default=1,
                     help="the collusion threshold t: the noise of the clients outside any t meets the calibration (t < (K+1)/2)")
    fse.add_argument("--timeout", type=finite_float, default=60.0, help="seconds a party waits for the others (default 60)")
    fse.add_argument("--addresses", nargs="+", default=None, metavar="HOST:PORT",
                     help="one address per party: the server's first, then each client's in --data order (default: free ports "
                     "on 127.0.0.1)")
    fse.add_argument("--plaintext", action="store_true",
                     help="plaintext TCP between the parties instead of mutual TLS (the report says so)")
    fse.add_argument("--certs", default=None, metavar="DIR",
                     help="the folder `privsdr secure keys` wrote for the parties server client-0 client-1 ... (default with TLS "
                     "on loopback: a CA made for this run; required for any other address)")
    fse.add_argument("--journal", default=None, help="charge this ledger journal")
    fse.add_argument("--report", default=None, help="write the privacy report (.md, .html or .json)")
    purpose_option(fse, digest=False)
    fse.add_argument("--out", default=None, metavar="RESULT.json", help="write the result and the released sums as JSON")
    fse.add_argument("--json", action="store_true", help="print the result as JSON")
    fse.add_argument("--allow-uncertified", action="store_true", help="accept a non-private run (a configuration with noise off)")
    fse.set_defaults(func=_fsir_secure)
