"""bountysite/client_address.py: X-Forwarded-For is believed only as far as it runs through
trusted proxies. (The rate limits, the access lines and the websocket's limits all use it; their
own tests show it at work through daphne and Django.)"""

from __future__ import annotations

import ipaddress

import pytest

from bountysite.client_address import client_address, client_key

PROXIES = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")]


@pytest.mark.parametrize(("peer", "forwarded", "expected"), [
    ("198.51.100.1", None, "198.51.100.1"),
    ("198.51.100.1", "203.0.113.5", "198.51.100.1"),  # an untrusted peer's header is not believed
    ("10.0.0.2", None, "10.0.0.2"),  # a trusted proxy without the header is the client
    ("10.0.0.2", "", "10.0.0.2"),
    ("10.0.0.2", "203.0.113.5", "203.0.113.5"),
    ("::1", "2001:db8::7", "2001:db8::7"),
    ("10.0.0.2", "203.0.113.9, 203.0.113.5", "203.0.113.5"),  # what the client itself wrote is not believed
    ("10.0.0.2", "203.0.113.5, 10.0.0.3", "203.0.113.5"),  # through two trusted proxies
    ("10.0.0.2", "10.0.0.4, 10.0.0.3", "10.0.0.4"),  # every hop trusted: the first
    ("10.0.0.2", " , 203.0.113.5 ,", "203.0.113.5"),  # blank hops dropped
    ("10.0.0.2", "not-an-address", "not-an-address"),
    ("", None, ""),
])
def test_it_believes_x_forwarded_for_only_through_trusted_proxies(peer: str, forwarded: str | None,
                                                                   expected: str) -> None:
    assert client_address(peer, forwarded, trusted=PROXIES) == expected


def test_with_no_trusted_proxy_the_peer_is_the_client() -> None:
    assert client_address("10.0.0.2", "203.0.113.5", trusted=[]) == "10.0.0.2"


def test_the_trusted_networks_may_be_any_iterable() -> None:
    assert client_address("10.0.0.2", "203.0.113.5", trusted=iter(PROXIES)) == "203.0.113.5"


@pytest.mark.parametrize(("address", "key"), [
    ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
    ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
    ("::ffff:198.51.100.7", "198.51.100.7"),  # an IPv4 client seen through an IPv6 socket
    ("198.51.100.7", "198.51.100.7"),
    ("not-an-address", "not-an-address"),
    ("", ""),
])
def test_limits_count_an_ipv6_client_by_its_64_and_an_ipv4_client_by_its_address(address: str, key: str) -> None:
    assert client_key(address) == key
