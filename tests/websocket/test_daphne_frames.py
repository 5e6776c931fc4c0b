"""The websocket.frames extension's write (bountysite/daphne_ws.py, `write`): straight to the
socket when Twisted holds nothing for it, through Twisted's buffer for whatever the socket does not
take at once (and always on transports that are not plain TCP)."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import tcp

from bountysite.daphne_ws import write


class _Socket:
    def __init__(self, takes: int | type[OSError]) -> None:
        self.takes, self.sent = takes, b""

    def send(self, data: bytes) -> int:
        if not isinstance(self.takes, int):
            raise self.takes()
        self.sent += data[: self.takes]
        return min(self.takes, len(data))


def _transport(takes: int | type[OSError], buffered: bytes = b"") -> tuple[Any, list[bytes]]:
    transport: Any = tcp.Server.__new__(tcp.Server)  # attributes only: no reactor, no real socket
    transport.socket, transport.dataBuffer, transport._tempDataBuffer = _Socket(takes), buffered, []
    transport.disconnecting = False
    queued: list[bytes] = []
    transport.write = queued.append
    return transport, queued


def test_frames_the_socket_takes_whole_skip_twisteds_buffer() -> None:
    transport, queued = _transport(takes=1_000)
    write(transport, b"frames")
    assert (transport.socket.sent, queued) == (b"frames", [])


def test_what_the_socket_does_not_take_goes_to_twisteds_buffer_in_order() -> None:
    transport, queued = _transport(takes=2)
    write(transport, b"frames")
    assert (transport.socket.sent, queued) == (b"fr", [b"ames"])


@pytest.mark.parametrize("error", [BlockingIOError, ConnectionResetError])
def test_a_socket_that_refuses_leaves_everything_to_twisted(error: type[OSError]) -> None:
    transport, queued = _transport(takes=error)
    write(transport, b"frames")
    assert queued == [b"frames"]


def test_bytes_already_buffered_keep_their_place_ahead() -> None:
    transport, queued = _transport(takes=1_000, buffered=b"earlier")
    write(transport, b"frames")
    assert (transport.socket.sent, queued) == (b"", [b"frames"])


def test_other_transports_are_written_through_twisted() -> None:
    queued: list[bytes] = []

    class Other:
        write = staticmethod(queued.append)

    write(Other(), b"frames")
    assert queued == [b"frames"]
