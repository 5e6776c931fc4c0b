"""Where the service bends daphne 4.2's websockets (and the Twisted and autobahn under them). Every
bend of daphne's websocket side lives here, each with its reason beside its code; the HTTP side's
live in bountysite/daphne_http.py. `bountysite.asgi` calls `install()`, so `daphne
bountysite.asgi:application` and `manage.py runserver` (daphne's) both get them; it is idempotent.

tests/websocket/test_daphne_ws.py serves one bare ASGI application from two real daphne processes,
one with the bends and one without: for each bend one test fails if the bend is wrong, and one
fails once an upgrade makes it unnecessary (upstream then does it alone: delete the bend and its
tests).

**Close codes and reasons.** Upstream: `WebSocketProtocol.serverClose` passes the application's
code to autobahn's `sendClose`, which accepts only 1000 and 3000-4999 (the IANA rules for
*registering* codes, not RFC 6455's rules for *sending* them: section 7.4.1 defines 1001-1003 and
1007-1011 for endpoints to send; IANA added 1012-1014); any other code raises inside daphne's
reply handler, the application dies, and the client sees 1011. We need 1008 (policy violation)
for the websocket's limits (docs/api.md, Limits and close codes). The bend calls autobahn's
`sendCloseFrame` -- the method `sendClose` itself ends in, minus the check -- for a code an
endpoint may send, and `sendClose` for everything else. Upstream also drops the `reason` of
`websocket.close` (ASGI's, which Channels' `close(code, reason)` sends): we need it to tell a
client which limit closed it (a snapshot taken too slowly, no snapshot slot free). The bend passes
it on, cut to the 123 bytes a close frame holds.

**Backpressure.** Upstream: `websocket.send` completes at once and Twisted buffers the bytes
without limit, so a client that stops reading makes the server hold everything ever sent to it and
the application can never tell that the client is too slow. We need `send` to wait while the
socket is full (the ASGI spec lets it; uvicorn waits the same way), so that the application's own
bounded queue (records.ws.outbox.Outbox) overflows and closes the client with 1008. The bend gives
the websocket's transport a streaming producer (`Writable`) once accepted: Twisted pauses it when
its write buffer passes `bufferSize` (64 KiB) and resumes it once flushed, and `websocket.send`
(like prebuilt frames) waits while it is paused. The close frame then waits behind what the client
has not read yet, so a slow client gets CLOSE_HANDSHAKE_SECONDS, not autobahn's default of 1 s, to
read up to it and answer (otherwise it would see 1006). Below Twisted, Linux grows a socket's
kernel send buffer up to `net.ipv4.tcp_wmem`'s maximum (4 MiB) whether the client reads or not: a
client reading at 50 KB/s then has 80 s of data queued before anything the server sends next, a
close frame included, and the server's send completes long before the client has read. The bend
also sets the accepted websocket's SO_SNDBUF to `install(send_buffer_bytes=...)`
(BOUNTY_WS_SEND_BUFFER_BYTES; Linux doubles it), so that a send waits for the client, and a
limit's close frame reaches it within the handshake.

**Prebuilt frames: the `websocket.frames` extension.** Upstream: each `websocket.send` is framed
by autobahn and queued by Twisted on its own: a burst of 1,000 changes to 1,000 clients is about
1,000,000 such round trips, seconds of CPU. A server frame is never masked, so the same bytes are
right for every client: records.ws builds each message's frame once. The bend announces
`scope["extensions"]["websocket.frames"]`; an application that finds it may send `{"type":
"websocket.frames", "frames": <bytes>}` of complete, unmasked, unfragmented text frames (never
control frames: keepalive pings and the close handshake stay autobahn's), which daphne writes as
they are (dropped on a socket no longer open), with the backpressure above. The extension's
`write_now(frames) -> bool` writes frames synchronously from any code on the server's event loop
when the socket is open and not held back, and returns False (writing nothing) otherwise: the feed
calls it for each client in one loop, sparing a task switch and an ASGI round trip per client per
wake-up; the caller makes sure nothing it sent through `send` still waits to be written
(records.ws.outbox.Outbox). Frames behind autobahn's send queue go through it (`sendData`); the
others are sent on the socket on the spot when Twisted holds nothing for it (`write`, bypassing
Twisted's buffer), and through `transport.write` otherwise. Through `transport.write` alone,
bench/ws_broadcast.py's broadcast of 500 changes to 1,000 clients reached the last client twice as
late at the median, 92 ms against 44 (bench/README.md, Websocket: the bypass measured). The bypass
reads Twisted's private buffers (`dataBuffer`, `_tempDataBuffer`) and autobahn's `send_queue`:
tests/websocket/test_daphne_frames.py fails when Twisted holds unsent bytes anywhere else, or sends
a write on the spot itself (the bypass can go then), and test_daphne_ws.py when frames written at
once overtake a message sent before them, whether Twisted or autobahn held it.

**Debug lines formatted only when written.** Upstream: autobahn's `_connectionMade` formats every
option of each new connection with `pprint.pformat` for a debug line (`self.log.debug("\n{attrs}",
attrs=pformat(...))`), whether debug lines are written or not: about 40 options, formatted for
every websocket a reconnect storm brings back. We need a connection to cost what it does. The bend
gives autobahn's protocol module a `pformat` that returns a `LazyFormat`: the same text, made only
if the line is written. tests/websocket/test_daphne_ws.py checks the text is the same and made
only when asked for, and fails once autobahn no longer formats eagerly.

**Denial responses: the `websocket.http.response` extension.** Upstream: an application can refuse
a websocket handshake only with `websocket.close` before accepting, which daphne answers `403
Access denied`, with no header of the application's; and daphne ignores ASGI's
`websocket.http.response.start` / `.body`. We need the connection rate limit (records.limits) to
answer as the HTTP rate limit does: 429, `Retry-After`, the error shape. The bend announces
`scope["extensions"]["websocket.http.response"]` and, for those messages before the handshake
completes, writes the application's status, headers and body as the HTTP response to the upgrade
request (with `Content-Length` and `Connection: close`), then closes the connection; the
handshake never completes and the application gets `websocket.disconnect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from functools import partial
from http import HTTPStatus
from typing import Any, cast

from autobahn.websocket import protocol as autobahn_protocol
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import tcp
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer  # type: ignore[import-untyped]

FRAMES_EXTENSION = "websocket.frames"  # the scope's extension, and the type of the message that uses it
DENIAL_EXTENSION = "websocket.http.response"  # the scope's extension; its messages' types start with it
CLOSE_HANDSHAKE_SECONDS = 10
# RFC 6455 7.4.1 codes an endpoint may send, plus IANA's 1012-1014; 1004-1006 and 1015 never go
# on the wire, and 1010 is for clients only.
SENDABLE_CLOSE_CODES = frozenset({1001, 1002, 1003, 1007, 1008, 1009, 1011, 1012, 1013, 1014})


class Upstream:
    """daphne's own methods, as they were before `install()` (the tests serve them too).
    `server_handle_reply` is taken when `install()` first runs, so that it chains to the HTTP
    side's bend (bountysite.daphne_http) whichever is installed first."""

    server_close = WebSocketProtocol.serverClose
    pformat = cast(Any, autobahn_protocol).pformat
    server_handle_reply: Any = None
    create_application = Server.create_application
    protocol_handle_reply = WebSocketProtocol.handle_reply


class Limits:
    """What install() was given."""

    send_buffer_bytes: int | None = None  # the backpressure's SO_SNDBUF of a websocket; None: the kernel's own


# ---------------------------------------------------------------------------- close codes and reasons


def _server_close(self: Any, code: int | None = None, reason: str | None = None) -> None:
    if code in SENDABLE_CLOSE_CODES:
        self.sendCloseFrame(code=code, reasonUtf8=_close_reason(reason), isReply=False)
    elif reason:
        self.sendClose(code=1000 if code is None else code, reason=reason)  # autobahn cuts it to 123 bytes
    else:
        Upstream.server_close(self, code=code)


def _close_reason(reason: str | None) -> bytes | None:
    """The reason as a close frame holds it: UTF-8, at most 123 bytes, never a split character."""
    return reason.encode()[:123].decode(errors="ignore").encode() if reason else None


# ---------------------------------------------------------------------------- backpressure


@implementer(IPushProducer)
class Writable:
    """Twisted's flow control of one websocket or HTTP response (bountysite.daphne_http uses it
    too), as an asyncio event that is set while writable."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.event.set()

    def pauseProducing(self) -> None:  # noqa: N802 (Twisted's interface)
        self.event.clear()

    def resumeProducing(self) -> None:  # noqa: N802
        self.event.set()

    def stopProducing(self) -> None:  # noqa: N802 (connection lost: nobody waits any longer)
        self.event.set()


async def _server_handle_reply(self: Any, protocol: Any, message: dict[str, Any]) -> None:
    if not isinstance(protocol, WebSocketProtocol):
        await Upstream.server_handle_reply(self, protocol, message)
        return
    if str(message.get("type", "")).startswith(DENIAL_EXTENSION + "."):
        if not self.connections.get(protocol, {}).get("disconnected"):
            _deny(protocol, message)
        return
    await Upstream.server_handle_reply(self, protocol, message)
    if message.get("type") == "websocket.accept" and protocol.transport is not None:
        # The transport still holds the HTTP channel the websocket was upgraded from as its
        # producer; that channel serves no more requests on this connection.
        if getattr(protocol.transport, "producer", None) is not None:
            protocol.transport.unregisterProducer()
        protocol.closeHandshakeTimeout = CLOSE_HANDSHAKE_SECONDS
        sock = getattr(protocol.transport, "socket", None)  # gone with a connection lost meanwhile
        if Limits.send_buffer_bytes is not None and isinstance(protocol.transport, tcp.Server) and sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, Limits.send_buffer_bytes)
        protocol._bounty_writable = Writable()
        protocol.transport.registerProducer(protocol._bounty_writable, True)
    elif message.get("type") in ("websocket.send", FRAMES_EXTENSION):
        writable: Writable | None = getattr(protocol, "_bounty_writable", None)
        if writable is not None:
            await writable.event.wait()


# ---------------------------------------------------------------------------- prebuilt frames


def _create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> Any:
    if scope.get("type") == "websocket":
        extensions = scope.setdefault("extensions", {})
        extensions[FRAMES_EXTENSION] = {"write_now": partial(_write_now, self, protocol)}
        extensions[DENIAL_EXTENSION] = {}  # the denial responses'
    return Upstream.create_application(self, protocol, scope)


def _write_now(server: Any, protocol: Any, frames: bytes) -> bool:
    writable = getattr(protocol, "_bounty_writable", None)  # the backpressure's
    if (protocol.state != protocol.STATE_OPEN or protocol.send_queue or (writable and not writable.event.is_set())
            or server.connections.get(protocol, {}).get("disconnected")):
        return False
    write(protocol.transport, frames)
    return True


def write(transport: Any, frames: bytes) -> None:
    """`transport.write(frames)`, but on a plain TCP connection with nothing buffered, sent on the
    spot: Twisted would queue the bytes, register the socket for writing, send on the next loop
    iteration and unregister it, two epoll changes and a callback per client per wake-up (the
    module's docstring, Prebuilt frames: what that costs, and the tests that watch the buffers read
    here)."""
    if (isinstance(transport, tcp.Server) and not transport.dataBuffer and not transport._tempDataBuffer
            and not transport.disconnecting):
        try:
            sent = transport.socket.send(frames)
        except OSError:  # full (BlockingIOError) or broken: Twisted's own write deals with either
            sent = 0
        if sent == len(frames):
            return
        frames = frames[sent:]
    transport.write(frames)


def _protocol_handle_reply(self: Any, message: dict[str, Any]) -> None:
    if message.get("type") == "websocket.close" and message.get("reason") and self.state != self.STATE_CONNECTING:
        self.serverClose(code=message.get("code"), reason=message["reason"])  # the close reason's bend
    elif message.get("type") != FRAMES_EXTENSION:
        Upstream.protocol_handle_reply(self, message)
    elif self.state == self.STATE_CONNECTING:
        raise ValueError("Socket has not been accepted, so cannot send over it")
    elif self.state == self.STATE_OPEN:
        if self.send_queue:  # autobahn's delayed writes go first
            self.sendData(message["frames"])
        else:  # what sendData does then, without formatting its debug message's arguments
            write(self.transport, message["frames"])


# ---------------------------------------------------------------------------- debug lines formatted only when written


class LazyFormat:
    """`pprint.pformat(value)`, made when a log line that holds it is written."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return str(Upstream.pformat(self.value))

    def __format__(self, spec: str) -> str:  # txaio writes a line with str.format
        return format(str(self), spec)


# ---------------------------------------------------------------------------- denial responses


def _deny(protocol: Any, message: dict[str, Any]) -> None:
    """An HTTP response in place of the upgrade: the status and headers of `.start`, kept until
    the last `.body`; then written, and the connection closed."""
    if protocol.state != protocol.STATE_CONNECTING:
        raise ValueError("Socket has been accepted, so cannot send an HTTP response over it")
    if message["type"] == DENIAL_EXTENSION + ".start":
        protocol._bounty_denial = (int(message["status"]), list(message.get("headers", [])), [])
        return
    status, headers, body = protocol._bounty_denial
    body.append(bytes(message.get("body", b"")))
    if message.get("more_body"):
        return
    content = b"".join(body)
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode("ascii")]
    lines += [bytes(name) + b": " + bytes(value) for name, value in headers
              if bytes(name).lower() not in (b"content-length", b"connection")]
    lines += [b"Content-Length: %d" % len(content), b"Connection: close"]
    protocol.transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + content)
    protocol.transport.loseConnection()
    protocol.server.protocol_disconnected(protocol)  # no handshake timeout for it any longer


# ---------------------------------------------------------------------------- install


def install(*, send_buffer_bytes: int | None = None) -> None:
    """Applies every websocket bend (idempotent); `send_buffer_bytes` is the backpressure's kernel
    send buffer of a websocket (None: the kernel's own)."""
    Limits.send_buffer_bytes = send_buffer_bytes
    WebSocketProtocol.serverClose = _server_close  # close codes and reasons
    if Upstream.server_handle_reply is None:  # once: a second time would wrap this bend in itself
        Upstream.server_handle_reply = Server.handle_reply
        Server.handle_reply = _server_handle_reply  # backpressure, denial responses
    Server.create_application = _create_application  # prebuilt frames, denial responses
    WebSocketProtocol.handle_reply = _protocol_handle_reply  # prebuilt frames, close reasons
    cast(Any, autobahn_protocol).pformat = LazyFormat  # debug lines formatted only when written
