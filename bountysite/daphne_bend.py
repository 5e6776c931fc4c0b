"""Where the service bends daphne 4.2 (and the Twisted and autobahn under it): five patches (1-3,
6 and 7), one install(), and an ASGI layer in front of Django (5).

`bountysite.asgi` calls `install()`, so `daphne bountysite.asgi:application` and `manage.py
runserver` (daphne's) both get every patch; it is idempotent; and it serves Django through
`BodilessResponses`; it passes patch 6 its setting (`BOUNTY_HTTP_STALL_SECONDS`).
tests/websocket/test_daphne_bend.py serves one bare ASGI application from two
real daphne processes, one with the bend and one without: for each patch one test fails if the
bend is wrong, and one fails once an upgrade makes it unnecessary (upstream then does it alone:
delete the patch and its tests). The layer 5 is tested in tests/api/test_bodiless.py.

1. **Close codes.** Upstream: `WebSocketProtocol.serverClose` passes the application's code to
   autobahn's `sendClose`, which accepts only 1000 and 3000-4999 (the IANA rules for
   *registering* codes, not RFC 6455's rules for *sending* them: section 7.4.1 defines 1001-1003
   and 1007-1011 for endpoints to send; IANA added 1012-1014); any other code raises inside
   daphne's reply handler, the application dies, and the client sees 1011. We need 1008
   (policy violation) for the websocket's limits (docs/api.md, Limits and close codes). The
   patch calls autobahn's `sendCloseFrame` -- the method `sendClose` itself ends in, minus the
   check -- for a code an endpoint may send, and `sendClose` for everything else. Upstream also
   drops the `reason` of `websocket.close` (ASGI's, which Channels' `close(code, reason)` sends):
   we need it to tell a client which limit closed it (a snapshot taken too slowly, no snapshot slot
   free). The patch passes it on, cut to the 123 bytes a close frame holds.

2. **Backpressure.** Upstream: `websocket.send` completes at once and Twisted buffers the bytes
   without limit, so a client that stops reading makes the server hold everything ever sent to it
   and the application can never tell that the client is too slow. We need `send` to wait while
   the socket is full (the ASGI spec lets it; uvicorn waits the same way), so that the
   application's own bounded queue (records.ws.outbox.Outbox) overflows and closes the client with
   1008. The patch gives the websocket's transport a streaming producer once accepted: Twisted
   pauses it when its write buffer passes `bufferSize` (64 KiB) and resumes it once flushed, and
   `websocket.send` (like the frames of patch 3) waits while it is paused. The close frame then
   waits behind what the client has not read yet, so a slow client gets CLOSE_HANDSHAKE_SECONDS,
   not autobahn's default of 1 s, to read up to it and answer (otherwise it would see 1006).
   Below Twisted, Linux grows a socket's kernel send buffer up to `net.ipv4.tcp_wmem`'s maximum
   (4 MiB) whether the client reads or not: a client reading at 50 KB/s then has 80 s of data
   queued before anything the server sends next, a close frame included, and the server's send
   completes long before the client has read. The patch also sets the accepted websocket's
   SO_SNDBUF to `install(send_buffer_bytes=...)` (BOUNTY_WS_SEND_BUFFER_BYTES; Linux doubles it),
   so that a send waits for the client, and a limit's close frame reaches it within the handshake.

3. **Prebuilt frames: the `websocket.frames` extension.** Upstream: each `websocket.send` is
   framed by autobahn and queued by Twisted on its own: a burst of 1,000 changes to 1,000 clients
   is about 1,000,000 such round trips, seconds of CPU. A server frame is never masked, so the same
   bytes are right for every client: records.ws builds each message's frame once. The patch
   announces `scope["extensions"]["websocket.frames"]`; an application that finds it may send
   `{"type": "websocket.frames", "frames": <bytes>}` of complete, unmasked, unfragmented text
   frames (never control frames: keepalive pings and the close handshake stay autobahn's), which
   daphne writes as they are (dropped on a socket no longer open), with the backpressure of
   patch 2. The extension's `write_now(frames) -> bool` writes frames synchronously from any code
   on the server's event loop when the socket is open and not held back, and returns False
   (writing nothing) otherwise: the feed calls it for each client in one loop, sparing a task
   switch and an ASGI round trip per client per wake-up; the caller makes sure nothing it sent
   through `send` still waits to be written (records.ws.outbox.Outbox).

5. **Bodiless responses: `BodilessResponses`, an ASGI layer, not a patch** (it also undoes what
   Django, not daphne, adds, and holds under any ASGI server). A HEAD's, a 204's and
   a 304's response must have no body. Upstream: Django's ASGI handler sends a HEAD response's
   body as it would for GET (its test client strips the body itself, so tests through it never see
   one), leaving it to the server to send nothing. daphne fails at that for a body of more than one
   message: Twisted's `Request.write` sends the headers on its first call and, for a HEAD, 204 or
   304, replaces the instance's `write` with a no-op, but daphne writes every `http.response.body`
   through the class, `http.Request.write(self, ...)`, which skips that no-op. A one-message body
   is swallowed by the first call; every message of a streamed one after the first goes out raw
   after the headers (`HEAD /bounties` answered its headers, then the array's last bytes), and a
   client on a keep-alive connection reads them as the start of the next response. A 204 or 304
   also carries the `Content-Length: 0` Django's CommonMiddleware sets from the empty body, which
   RFC 9110 (section 8.6) forbids on a 204 and allows on a 304 only if it is the length the 200
   would have. We need neither to reach the client. The layer wraps Django's application, so every
   HTTP response passes it, whichever part of Django made it (a DRF view, the error handlers, the
   admin, the docs, Django's own 400 and 413), under any ASGI server. It keeps the headers as the
   application made them, so a HEAD carries the Content-Length its GET would (a streamed response
   has none; GET sends it chunked, HEAD sends no chunk), passes on every body message emptied, so
   the headers leave at once and the response ends when the application's does, and drops a 204's
   or 304's Content-Length. Not computing a body that is then dropped is the application's part
   (records.api.caching skips the records of a streamed list for a HEAD). When daphne keeps a HEAD
   bodiless itself, only the Content-Length part remains needed.

6. **HTTP bodies with backpressure, a stall limit, a failure after the start.** Upstream:
   `http.response.body` completes
   at once, as `websocket.send` did before patch 2: a streamed body (an unpaged list of 200,000
   records is about 180 MB) is read from the database and buffered by Twisted as fast as the
   application makes it, whatever the client takes, so 20 clients reading slowly made the process
   hold 20 whole bodies. We need a body to be made as the client takes it. Twisted's HTTP
   channel is already the transport's producer (it pauses reading the next request while the
   socket is full) and hands the pause on to the request's own producer, if one is registered:
   the patch registers one on the request (`Request.registerProducer`, never on the transport,
   which has its producer) when the response starts, and unregisters it before daphne finishes
   the request (Twisted's request log an error for a producer left registered, and a keep-alive
   connection's next request could not register its own). An `http.response.body` with more to
   come then waits while the transport holds more than its `bufferSize` (64 KiB) beyond what the
   socket took, until the socket has taken all of it. A client that has not taken it within
   `http_stall_seconds` (the setting BOUNTY_HTTP_STALL_SECONDS: the 64 KiB and the next message,
   8 KiB of an unpaged list, in 30 s: about 2.4 KB/s) is cut off (the connection aborted): daphne then sends the
   application `http.disconnect`, Django cancels the response, and the application closes its
   iterator (records.api.caching closes the database cursor on the request's thread). Without
   the limit, a client that stops reading would hold its response, with its database cursor and
   connection, for as long as it keeps the socket open.

7. **Denial responses: the `websocket.http.response` extension.** Upstream: an application can
   refuse a websocket handshake only with `websocket.close` before accepting, which daphne answers
   `403 Access denied`, with no header of the application's; and daphne ignores ASGI's
   `websocket.http.response.start` / `.body`. We need the connection rate limit
   (records.limits) to answer as the HTTP rate limit does: 429, `Retry-After`, the error shape.
   The patch announces `scope["extensions"]["websocket.http.response"]` and, for those messages
   before the handshake completes, writes the application's status, headers and body as the HTTP
   response to the upgrade request (with `Content-Length` and `Connection: close`), then closes the
   connection; the handshake never completes and the application gets `websocket.disconnect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from http import HTTPStatus
from typing import Any

from daphne.http_protocol import WebRequest
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
HTTP_STALL_SECONDS = 30.0  # patch 6's limit unless install() is given the setting

logger = logging.getLogger(__name__)


class Upstream:
    """daphne's own methods, as they were before `install()` (the tests serve them too)."""

    server_close = WebSocketProtocol.serverClose
    server_handle_reply = Server.handle_reply
    create_application = Server.create_application
    protocol_handle_reply = WebSocketProtocol.handle_reply
    request_finish = WebRequest.finish
    handle_exception = WebRequest.handle_exception


class Limits:
    """What install() was given."""

    http_stall_seconds = HTTP_STALL_SECONDS
    send_buffer_bytes: int | None = None  # patch 2's SO_SNDBUF of a websocket; None: the kernel's own


# ---------------------------------------------------------------------------- 1. close codes


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


# ---------------------------------------------------------------------------- 2. backpressure


@implementer(IPushProducer)
class _Writable:
    """Twisted's flow control of one websocket or HTTP response, as an asyncio event that is set
    while writable."""

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
    if str(message.get("type", "")).startswith(DENIAL_EXTENSION + ".") and isinstance(protocol, WebSocketProtocol):
        if not self.connections.get(protocol, {}).get("disconnected"):  # 7
            _deny(protocol, message)
        return
    await Upstream.server_handle_reply(self, protocol, message)
    if isinstance(protocol, WebRequest):
        await _http_reply_sent(protocol, message)  # 6
        return
    if not isinstance(protocol, WebSocketProtocol):
        return
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
        protocol._bounty_writable = _Writable()
        protocol.transport.registerProducer(protocol._bounty_writable, True)
    elif message.get("type") in ("websocket.send", FRAMES_EXTENSION):
        writable: _Writable | None = getattr(protocol, "_bounty_writable", None)
        if writable is not None:
            await writable.event.wait()


# ---------------------------------------------------------------------------- 3. prebuilt frames


def _create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> Any:
    if scope.get("type") == "websocket":
        extensions = scope.setdefault("extensions", {})
        extensions[FRAMES_EXTENSION] = {"write_now": partial(_write_now, self, protocol)}
        extensions[DENIAL_EXTENSION] = {}  # 7
    return Upstream.create_application(self, protocol, scope)


def _write_now(server: Any, protocol: Any, frames: bytes) -> bool:
    writable = getattr(protocol, "_bounty_writable", None)  # patch 2's
    if (protocol.state != protocol.STATE_OPEN or protocol.send_queue or (writable and not writable.event.is_set())
            or server.connections.get(protocol, {}).get("disconnected")):
        return False
    write(protocol.transport, frames)
    return True


def write(transport: Any, frames: bytes) -> None:
    """`transport.write(frames)`, but on a plain TCP connection with nothing buffered, sent on the
    spot: Twisted would queue the bytes, register the socket for writing, send on the next loop
    iteration and unregister it, two epoll changes and a callback per client per wake-up."""
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
        self.serverClose(code=message.get("code"), reason=message["reason"])  # 1, with its reason
    elif message.get("type") != FRAMES_EXTENSION:
        Upstream.protocol_handle_reply(self, message)
    elif self.state == self.STATE_CONNECTING:
        raise ValueError("Socket has not been accepted, so cannot send over it")
    elif self.state == self.STATE_OPEN:
        if self.send_queue:  # autobahn's delayed writes go first
            self.sendData(message["frames"])
        else:  # what sendData does then, without formatting its debug message's arguments
            write(self.transport, message["frames"])


# ---------------------------------------------------------------------------- 7. denial responses


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


# ---------------------------------------------------------------------------- 5. bodiless responses

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

NO_CONTENT_STATUSES = frozenset({204, 304})


class BodilessResponses:
    """The ASGI application `app`, sending no body for a HEAD, 204 or 304 (bend 5)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        bodiless = scope["method"] == "HEAD"

        async def send_no_body(message: Message) -> None:
            nonlocal bodiless
            if message["type"] == "http.response.start" and message["status"] in NO_CONTENT_STATUSES:
                bodiless = True
                message = {**message, "headers": [(name, value) for name, value in message.get("headers", ())
                                                  if name.lower() != b"content-length"]}
            elif message["type"] == "http.response.body" and bodiless:
                message = {**message, "body": b""}
            await send(message)

        await self.app(scope, receive, send_no_body)


# ---------------------------------------------------------------------------- 6. HTTP bodies with backpressure


async def _http_reply_sent(request: Any, message: dict[str, Any]) -> None:
    """After daphne has handled an HTTP response's message: the producer registered at its start;
    a body message with more to come returns once the transport has room again, or once the
    client has been cut off for not making room within `Limits.http_stall_seconds`."""
    if request.finished or request.channel is None:  # done, or the connection is gone
        return
    kind = message.get("type")
    if kind == "http.response.start" and request.producer is None:
        request._bounty_writable = _Writable()
        request.registerProducer(request._bounty_writable, True)
    elif kind == "http.response.body" and message.get("more_body", False):
        writable: _Writable | None = getattr(request, "_bounty_writable", None)
        if writable is None or writable.event.is_set():
            return
        try:
            await asyncio.wait_for(writable.event.wait(), Limits.http_stall_seconds)
        except TimeoutError:
            logger.warning("Closed an HTTP connection whose client did not take its response for %s s: %s %s",
                           Limits.http_stall_seconds, request.method.decode("ascii", "replace"),
                           request.path.decode("ascii", "replace"))
            request.transport.abortConnection()  # daphne then tells the application (http.disconnect)


def _handle_exception(self: Any, exception: BaseException) -> None:
    """An application that failed after its response started (an unpaged list whose spool was
    taken back for room, records.spools) has its connection aborted: the client sees the body end
    short of its Content-Length. Upstream answers a 500 it can no longer send: its
    `basic_error` raises `ValueError("HTTP response has already been started")` inside the
    server's `application_checker`, which then never runs again: no application of the process
    is reaped, and every later failure leaves its client waiting."""
    if getattr(self, "_response_started", False):
        self.transport.abortConnection()
        return
    Upstream.handle_exception(self, exception)


def _request_finish(self: Any) -> None:
    if self.producer is not None and self.channel is not None:
        self.unregisterProducer()
    Upstream.request_finish(self)


# ---------------------------------------------------------------------------- install


def install(*, http_stall_seconds: float = HTTP_STALL_SECONDS, send_buffer_bytes: int | None = None) -> None:
    """Applies every patch (idempotent); `http_stall_seconds` is patch 6's limit, `send_buffer_bytes`
    patch 2's kernel send buffer of a websocket (None: the kernel's own)."""
    Limits.send_buffer_bytes = send_buffer_bytes
    WebSocketProtocol.serverClose = _server_close  # 1
    Server.handle_reply = _server_handle_reply  # 2
    Server.create_application = _create_application  # 3
    WebSocketProtocol.handle_reply = _protocol_handle_reply  # 3, and 1's reasons
    Limits.http_stall_seconds = http_stall_seconds  # 6, with Server.handle_reply above
    WebRequest.finish = _request_finish  # 6
    WebRequest.handle_exception = _handle_exception  # 6
