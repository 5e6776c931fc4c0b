"""The prebuilt frames' write (bountysite/daphne_ws.py, `write`): straight to the socket when
Twisted holds nothing for it, through Twisted's buffer for whatever the socket does not take at once
(and always on transports that are not plain TCP). The bypass reads Twisted's private buffers, so
two tests run Twisted's real TCP transport on a real socket: one fails when Twisted keeps unsent
bytes anywhere the bypass does not look, one once Twisted sends a write on the spot itself (then
`transport.write` costs no more, and the bypass can go)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet import tcp
from twisted.internet.protocol import Protocol

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


# ---------------------------------------------------------------------------- Twisted's real transport


class _Reactor:
    """Twisted's reactor as a TCP transport sees it: whether it waits to write is all we need."""

    def __init__(self) -> None:
        self.writers: set[Any] = set()

    def addReader(self, reader: Any) -> None:  # noqa: N802 (Twisted's interface)
        pass

    def removeReader(self, reader: Any) -> None:  # noqa: N802
        pass

    def addWriter(self, writer: Any) -> None:  # noqa: N802
        self.writers.add(writer)

    def removeWriter(self, writer: Any) -> None:  # noqa: N802
        self.writers.discard(writer)


@pytest.fixture
def connection() -> Iterator[tuple[Any, _Reactor, socket.socket]]:
    """Twisted's TCP transport on one end of a real connection with small buffers, the other end."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4_096)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4_096)
    ours.setblocking(False)
    theirs.settimeout(5)
    reactor = _Reactor()
    server: Any = tcp.Server  # the reactor and the port as duck types
    transport = server(ours, Protocol(), ("127.0.0.1", 1), None, 1, reactor)
    with ours, theirs:
        yield transport, reactor, theirs


def _drain(transport: Any, reactor: _Reactor, peer: socket.socket) -> bytes:
    """What the peer reads until Twisted holds nothing more, the reactor writing whenever Twisted
    waits to."""
    received = b""
    while transport in reactor.writers:
        transport.doWrite()
        received += peer.recv(1 << 20)  # Twisted holds more only while the socket is full: never empty here
    peer.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while chunk := peer.recv(1 << 20):
            received += chunk
    peer.settimeout(5)
    return received


def test_twisted_keeps_unsent_bytes_only_where_the_bypass_looks(connection: Any) -> None:
    transport, reactor, peer = connection
    first, second = b"a" * 50_000, b"b" * 50_000  # each far more than the socket takes
    transport.write(first)  # Twisted holds it until the reactor has it written
    write(transport, b"1")  # so this waits behind it
    transport.doWrite()  # the socket takes what it can of both; Twisted holds the rest
    received = peer.recv(1 << 20)  # the socket has room again, before the reactor writes more
    write(transport, b"2")
    transport.write(second)
    write(transport, b"3")
    assert received + _drain(transport, reactor, peer) == first + b"12" + second + b"3"
    write(transport, b"last")  # nothing held now: on the spot, without the reactor
    assert transport not in reactor.writers
    assert _drain(transport, reactor, peer) == b"last"


def test_twisted_alone_still_waits_for_the_reactor_to_send_a_write(connection: Any) -> None:
    transport, reactor, peer = connection
    transport.write(b"frames")
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(100)
    assert transport in reactor.writers, "Twisted sends a write on the spot now: the bypass (write) can go"
