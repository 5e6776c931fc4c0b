"""bountysite/daphne_bend.py, patch by patch, against real daphne processes: one serving a bare
application with the bend installed, one serving it as daphne upstream does. For each patch, one
test fails if the bend is wrong, and one fails once an upgrade of daphne (or autobahn, Twisted)
makes it unnecessary -- then delete the patch and its tests. (Bend 5, the ASGI layer for bodiless
responses, is checked in tests/api/test_bodiless.py; patch 6's stall limit through Django, with a database
cursor to close, in tests/api/test_slow_readers.py.)"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import Server, start_daphne, stop
from tests.websocket.bend_app import DENIAL_BODY, FLOOD_MESSAGES, HTTP_STALL_SECONDS, SEND_BUFFER_BYTES
from tests.websocket.conftest import close_code, open_client, receive, upgrade

UNREAD_SECONDS = 2.0  # how long the flood's client reads nothing


@pytest.fixture(scope="module")
def bent() -> Iterator[Server]:
    instance = start_daphne(dict(os.environ), "tests.websocket.bend_app_installed:application")
    yield instance
    stop(instance.process)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    instance = start_daphne(dict(os.environ), "tests.websocket.bend_app:application")
    yield instance
    stop(instance.process)


# ---------------------------------------------------------------------------- 1. close codes


@pytest.mark.parametrize("code", [1008, 1000, 1001, 1011, 1013, 4000])
def test_it_sends_the_close_code_of_the_application(bent: Server, code: int) -> None:
    with open_client(f"ws://127.0.0.1:{bent.port}/close?code={code}") as client:
        assert close_code(client) == code


def test_daphne_alone_still_cannot_close_with_1008(upstream: Server) -> None:
    with open_client(f"ws://127.0.0.1:{upstream.port}/close?code=1008") as client:
        assert close_code(client) != 1008, "daphne sends 1008 itself now: patch 1 can go"


@pytest.mark.parametrize("code", [1008, 1013, 4000])
def test_it_sends_the_close_reason_of_the_application(bent: Server, code: int) -> None:
    with open_client(f"ws://127.0.0.1:{bent.port}/close?code={code}&reason=too+slow+%C3%A9") as client:
        assert close_code(client) == code
        assert client.close_reason == "too slow é"


def test_it_cuts_a_long_close_reason_to_what_a_close_frame_holds(bent: Server) -> None:
    with open_client(f"ws://127.0.0.1:{bent.port}/close?code=1013&reason={'é' * 100}") as client:
        assert close_code(client) == 1013
        assert client.close_reason == "é" * 61  # 122 of the 123 bytes: the 62nd would be split


def test_daphne_alone_still_drops_the_close_reason(upstream: Server) -> None:
    with open_client(f"ws://127.0.0.1:{upstream.port}/close?code=4000&reason=why") as client:
        assert close_code(client) == 4000
        assert client.close_reason == "", "daphne sends the close reason itself now: that part of patch 1 can go"


# ---------------------------------------------------------------------------- 2. backpressure

WEBSOCKET_FLOOD = (b"GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
HTTP_FLOOD = b"GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
LAST_MESSAGE = re.compile(rb'\{"flood_seconds": [0-9.e-]+\}')


def _flood_seconds(server: Server, request: bytes = WEBSOCKET_FLOOD) -> float:
    """Opens /flood on a raw socket, reads nothing for UNREAD_SECONDS, then everything: how long
    the application's sends took to complete."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(request)
        time.sleep(UNREAD_SECONDS)
        data = b""
        wanted = FLOOD_MESSAGES * (1 << 20)
        while not (last := LAST_MESSAGE.search(data, wanted)):
            chunk = raw.recv(1 << 20)
            assert chunk, "the server closed before its last message"
            data += chunk
    flood: dict[str, Any] = json.loads(last.group())
    return float(flood["flood_seconds"])


def _kernel_queue_for_an_unread_client(server: Server) -> int:
    """Opens /flood on a socket that reads nothing: the bytes the server's kernel then holds for it
    (the send queue of the server's end, from /proc/net/tcp)."""
    with socket.socket() as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
        raw.connect(("127.0.0.1", server.port))
        raw.sendall(WEBSOCKET_FLOOD)
        time.sleep(UNREAD_SECONDS)
        client_port = raw.getsockname()[1]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
            if (local, remote) == (server.port, client_port):
                return int(fields[4].split(":")[0], 16)
    raise AssertionError("the server's end of the connection is not in /proc/net/tcp")


def test_the_kernel_holds_little_for_a_client_that_reads_nothing(bent: Server) -> None:
    assert _kernel_queue_for_an_unread_client(bent) <= 4 * SEND_BUFFER_BYTES  # Linux doubles SO_SNDBUF


def test_daphne_alone_still_lets_the_kernel_queue_megabytes(upstream: Server) -> None:
    assert _kernel_queue_for_an_unread_client(upstream) > 4 * SEND_BUFFER_BYTES, \
        "the kernel holds little for a slow websocket client now: patch 2's SO_SNDBUF can go"


def test_a_send_waits_while_the_client_reads_nothing(bent: Server) -> None:
    assert _flood_seconds(bent) >= UNREAD_SECONDS * 0.75


def test_daphne_alone_still_completes_every_send_at_once(upstream: Server) -> None:
    assert _flood_seconds(upstream) < UNREAD_SECONDS * 0.5, "daphne has backpressure now: patch 2 can go"


# ---------------------------------------------------------------------------- 3. prebuilt frames


def test_prebuilt_frames_arrive_as_the_messages_they_frame(bent: Server) -> None:
    with open_client(f"ws://127.0.0.1:{bent.port}/frames") as client:
        assert receive(client) == {"extension": True}
        assert receive(client) == {"second": True}


def test_daphne_alone_still_offers_no_frames_extension(upstream: Server) -> None:
    with open_client(f"ws://127.0.0.1:{upstream.port}/frames") as client:
        assert receive(client) == {"extension": False}, "daphne offers websocket.frames now: patch 3 can go"


# ---------------------------------------------------------------------------- 6. HTTP bodies with backpressure


def test_an_http_body_is_sent_as_the_client_takes_it(bent: Server) -> None:
    assert _flood_seconds(bent, HTTP_FLOOD) >= UNREAD_SECONDS * 0.75


def test_daphne_alone_still_takes_every_http_body_message_at_once(upstream: Server) -> None:
    assert _flood_seconds(upstream, HTTP_FLOOD) < UNREAD_SECONDS * 0.5, "daphne has backpressure now: patch 6 can go"


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


# ---------------------------------------------------------------------------- 7. denial responses


def test_an_application_answers_the_handshake_with_its_status_headers_and_body(bent: Server) -> None:
    response = upgrade(bent.port, "/deny")
    assert (response.status, response.reason) == (429, "Too Many Requests")
    assert response.getheader("Retry-After") == "7"
    assert response.getheader("Content-Type") == "application/json"
    assert response.read() == DENIAL_BODY


def test_daphne_alone_still_offers_no_denial_extension(upstream: Server) -> None:
    response = upgrade(upstream.port, "/deny")
    assert response.status == 101, "daphne offers websocket.http.response now: patch 7 can go"
