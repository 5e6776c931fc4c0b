"""A slow (not down) Redis does not serialise the websocket's handshakes (records.limits): each
client's calls run in order on one of several threads, other clients' alongside, and a handshake
waits for Redis at most twice REDIS_TIMEOUT_MS before deciding without it. A real daphne, a real
Redis behind a loopback proxy that holds every chunk 100 ms each way, real clients at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.faulty_proxy import FaultyProxy
from tests.servers import Server, ThrowawayRedis
from tests.websocket.conftest import open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 16
ONE_WAY_SECONDS = 0.1  # 200 ms a round trip: Redis on another continent


@pytest.fixture
def far_redis() -> Iterator[tuple[ThrowawayRedis, FaultyProxy]]:
    with ThrowawayRedis() as store, FaultyProxy("127.0.0.1", store.port) as proxy:
        yield store, proxy


def first_messages_after(server: Server, clients: int) -> list[float]:
    """Seconds from opening to each client's first message, `clients` of as many addresses at once."""
    took: list[float] = [float("inf")] * clients
    start = threading.Barrier(clients)

    def client(number: int) -> None:
        start.wait()
        opened = time.monotonic()
        with open_client(server.url(), additional_headers={"X-Forwarded-For": f"198.51.100.{number + 1}"}) as ws:
            receive(ws, 30)
            took[number] = time.monotonic() - opened

    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return took


def test_handshakes_through_a_slow_redis_go_on_side_by_side(
        servers: Callable[..., Server], far_redis: tuple[ThrowawayRedis, FaultyProxy]) -> None:
    _, proxy = far_redis
    server = servers(REDIS_URL=f"redis://127.0.0.1:{proxy.port}/0", REDIS_TIMEOUT_MS="2000",
                     BOUNTY_TRUSTED_PROXIES="127.0.0.1")
    first_messages_after(server, 2)  # the process's Redis pool and scripts warmed up
    proxy.delay(ONE_WAY_SECONDS)
    took = first_messages_after(server, CLIENTS)
    # Each handshake makes two round trips to Redis (its connect counted, its connection
    # admitted): one after another, the last client would wait 16 x 2 x 200 ms, 6.4 s.
    assert max(took) < 2.5, sorted(took)


def test_a_frozen_redis_holds_a_handshake_for_its_bounded_wait_only(
        servers: Callable[..., Server], far_redis: tuple[ThrowawayRedis, FaultyProxy]) -> None:
    _, proxy = far_redis
    server = servers(REDIS_URL=f"redis://127.0.0.1:{proxy.port}/0", REDIS_TIMEOUT_MS="500",
                     BOUNTY_TRUSTED_PROXIES="127.0.0.1")
    first_messages_after(server, 2)
    proxy.blackhole()
    took = first_messages_after(server, 4)
    assert max(took) < 4 * 0.5 + 2, sorted(took)  # the connect's and the admission's waits, and the snapshot
