"""bountysite/daphne_bend.py, patch 4: a real daphne's status lines carry the status's reason phrase, the
rate limit's 429 included (Twisted alone writes `429 Unknown Status`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server() -> Iterator[Server]:
    instance = start_daphne({**os.environ, "DATABASE_URL": database_url(), "BOUNTY_RATE_LIMIT": "1"})
    yield instance
    stop(instance.process)


def status_line(server: Server, path: str) -> str:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
        client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while b"\r\n" not in answer:
            chunk = client.recv(4096)
            assert chunk, "the connection closed before the status line"
            answer += chunk
    return answer.split(b"\r\n", 1)[0].decode()


def test_a_rate_limited_answer_says_too_many_requests(server: Server) -> None:
    status_line(server, "/bounties")
    assert status_line(server, "/bounties") == "HTTP/1.1 429 Too Many Requests"


def test_the_usual_statuses_keep_their_phrases(server: Server) -> None:
    assert status_line(server, "/health") == "HTTP/1.1 200 OK"


def test_twisted_alone_still_lacks_the_phrase() -> None:
    """Fails once Twisted knows 429 itself (asked in a process without the patch): delete the patch then."""
    code = "from twisted.web import http; print(429 in http.RESPONSES)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", "Twisted names 429 now: patch 4 of bountysite/daphne_bend.py can go"
