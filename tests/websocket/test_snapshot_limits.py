"""Snapshots share fairly (docs/api.md, Limits and close codes): a client slower than the minimum
rate is closed with 1008 by its deadline; one address holds at most its share of snapshot slots,
and a snapshot that waits too long for one is closed with 1013; slow readers, sent their snapshot
from its spool (records.spools), hold no database transaction. Real daphne processes, real clients
on real sockets with small receive buffers, reading slowly."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from records.models import Deployment
from tests.servers import Server
from tests.websocket.conftest import close_code, many_bounties, open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

BOUNTIES = 2_000
PROMPT = "p" * 2_000  # a snapshot of about 5 MB
MIN_RATE = 500_000  # bytes/s, the servers' minimum: 5x the slow clients', a tenth of a fast one's on a loaded machine
SLOW_PAUSE = 0.025  # a slow client's pause after each message (2.5 KB): about 100 KB/s
BASE_SECONDS = 4
TOO_SLOW = f"snapshot taken slower than {MIN_RATE} bytes/s"


@pytest.fixture
def bounties(active: Deployment) -> Deployment:
    many_bounties(active, BOUNTIES, prompt=PROMPT)
    return active


def serve(servers: Callable[..., Server], **settings: str) -> Server:
    return servers(**{"BOUNTY_TRUSTED_PROXIES": "127.0.0.1", "BOUNTY_WS_SNAPSHOT_BASE_SECONDS": str(BASE_SECONDS),
                      "BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND": str(MIN_RATE), **settings})


def client_of(server: Server, address: str, *, slow: bool = True) -> ClientConnection:
    """A snapshot client of `address` (through the trusted proxy). `slow`: on a socket with a small
    receive buffer, its own queue holding one message, so it takes what the server sends only as
    it reads."""
    headers = {"X-Forwarded-For": address}
    if not slow:
        return open_client(server.url(), additional_headers=headers)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
    sock.connect(("127.0.0.1", server.port))
    return open_client(server.url(), additional_headers=headers, sock=sock, max_queue=1)


class SlowReader(threading.Thread):
    """Reads one message, then pauses `pause` seconds, until the server closes the connection."""

    def __init__(self, client: ClientConnection, pause: float = SLOW_PAUSE) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.pause = pause
        self.received = 0
        self.opened = time.monotonic()
        self.closed_after: float | None = None
        self.start()

    def run(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                self.client.recv()
                self.received += 1
                time.sleep(self.pause)
        self.closed_after = time.monotonic() - self.opened

    def close_code(self, timeout: float) -> int | None:
        """The close code the server sent, once it closed the connection."""
        self.join(timeout)
        assert not self.is_alive(), "the server did not close the connection"
        return self.client.close_code


def completes(client: ClientConnection, timeout: float = 60) -> bool:
    """Reads the snapshot to its end: whether `snapshot.complete` came, with every bounty."""
    deadline = time.monotonic() + timeout
    for _ in range(BOUNTIES):
        assert receive(client, max(0.01, deadline - time.monotonic()))["snapshot"] is True
    complete = receive(client, max(0.01, deadline - time.monotonic()))
    return bool(complete["type"] == "snapshot.complete" and complete["payload"] == {
        "bounties": BOUNTIES, "submissions": 0, "disputes": 0})


def snapshot_transactions() -> list[int]:
    """The PostgreSQL backends idle in a transaction on the test database, other than this one's."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND state LIKE 'idle in transaction%%' AND pid <> pg_backend_pid()")
        return [pid for (pid,) in cursor.fetchall()]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@contextlib.contextmanager
def slow_readers(server: Server, address: str, count: int) -> Iterator[list[SlowReader]]:
    with contextlib.ExitStack() as stack:
        yield [SlowReader(stack.enter_context(client_of(server, address))) for _ in range(count)]


def test_a_client_slower_than_the_minimum_rate_is_closed_with_1008_while_another_gets_its_snapshot(
    bounties: Deployment, servers: Callable[..., Server]
) -> None:
    server = serve(servers, BOUNTY_WS_SNAPSHOT_READERS="1", BOUNTY_WS_SNAPSHOT_WAIT_SECONDS="30")
    with slow_readers(server, "10.1.0.1", 1) as (slow,):
        wait_until(lambda: slow.received > 0, 10, "the slow client's snapshot did not start")
        with client_of(server, "10.1.0.2", slow=False) as waiting:  # the process's one reader made the spool
            assert completes(waiting)
            assert slow.close_code(timeout=30) == 1008
            assert slow.client.close_reason == TOO_SLOW
            # By its deadline: the base, plus what it was sent at the minimum rate (a few hundred KB
            # ahead of what it read, in the buffers), then what it had not read before the close frame.
            assert slow.closed_after is not None and slow.closed_after < BASE_SECONDS + 10
    if connection.vendor == "postgresql":
        wait_until(lambda: not snapshot_transactions(), 5, "a snapshot's transaction outlived its client")


def test_a_third_snapshot_of_an_address_waits_then_is_closed_with_1013(
    bounties: Deployment, servers: Callable[..., Server]
) -> None:
    server = serve(servers, BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT="2", BOUNTY_WS_SNAPSHOT_WAIT_SECONDS="1",
                   BOUNTY_WS_SNAPSHOT_BASE_SECONDS="60")
    with slow_readers(server, "10.2.0.1", 2) as readers:
        wait_until(lambda: all(reader.received for reader in readers), 10, "the slow snapshots did not start")
        with client_of(server, "10.2.0.1") as third:
            assert close_code(third, timeout=10) == 1013
            assert third.close_reason == "no snapshot slot free within 1 s; try again later"
        assert all(reader.closed_after is None for reader in readers)  # they keep their slots


def test_another_address_gets_its_snapshot_while_one_address_holds_many_slow_ones(
    bounties: Deployment, servers: Callable[..., Server]
) -> None:
    server = serve(servers, BOUNTY_WS_SNAPSHOT_WAIT_SECONDS="2", BOUNTY_WS_SNAPSHOT_BASE_SECONDS="60")
    # As many as the process had snapshot readers before they were shared per address (8).
    with slow_readers(server, "10.3.0.1", 8) as readers:
        wait_until(lambda: sum(reader.received > 0 for reader in readers) >= 2, 10, "no slow snapshot started")
        with client_of(server, "10.3.0.2", slow=False) as other:
            assert completes(other)
        wait_until(lambda: sum(reader.closed_after is not None for reader in readers) == 6, 10,
                   "the address's snapshots over its share were not refused")
        assert {reader.client.close_code for reader in readers if reader.closed_after is not None} == {1013}


def test_on_postgresql_a_slow_snapshot_client_holds_no_transaction(
    bounties: Deployment, servers: Callable[..., Server]
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's pg_stat_activity")
    server = serve(servers, BOUNTY_WS_SNAPSHOT_BASE_SECONDS="60")
    with client_of(server, "10.4.0.1") as client:  # reads nothing after its first message
        assert receive(client)["snapshot"] is True
        wait_until(lambda: not snapshot_transactions(), 5, "a slow client's snapshot holds a transaction")
        with client_of(server, "10.4.0.2", slow=False) as other:
            assert completes(other)
