"""``privsdr fsir config|client|server``: federated SIR across sites."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..accounting import Budget, Ledger
from ..datasets import load_csv
from ._common import Parser, budget_options


def _fsir_config(args: argparse.Namespace) -> int:
    from ..federated import FSIRConfig

    config = FSIRConfig(bound=args.bound, norm=args.norm, cut_points=args.cut_points, classes=args.classes,
                        mechanism=args.mechanism, cov_mechanism=args.cov_mechanism, calibration=args.calibration,
                        n_directions=args.n_directions)
    Path(args.out).write_text(config.to_json())
    print(f"wrote {args.out} (configuration digest {config.digest()}); give it to every client and to the server")
    return 0


def _fsir_client(args: argparse.Namespace) -> int:
    from ..federated import FSIRConfig, client_message

    config = FSIRConfig.from_json(Path(args.config).read_text())
    X, y, names = load_csv(args.data, target=args.target, columns=args.columns)
    ledger = Ledger.open(args.journal) if args.journal else None
    message = client_message(X, y, config, Budget(args.epsilon, args.delta), client_id=args.client_id, ledger=ledger)
    message.save(args.out)
    print(message.report.summary())
    print(f"wrote {args.out}: n = {message.n}, p = {message.p}, H = {message.n_slices}; upload it to the server")
    return 0


def _fsir_server(args: argparse.Namespace) -> int:
    from ..federated import ClientMessage, FSIRConfig, merge

    config = FSIRConfig.from_json(Path(args.config).read_text())
    messages = [ClientMessage.load(path) for path in args.messages]
    result = merge(messages, config, psd_floor=args.psd_floor)
    if args.json:
        print(json.dumps({"directions": result.directions.tolist(), "n_total": result.n_total, "privacy": result.privacy}, indent=2, default=str))
        return 0
    np.set_printoptions(precision=4, suppress=True)
    print(f"merged {len(messages)} clients, N = {result.n_total}; {result.n_directions} direction(s) (columns):")
    print(result.directions)
    per = result.privacy["per_record"]
    print(f"privacy per record ({result.privacy['status']}): epsilon = {per['epsilon']:.4g}, delta = {per['delta']:.3g} "
          f"-- {result.privacy['composition']}")
    return 0



def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fsir = sub.add_parser("fsir", help="federated SIR: a shared configuration, client uploads, the server merge",
                          description="Clients compute private uploads from their own CSV with `fsir client`; the server "
                          "merges the upload files with `fsir server`. Everything after an upload is post-processing.")
    fsub = fsir.add_subparsers(dest="fsir_command", required=True, metavar="ACTION", parser_class=Parser)
    fconf = fsub.add_parser("config", help="write the public configuration every client and the server share")
    fconf.add_argument("out")
    fconf.add_argument("--bound", type=float, required=True, help="public truncation: |x_ij| <= R (linf) or ||x|| <= C (l2)")
    fconf.add_argument("--norm", choices=("linf", "l2"), default="linf")
    fconf.add_argument("--cut-points", type=float, nargs="+", default=None, help="public slice boundaries for a continuous y")
    fconf.add_argument("--classes", type=float, nargs="+", default=None, help="the classes of a categorical y")
    fconf.add_argument("--mechanism", choices=("iid", "vgm", "vgm_two_stage", "none"), default="iid")
    fconf.add_argument("--cov-mechanism", choices=("modsulq", "analyze_gauss", "none"), default="analyze_gauss")
    fconf.add_argument("--calibration", choices=("classical", "thm3_exact", "paper_approx", "analytic"), default="analytic")
    fconf.add_argument("--n-directions", type=int, default=1)
    fconf.set_defaults(func=_fsir_config)
    fcl = fsub.add_parser("client", help="compute one client's private upload from its own CSV")
    fcl.add_argument("--config", required=True)
    fcl.add_argument("--data", required=True)
    fcl.add_argument("--target", required=True)
    fcl.add_argument("--columns", nargs="+", default=None)
    fcl.add_argument("--client-id", required=True)
    budget_options(fcl)
    fcl.add_argument("--journal", default=None, help="charge this client's ledger journal")
    fcl.add_argument("--out", required=True, help="the upload file to send to the server")
    fcl.set_defaults(func=_fsir_client)
    fsv = fsub.add_parser("server", help="merge client uploads into the SDR directions")
    fsv.add_argument("messages", nargs="+")
    fsv.add_argument("--config", required=True)
    fsv.add_argument("--psd-floor", type=float, default=None, help="floor the merged second moment's eigenvalues (post-processing)")
    fsv.add_argument("--json", action="store_true")
    fsv.set_defaults(func=_fsir_server)

