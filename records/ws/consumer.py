"""The websocket `/ws/events`: a thin consumer over the client's stream (records.ws.stream) and the
limits (records.limits).

The feed is public and read-only, like the REST routes: it reads no cookie or session, so a page
of another origin learns nothing through it that it could not fetch anyway, and no origin check
applies (bountysite/asgi.py). The server expects no messages from clients; what they send only
counts against the limits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import parse_qs

import orjson
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer

from bountysite.daphne_ws import DENIAL_EXTENSION, FRAMES_EXTENSION
from records.limits import (
    ConnectionSlot,
    MessageBudget,
    scope_address,
    scope_client,
    spend_connect,
    ws_connects_per_minute,
)
from records.metrics import WS_CLOSES, WS_OPEN
from records.ws.closes import INTERNAL_ERROR, POLICY_VIOLATION, Refusal
from records.ws.messages import MessageBatch
from records.ws.stream import run_stream

logger = logging.getLogger(__name__)
access_log = logging.getLogger("records.access")
COUNTED_CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1011, 1012, 1013, 1014})


class EventsConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    # The feed, not a per-connection channel, delivers messages: no channel-layer receive loop.
    channel_layer_alias = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.stream: asyncio.Task[None] | None = None
        self.address = scope_address(scope)  # for the access line
        self.client = scope_client(scope)  # what the limits count
        self.slot = ConnectionSlot(scope)
        self.opened = time.perf_counter()
        WS_OPEN.inc()
        try:
            await super().__call__(scope, receive, send)
        finally:  # also when daphne cancels the application at shutdown, without a disconnect
            WS_OPEN.dec()
            if self.stream is not None:
                self.stream.cancel()
            self.slot.release()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, without its `aclose_old_connections()` before every handler: that
        call runs on the process's one thread for synchronous work (asgiref's), so under a
        reconnect storm every handshake queued there before it was accepted, thousands in a row,
        and daphne dropped the upgrades not accepted within 5 s. This consumer reads the database
        only on its lanes (records.lanes), which look after their own connections."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        """Channels' own, without the channel layer's groups (none: channel_layer_alias) and
        without `aclose_old_connections()` (`dispatch`)."""
        await self.disconnect(message["code"])
        raise StopConsumer

    async def connect(self) -> None:
        self.budget = MessageBudget()
        if (retry_after := await spend_connect(self.scope)) is not None:
            await self._refuse_too_often(retry_after)
            return
        await self.accept()
        if not await self.slot.acquire():
            await self.close(code=POLICY_VIOLATION)
            return
        frames = self.scope.get("extensions", {}).get(FRAMES_EXTENSION)
        self.stream = asyncio.create_task(run_stream(
            self._since(), self._send_frames if frames else self._send_texts, self._too_slow,
            frames["write_now"] if frames else None, client=self.client))
        self.stream.add_done_callback(self._stream_failed)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        size = len(text_data.encode()) if text_data is not None else len(bytes_data or b"")
        if not self.budget.spend(size):
            await self._close_for_policy()

    async def disconnect(self, code: int) -> None:
        # The code may be the client's: the metric keeps the meaningful ones apart, the rest as
        # `other`, so that no client can add series at will.
        WS_CLOSES.labels(str(code) if code in COUNTED_CLOSE_CODES else "other").inc()
        duration_ms = round((time.perf_counter() - self.opened) * 1000, 2)
        path = self.scope.get("path", "")
        access_log.info("WS %s closed %s after %.2f ms", path, code, duration_ms,
                        extra={"method": "WS", "path": path, "route": "/ws/events", "status": code,
                               "duration_ms": duration_ms, "client": self.address})
        if self.stream is not None:
            self.stream.cancel()
            # Waited for, not awaited: how it ended was dealt with when it did (_stream_failed). A
            # refusal raised again here would end the application with a traceback that daphne logs
            # as an error, for every snapshot that found no slot (1013) or was taken too slowly (1008).
            await asyncio.wait([self.stream])

    async def _refuse_too_often(self, retry_after: int) -> None:
        """The handshake answered 429 with Retry-After, as an HTTP request past the rate limit is;
        under a server without the extension for it, a close with 1008 saying the same."""
        limit = ws_connects_per_minute()
        detail = f"rate limit of {limit} websocket connections per minute exceeded"
        if DENIAL_EXTENSION in self.scope.get("extensions", {}):
            await self.base_send({"type": f"{DENIAL_EXTENSION}.start", "status": 429, "headers": [
                (b"content-type", b"application/json"), (b"retry-after", str(retry_after).encode())]})
            await self.base_send({"type": f"{DENIAL_EXTENSION}.body", "body": orjson.dumps({"detail": detail})})
        else:
            await self.accept()
            await self.close(code=POLICY_VIOLATION, reason=f"{detail}; retry after {retry_after} s")

    async def _send_frames(self, batch: MessageBatch) -> None:
        """To a server with the frame extension (bountysite/daphne_ws.py): the batch's frames as they are."""
        await self.base_send({"type": FRAMES_EXTENSION, "frames": batch.frames})

    async def _send_texts(self, batch: MessageBatch) -> None:
        """To a server without it: one ASGI message per websocket message."""
        for text in batch.texts:
            await self.send(text_data=text.decode())

    async def _close_for_policy(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
        await self.close(code=POLICY_VIOLATION)

    def _too_slow(self) -> None:
        self._closing = asyncio.ensure_future(self._close_for_policy())

    def _stream_failed(self, stream: asyncio.Task[None]) -> None:
        if stream.cancelled() or (error := stream.exception()) is None:
            return
        if isinstance(error, Refusal):
            self._closing = asyncio.ensure_future(self.close(code=error.code, reason=error.reason))
        else:
            logger.error("websocket stream failed", exc_info=error)
            self._closing = asyncio.ensure_future(self.close(code=INTERNAL_ERROR))

    def _since(self) -> str | None:
        """The position the client resumes from (records.history), as it sent it: one the service
        cannot vouch for, or none it hands out, gets a snapshot."""
        values = parse_qs(self.scope.get("query_string", b"").decode("latin1")).get("since")
        return values[0] if values else None
