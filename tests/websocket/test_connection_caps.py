"""The websocket's connection caps (docs/api.md, Limits and close codes) count the open connections
themselves, so they never drift: round after round of connections, refused ones included, ended
every way a connection ends (the client's close, a flood of messages closed with 1008, a dropped
TCP connection), each round admits exactly the cap, on the local cache with one process and on
Redis with two processes sharing the per-client count. A stopped process gives its connections
back at once, a killed one's stop counting when their entries in Redis expire, and renewals add
back what a flush of Redis lost. A connection cancelled while it takes its slot (daphne cancels
applications) leaves nothing counted."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from records.limits import ConnectionSlot
from tests.metrics import parse, value
from tests.servers import Server, stop
from tests.websocket.conftest import close_code, open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 5
OVER = 10  # connections past the cap in each round
ROUNDS = 6
MAX_MESSAGES = 3
ENDS = ("close", "flood", "drop")
ADDRESS = "10.0.0.1"
SHORT_ENTRIES = "tests.websocket.short_entries_app:application"  # entries renewed every 0.25 s, expiring after 2 s
ENTRY_SECONDS = 2.0
# No limit on connections opened per minute: the rounds open more than a minute's worth from one address.
LIMITS = {"BOUNTY_TRUSTED_PROXIES": "127.0.0.1", "BOUNTY_WS_MAX_MESSAGES": str(MAX_MESSAGES),
          "BOUNTY_WS_CONNECTS_PER_MINUTE": "0"}

Target = tuple[Server, str]  # a server, and the client address a connection comes from


@pytest.fixture
def shared(shared_redis: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(shared_redis)
    yield client
    client.close()


def connect(stack: contextlib.ExitStack, target: Target) -> tuple[ClientConnection, bool]:
    """A connection (closed with `stack`), and whether it was admitted: an admitted one gets its
    snapshot (here only `snapshot.complete`), a refused one is closed with 1008."""
    server, address = target
    client = stack.enter_context(open_client(server.url(), additional_headers={"X-Forwarded-For": address}))
    try:
        receive(client)
    except ConnectionClosed:
        assert client.close_code == 1008
        return client, False
    return client, True


def connect_all(stack: contextlib.ExitStack, targets: list[Target],
                at_once: bool = True) -> list[tuple[ClientConnection, bool]]:
    """Opens every connection, at once or one after the other."""
    if not at_once:
        return [connect(stack, target) for target in targets]
    with ThreadPoolExecutor(len(targets)) as pool:
        return list(pool.map(partial(connect, stack), targets))


def admitted_once(target: Target) -> bool:
    """Whether a connection is admitted; it is closed right after."""
    with contextlib.ExitStack() as stack:
        return connect(stack, target)[1]


def end(client: ClientConnection, how: str) -> None:
    if how == "close":
        client.close()
    elif how == "flood":
        with contextlib.suppress(ConnectionClosed):
            for _ in range(MAX_MESSAGES + 1):
                client.send("hello")
        assert close_code(client) == 1008
    else:  # the TCP connection drops: a reset, and no close frame
        client.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close_socket()


def open_connections(server: Server) -> float:
    with urllib.request.urlopen(server.http("/metrics"), timeout=10) as response:
        return value(parse(response.read().decode()), "bounty_ws_connections_open")


def wait_until_released(servers: list[Server], shared: redis.Redis | None) -> None:
    """Waits for the servers to have ended every connection, and for Redis to hold none of them."""
    deadline = time.monotonic() + 10
    while any(open_connections(server) for server in servers) or (
            shared is not None and any(shared.scan_iter("*ws:connections:*"))):  # Redis drops an empty set
        assert time.monotonic() < deadline, "the servers did not give the connections back"
        time.sleep(0.05)


def assert_each_round_admits_the_cap(servers: list[Server], address: Callable[[int], str], cap: int,
                                     shared: redis.Redis | None = None, rounds: int = ROUNDS,
                                     at_once: bool = True) -> None:
    """Rounds of cap + OVER connections, spread over the servers; each round admits exactly `cap`,
    then ends them at once, each way in turn, and waits for the servers to notice."""
    for number in range(rounds):
        with contextlib.ExitStack() as stack:
            results = connect_all(stack, [(servers[n % len(servers)], address(n)) for n in range(cap + OVER)],
                                  at_once)
            admitted = [client for client, ok in results if ok]
            assert len(admitted) == cap, f"round {number + 1} admitted {len(admitted)} connections, not {cap}"
            ends = [ENDS[(number + n) % len(ENDS)] for n in range(len(admitted))]
            with ThreadPoolExecutor(len(admitted)) as pool:
                list(pool.map(end, admitted, ends))
        wait_until_released(servers, shared)


@pytest.mark.parametrize("at_once", [True, False], ids=["opened-at-once", "opened-one-by-one"])
def test_each_round_admits_exactly_the_per_client_cap_on_the_local_cache(servers: Callable[..., Server],
                                                                         at_once: bool) -> None:
    server = servers(REDIS_URL="", BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT=str(CAP), **LIMITS)
    assert_each_round_admits_the_cap([server], lambda n: ADDRESS, CAP, at_once=at_once)


def test_each_round_admits_exactly_the_process_cap(servers: Callable[..., Server]) -> None:
    server = servers(REDIS_URL="", BOUNTY_WS_MAX_CONNECTIONS=str(CAP), **LIMITS)
    assert_each_round_admits_the_cap([server], lambda n: f"10.0.1.{n}", CAP)


@pytest.mark.parametrize("at_once", [True, False], ids=["opened-at-once", "opened-one-by-one"])
def test_each_round_admits_exactly_the_per_client_cap_across_two_processes(
        servers: Callable[..., Server], shared_redis: str, shared: redis.Redis, at_once: bool) -> None:
    pair = [servers(REDIS_URL=shared_redis, BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT=str(CAP), **LIMITS)
            for _ in range(2)]
    assert_each_round_admits_the_cap(pair, lambda n: ADDRESS, CAP, shared, at_once=at_once)


def test_the_process_cap_holds_with_redis(servers: Callable[..., Server], shared_redis: str,
                                          shared: redis.Redis) -> None:
    server = servers(REDIS_URL=shared_redis, BOUNTY_WS_MAX_CONNECTIONS=str(CAP), **LIMITS)
    assert_each_round_admits_the_cap([server], lambda n: f"10.0.1.{n}", CAP, shared, rounds=3)


def test_a_stopped_process_gives_its_connections_back_at_once(servers: Callable[..., Server], shared_redis: str,
                                                             shared: redis.Redis) -> None:
    # daphne may stop without ending its applications (it does when any connection has none at
    # that moment), so the process removes its entries as it exits.
    env = {"REDIS_URL": shared_redis, "BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT": str(CAP), **LIMITS}
    stopped, other = servers(**env), servers(**env)
    with contextlib.ExitStack() as stack:
        assert all(ok for _, ok in connect_all(stack, [(stopped, ADDRESS)] * CAP))
        stop(stopped.process)
    assert_each_round_admits_the_cap([other], lambda n: ADDRESS, CAP, shared, rounds=1)


def test_a_killed_process_connections_stop_counting_when_their_entries_expire(
        servers: Callable[..., Server], shared_redis: str, shared: redis.Redis) -> None:
    env = {"REDIS_URL": shared_redis, "BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT": str(CAP), **LIMITS}
    killed, survivor = servers(SHORT_ENTRIES, **env), servers(SHORT_ENTRIES, **env)
    with contextlib.ExitStack() as stack:
        assert all(ok for _, ok in connect_all(stack, [(killed, ADDRESS)] * CAP))
        time.sleep(ENTRY_SECONDS + 1)  # open connections keep counting: their process renews them
        assert not admitted_once((survivor, ADDRESS))
        killed.process.kill()
        killed.process.wait()
        died = time.monotonic()
    while not admitted_once((survivor, ADDRESS)):
        assert time.monotonic() - died < ENTRY_SECONDS + 2, "the killed process's connections still count"
        time.sleep(0.1)
    wait_until_released([survivor], shared)
    assert_each_round_admits_the_cap([survivor], lambda n: ADDRESS, CAP, shared, rounds=1)


def test_renewals_add_back_the_connections_a_flush_of_redis_lost(servers: Callable[..., Server],
                                                                 shared_redis: str, shared: redis.Redis) -> None:
    server = servers(SHORT_ENTRIES, REDIS_URL=shared_redis, BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT=str(CAP), **LIMITS)
    with contextlib.ExitStack() as stack:
        assert all(ok for _, ok in connect_all(stack, [(server, ADDRESS)] * CAP))
        shared.flushdb()
        time.sleep(1)  # four renewals
        assert not admitted_once((server, ADDRESS))


@pytest.mark.parametrize("backend", ["local", "redis"])
def test_a_connection_cancelled_while_it_takes_its_slot_leaves_nothing_counted(
        settings: Any, shared_redis: str, shared: redis.Redis, backend: str) -> None:
    # In this process, as daphne runs the consumer: daphne cancels an application at its shutdown,
    # or when it outlives its connection by 10 s, maybe while the slot is being taken.
    location = {"BACKEND": "bountysite.cache.RedisCache", "LOCATION": shared_redis} if backend == "redis" else {
        "BACKEND": "bountysite.cache.LocalCache"}
    settings.CACHES = {"default": location}
    settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT = 2

    async def connection(slot: ConnectionSlot) -> None:
        try:
            await slot.acquire()
            await asyncio.sleep(60)
        finally:
            slot.release()

    async def scenario() -> list[bool]:
        for steps in (1, 1, 1, 3, 3):  # cancelled while acquiring (with Redis), or while connected
            task = asyncio.create_task(connection(ConnectionSlot({"client": (ADDRESS, 1)})))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        deadline = time.monotonic() + 10
        while any(shared.scan_iter("*ws:connections:*")):  # the removals reach Redis from their thread
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        slots = [ConnectionSlot({"client": (ADDRESS, 1)}) for _ in range(3)]
        admitted = [await slot.acquire() for slot in slots]
        for slot in slots:
            slot.release()
        return admitted

    assert asyncio.run(scenario()) == [True, True, False]
