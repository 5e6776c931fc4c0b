"""Two real daphne server processes on one database and one Redis, as workers run in production:
one rate-limit budget per client across both, and the same ETag (so a 304) from either."""

from __future__ import annotations

import http.client
import os
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 4
WINDOW = 3_600  # long enough that no test run crosses a window's end but once in hours; see _budget_run



@pytest.fixture
def two_servers(shared_redis: str) -> Iterator[tuple[Server, Server]]:
    env = {
        **os.environ, "DATABASE_URL": database_url(), "REDIS_URL": shared_redis, "BOUNTY_CHAIN_ID": "91342",
        "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
        "BOUNTY_RATE_LIMIT": str(LIMIT), "BOUNTY_RATE_WINDOW_SECONDS": str(WINDOW),
    }
    env.pop("BOUNTY_RPC_URL", None)
    servers: list[Server] = []
    try:
        servers.extend(start_daphne(env) for _ in range(2))
        yield servers[0], servers[1]
    finally:
        for server in servers:
            stop(server.process)


def get(url: str, **headers: str) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.netloc, timeout=10)
    conn.request("GET", f"{parts.path}?{parts.query}" if parts.query else parts.path,
                 headers={"Accept": "application/json", **headers})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def _budget_run(a: Server, b: Server) -> list[http.client.HTTPResponse] | None:
    """LIMIT + 2 requests alternating between the servers; None if a window ended meanwhile."""
    responses = [get((a, b)[n % 2].http("/bounties?limit=1")) for n in range(LIMIT + 2)]
    resets = {response.getheader("X-RateLimit-Reset") for response in responses}
    return responses if len(resets) == 1 else None


def test_both_processes_count_against_one_budget_per_client(two_servers: tuple[Server, Server],
                                                            shared_redis: str) -> None:
    a, b = two_servers
    responses = _budget_run(a, b)
    if responses is None:  # the run straddled the end of a window: the next run fits in one
        redis.Redis.from_url(shared_redis).flushdb()
        responses = _budget_run(a, b)
    assert responses is not None
    assert [r.status for r in responses] == [200] * LIMIT + [429, 429]
    assert [r.getheader("X-RateLimit-Remaining") for r in responses] == ["3", "2", "1", "0", "0", "0"]
    assert all(r.getheader("X-RateLimit-Limit") == str(LIMIT) for r in responses)
    retry_after = responses[-1].getheader("Retry-After")
    assert retry_after is not None and 1 <= int(retry_after) <= WINDOW


def test_either_process_gives_an_equal_body_the_same_tag_and_a_304_for_the_others(
        two_servers: tuple[Server, Server], active: Deployment) -> None:
    h.make_tree(active)
    a, b = two_servers
    first, second = get(a.http("/bounties?limit=5")), get(b.http("/bounties?limit=5"))
    assert first.status == second.status == 200
    tag = first.getheader("ETag")
    assert tag is not None and re.fullmatch(r'W/"[0-9a-f]{32}@[0-9]+:[0-9]+"', tag)
    assert second.getheader("ETag") == tag
    assert get(b.http("/bounties?limit=5"), **{"If-None-Match": tag}).status == 304
