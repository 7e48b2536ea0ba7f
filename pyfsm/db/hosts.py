"""The servers a DSN names: ``h1:3306,h2,[::1]:3307``, tried in order, and which answered last.

Beside :mod:`pyfsm.db.settings` (the rest of a DSN): parsing a list of servers and
remembering the one in use are pure, and small enough to read on their own.
"""

from __future__ import annotations

import ipaddress
import re

from ..errors import InvalidArgument

Host = tuple[str, int]
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 3306
#: A host name or IPv4 address as a DSN may give it (IPv6 addresses go in brackets).
_HOST_NAME = re.compile(r"[A-Za-z0-9._-]+")


class HostMemory:
    """Which server of a DSN's list answered last, so that new connections start there.

    One per parsed DSN: the copies of a Settings (``replace``, ``with_database``,
    ``with_timeouts``) share it, so the Store's pool and its leases' connections agree;
    unrelated Settings never do (no process-wide state). Keyed by the whole list, so a copy
    naming other servers starts from its own first one. A plain dict: setting one key is
    atomic, and two threads racing cost at most one extra connect attempt.
    """

    def __init__(self) -> None:
        self._last: dict[tuple[Host, ...], Host] = {}

    def get(self, hosts: tuple[Host, ...]) -> Host | None:
        return self._last.get(hosts)

    def remember(self, hosts: tuple[Host, ...], host: Host) -> None:
        self._last[hosts] = host

    def forget(self, hosts: tuple[Host, ...]) -> None:
        self._last.pop(hosts, None)


def where(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (as in a DSN)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_hosts(text: str) -> tuple[Host, ...]:
    """A DSN's servers, ``h1:3306,h2,[::1]:3307``, as (host, port) pairs in that order.

    The port defaults to 3306 and the host to 127.0.0.1 (``:3307``); no servers at all
    means 127.0.0.1:3306. An empty entry, a malformed host or port, an IPv6 address
    without brackets or a server listed twice raises InvalidArgument naming it.
    """
    if not text:
        return ((DEFAULT_HOST, DEFAULT_PORT),)
    hosts: list[Host] = []
    for entry in text.split(","):
        if not entry:
            raise InvalidArgument(
                f"bad DSN: the server list {text!r:.200} has an empty entry "
                "(servers are separated by single commas: h1:3306,h2:3306)"
            )
        host = _parse_host(entry, text)
        if host in hosts:
            raise InvalidArgument(f"bad DSN: {where(*host)} is listed twice in {text!r:.200}")
        hosts.append(host)
    return tuple(hosts)


def _parse_host(entry: str, text: str) -> Host:
    def bad(why: str) -> InvalidArgument:
        within = f" (in {text!r:.200})" if entry != text else ""
        return InvalidArgument(f"bad DSN: server {entry!r:.100}{within}: {why}")

    if entry.startswith("["):
        name, bracket, rest = entry[1:].partition("]")
        if not bracket:
            raise bad("the [ of an IPv6 address is not closed")
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            raise bad("not an IPv6 address between [ and ]") from None
        if rest and not rest.startswith(":"):
            raise bad("expected :port after the ]")
        port_text = rest[1:]
    else:
        name, _, port_text = entry.partition(":")
        if ":" in port_text:
            raise bad("an IPv6 address goes in brackets, e.g. [::1]:3306")
        if name and not _HOST_NAME.fullmatch(name):
            raise bad("a host is a name or address of letters, digits, dots, hyphens and underscores")
        name = name or DEFAULT_HOST
    if not port_text:
        return name.lower(), DEFAULT_PORT
    if not (port_text.isascii() and port_text.isdigit() and 1 <= int(port_text) <= 65535):
        raise bad("the port must be a number from 1 to 65535")
    return name.lower(), int(port_text)
