"""A web process holds a bounded number of Redis connections whatever its clients
(docs/operations.md, Redis): one pool per process (REDIS_MAX_CONNECTIONS), shared by every thread
and consumer, plus the channel layer's, which the process's one feed uses; and one descriptor
per websocket client."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from urllib.parse import urlparse

import pytest

from records.models import Deployment
from tests.servers import Server, connections_to, descriptors
from tests.websocket.conftest import commit_change, head, open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

POOL = 3
CHANNEL_LAYER = 2  # the feed's: its receive and its group membership
CLIENTS = 40


def test_a_web_process_holds_at_most_its_pool_of_redis_connections_whatever_its_clients(
        active: Deployment, servers: Callable[..., Server], shared_redis: str) -> None:
    server = servers(REDIS_URL=shared_redis, REDIS_MAX_CONNECTIONS=str(POOL),
                     BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT=str(CLIENTS))
    redis_port = urlparse(shared_redis).port or 6379
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(open_client(server.url(f"?since={head(active)}")))
        seq = commit_change(active, "bounty.updated", {"id": 1})
        assert receive(first)["seq"] == seq
        before = len(descriptors(server.process.pid))
        since = head(active)
        clients = [stack.enter_context(open_client(server.url(f"?since={since}"))) for _ in range(CLIENTS - 1)]
        seq = commit_change(active, "bounty.updated", {"id": 2})
        for client in [first, *clients]:  # each admitted (its Redis calls made) and following the feed
            assert receive(client)["seq"] == seq
        assert connections_to(server.process.pid, redis_port) <= POOL + CHANNEL_LAYER
        assert len(descriptors(server.process.pid)) - before <= len(clients)
