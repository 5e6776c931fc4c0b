"""Slow readers of an unpaged list, through a real daphne serving the service (bountysite.asgi) and a
real HTTP/1.1 client on a raw socket with a small receive buffer: the body is made as the client
takes it (bountysite/daphne_bend.py, patch 6), and a client that stops taking it is cut off after
BOUNTY_HTTP_STALL_SECONDS, its response's database cursor closed and its connection given back.

The server's pool holds one connection (PostgreSQL), so a read answered after a stalled one shows
that the stalled read gave its connection back. A second server streams one list at a time
(BOUNTY_HTTP_MAX_STREAMS), so that slow readers cannot hold every database connection."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import orjson
import pytest
from django.db import connection

from records.models import Deployment
from tests.api.wire import Wire
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import Server, database_url, start_daphne, stop
from tests.websocket.conftest import many_bounties

pytestmark = pytest.mark.django_db(transaction=True)

STALL_SECONDS = 3
BOUNTIES = 12_000  # an unpaged array of about 10 MB: far more than the sockets' buffers hold
END_OF_BODY = b"]\r\n0\r\n\r\n"  # the array's last byte and the chunked body's end
# The statements of a streamed list's server-side cursor (Django's `_django_curs_...`).
CURSOR_STATEMENTS = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                     "AND pid <> pg_backend_pid() AND (query LIKE 'DECLARE%%' OR query LIKE 'FETCH%%')")
TRANSACTIONS = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%%'")


# The smallest pool the settings allow (PostgreSQL): one snapshot reader, the feed, one stream, and
# one connection for every other request; a stream that kept its connection would leave pages none.
SMALL_POOL = {"BOUNTY_WS_SNAPSHOT_READERS": "1", "BOUNTY_HTTP_MAX_STREAMS": "1", "DATABASE_POOL_MAX": "4"}


def serve(**settings: str) -> Iterator[Server]:
    env = {
        **os.environ, "DATABASE_URL": database_url(), "BOUNTY_CHAIN_ID": "91342",
        "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
        "BOUNTY_API_CACHE_SECONDS": "0", "BOUNTY_RATE_LIMIT": "1000000", "DATABASE_POOL_MIN": "0",
        "DATABASE_POOL_TIMEOUT": "3", "BOUNTY_TRUSTED_PROXIES": "127.0.0.1", **settings,
    }
    for name in ("BOUNTY_RPC_URL", "REDIS_URL", "DJANGO_DEBUG"):
        env.pop(name, None)
    instance = start_daphne(env)
    yield instance
    stop(instance.process)


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[Server]:
    yield from serve(BOUNTY_HTTP_STALL_SECONDS=str(STALL_SECONDS), **SMALL_POOL)


@pytest.fixture(scope="module")
def one_stream(django_db_setup: None) -> Iterator[Server]:
    yield from serve(**SMALL_POOL)


@pytest.fixture(scope="module")
def two_streams(django_db_setup: None) -> Iterator[Server]:
    yield from serve(**{**SMALL_POOL, "BOUNTY_HTTP_MAX_STREAMS": "2", "DATABASE_POOL_MAX": "5"})


@pytest.fixture
def big_list(active: Deployment) -> None:
    many_bounties(active, BOUNTIES)


def slow_client(server: Server, address: str = "198.51.100.60") -> socket.socket:
    """A connection from `address` (through the trusted proxy that 127.0.0.1 is) that has asked
    for the unpaged list of bounties and reads nothing yet."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(b"GET /bounties HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                 b"X-Forwarded-For: " + address.encode() + b"\r\n\r\n")
    return sock


def read_to_the_end(sock: socket.socket, quiet_seconds: float = 5) -> tuple[bytes, bool]:
    """Everything the connection still delivers, and whether the server closed it (False: it
    stayed open and silent for `quiet_seconds`)."""
    sock.settimeout(quiet_seconds)
    received = bytearray()
    try:
        while chunk := sock.recv(1 << 20):
            received += chunk
            if received.endswith(END_OF_BODY):
                return bytes(received), False
    except ConnectionResetError:
        pass
    except TimeoutError:
        return bytes(received), False
    return bytes(received), True


def dechunked(response: bytes) -> bytes:
    """The body of a whole chunked response."""
    rest = response.partition(b"\r\n\r\n")[2]
    body = bytearray()
    while size := int(rest[:rest.index(b"\r\n")], 16):
        start = rest.index(b"\r\n") + 2
        body += rest[start:start + size]
        rest = rest[start + size + 2:]
    return bytes(body)


def count(sql: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def wait_for_no_cursor(seconds: float = 5) -> tuple[int, int]:
    """(statements of an open cursor, transactions left open) once both are 0, or after `seconds`."""
    deadline = time.monotonic() + seconds
    while (found := (count(CURSOR_STATEMENTS), count(TRANSACTIONS))) != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def test_a_reader_that_stops_reading_is_cut_off_and_its_database_connection_given_back(
        server: Server, big_list: None) -> None:
    with slow_client(server) as sock:
        time.sleep(STALL_SECONDS + 2)
        received, closed = read_to_the_end(sock)
    assert closed, f"still open after {len(received):,} bytes"
    assert not received.endswith(END_OF_BODY)
    if connection.vendor == "postgresql":
        assert wait_for_no_cursor() == (0, 0)
    wire = Wire(server)
    reply = wire.send("GET", "/bounties?limit=1")
    assert reply.status == 200 and len(reply.json()["items"]) == 1
    wire.finish()


def test_while_a_reader_stalls_the_server_reads_no_further_than_the_client_takes(
        server: Server, big_list: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's pg_stat_activity")
    with slow_client(server) as sock:
        time.sleep(1)
        assert count(CURSOR_STATEMENTS) == 1, "the list's cursor is not open: the server read it all"
        received = bytearray()
        sock.settimeout(10)
        while not received.endswith(END_OF_BODY):  # faster than the stall limit needs
            chunk = sock.recv(1 << 16)
            assert chunk, "closed before the end"
            received += chunk
    assert len(orjson.loads(dechunked(bytes(received)))) == BOUNTIES
    assert wait_for_no_cursor() == (0, 0)


def test_an_unpaged_list_past_the_streams_a_process_may_hold_answers_503_and_pages_still_answer(
        one_stream: Server, big_list: None) -> None:
    wire = Wire(one_stream)
    with slow_client(one_stream):  # holds the one stream, reading nothing
        time.sleep(0.5)
        busy = wire.send("GET", "/bounties")
        assert busy.status == 503 and busy.headers["retry-after"] == "5"
        assert "BOUNTY_HTTP_MAX_STREAMS" in busy.json()["detail"]
        assert wire.send("GET", "/bounties?limit=1").status == 200
    time.sleep(0.5)  # the slow client gone, its stream ends and frees its slot
    assert len(wire.send("GET", "/bounties").json()) == BOUNTIES
    wire.finish()


def test_a_client_reading_an_unpaged_list_gets_429_for_another_while_other_clients_get_theirs(
        two_streams: Server, big_list: None) -> None:
    with slow_client(two_streams, "198.51.100.61"):  # holds one of the two streams, reading nothing
        time.sleep(0.5)
        same = Wire(two_streams)
        refused = same.send("GET", "/bounties", {"X-Forwarded-For": "198.51.100.61"})
        assert refused.status == 429 and refused.headers["retry-after"] == "5"
        assert "BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT" in refused.json()["detail"]
        assert same.send("GET", "/bounties?limit=1", {"X-Forwarded-For": "198.51.100.61"}).status == 200
        same.finish()
        other = Wire(two_streams)
        assert len(other.send("GET", "/bounties", {"X-Forwarded-For": "198.51.100.62"}).json()) == BOUNTIES
        other.finish()
