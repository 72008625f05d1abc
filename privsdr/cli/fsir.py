"""``privsdr fsir config|client|server``: federated SIR across sites."""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

import numpy as np

from ..accounting import Budget
from ..datasets import load_csv
from ..errors import ValidationError
from ._common import (
    FORMATTER,
    Outputs,
    Parser,
    budget_options,
    distinct,
    finite_float,
    input_file,
    load_bounds,
    open_ledger,
    positive_int,
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
        outputs.commit("config", config.to_json())
    print(f"wrote {args.out} (configuration digest {config.digest()}); give it to every client and to the server")
    if config.mechanism in ("vgm", "none"):
        print(f"note: mechanism {config.mechanism!r} is not certified; clients and the server must pass --allow-uncertified")
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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fsir = sub.add_parser("fsir", help="federated SIR: a shared configuration, client uploads, the server merge",
                          formatter_class=FORMATTER,
                          description="Clients compute private uploads from their own CSV with `fsir client`; the server "
                          "merges the upload files with `fsir server`. Everything after an upload is post-processing. "
                          "Uncertified configurations (mechanism vgm or none) need --allow-uncertified on every side.")
    fsub = fsir.add_subparsers(dest="fsir_command", required=True, metavar="ACTION", parser_class=Parser)
    fconf = fsub.add_parser("config", help="write the public configuration every client and the server share")
    fconf.add_argument("out", help="the configuration file to write (.json)")
    fconf.add_argument("--bound", type=finite_float, default=None, help="public truncation: |x_ij| <= R (linf) or ||x|| <= C (l2)")
    fconf.add_argument("--bounds", default=None, metavar="FILE.json", help="per-column bounds (linf), with --columns")
    fconf.add_argument("--columns", nargs="+", default=None, help="the feature columns, in order, every client reads")
    fconf.add_argument("--norm", choices=("linf", "l2"), default="linf")
    fconf.add_argument("--cut-points", type=finite_float, nargs="+", default=None, help="public slice boundaries for a continuous y")
    fconf.add_argument("--classes", type=finite_float, nargs="+", default=None, help="the classes of a categorical y")
    fconf.add_argument("--mechanism", choices=("iid", "vgm", "vgm_two_stage", "none"), default="iid")
    fconf.add_argument("--cov-mechanism", choices=("modsulq", "analyze_gauss", "none"), default="analyze_gauss")
    fconf.add_argument("--calibration", choices=("classical", "thm3_exact", "paper_approx", "analytic"), default="analytic")
    fconf.add_argument("--n-directions", type=positive_int, default=1)
    fconf.add_argument("--center", nargs="+", default="dp", metavar="dp|none|C",
                       help="dp: centre at a DP mean (each client also releases its slice proportions); none: data assumed "
                       "centred (the paper); numbers: a public centre subtracted before truncation, one per column or one for all "
                       "(the DP correction still applies)")
    fconf.add_argument("--center-share", type=finite_float, default=0.1,
                       help="the share of each client's budget spent on the slice proportions (with --center dp or numbers)")
    fconf.set_defaults(func=_fsir_config)
    fcl = fsub.add_parser("client", help="compute one client's private upload from its own CSV")
    fcl.add_argument("--config", required=True)
    fcl.add_argument("--data", required=True)
    fcl.add_argument("--target", required=True)
    fcl.add_argument("--columns", nargs="+", default=None, help="feature columns (default: the configuration's, else all but the target)")
    fcl.add_argument("--client-id", required=True)
    budget_options(fcl, what="this client's upload")
    fcl.add_argument("--journal", default=None, help="charge this client's ledger journal")
    fcl.add_argument("--out", required=True, help="the upload file to send to the server (.fsir)")
    fcl.add_argument("--allow-uncertified", action="store_true", help="upload a claimed (vgm) or non-private (none) release")
    fcl.set_defaults(func=_fsir_client)
    fsv = fsub.add_parser("server", help="merge client uploads into the SDR directions")
    fsv.add_argument("messages", nargs="+")
    fsv.add_argument("--config", required=True)
    fsv.add_argument("--psd-floor", type=finite_float, default=None, help="floor the merged second moment's eigenvalues (post-processing)")
    fsv.add_argument("--allow-uncertified", action="store_true", help="merge uploads whose guarantee is claimed or none")
    fsv.add_argument("--out", default=None, metavar="RESULT.json", help="also write the result as JSON")
    fsv.add_argument("--json", action="store_true", help="print the result as JSON")
    fsv.set_defaults(func=_fsir_server)
