"""bountysite/daphne_ws.py, bend by bend, against real daphne processes: one serving a bare
application (bend_app.py) with the bends installed, one serving it as daphne upstream does. For
each bend, one test fails if the bend is wrong, and one fails once an upgrade of daphne (or
autobahn, Twisted) makes it unnecessary -- then delete the bend and its tests. (The HTTP side's
bend is checked the same two ways in test_daphne_http.py; the ASGI layer for bodiless responses,
bountysite/bodiless.py, in tests/api/test_bodiless.py.)"""

from __future__ import annotations

import inspect
import pprint
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest

from tests.servers import Server
from tests.websocket.bend_app import DENIAL_BODY, ORDER_MESSAGES, SEND_BUFFER_BYTES
from tests.websocket.conftest import UNREAD_SECONDS, close_code, flood_seconds, open_client, receive, receive_n, upgrade

WEBSOCKET_FLOOD = (b"GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


# ---------------------------------------------------------------------------- close codes and reasons


@pytest.mark.parametrize("code", [1008, 1000, 1001, 1011, 1013, 4000])
def test_it_sends_the_close_code_of_the_application(bent: Server, code: int) -> None:
    with open_client(f"ws://127.0.0.1:{bent.port}/close?code={code}") as client:
        assert close_code(client) == code


def test_daphne_alone_still_cannot_close_with_1008(upstream: Server) -> None:
    with open_client(f"ws://127.0.0.1:{upstream.port}/close?code=1008") as client:
        assert close_code(client) != 1008, "daphne sends 1008 itself now: the close codes' bend can go"


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
        assert client.close_reason == "", "daphne sends the close reason itself now: that part of the bend can go"


# ---------------------------------------------------------------------------- backpressure


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
        "the kernel holds little for a slow websocket client now: the backpressure's SO_SNDBUF can go"


def test_a_send_waits_while_the_client_reads_nothing(bent: Server) -> None:
    assert flood_seconds(bent, WEBSOCKET_FLOOD) >= UNREAD_SECONDS * 0.75


def test_daphne_alone_still_completes_every_send_at_once(upstream: Server) -> None:
    assert flood_seconds(upstream, WEBSOCKET_FLOOD) < UNREAD_SECONDS * 0.5, \
        "daphne has backpressure now: the backpressure's bend can go"


# ---------------------------------------------------------------------------- prebuilt frames


def test_prebuilt_frames_arrive_as_the_messages_they_frame(bent: Server) -> None:
    with open_client(f"ws://127.0.0.1:{bent.port}/frames") as client:
        assert receive(client) == {"extension": True}
        assert receive(client) == {"second": True}


def test_frames_written_at_once_never_overtake_a_message_sent_before_them(bent: Server) -> None:
    """What `write_now` sends on the socket directly must wait behind whatever autobahn or Twisted
    still holds: fails when either keeps unsent bytes where the bypass does not look."""
    with open_client(f"ws://127.0.0.1:{bent.port}/order", max_size=None) as client:
        assert [message["n"] for message in receive_n(client, ORDER_MESSAGES)] == list(range(ORDER_MESSAGES))


def test_daphne_alone_still_offers_no_frames_extension(upstream: Server) -> None:
    with open_client(f"ws://127.0.0.1:{upstream.port}/frames") as client:
        assert receive(client) == {"extension": False}, "daphne offers websocket.frames now: that bend can go"


# ---------------------------------------------------------------------------- denial responses


def test_an_application_answers_the_handshake_with_its_status_headers_and_body(bent: Server) -> None:
    response = upgrade(bent.port, "/deny")
    assert (response.status, response.reason) == (429, "Too Many Requests")
    assert response.getheader("Retry-After") == "7"
    assert response.getheader("Content-Type") == "application/json"
    assert response.read() == DENIAL_BODY


def test_daphne_alone_still_offers_no_denial_extension(upstream: Server) -> None:
    response = upgrade(upstream.port, "/deny")
    assert response.status == 101, "daphne offers websocket.http.response now: the denial responses' bend can go"


# ---------------------------------------------------------------------------- debug lines formatted only when written


class Counted:
    """A value that counts how often it is formatted."""

    def __init__(self) -> None:
        self.formatted = 0

    def __repr__(self) -> str:
        self.formatted += 1
        return "<counted>"


def test_a_debug_lines_value_is_formatted_only_when_the_line_is_written() -> None:
    from autobahn.websocket import protocol

    from bountysite import daphne_ws

    daphne_ws.install()
    value = Counted()
    lazy = cast(Any, protocol).pformat([("option", value, "Factory")])  # what autobahn passes its debug line
    assert value.formatted == 0
    assert "\n{attrs}".format(attrs=lazy) == "\n" + pprint.pformat([("option", value, "Factory")])  # noqa: UP032
    assert value.formatted == 2


def test_autobahn_alone_still_formats_every_connections_options_eagerly() -> None:
    from autobahn.websocket.protocol import WebSocketProtocol

    source = inspect.getsource(WebSocketProtocol._connectionMade)
    assert "attrs=pformat(" in source, "autobahn formats its debug line lazily now: that bend can go"
