"""The client's address behind proxies, by one rule for every part of the service that needs it:
every limit, the access lines and the admin's sign-in records, through records.limits' two
adapters (an HTTP request's, a websocket scope's). No Django here: each adapter passes the peer,
the X-Forwarded-For header and the trusted networks (settings.BOUNTY_TRUSTED_PROXIES).

Every per-client limit counts a client by `client_key`: an IPv4 address is a client, but an IPv6
host is usually given a whole /64 (RFC 6177's smallest end-site assignment), where it may take a
new address for every request; so an IPv6 client is its /64. The access lines keep the address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from ipaddress import IPv4Network, IPv6Network

Networks = Iterable[IPv4Network | IPv6Network]


def _trusted(address: str, trusted: Networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def client_address(peer: str, forwarded: str | None, *, trusted: Networks) -> str:
    """The peer, or, when the peer is a trusted proxy, the nearest X-Forwarded-For hop (`forwarded`,
    the header's value) not added by a trusted proxy: the chain is believed only as far as it runs
    through `trusted` networks."""
    trusted = tuple(trusted)
    if not _trusted(peer, trusted):
        return peer
    hops = [hop.strip() for hop in (forwarded or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer


def client_key(address: str) -> str:
    """What a client's limits are counted under: an IPv4 address as it is, an IPv6 address's /64
    (`2001:db8:1:2::/64`), an IPv4-mapped IPv6 address as its IPv4 address; anything else as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return address
