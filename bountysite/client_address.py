"""The client's address behind proxies, by one rule for every part of the service that needs it:
the HTTP rate limits (bountysite.ratelimit), the access lines (bountysite.access) and the
websocket's limits (records.ws.limits). No Django here: each caller passes the peer, the
X-Forwarded-For header and the trusted networks (settings.BOUNTY_TRUSTED_PROXIES) as it has them.
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
