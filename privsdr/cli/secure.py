"""``privsdr secure keys``: a CA and one key and certificate per party of a secure computation (mutual TLS).

    privsdr secure keys DIR --parties helper alice bob      # in MPyC's order: party i is "MPyC party i"
    privsdr secure keys DIR --config shared.json            # the parties of a `vertical config --secure` or
                                                            # `fsir config --secure` file

Writes ``DIR/ca/`` (the CA certificate and its key) and ``DIR/<name>/`` per party (the CA certificate, the party's
certificate and key); keys mode 0600, folders 0700 (``privsdr.network.certificates``). Give each party its own
folder only; keep the CA's key away from the parties' hosts. Nothing secret is printed.
"""
from __future__ import annotations

import argparse

from ..errors import ValidationError
from ._common import FORMATTER, Parser


def _keys(args: argparse.Namespace) -> int:
    from ..network.certificates import make_keys

    if (args.parties is None) == (args.config is None):
        raise ValidationError("give the parties in order (--parties NAME ...) or a configuration (--config shared.json), one of them")
    parties = args.parties
    if args.config is not None and _is_fsir(args.config):  # `fsir config --secure`: the server, then every site
        from .fsir import _secure_parties, read_secure

        parties = _secure_parties(read_secure(args.config)[1])
    elif args.config is not None:
        from .vertical_secure import configured_parties, read_config

        shared = read_config(args.config)
        if shared["layout"] is None:
            raise ValidationError(f"{args.config} has no layout: its parties are not known yet")
        parties = configured_parties(shared)
    folders = make_keys(args.out, parties, days=args.days)
    print(f"wrote a CA and a key and certificate for each of {len(folders)} parties in {args.out} (valid {args.days} days):")
    for i, (name, folder) in enumerate(folders.items()):
        print(f"  {name:<12} {folder}/  (MPyC party {i}: give this folder to {name} only)")
    print(f"  the CA's key is {args.out}/ca/mpyc_ca.key: it only signs certificates; keep it off the parties' hosts")
    return 0


def _is_fsir(path: str) -> bool:
    """Whether ``path`` is an FSIR configuration (else it is read as a secure vertical one)."""
    import json
    from pathlib import Path

    try:
        return json.loads(Path(path).read_text()).get("protocol") == "privsdr.fsir"
    except (OSError, ValueError, AttributeError):
        return False


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    secure = sub.add_parser("secure", formatter_class=FORMATTER, help="certificates for the parties of a secure computation (mutual TLS)",
                            description="The parties of a secure computation (`fsir secure`, `vertical ... --secure`) talk over "
                            "mutual TLS: every party holds a certificate signed by one CA that names it (\"MPyC party i\", i its "
                            "place in the configuration's order), and each side checks the other's. `secure keys` makes the CA and "
                            "every party's key and certificate; an organisation's own CA works too (docs/secure.md).")
    ssub = secure.add_subparsers(dest="secure_command", required=True, metavar="ACTION", parser_class=Parser)
    keys = ssub.add_parser("keys", help="make a CA and one key and certificate per party (keys 0600)")
    keys.add_argument("out", help="the folder to write (DIR/ca/ and DIR/<party>/); refused if it already holds a CA")
    keys.add_argument("--parties", nargs="+", default=None, help="the parties in MPyC's order (helper or server first)")
    keys.add_argument("--config", default=None, help="a `vertical config --secure` or `fsir config --secure` file: its parties, in its order")
    keys.add_argument("--days", type=int, default=365, help="how long the certificates are valid (default 365)")
    keys.set_defaults(func=_keys)
