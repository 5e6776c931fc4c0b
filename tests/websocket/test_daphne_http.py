"""bountysite/daphne_http.py, bend by bend, against real daphne processes: one serving a bare
application (bend_app.py) with the bends installed, one serving it as daphne upstream does. For
each bend, one test fails if the bend is wrong, and one fails once an upgrade of daphne (or
Twisted) makes it unnecessary -- then delete the bend and its tests. The first two through Django,
with a database cursor to close and a spool taken back for room: tests/api/test_slow_readers.py;
the reason phrases through the service's rate limit: tests/api/test_reason_phrases.py."""

from __future__ import annotations

import socket
import time
from http import HTTPStatus

from tests.servers import Server
from tests.websocket.bend_app import FAILED_LENGTH, FLOOD_MESSAGES, HTTP_STALL_SECONDS
from tests.websocket.conftest import LAST_MESSAGE, UNREAD_SECONDS, flood_seconds

HTTP_FLOOD = b"GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
FAIL = b"GET /fail HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


# -------------------------------------------------------------------- bodies with backpressure, and a stall limit


def test_an_http_body_is_sent_as_the_client_takes_it(bent: Server) -> None:
    assert flood_seconds(bent, HTTP_FLOOD) >= UNREAD_SECONDS * 0.75


def test_daphne_alone_still_takes_every_http_body_message_at_once(upstream: Server) -> None:
    assert flood_seconds(upstream, HTTP_FLOOD) < UNREAD_SECONDS * 0.5, "daphne has backpressure now: the bend can go"


def test_an_http_client_that_takes_nothing_is_cut_off_after_the_stall_limit(bent: Server) -> None:
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)  # the server's socket fills after little
    with raw:
        raw.connect(("127.0.0.1", bent.port))
        raw.sendall(HTTP_FLOOD)
        time.sleep(HTTP_STALL_SECONDS + 2)
        raw.settimeout(5)
        received, closed = b"", True
        try:
            while chunk := raw.recv(1 << 20):
                received += chunk
        except ConnectionResetError:  # aborted: what the socket still held is gone
            pass
        except TimeoutError:
            closed = False
    assert closed, f"the connection is still open after {len(received)} bytes"
    assert len(received) < FLOOD_MESSAGES * (1 << 20) // 2
    assert not LAST_MESSAGE.search(received)


# -------------------------------------------------------------------------------------------------- reason phrases

FINAL_STATUSES = [status for status in HTTPStatus if status >= 200]


def _status_line(server: Server, code: int) -> str:
    """The status line of the server's answer to `/status?code=<code>`, as a raw HTTP/1.1 client reads it."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(f"GET /status?code={code} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while b"\r\n" not in received:
            chunk = raw.recv(4096)
            assert chunk, f"the connection closed before the status line: {received!r}"
            received += chunk
    return received.split(b"\r\n", 1)[0].decode("latin-1")


def _wrong_phrases(server: Server) -> dict[int, str]:
    """Every final status HTTP knows whose status line from `server` is not `HTTP/1.1 <code> <its phrase>`."""
    lines = {status.value: _status_line(server, status.value) for status in FINAL_STATUSES}
    return {code: line for code, line in lines.items() if line != f"HTTP/1.1 {code} {HTTPStatus(code).phrase}"}


def test_a_429_says_too_many_requests_on_its_status_line(bent: Server) -> None:
    assert _status_line(bent, 429) == "HTTP/1.1 429 Too Many Requests"


def test_every_status_carries_its_reason_phrase(bent: Server) -> None:
    assert _wrong_phrases(bent) == {}


def test_daphne_alone_still_sends_statuses_without_their_phrase(upstream: Server) -> None:
    wrong = _wrong_phrases(upstream)
    assert wrong, "daphne sends every status's phrase now: the reason-phrase bend can go"
    assert wrong.get(429) == "HTTP/1.1 429 Unknown Status", wrong


# ---------------------------------------------------------------------------- a failure after the response started


def _fail(server: Server) -> tuple[bytes, bool]:
    """Requests /fail: what arrives within 5 s (daphne checks its applications every second), and
    whether the server then closed the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(FAIL)
        received = b""
        try:
            while chunk := raw.recv(65_536):
                received += chunk
        except ConnectionResetError:  # aborted
            pass
        except TimeoutError:
            return received, False
    return received, True


def test_a_response_that_fails_after_its_start_is_cut_off_and_the_server_goes_on(bent: Server) -> None:
    for _ in range(2):  # the second shows that daphne still checks its applications
        received, closed = _fail(bent)
        head, _, body = received.partition(b"\r\n\r\n")
        assert closed and head.startswith(b"HTTP/1.1 200") and len(body) < FAILED_LENGTH, received


def test_daphne_alone_still_leaves_the_client_of_a_failed_started_response_waiting(upstream: Server) -> None:
    """Last in this file: daphne's application checker stops for good here, as it does upstream."""
    _, closed = _fail(upstream)
    assert not closed, "daphne ends a response that failed after its start now: that bend can go"
