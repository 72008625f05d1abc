"""The parties' public addresses: one ``host:port`` per party, checked when the configuration is written.

Every party of a secure computation listens on its own configured address only (``party``: the host is passed to
the listening socket) and dials the others at theirs. ``check_addresses`` refuses, before anything is written or
charged, a port outside 1..65535, an address that is not ``host:port`` (IPv4 or a host name; IPv6 literals are not
supported by MPyC's ``-P``), and the same ``host:port`` twice. ``loopback_addresses`` picks free ports on
127.0.0.1 for single-machine runs (the default). ``is_loopback``: 127.0.0.0/8 and ``localhost``; every other host
is a network address, and channels to it must be TLS unless plaintext was asked for explicitly.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence

from ..errors import ValidationError

#: a host name (RFC 1123 labels) or a dotted IPv4 address
_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def split_address(text: str) -> tuple[str, int]:
    """``host:port`` as (host, port), checked: a host name or IPv4 address and a port in 1..65535."""
    if not isinstance(text, str):
        raise ValidationError(f"an address is 'host:port', got {text!r}")
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not re.fullmatch(r"[0-9]{1,5}", port):
        raise ValidationError(f"an address is 'host:port' with a port in 1..65535, got {text!r}")
    if not 1 <= int(port) <= 65535:
        raise ValidationError(f"port {int(port)} of {text!r} is outside 1..65535")
    if ":" in host or not _HOST.match(host):
        raise ValidationError(f"the host of {text!r} must be a host name or an IPv4 address (IPv6 literals are not supported)")
    return host, int(port)


def check_addresses(addresses: Sequence[str], parties: Sequence[str]) -> tuple[str, ...]:
    """One address per party, each ``host:port`` (``split_address``), no two the same; normalised as ``host:port``."""
    if isinstance(addresses, str) or len(addresses) != len(parties):
        raise ValidationError(f"need one address host:port per party ({', '.join(parties)}), got "
                              f"{1 if isinstance(addresses, str) else len(addresses)}")
    split = [split_address(a) for a in addresses]
    seen: dict[tuple[str, int], str] = {}
    for (host, port), party in zip(split, parties, strict=True):
        key = (host.lower(), port)
        if key in seen:
            raise ValidationError(f"{party!r} and {seen[key]!r} have the same address {host}:{port}: every party needs its own")
        seen[key] = party
    return tuple(f"{host}:{port}" for host, port in split)


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` names this machine's loopback interface (127.0.0.0/8 or ``localhost``)."""
    return is_loopback_host(split_address(address)[0])


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an IP literal or a name) is this machine's loopback interface: a loopback IP or ``localhost``;
    any other host name counts as the network."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: the network


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago (the OS picks them)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def loopback_addresses(count: int) -> tuple[str, ...]:
    """``count`` addresses on 127.0.0.1 with ports that were free a moment ago: the single-machine default."""
    return tuple(f"127.0.0.1:{port}" for port in free_ports(count))
