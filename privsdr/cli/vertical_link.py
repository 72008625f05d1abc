"""``privsdr vertical link``: align this party's rows with the other parties' by an identifier column, privately.

    privsdr vertical link --parties alice=127.0.0.2:29355 bob=127.0.0.3:29356 --label alice --name alice \\
        --data alice_ids.csv --id-column id --out alice.csv --certs keys/alice

``--certs`` is this party's folder from ``privsdr secure keys`` (its certificate names the party; the CA's the same
for every party), or give ``--ca --cert --key`` of an organisation's own CA.

Every party runs it with the same ``--parties`` (in the same order), ``--label`` and identifier options; each writes
its own rows of the intersection, in one common order, without the identifier column: the ``--data`` of
``vertical party --secure``, N (the ``--rows`` of ``vertical config``) its number of rows. No budget is spent
(``privsdr.linkage``; what it reveals: docs/linkage.md).
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import ValidationError
from ._common import FORMATTER, check_output


def _link(args: argparse.Namespace) -> int:
    from ..linkage import LinkageConfig, Peer, link_csv, tls_contexts

    config = LinkageConfig(tuple(Peer.parse(p) for p in args.parties), args.label or Peer.parse(args.parties[0]).name,
                           casefold=args.casefold, pattern=args.id_pattern)
    if args.certs is not None:
        if args.ca or args.cert or args.key:
            raise ValidationError("give --certs DIR or --ca, --cert and --key, not both")
        args.ca, args.cert, args.key = _folder_files(args.certs)
    tls = [args.ca, args.cert, args.key]
    if any(tls) and not all(tls):
        raise ValidationError("TLS needs --ca, --cert and --key together")
    if all(tls) and args.plaintext:
        raise ValidationError("--plaintext and the TLS certificates exclude each other")
    contexts = tls_contexts(args.ca, args.cert, args.key) if all(tls) else (None, None)
    try:
        check_output(args.out, "--out", (".csv",))  # link_csv then reserves it before anything is sent
    except ValidationError as exc:  # the other parties hear it and stop at once
        from ..linkage.refusal import tell_others

        tell_others(exc, config, args.name, server_context=contexts[0], client_context=contexts[1],
                    allow_plaintext=args.plaintext, timeout=args.timeout)
        raise
    result = link_csv(args.data, args.id_column, args.out, config, args.name, server_context=contexts[0],
                      client_context=contexts[1], allow_plaintext=args.plaintext, timeout=args.timeout,
                      workers=args.workers)
    channel = "TLS, peers checked by certificate name" if result.tls else "PLAINTEXT (not encrypted, not authenticated)"
    if args.json:
        print(json.dumps({"party": args.name, "n": result.n, "set_sizes": result.set_sizes, "channels": channel,
                          "out": args.out, "revealed": result.revealed}, indent=2))
        return 0
    sizes = ", ".join(f"{k} {v}" for k, v in result.set_sizes.items())
    print(f"linked N = {result.n} rows (identifiers per party: {sizes}); channels: {channel}")
    print(f"wrote {args.out}: this party's {result.n} linked rows in the common order, without {args.id_column!r}")
    print("\nwhat the linkage revealed to this party (no budget spent; outside the DP guarantee of the fit):")
    for sentence in result.revealed:
        print(f"  - {sentence}")
    return 0


def _folder_files(certs: str) -> tuple[str, str, str]:
    """(CA, certificate, key) of one party's folder from ``privsdr secure keys`` (``DIR/<name>``)."""
    from pathlib import Path

    from ..network.certificates import CA_CERT

    folder = Path(certs)
    crts = sorted(folder.glob("party_*.crt"))
    if not folder.is_dir() or len(crts) != 1:
        raise ValidationError(f"--certs {certs}: not one party's certificate folder (`privsdr secure keys DIR ...` writes DIR/<name>)")
    return str(folder / CA_CERT), str(crts[0]), str(crts[0].with_suffix(".key"))


def add_link(vsub: Any) -> None:
    p = vsub.add_parser("link", help="private record linkage: align the parties' rows by an identifier column (PSI, no budget)",
                        description=__doc__, formatter_class=FORMATTER)
    p.add_argument("--parties", nargs="+", required=True,
                   help="every party as NAME=HOST:PORT, in one order all parties give alike (the helper takes no part)")
    p.add_argument("--name", required=True, help="this party's name")
    p.add_argument("--label", default=None, help="the label holder, who computes the intersection (default: the first party)")
    p.add_argument("--data", required=True, help="this party's CSV, with the identifier column")
    p.add_argument("--id-column", required=True, help="the identifier column (dropped from the output)")
    p.add_argument("--out", required=True, help="the linked CSV to write (.csv)")
    p.add_argument("--casefold", action="store_true", help="fold case of identifiers (default: case is kept; whitespace is stripped)")
    p.add_argument("--id-pattern", default=None, help="a regular expression every identifier must match in full (else refused)")
    p.add_argument("--certs", default=None, metavar="DIR",
                   help="TLS: this party's certificate folder from `privsdr secure keys` (instead of --ca --cert --key)")
    p.add_argument("--ca", default=None, help="TLS: the CA certificate the parties' certificates are checked against")
    p.add_argument("--cert", default=None, help="TLS: this party's certificate (naming the party)")
    p.add_argument("--key", default=None, help="TLS: this party's private key (a file only its owner can read)")
    p.add_argument("--plaintext", action="store_true",
                   help="allow plaintext TCP to non-loopback addresses (blinded elements unencrypted, peers unauthenticated)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for a peer or one message (default 300; above ~150 us x the largest set)")
    p.add_argument("--workers", type=int, default=1,
                   help="threads for this party's hashing and scalar multiplications: the cores it has to itself (default 1)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_link)
