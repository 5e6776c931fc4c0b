"""A strict HTTP/1.1 client for tests through a real server: one keep-alive connection, framed by
h11, that fails on any byte a response sends beyond its end."""

from __future__ import annotations

import json
import select
import socket
from dataclasses import dataclass
from typing import Any

import h11

from tests.servers import Server

QUIET_SECONDS = 0.3  # how long a connection must stay silent after a test's last response


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Wire:
    """One HTTP/1.1 connection, kept alive from request to request."""

    def __init__(self, server: Server) -> None:
        self.socket = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self.host = f"127.0.0.1:{server.port}"
        self.h11 = h11.Connection(h11.CLIENT)

    def send(self, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b"") -> Reply:
        """The response to one request, checked for its framing; the connection stays open."""
        if self.h11.our_state is h11.DONE:
            self.h11.start_next_cycle()
        fields = {"Host": self.host, "Accept": "application/json", **(headers or {})}
        if body:
            fields["Content-Length"] = str(len(body))
        self._write(h11.Request(method=method, target=target, headers=list(fields.items())))
        if body:
            self._write(h11.Data(data=body))
        self._write(h11.EndOfMessage())
        reply = self._read()
        assert_framed(reply, method)
        return reply

    def finish(self) -> None:
        """Nothing more arrives after the last response."""
        left = read_until_quiet(self.socket)
        assert left == b"", f"after the last response: {left!r}"
        self.socket.close()

    def _write(self, event: h11.Request | h11.Data | h11.EndOfMessage) -> None:
        data = self.h11.send(event)
        if data:
            self.socket.sendall(data)

    def _read(self) -> Reply:
        head: h11.Response | None = None
        body = bytearray()
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as error:  # e.g. bytes left by the previous response
                raise AssertionError(f"unreadable response: {str(error)[:300]}") from None
            if event is h11.NEED_DATA:
                self.h11.receive_data(self.socket.recv(65_536))
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise AssertionError(f"unexpected {event!r}")
        assert head is not None
        assert head.http_version == b"1.1"
        assert self.h11.their_state is h11.DONE, "the server would close the connection"
        assert self.h11.trailing_data == (b"", False), f"sent after the response: {self.h11.trailing_data!r}"
        headers: dict[str, str] = {}
        for name, value in head.headers:
            key = name.decode()
            headers[key] = f"{headers[key]}, {value.decode()}" if key in headers else value.decode()
        return Reply(head.status_code, headers, bytes(body))


def assert_framed(reply: Reply, method: str) -> None:
    """Content-Length or chunking, never both; neither where no body may follow."""
    length, coding = reply.headers.get("content-length"), reply.headers.get("transfer-encoding")
    assert length is None or coding is None, reply.headers
    if method == "HEAD" or reply.status == 304:
        assert reply.body == b"" and coding is None, reply.headers
    else:
        assert coding == "chunked" or length == str(len(reply.body)), reply.headers


def read_until_quiet(connection: socket.socket) -> bytes:
    """Every byte that arrives until the connection is silent for QUIET_SECONDS (or closed)."""
    received = bytearray()
    while select.select([connection], [], [], QUIET_SECONDS)[0]:
        data = connection.recv(65_536)
        if not data:
            break
        received += data
    return bytes(received)
