"""The service's status lines on the wire, through a real daphne serving bountysite.asgi: the rate
limit's 429 says `Too Many Requests` (bountysite/daphne_http.py's reason phrases; daphne alone
writes `429 Unknown Status`, which clients show: `requests` raises "429 Client Error: Unknown
Status", a browser's `statusText` is "Unknown Status")."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from records.models import Deployment
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[Server]:
    """One daphne for the module on the test database, as in production but for a rate limit of one
    request per hour."""
    env = {
        **os.environ, "DATABASE_URL": database_url(), "BOUNTY_CHAIN_ID": "91342",
        "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
        "BOUNTY_RATE_LIMIT": "1", "BOUNTY_RATE_WINDOW_SECONDS": "3600",
    }
    for name in ("BOUNTY_RPC_URL", "DJANGO_DEBUG"):
        env.pop(name, None)
    instance = start_daphne(env)
    yield instance
    stop(instance.process)


def head(server: Server, path: str) -> list[str]:
    """The lines of the head of the server's answer to `GET path`, the status line first, read
    from a raw HTTP/1.1 connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                    "Connection: close\r\n\r\n".encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = raw.recv(65_536)
            assert chunk, f"the connection closed before the end of the head: {received!r}"
            received += chunk
    return received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")


def test_a_request_past_the_rate_limit_answers_429_too_many_requests(server: Server, active: Deployment) -> None:
    # A window may end between two requests (and with Redis, other processes' requests count too):
    # the first 429 within three requests is the one past the limit.
    answers = [head(server, "/bounties") for _ in range(3)]
    limited = next((lines for lines in answers if lines[0].split(" ", 2)[1] == "429"), None)
    assert limited is not None, [lines[0] for lines in answers]
    assert limited[0] == "HTTP/1.1 429 Too Many Requests"
    assert any(line.lower().startswith("retry-after: ") for line in limited[1:]), limited

