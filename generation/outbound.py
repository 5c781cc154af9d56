"""Where this server may send a provider's request: public addresses only, unless the operator allow-listed the host.

A staff user types a provider's base URL, and *Test connection* (or a generation run) makes this server dial it. So
the URL is checked twice:

* when it is saved (`url_problem`, the model's validator): an address written as an IP — in any spelling the C
  library accepts: ``2130706433``, ``0x7f000001``, ``0177.0.0.1`` — or a host that resolves now must be public;
* when a connection is opened (`GuardedBackend`, the network backend of every SDK client): the host is resolved,
  EVERY address it resolves to must be public, and the socket is opened to one of those checked addresses — not to
  the name again — so a DNS answer that changes between the check and the connection (DNS rebinding) changes
  nothing.

Public means `ipaddress`'s is_global: not loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
(169.254/16, fe80::/10), unspecified (0.0.0.0, ::), shared (100.64/10), reserved, or an IPv4 address wrapped in
IPv6 (::ffff:a.b.c.d, 64:ff9b::/96) that is one of those.

settings.PROVIDER_URL_ALLOWLIST (comma-separated, from the environment) lets the operator's own endpoints through:
a host name (``vllm``, ``localhost``: that host, whatever it resolves to) or a network (``10.0.0.0/8``,
``127.0.0.1/32``). Production's default is empty; the test suite's and `make run`'s is loopback. Cloud metadata
endpoints (169.254.169.254, fd00:ec2::254, metadata.google.internal, …) are refused even when allow-listed.

No database access here.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import anyio
from django.conf import settings
from httpcore2 import AnyIOBackend, ConnectError, SyncBackend

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Never dialled, whatever the allow-list says: the cloud metadata services hand out the machine's credentials.
METADATA_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "0.0.0.0/8", "::/128")
)
METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class OutboundRefused(ConnectError):
    """A connection the outbound policy refused (a ConnectError, so the SDKs treat it as one)."""


def _host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").rstrip(".").lower()


def ip_literal(host: str) -> IPAddress | None:
    """The address a host written as an IP stands for, in any spelling the C library accepts (dotted, decimal,
    hex, octal, shortened: ``2130706433``, ``0x7f.1``); None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _unwrapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _allowlist() -> tuple[frozenset[str], tuple]:
    hosts, networks = set(), []
    for entry in settings.PROVIDER_URL_ALLOWLIST:
        entry = entry.strip().lower()
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            hosts.add(entry.rstrip("."))
    return frozenset(hosts), tuple(networks)


def host_allowlisted(host: str) -> bool:
    """The operator listed this host (by name, or as an address inside a listed network)."""
    hosts, networks = _allowlist()
    if host in hosts:
        return True
    literal = ip_literal(host)
    return literal is not None and any(_unwrapped(literal) in net for net in networks)


def address_problem(address: IPAddress, *, host: str) -> str | None:
    """Why this server may not dial `address` (which `host` stands for); None when it may."""
    address = _unwrapped(address)
    if any(address in net for net in METADATA_NETWORKS if net.version == address.version):
        return f"{host} is (or resolves to) {address}, a link-local, metadata or unspecified address"
    hosts, networks = _allowlist()
    if host in hosts or any(address in net for net in networks if net.version == address.version):
        return None
    if not address.is_global:
        return (
            f"{host} is (or resolves to) {address}, which is not a public address (loopback, private, "
            "link-local or reserved); an endpoint of your own must be listed in PROVIDER_URL_ALLOWLIST"
        )
    return None


def host_problem(host: str) -> str | None:
    """The address check for a host name: metadata names refused; an IP literal checked; a name checked against
    every address it resolves to now (a name that does not resolve yet is left to the connection's check)."""
    if not host:
        return "the URL has no host"
    if host in METADATA_HOSTS or host.endswith(".metadata.google.internal"):
        return f"{host} is a cloud metadata service"
    literal = ip_literal(host)
    if literal is not None:
        return address_problem(literal, host=host)
    try:
        addresses = resolve(host, 443)
    except OSError:
        return None
    for address in addresses:
        problem = address_problem(address, host=host)
        if problem:
            return problem
    return None


def url_problem(url: str) -> str | None:
    """Why a provider's base URL may not be dialled, in one sentence; None when it may (blank: the vendor's own)."""
    if not url:
        return None
    if urlsplit(url).scheme not in ("http", "https"):
        return "only http and https addresses are allowed"
    problem = host_problem(_host_of(url))
    return f"Refused by the outbound policy: {problem}." if problem else None


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (OSError when it does not)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))


def checked_addresses(host: str, port: int) -> tuple[str, list[IPAddress]]:
    """The host's name as dialled and every address it resolves to, each allowed by the policy (OutboundRefused
    otherwise; ConnectError when it does not resolve)."""
    host = host.strip("[]").rstrip(".").lower()
    if host in METADATA_HOSTS:
        raise OutboundRefused(f"refused by the outbound policy: {host} is a cloud metadata service")
    literal = ip_literal(host)
    try:
        addresses = [literal] if literal is not None else resolve(host, port)
    except OSError as exc:
        raise ConnectError(f"could not resolve {host}: {exc}") from exc
    for address in addresses:
        problem = address_problem(address, host=host)
        if problem:
            raise OutboundRefused(f"refused by the outbound policy: {problem}")
    return host, addresses


class GuardedBackend(SyncBackend):
    """httpcore's socket backend with the outbound policy: resolve, check every address, connect to a checked
    one (never resolving the name a second time)."""

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        host, addresses = checked_addresses(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return super().connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except ConnectError as exc:  # the next checked address, as socket.create_connection would
                last = exc
        raise last or ConnectError(f"could not connect to {host}")


class GuardedAsyncBackend(AnyIOBackend):
    """GuardedBackend for the SDKs' async clients (respond now in an async view): the same policy, the name
    resolved in a thread."""

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        host, addresses = await anyio.to_thread.run_sync(checked_addresses, host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return await super().connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except ConnectError as exc:
                last = exc
        raise last or ConnectError(f"could not connect to {host}")


def refused_in_chain(exc: BaseException | None) -> OutboundRefused | None:
    """The policy's refusal somewhere in an exception's causes (the SDKs wrap it twice)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OutboundRefused):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
