"""Gives daphne's websocket `send` backpressure, so that a slow reader's backlog is bounded.

Why this exists: daphne 4.2 completes an application's `websocket.send` at once and Twisted
buffers the bytes without limit. A client that stops reading would make the server hold
everything ever sent to it, and the application could never notice that the client is too slow
(which the websocket closes with 1008: docs/api.md, Limits and close codes). Here the websocket's
transport gets a streaming producer: Twisted pauses it when its write buffer passes `bufferSize`
(64 KiB) and resumes it once the buffer is flushed, and `websocket.send` (like the prebuilt frames of
bountysite/daphne_frames.py) waits while it is paused. The ASGI spec lets `send` wait (uvicorn
waits the same way); the application then keeps its own bounded queue (`records.live.Outbox`)
and closes the client when that queue overflows.

The close frame then waits behind what the client has not read yet, so a slow client gets
CLOSE_HANDSHAKE_SECONDS, not autobahn's default of 1 s, to read up to it and answer; otherwise
the connection would be dropped and the client would see 1006 instead of 1008.
"""

from __future__ import annotations

import asyncio
from typing import Any

from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer  # type: ignore[import-untyped]

from bountysite import daphne_frames

CLOSE_HANDSHAKE_SECONDS = 10

_original_handle_reply = Server.handle_reply


@implementer(IPushProducer)
class _Writable:
    """Twisted's flow control of one websocket, as an asyncio event that is set while writable."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.event.set()

    def pauseProducing(self) -> None:  # noqa: N802 (Twisted's interface)
        self.event.clear()

    def resumeProducing(self) -> None:  # noqa: N802
        self.event.set()

    def stopProducing(self) -> None:  # noqa: N802 (connection lost: nobody waits any longer)
        self.event.set()


async def _handle_reply(self: Any, protocol: Any, message: dict[str, Any]) -> None:
    await _original_handle_reply(self, protocol, message)
    if not isinstance(protocol, WebSocketProtocol):
        return
    if message.get("type") == "websocket.accept" and protocol.transport is not None:
        # The transport still holds the HTTP channel the websocket was upgraded from as its
        # producer; that channel serves no more requests on this connection.
        if getattr(protocol.transport, "producer", None) is not None:
            protocol.transport.unregisterProducer()
        protocol.closeHandshakeTimeout = CLOSE_HANDSHAKE_SECONDS
        protocol._bounty_writable = _Writable()
        protocol.transport.registerProducer(protocol._bounty_writable, True)
    elif message.get("type") in ("websocket.send", daphne_frames.MESSAGE_TYPE):
        writable: _Writable | None = getattr(protocol, "_bounty_writable", None)
        if writable is not None:
            await writable.event.wait()


def install() -> None:
    """Patches daphne's Server (idempotent)."""
    Server.handle_reply = _handle_reply
