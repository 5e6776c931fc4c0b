"""Which addresses a webhook may reach: the endpoint's URL is staff's input and the worker runs
inside the operator's network, so a URL must not turn the worker into a way in (server-side
request forgery).

An address is refused unless it is public: loopback, private, link-local (the cloud metadata
address 169.254.169.254 is one), shared (carrier-grade NAT), multicast, reserved, unspecified,
and any IPv4-mapped IPv6 address, unless BOUNTY_WEBHOOKS_ALLOWED_NETWORKS names it. The URL is
checked when an endpoint is saved (`check_url`, every address its name resolves to) and the
address is checked again on every connection (`guarded_socket`, the address the socket is about
to connect to), so a name that resolves elsewhere later changes nothing. Through an egress proxy
(HTTPS_PROXY) the worker connects only to the proxy, which fences what lies behind it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

SHARED = IPv4Network("100.64.0.0/10")  # RFC 6598: carrier-grade NAT


class Refused(ValueError):
    """A URL or an address webhooks may not reach; the message says why and what to change."""


Network = IPv4Network | IPv6Network


def refusal(address: IPv4Address | IPv6Address, allowed: Iterable[Network]) -> str | None:
    """Why `address` may not be reached (the kind of address it is), or None when it may."""
    if any(address.version == network.version and address in network for network in allowed):
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return "an IPv4-mapped IPv6 address"
    checks = (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address (the cloud metadata service is one)"),
        (isinstance(address, IPv4Address) and address in SHARED, "a carrier-grade NAT address"),
        (address.is_multicast, "a multicast address"),
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (not address.is_global, "not a public address"),
    )
    return next((why for refused, why in checks if refused), None)


def _allowed() -> list[Network]:
    return list(settings.BOUNTY_WEBHOOKS_ALLOWED_NETWORKS)


def _refused_address(host: str, address: str) -> Refused | None:
    why = refusal(ip_address(address.split("%", 1)[0]), _allowed())
    if why is None:
        return None
    named = host if host == address else f"{host} ({address})"
    return Refused(f"{named} is {why}; webhooks reach public addresses only, unless "
                   "BOUNTY_WEBHOOKS_ALLOWED_NETWORKS names it")


def check_url(url: str) -> None:
    """Refused unless `url` may be an endpoint: https:// (or http:// where allowed), no fragment,
    and a host every address of which is public (or allowlisted)."""
    parts = urlsplit(url)
    schemes = ("https", "http") if settings.BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP else ("https",)
    if parts.scheme not in schemes:
        raise Refused("the URL must be https://" + ("" if "http" in schemes else
                                                       " (BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP=1 allows http://)"))
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise Refused("the URL has no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Refused("the URL's port is not a number from 0 to 65535") from None
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise Refused(f"{host} does not resolve ({error})") from None
    for *_, sockaddr in found:
        refused = _refused_address(host, str(sockaddr[0]))
        if refused is not None:
            raise refused


def guarded_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's socket factory for direct connections: the socket for the address about to be
    connected to, or Refused when it may not be reached."""
    family, type_, proto, _, sockaddr = addr_info
    refused = _refused_address(str(sockaddr[0]), str(sockaddr[0]))
    if refused is not None:
        raise refused
    return socket.socket(family=family, type=type_, proto=proto)
