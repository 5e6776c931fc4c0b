"""Slow readers of an unpaged list, through a real daphne serving the service (bountysite.asgi) and a
real HTTP/1.1 client on a raw socket with a small receive buffer. The list is read from the
database once into a spool (records.spools) and sent from it at each client's pace
(bountysite/daphne_http.py): a slow reader holds no database connection, no cursor and no
transaction, and nothing other clients wait for; one that stops taking its body is cut off after
BOUNTY_HTTP_STALL_SECONDS. Spools are unnamed files: nothing is left in BOUNTY_SPOOL_DIR, even by a
killed process, and their disk is bounded (BOUNTY_SPOOL_MAX_BYTES: past it, 503)."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from django.db import connection

from records.models import Deployment
from tests.api.wire import Wire
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC, bump_version
from tests.servers import Server, database_url, start_daphne, stop
from tests.websocket.conftest import many_bounties

pytestmark = pytest.mark.django_db(transaction=True)

STALL_SECONDS = 3
BOUNTIES = 12_000  # an unpaged array of about 10 MB: far more than the sockets' buffers hold
# The statements of a streamed list's server-side cursor (Django's `_django_curs_...`).
CURSOR_STATEMENTS = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                     "AND pid <> pg_backend_pid() AND (query LIKE 'DECLARE%%' OR query LIKE 'FETCH%%')")
TRANSACTIONS = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%%'")


# The smallest pool the settings allow (PostgreSQL): one snapshot reader, the feed, one list reader,
# and one connection for every other request; a slow reader that kept its connection would leave
# pages none.
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
def spool_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spools")


@pytest.fixture(scope="module")
def server(django_db_setup: None, spool_dir: Path) -> Iterator[Server]:
    yield from serve(BOUNTY_HTTP_STALL_SECONDS=str(STALL_SECONDS), BOUNTY_SPOOL_DIR=str(spool_dir), **SMALL_POOL)


@pytest.fixture(scope="module")
def small_disk(django_db_setup: None) -> Iterator[Server]:
    yield from serve(BOUNTY_SPOOL_MAX_BYTES=str(1024**2), **SMALL_POOL)


@pytest.fixture(scope="module")
def tight_disk(django_db_setup: None) -> Iterator[Server]:
    """Room for two spools of the big list (7.6 MB each), not three."""
    yield from serve(BOUNTY_SPOOL_MAX_BYTES=str(16 * 1024**2), **SMALL_POOL)


@pytest.fixture(scope="module")
def two_per_client(django_db_setup: None) -> Iterator[Server]:
    yield from serve(**{**SMALL_POOL, "BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT": "2"})


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
    """Everything the connection still delivers, and whether the server closed it (False: the
    body ended, or the connection stayed open and silent for `quiet_seconds`)."""
    sock.settimeout(quiet_seconds)
    received = bytearray()
    try:
        while chunk := sock.recv(1 << 20):
            received += chunk
            if complete(bytes(received)):
                return bytes(received), False
    except ConnectionResetError:
        pass
    except TimeoutError:
        return bytes(received), False
    return bytes(received), True


def complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = lengths[0] if lengths else None
    return length is not None and len(body) == length


def body_of(response: bytes) -> bytes:
    return response.partition(b"\r\n\r\n")[2]


def metric(server: Server, name: str) -> float:
    """A sample of the server's /metrics (asked from loopback, not through the proxy)."""
    wire = Wire(server)
    text = wire.send("GET", "/metrics").body.decode()
    wire.finish()
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines() if line.startswith(name))


def count(sql: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def test_a_reader_that_stops_reading_is_cut_off_and_other_reads_go_on(server: Server, big_list: None) -> None:
    with slow_client(server) as sock:
        time.sleep(STALL_SECONDS + 2)
        received, closed = read_to_the_end(sock)
    assert closed, f"still open after {len(received):,} bytes"
    assert not complete(received)
    wire = Wire(server)
    reply = wire.send("GET", "/bounties?limit=1")
    assert reply.status == 200 and len(reply.json()["items"]) == 1
    wire.finish()


def test_a_slow_reader_holds_no_database_cursor_connection_or_transaction(server: Server, big_list: None) -> None:
    with slow_client(server, "198.51.100.63") as sock:
        time.sleep(1)
        if connection.vendor == "postgresql":
            assert (count(CURSOR_STATEMENTS), count(TRANSACTIONS)) == (0, 0)
        received = bytearray()
        sock.settimeout(10)
        while not complete(bytes(received)):  # faster than the stall limit needs
            chunk = sock.recv(1 << 16)
            assert chunk, "closed before the end"
            received += chunk
    assert len(orjson.loads(body_of(bytes(received)))) == BOUNTIES


def test_slow_readers_from_many_addresses_hold_nothing_another_client_waits_for(server: Server, big_list: None) -> None:
    produced = metric(server, 'bounty_spools_produced_total{kind="unpaged list"}')
    readers = [slow_client(server, f"198.51.100.{70 + n}") for n in range(8)]  # twice the pool's connections
    try:
        for sock in readers:  # each is answered, though the pool holds 4 connections: none keeps one
            sock.settimeout(10)
            assert sock.recv(12) == b"HTTP/1.1 200"
        wire = Wire(server)
        started = time.monotonic()
        assert wire.send("GET", "/bounties/1").status in (200, 404)
        assert time.monotonic() - started < 1
        started = time.monotonic()
        reply = wire.send("GET", "/bounties")
        assert reply.status == 200 and len(reply.json()) == BOUNTIES
        assert time.monotonic() - started < 5
        assert reply.headers["content-length"] == str(len(reply.body))
        assert wire.send("GET", "/bounties?limit=1").status == 200
        wire.finish()
        # One spool for everyone: the list was read from the database once.
        assert metric(server, 'bounty_spools_produced_total{kind="unpaged list"}') == produced + 1
    finally:
        for sock in readers:
            sock.close()


def test_spools_are_unnamed_files_that_a_killed_process_leaves_nowhere(spool_dir: Path, big_list: None) -> None:
    instance = next(serve(BOUNTY_SPOOL_DIR=str(spool_dir), **SMALL_POOL))
    try:
        with slow_client(instance, "198.51.100.64"):
            time.sleep(1)
            held = [os.readlink(f"/proc/{instance.process.pid}/fd/{fd}")
                    for fd in os.listdir(f"/proc/{instance.process.pid}/fd")]
            spools = [target for target in held if target.startswith(str(spool_dir))]
            assert spools and all(target.endswith(" (deleted)") for target in spools), held
            assert not list(spool_dir.iterdir())
    finally:
        instance.process.send_signal(signal.SIGKILL)
        instance.process.wait()
    assert not list(spool_dir.iterdir())


def test_a_list_past_the_spools_disk_bound_answers_503_and_pages_still_answer(
        small_disk: Server, big_list: None) -> None:
    wire = Wire(small_disk)
    busy = wire.send("GET", "/bounties")
    assert busy.status == 503 and busy.headers["retry-after"] == "5"
    assert "BOUNTY_SPOOL_MAX_BYTES" in busy.json()["detail"]
    assert wire.send("GET", "/bounties?limit=1").status == 200
    wire.finish()


def test_a_client_reading_as_many_unpaged_lists_as_it_may_gets_429_while_other_clients_get_theirs(
        two_per_client: Server, big_list: None) -> None:
    with slow_client(two_per_client, "198.51.100.61"), slow_client(two_per_client, "198.51.100.61"):
        time.sleep(0.5)
        same = Wire(two_per_client)
        refused = same.send("GET", "/bounties", {"X-Forwarded-For": "198.51.100.61"})
        assert refused.status == 429 and refused.headers["retry-after"] == "5"
        assert "BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT" in refused.json()["detail"]
        assert same.send("GET", "/bounties?limit=1", {"X-Forwarded-For": "198.51.100.61"}).status == 200
        same.finish()
        other = Wire(two_per_client)
        assert len(other.send("GET", "/bounties", {"X-Forwarded-For": "198.51.100.62"}).json()) == BOUNTIES
        other.finish()
    time.sleep(0.5)  # the slow clients gone, their claims end
    again = Wire(two_per_client)
    assert again.send("GET", "/bounties", {"X-Forwarded-For": "198.51.100.61"}).status == 200
    again.finish()


def test_a_reader_of_a_superseded_spool_cut_off_for_room_has_its_connection_closed_and_the_server_goes_on(
        tight_disk: Server, active: Deployment, big_list: None) -> None:
    with slow_client(tight_disk, "198.51.100.65") as sock:
        sock.settimeout(10)
        head = sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 200") and b"Content-Length" in head
        bump_version(active)  # the list changes: the slow reader's spool is superseded by the next
        wire = Wire(tight_disk)
        assert len(wire.send("GET", "/bounties").json()) == BOUNTIES
        # Another list needs room: the unread current spool goes first, then the superseded one's reader.
        assert len(wire.send("GET", "/bounties?dir=asc").json()) == BOUNTIES
        received, closed = read_to_the_end(sock)
        assert closed and not complete(head + received)  # cut off, short of its Content-Length
    assert wire.send("GET", "/bounties/999999999").status == 404  # the server answers as ever
    wire.finish()
