"""The parties' certificates: one CA, one key and certificate per party, and verified TLS contexts for them.

Names. Party i (its index in the job's order, MPyC's party id) holds a certificate whose subject common name and
subject alternative name (DNS) are ``MPyC party i`` (``party_name``): the name MPyC's dialing side checks
(``server_hostname``) and the name ``party`` checks on the listening side for the id a client claims. The party's
own name (``alice``) is in the subject's organisational unit, for people; no check reads it.

Layout (``make_keys``, ``privsdr secure keys DIR --parties helper alice bob``; or an organisation's own CA)::

    DIR/ca/mpyc_ca.crt          the CA certificate (public)
    DIR/ca/mpyc_ca.key          the CA's key (0600): it signs certificates only; keep it off the parties' hosts
    DIR/<name>/mpyc_ca.crt      the CA certificate, for that party
    DIR/<name>/party_<i>.crt    that party's certificate (names "MPyC party <i>")
    DIR/<name>/party_<i>.key    that party's key (0600)

Each party gets its own folder ``DIR/<name>`` (``--certs``); bringing an organisation's own CA means a folder with
the same three files. ``load_credentials`` refuses, with one clear line each: a missing file, a key file that
anyone but its owner may read (its mode must be 0600 or stricter), a certificate that does not name its party,
one not signed by the CA or not valid now, and a key that does not match the certificate. A key is never read
into a message, a report, a journal or a log: only paths are.

MPyC's ``--ssl`` reads ``.config/party_<i>.crt``, ``.config/party_<i>.key`` and ``.config/mpyc_ca.crt`` relative
to its working directory: ``private_config`` makes such a folder holding links to this party's three files only,
and the party process runs there. ``server_context``/``client_context``: verified contexts (TLS 1.2 or newer,
certificates required both ways) for other channels between the parties.
"""
from __future__ import annotations

import datetime
import os
import re
import secrets
import ssl
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import ValidationError

CA_CERT = "mpyc_ca.crt"
CA_KEY = "mpyc_ca.key"
_PARTY_NAME = re.compile(r"^MPyC party (\d+)$")


def party_name(index: int) -> str:
    """The name a certificate of party ``index`` carries (common name and DNS subject alternative name)."""
    return f"MPyC party {int(index)}"


@attrs.frozen
class Credentials:
    """One party's files: the CA certificate, its own certificate and key (paths; the key is never loaded here)."""

    index: int
    ca: Path
    certificate: Path
    key: Path

    @classmethod
    def in_folder(cls, folder: str | Path, index: int) -> Credentials:
        """Party ``index``'s file names in ``folder`` (module docstring), unchecked."""
        folder = Path(folder)
        return cls(int(index), folder / CA_CERT, folder / f"party_{int(index)}.crt", folder / f"party_{int(index)}.key")


def check_key_file(path: Path) -> None:
    """Refuse a key file that is missing, not a regular file, or readable or writable by anyone but its owner."""
    try:
        st = os.stat(path)
    except OSError:
        raise ValidationError(f"no key file {path}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValidationError(f"the key {path} is not a regular file")
    if st.st_mode & 0o077:
        raise ValidationError(f"the key file {path} has mode {stat.S_IMODE(st.st_mode):04o}: a key must be readable by its owner "
                              f"only (chmod 600 {path}); it was not used")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise ValidationError(f"the key file {path} belongs to another user; it was not used")


def _load_certificate(path: Path) -> Any:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except OSError:
        raise ValidationError(f"no certificate file {path}") from None
    except ValueError:
        raise ValidationError(f"{path} is not a PEM certificate") from None


def _subject_names(cert: Any) -> list[str]:
    """The names a certificate (``cryptography``'s) answers to: its DNS subject alternative names, else its common name."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        dns = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    return list(dns) or [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]


def certificate_names(peercert: Mapping[str, Any]) -> list[str]:
    """The host names a peer certificate (``ssl``'s ``getpeercert()`` dict) answers to, as TLS hostname checking
    reads them: its DNS subject alternative names if it has any, else its common name."""
    dns = [value for kind, value in peercert.get("subjectAltName", ()) if kind == "DNS"]
    if dns:
        return dns
    return [value for rdn in peercert.get("subject", ()) for key, value in rdn if key == "commonName"]


def names_party(peercert: Mapping[str, Any] | None, index: int) -> bool:
    """Whether a verified peer certificate names party ``index`` and no other party."""
    if not peercert:
        return False
    names = certificate_names(peercert)
    parties = {int(m.group(1)) for m in (_PARTY_NAME.match(n) for n in names) if m}
    return parties == {int(index)}


def load_credentials(folder: str | Path, index: int) -> Credentials:
    """Party ``index``'s files in ``folder`` (module docstring), checked: key mode, names, CA signature, validity, and
    that the key matches the certificate (``server_context`` loads them once)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValidationError(f"no certificate folder {folder} (make one with `privsdr secure keys`)")
    creds = Credentials.in_folder(folder, index)
    check_key_file(creds.key)
    ca, cert = _load_certificate(creds.ca), _load_certificate(creds.certificate)
    names = _subject_names(cert)
    if party_name(index) not in names or any(_PARTY_NAME.match(n) and n != party_name(index) for n in names):
        raise ValidationError(f"the certificate {creds.certificate} names {names}, not {party_name(index)!r} (party {index} of the job)")
    from cryptography.exceptions import InvalidSignature

    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise ValidationError(f"the certificate {creds.certificate} is not signed by the CA {creds.ca} ({type(exc).__name__})") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    for what, c in (("certificate", cert), ("CA certificate", ca)):
        if not c.not_valid_before_utc <= now <= c.not_valid_after_utc:
            raise ValidationError(f"the {what} of party {index} is not valid now (valid {c.not_valid_before_utc:%Y-%m-%d} to "
                                  f"{c.not_valid_after_utc:%Y-%m-%d})")
    server_context(creds)  # the key matches the certificate, and ssl can use both
    return creds


def _context(purpose: ssl.Purpose, creds: Credentials) -> ssl.SSLContext:
    check_key_file(creds.key)
    try:  # the parties' CA only: without a CA file, create_default_context also trusts the system's public CAs
        context = ssl.create_default_context(purpose, cafile=str(creds.ca))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(creds.certificate, keyfile=creds.key)
    except (ssl.SSLError, OSError) as exc:
        raise ValidationError(f"party {creds.index}'s certificate {creds.certificate} and key do not load together "
                              f"({type(exc).__name__}: the key does not match the certificate, or a file is not PEM)") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def server_context(creds: Credentials) -> ssl.SSLContext:
    """A listening party's context: presents its certificate, requires a client certificate signed by the CA. The
    caller checks the client's name for the party it claims to be (``names_party`` on ``getpeercert()``)."""
    return _context(ssl.Purpose.CLIENT_AUTH, creds)


def client_context(creds: Credentials) -> ssl.SSLContext:
    """A dialing party's context: presents its certificate, requires the server's signed by the CA and checks its name
    (connect with ``server_hostname=party_name(j)`` for party j)."""
    context = _context(ssl.Purpose.SERVER_AUTH, creds)
    context.check_hostname = True
    return context


def private_config(creds: Credentials, workdir: str | Path) -> Path:
    """A working directory for MPyC's ``--ssl``: ``workdir/.config`` (mode 0700) with links to this party's CA
    certificate, certificate and key only. Returns ``workdir``."""
    config = Path(workdir) / ".config"
    config.mkdir(mode=0o700, parents=True, exist_ok=False)
    for link, target in ((CA_CERT, creds.ca), (f"party_{creds.index}.crt", creds.certificate), (f"party_{creds.index}.key", creds.key)):
        (config / link).symlink_to(Path(target).resolve())
    return Path(workdir)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def make_keys(folder: str | Path, parties: Sequence[str], *, days: int = 365) -> dict[str, Path]:
    """A CA and one key and certificate per party (in this order: party i is ``MPyC party i``), in the layout of the
    module docstring; keys 0600, folders 0700. Refuses a folder that already holds a CA. Returns each party's folder."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    names = [str(p) for p in parties]
    if len(set(names)) != len(names) or not names or any(not re.fullmatch(r"[A-Za-z0-9_.-]+", n) or n == "ca" for n in names):
        raise ValidationError(f"need distinct party names of letters, digits, '_', '.', '-' (not 'ca'), got {names}")
    if not isinstance(days, int) or days < 1:
        raise ValidationError(f"days must be a positive integer, got {days!r}")
    root = Path(folder)
    if (root / "ca" / CA_KEY).exists() or (root / "ca" / CA_CERT).exists():
        raise ValidationError(f"{root} already holds a CA; choose another folder (an existing CA is never overwritten)")
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)
    pem = serialization.Encoding.PEM
    key_format = (serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "privsdr MPyC CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
               .serial_number(secrets.randbits(120)).not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    (root / "ca").mkdir(mode=0o700, exist_ok=True)
    _write_private(root / "ca" / CA_KEY, ca_key.private_bytes(pem, *key_format))
    ca_pem = ca_cert.public_bytes(pem)
    (root / "ca" / CA_CERT).write_bytes(ca_pem)
    folders = {}
    for i, name in enumerate(names):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party_name(i)),
                             x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, name)])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name).public_key(key.public_key())
                .serial_number(secrets.randbits(120)).not_valid_before(start).not_valid_after(end)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(party_name(i)), x509.DNSName(name)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
        own = root / name
        own.mkdir(mode=0o700, exist_ok=False)
        (own / CA_CERT).write_bytes(ca_pem)
        (own / f"party_{i}.crt").write_bytes(cert.public_bytes(pem))
        _write_private(own / f"party_{i}.key", key.private_bytes(pem, *key_format))
        folders[name] = own
    return folders


def party_folders(certificates: str | Path | Mapping[str, str | Path], parties: Sequence[str]) -> dict[str, Path]:
    """Each party's folder: from a mapping party -> folder, or from the folder ``make_keys`` wrote (``DIR/<name>``)."""
    if isinstance(certificates, Mapping):
        return {str(k): Path(v) for k, v in certificates.items()}
    return {name: Path(certificates) / name for name in parties}


def party_credentials(certificates: str | Path | Mapping[str, str | Path], parties: Sequence[str]) -> dict[str, Credentials]:
    """Every party's checked credentials from its folder (``load_credentials``, ``party_folders``), by name, for parties
    in job order."""
    folders = party_folders(certificates, parties)
    missing = [p for p in parties if p not in folders]
    if missing:
        raise ValidationError(f"no certificate folder for the parties {missing}")
    return {name: load_credentials(folders[name], i) for i, name in enumerate(parties)}


def named_credentials(folder: str | Path, name: str) -> Credentials:
    """The credentials in a party's own folder (``DIR/<name>`` of ``make_keys``: one ``party_<i>.crt``), checked as
    ``load_credentials`` checks them, whose certificate also names the party ``name`` (a DNS subject alternative name, or
    the common name): for channels that know the parties by name rather than by MPyC's index."""
    found = sorted(Path(folder).glob("party_*.crt"))
    indices = [int(m.group(1)) for m in (re.fullmatch(r"party_(\d+)\.crt", p.name) for p in found) if m]
    if len(indices) != 1:
        raise ValidationError(f"the certificate folder {folder} must hold exactly one party_<i>.crt (this party's own folder, "
                              f"`privsdr secure keys DIR --parties ...` wrote DIR/{name}/); it holds {len(indices)}")
    creds = load_credentials(folder, indices[0])
    names = _subject_names(_load_certificate(creds.certificate))
    if name not in names:
        raise ValidationError(f"the certificate {creds.certificate} names {names}, not the party {name!r}: give {name!r}'s own folder")
    return creds
