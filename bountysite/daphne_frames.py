"""Lets an application hand daphne websocket frames it has already built: one write for many messages.

Why this exists: `/ws/events` sends every change to every client. Through ASGI's
`websocket.send` each message to each client is framed and written on its own (autobahn builds
the frame, Twisted queues the write), about 1,000,000 such round trips for a burst of 1,000
changes to 1,000 clients, which takes seconds of CPU. A server frame is never masked, so the same
frame bytes are right for every client: `records.live` builds each change's frame once and a
client's pending messages go out as one message of this extension, which daphne writes as is.

The extension is announced in the websocket scope (`scope["extensions"]["websocket.frames"]`);
an application that finds it may send `{"type": "websocket.frames", "frames": <bytes>}`, where the
bytes are complete, unmasked, unfragmented RFC 6455 frames. The application must not send control
frames this way (daphne's keepalive pings and its close handshake stay autobahn's). On a socket
that is no longer open (closing, closed) the frames are dropped, as nothing may follow a close.
Backpressure applies as to `websocket.send` (bountysite/daphne_backpressure.py).

The extension's `write_now(frames) -> bool` writes frames synchronously, from any code on the
server's event loop, when the socket is open and its buffer is not held back by backpressure, and
returns False (writing nothing) otherwise. The feed calls it for each client in one loop, which
spares a task switch and the ASGI round trip per client per wake-up; the caller must make sure
that nothing it sent through `send` is still waiting to be written (records.live.Outbox).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import tcp

EXTENSION = "websocket.frames"
MESSAGE_TYPE = "websocket.frames"

_original_create_application = Server.create_application
_original_handle_reply = WebSocketProtocol.handle_reply


def _create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> Any:
    if scope.get("type") == "websocket":
        scope.setdefault("extensions", {})[EXTENSION] = {"write_now": partial(_write_now, self, protocol)}
    return _original_create_application(self, protocol, scope)


def _write_now(server: Any, protocol: Any, frames: bytes) -> bool:
    writable = getattr(protocol, "_bounty_writable", None)  # bountysite/daphne_backpressure.py
    if (protocol.state != protocol.STATE_OPEN or protocol.send_queue or (writable and not writable.event.is_set())
            or server.connections.get(protocol, {}).get("disconnected")):
        return False
    _write(protocol.transport, frames)
    return True


def _write(transport: Any, frames: bytes) -> None:
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


def _handle_reply(self: Any, message: dict[str, Any]) -> None:
    if message.get("type") != MESSAGE_TYPE:
        _original_handle_reply(self, message)
    elif self.state == self.STATE_CONNECTING:
        raise ValueError("Socket has not been accepted, so cannot send over it")
    elif self.state == self.STATE_OPEN:
        if self.send_queue:  # autobahn's delayed writes go first
            self.sendData(message["frames"])
        else:  # what sendData does then, without formatting its debug message's arguments
            _write(self.transport, message["frames"])


def install() -> None:
    """Patches daphne's Server and WebSocketProtocol (idempotent)."""
    Server.create_application = _create_application
    WebSocketProtocol.handle_reply = _handle_reply
