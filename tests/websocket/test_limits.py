"""The websocket's limits (docs/api.md, Limits and close codes): each closes the offending
connection with 1008, as a real client sees it, while the other clients keep receiving."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import ClientConnection

from records.models import Deployment
from tests.servers import Server
from tests.websocket.conftest import close_code, commit_change, head, open_client, receive, upgrade

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(active: Deployment, servers: Callable[..., Server]) -> Server:
    return servers(BOUNTY_TRUSTED_PROXIES="127.0.0.1", BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT="2",
                   BOUNTY_WS_MAX_CONNECTIONS="5", BOUNTY_WS_MAX_MESSAGES="3", BOUNTY_WS_MESSAGE_WINDOW_SECONDS="10",
                   BOUNTY_WS_MAX_MESSAGE_BYTES="100", BOUNTY_WS_MAX_BACKLOG="20")


@pytest.fixture
def bystander(server: Server) -> Iterator[ClientConnection]:
    """A well-behaved client of its own address."""
    with client_of(server, "10.9.9.9") as client:
        yield client


def still_served(active: Deployment, *clients: ClientConnection) -> None:
    seq = commit_change(active, "bounty.updated", {"id": 1})
    for client in clients:
        assert receive(client)["seq"] == seq


def client_of(server: Server, address: str, **options: Any) -> ClientConnection:
    """A client of `address` (through the trusted proxy), following from the current position:
    with `since` its live messages start deterministically, with no snapshot to wait for."""
    since = head(Deployment.objects.get())
    return open_client(server.url(f"?since={since}"), additional_headers={"X-Forwarded-For": address}, **options)


def test_it_closes_connections_over_the_per_client_cap(server: Server, bystander: ClientConnection,
                                                       active: Deployment) -> None:
    with client_of(server, "10.0.0.1") as first, client_of(server, "10.0.0.1") as second:
        with client_of(server, "10.0.0.1") as third:
            assert close_code(third) == 1008
        still_served(active, first, second, bystander)
        with client_of(server, "10.0.0.1") as again:
            assert close_code(again) == 1008
    # The server gives a slot back when daphne reports the disconnect, a moment after the client's
    # close returns; from then on the address is admitted again.
    deadline = time.monotonic() + 10
    while True:
        with client_of(server, "10.0.0.1") as later:
            seq = commit_change(active, "bounty.updated", {"id": 1})
            assert receive(bystander)["seq"] == seq
            try:
                assert receive(later)["seq"] == seq
                return
            except ConnectionClosedError as refused:
                if refused.rcvd is None or refused.rcvd.code != 1008 or time.monotonic() > deadline:
                    raise
        time.sleep(0.05)


def test_ipv6_clients_of_one_64_share_the_per_client_cap(server: Server, bystander: ClientConnection,
                                                        active: Deployment) -> None:
    with client_of(server, "2001:db8:1:2::1") as first, client_of(server, "2001:db8:1:2::2") as second:
        with client_of(server, "2001:db8:1:2:ffff::3") as third:
            assert close_code(third) == 1008
        with client_of(server, "2001:db8:1:3::1") as other_64:
            still_served(active, first, second, other_64, bystander)


def test_a_client_opening_connections_too_often_is_answered_429_before_the_upgrade(
        active: Deployment, servers: Callable[..., Server]) -> None:
    server = servers(BOUNTY_TRUSTED_PROXIES="127.0.0.1", BOUNTY_WS_CONNECTS_PER_MINUTE="3")
    if time.time() % 60 > 45:  # the count starts again each minute: not across one while this runs
        time.sleep(61 - time.time() % 60)
    with contextlib.ExitStack() as stack:
        opened = [stack.enter_context(client_of(server, f"2001:db8:1:2::{n}")) for n in (1, 2, 3)]
        refused = upgrade(server.port, "/ws/events", **{"X-Forwarded-For": "2001:db8:1:2::4"})  # the same /64
        assert refused.status == 429
        assert 1 <= int(refused.getheader("Retry-After") or 0) <= 60
        assert json.loads(refused.read()) == {"detail": "rate limit of 3 websocket connections per minute exceeded"}
        with client_of(server, "2001:db8:1:3::1") as other:
            still_served(active, *opened, other)


def test_it_closes_connections_over_the_process_cap(server: Server, bystander: ClientConnection,
                                                    active: Deployment) -> None:
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(client_of(server, f"10.0.1.{n}")) for n in range(4)]
        with client_of(server, "10.0.2.1") as sixth:
            assert close_code(sixth) == 1008
        still_served(active, bystander, *clients)


def test_it_closes_a_client_that_sends_too_many_messages(server: Server, bystander: ClientConnection,
                                                         active: Deployment) -> None:
    with client_of(server, "10.0.3.1") as chatty:
        for _ in range(4):
            chatty.send("hello")
        assert close_code(chatty) == 1008
    still_served(active, bystander)


def test_it_closes_a_client_that_sends_a_message_too_large(server: Server, bystander: ClientConnection,
                                                           active: Deployment) -> None:
    with client_of(server, "10.0.4.1") as client:
        client.send("x" * 101)
        assert close_code(client) == 1008
    still_served(active, bystander)


def test_it_closes_a_client_too_slow_to_read(server: Server, bystander: ClientConnection,
                                             active: Deployment) -> None:
    # A small receive buffer, so that the server's socket fills after a few MB, not 30.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
    sock.connect(("127.0.0.1", server.port))
    with client_of(server, "10.0.5.1", sock=sock, max_queue=2) as slow:  # reads nothing for now
        big = {"id": 1, "text": "x" * 20_000}
        for _ in range(40):  # 8 MB, which the bystander reads as it comes
            commit_change(active, "bounty.updated", big, count=10)
            for _ in range(10):
                receive(bystander)
        assert close_code(slow) == 1008
    still_served(active, bystander)
