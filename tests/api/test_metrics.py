"""`GET /metrics` of a real daphne process: requests by route and status with their latency, the
304s and 429s, and the websocket's connections, messages and close codes; only for the
configured peers, never through a proxy."""

from __future__ import annotations

import http.client
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.metrics import Samples, parse, value
from tests.servers import Server, database_url, start_daphne, stop
from tests.websocket.conftest import open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(**extra: str) -> Server:
        env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_CHAIN_ID": "91342",
               "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
               "BOUNTY_RATE_LIMIT": "8", "BOUNTY_WS_POLL_MS": "50", **extra}
        for name in ("BOUNTY_RPC_URL", "REDIS_URL"):  # a process-local cache: this server's own budget
            env.pop(name, None)
        server = start_daphne(env)
        started.append(server)
        return server

    yield start
    for server in started:
        stop(server.process)


def request(server: Server, path: str, **headers: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path, headers={"Accept": "application/json" if path != "/metrics" else "text/plain",
                                       **headers})
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def scrape(server: Server) -> Samples:
    response = request(server, "/metrics")
    assert response.status == 200, response.body  # type: ignore[attr-defined]
    assert response.getheader("Content-Type", "").startswith("text/plain; version=0.0.4")
    return parse(response.body.decode())  # type: ignore[attr-defined]


def test_requests_are_counted_by_route_and_status_with_their_latency(serve: Callable[..., Server],
                                                                     active: Deployment) -> None:
    bounty_id = h.make_tree(active).bounty.bounty_id
    server = serve()
    tag = request(server, "/bounties?limit=2").getheader("ETag")
    assert tag is not None
    assert request(server, "/bounties?limit=2", **{"If-None-Match": tag}).status == 304
    assert request(server, f"/bounties/{bounty_id}").status == 200
    assert request(server, f"/bounties/{bounty_id + 1000}").status == 404
    assert request(server, "/no/such/route").status == 404
    statuses = [request(server, "/submissions").status for _ in range(6)]  # 5 + 3 = the budget of 8
    assert statuses == [200, 200, 200, 429, 429, 429]
    assert request(server, "/health").status == 200  # not counted against the budget
    for method in ("FOO1", "BAR2"):  # methods a client makes up add no series
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request(method, "/health")
        conn.getresponse().read()
        conn.close()

    samples = scrape(server)
    count = "bounty_http_requests_total"
    assert value(samples, count, route="/bounties", method="GET", status="200") == 1
    assert value(samples, count, route="/bounties", status="304") == 1
    assert value(samples, count, route="/bounties/<int:record_id>", status="200") == 1
    assert value(samples, count, route="/bounties/<int:record_id>", status="404") == 1
    assert value(samples, count, route="unmatched", status="404") == 1
    assert value(samples, count, route="/submissions", status="200") == 3
    assert value(samples, count, route="/submissions", status="429") == 3
    assert value(samples, count, route="/health", method="GET", status="200") == 1
    assert value(samples, count, route="/health", method="other") == 2
    assert not [labels for (name, labels) in samples if name == count and ("method", "FOO1") in labels]
    latency = "bounty_http_request_duration_seconds"
    assert value(samples, f"{latency}_count", route="/bounties") == 2
    assert value(samples, f"{latency}_count", route="/submissions") == 6
    assert 0 < value(samples, f"{latency}_sum", route="/submissions") < 6
    assert value(samples, f"{latency}_bucket", route="/submissions", le="+Inf") == 6
    assert value(samples, "process_resident_memory_bytes") > 0  # the process's own figures too


def test_websocket_connections_messages_and_close_codes_are_counted(serve: Callable[..., Server],
                                                                    active: Deployment) -> None:
    h.make_tree(active)
    server = serve()
    client = open_client(server.url())
    snapshot: list[dict[str, Any]] = []
    while not snapshot or snapshot[-1]["type"] != "snapshot.complete":
        snapshot.append(receive(client))
    samples = scrape(server)
    assert value(samples, "bounty_ws_connections_open") == 1
    assert value(samples, "bounty_ws_messages_sent_total") == len(snapshot)
    assert value(samples, "bounty_ws_slowest_send_queue") == 0
    assert value(samples, "bounty_ws_snapshots_sending") == value(samples, "bounty_ws_snapshots_waiting") == 0
    client.close(code=1000)
    deadline = time.monotonic() + 10
    while value(samples, "bounty_ws_connections_open") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        samples = scrape(server)
    assert value(samples, "bounty_ws_connections_open") == 0
    assert value(samples, "bounty_ws_closes_total", code="1000") == 1


def test_metrics_are_refused_through_a_proxy_and_to_peers_not_allowed(serve: Callable[..., Server]) -> None:
    allowed = serve()
    proxied = request(allowed, "/metrics", **{"X-Forwarded-For": "203.0.113.7"})
    assert proxied.status == 403
    assert proxied.getheader("Content-Type") == "application/json"
    assert b"BOUNTY_METRICS_ALLOWED" in proxied.body  # type: ignore[attr-defined]
    elsewhere = serve(BOUNTY_METRICS_ALLOWED="10.0.0.0/8")
    assert request(elsewhere, "/metrics").status == 403
    assert request(allowed, "/metrics").status == 200
