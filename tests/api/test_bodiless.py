"""bountysite/bodiless.py (BodilessResponses), on a real daphne: a HEAD's streamed body,
and a 304's Content-Length, never reach the client; and daphne alone still sends that body (the
reason for the layer)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.api.streaming_app import PARTS
from tests.api.wire import Wire, read_until_quiet
from tests.servers import Server, serving


@pytest.fixture(scope="module")
def bare() -> Iterator[Server]:
    with serving("tests.api.streaming_app:application") as server:
        yield server


@pytest.fixture(scope="module")
def wrapped() -> Iterator[Server]:
    with serving("tests.api.streaming_app:bodiless") as server:
        yield server


def test_daphne_alone_still_sends_a_streamed_body_after_a_heads_headers(bare: Server) -> None:
    """When this fails, daphne keeps a HEAD bodiless itself: the layer's HEAD part can go."""
    with socket.create_connection(("127.0.0.1", bare.port), timeout=10) as connection:
        connection.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head, _, after = read_until_quiet(connection).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert after == b"".join(PARTS[1:])  # Twisted swallows only the first write


def test_a_head_sends_the_headers_only_and_the_connection_goes_on(wrapped: Server) -> None:
    wire = Wire(wrapped)
    head = wire.send("HEAD", "/")
    assert (head.status, head.headers["content-type"], head.body) == (200, "text/plain", b"")
    got = wire.send("GET", "/")
    assert (got.headers["transfer-encoding"], got.body) == ("chunked", b"".join(PARTS))
    assert wire.send("HEAD", "/").body == b""
    wire.finish()


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_304_sends_no_content_length_and_no_body(wrapped: Server, method: str) -> None:
    wire = Wire(wrapped)
    for _ in range(2):
        unchanged = wire.send(method, "/?304")
        assert unchanged.status == 304 and "content-length" not in unchanged.headers
    wire.finish()
