"""A bare ASGI application for test_daphne_ws.py and test_daphne_http.py, served as it is (daphne
upstream) and by bend_app_installed.py (with bountysite/daphne_ws.py and bountysite/daphne_http.py
installed, SEND_BUFFER_BYTES and HTTP_STALL_SECONDS their settings). Websockets, by path:

- `/close?code=N[&reason=R]`: accepts, then closes with code N (and reason R).
- `/flood`: accepts, sends FLOOD_MESSAGES texts of 1 MiB through `websocket.send`, then a last
  text `{"flood_seconds": ...}`: how long those sends took to complete.
- `/frames`: accepts; with the `websocket.frames` extension in the scope, sends two messages in
  one `websocket.frames` message; without it, `{"extension": false}`.
- `/order`: with the `websocket.frames` extension, sends ORDER_MESSAGES messages `{"n": 0}`,
  `{"n": 1}`, ... alternately through `websocket.send` (padded to 60 KB, so that the socket
  fills) and as a prebuilt frame, through `write_now` at once after the send returns (through a
  `websocket.frames` message when `write_now` declines); without it, `{"extension": false}`.
- `/deny`: with the `websocket.http.response` extension, answers the handshake 429 with
  `Retry-After: 7` and DENIAL_BODY in two body messages; without it, accepts and sends
  `{"extension": false}`.

HTTP, by path: `/fail` starts a response of FAILED_LENGTH bytes, sends 10 of them, then raises;
`/status?code=N` answers status N with an empty body; any other request is answered as the
websocket's `/flood`: FLOOD_MESSAGES body messages of 1 MiB, then a last one,
`{"flood_seconds": ...}`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

FLOOD_MESSAGES = 24
HTTP_STALL_SECONDS = 4  # well above conftest.UNREAD_SECONDS
SEND_BUFFER_BYTES = 65_536  # the installed bend's websocket send buffer
FRAMES_EXTENSION = "websocket.frames"
DENIAL_EXTENSION = "websocket.http.response"
DENIAL_BODY = b'{"detail": "too many connections"}'
FAILED_LENGTH = 100
ORDER_MESSAGES = 200


def text_frame(data: bytes) -> bytes:
    """A short text as one unmasked websocket text frame (RFC 6455 5.2; under 126 bytes)."""
    assert len(data) < 126
    return bytes((0x81, len(data))) + data


async def application(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                      send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    if scope["type"] == "http" and scope["path"] == "/fail":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(FAILED_LENGTH).encode())]})
        await send({"type": "http.response.body", "body": b"x" * 10, "more_body": True})
        raise RuntimeError("failed after the response started")
    if scope["type"] == "http" and scope["path"] == "/status":
        code = int(parse_qs(scope["query_string"].decode())["code"][0])
        await send({"type": "http.response.start", "status": code, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        started = time.perf_counter()
        for _ in range(FLOOD_MESSAGES):
            await send({"type": "http.response.body", "body": b"x" * (1 << 20), "more_body": True})
        await send({"type": "http.response.body", "body": json.dumps({"flood_seconds": time.perf_counter() - started})
                    .encode()})
        return
    assert scope["type"] == "websocket"
    await receive()  # websocket.connect
    if scope["path"] == "/deny" and DENIAL_EXTENSION in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"), (b"retry-after", b"7")]})
        await send({"type": "websocket.http.response.body", "body": DENIAL_BODY[:10], "more_body": True})
        await send({"type": "websocket.http.response.body", "body": DENIAL_BODY[10:]})
        assert (await receive())["type"] == "websocket.disconnect"
        return
    await send({"type": "websocket.accept"})
    if scope["path"] == "/close":
        query = parse_qs(scope["query_string"].decode())
        await send({"type": "websocket.close", "code": int(query["code"][0]),
                    **({"reason": query["reason"][0]} if "reason" in query else {})})
    elif scope["path"] == "/flood":
        started = time.perf_counter()
        for _ in range(FLOOD_MESSAGES):
            await send({"type": "websocket.send", "text": "x" * (1 << 20)})
        await send({"type": "websocket.send", "text": json.dumps({"flood_seconds": time.perf_counter() - started})})
    elif scope["path"] == "/order" and FRAMES_EXTENSION in scope.get("extensions", {}):
        write_now = scope["extensions"][FRAMES_EXTENSION]["write_now"]
        for n in range(0, ORDER_MESSAGES, 2):
            await send({"type": "websocket.send", "text": json.dumps({"n": n, "pad": "x" * 60_000})})
            frame = text_frame(json.dumps({"n": n + 1}).encode())
            if not write_now(frame):
                await send({"type": FRAMES_EXTENSION, "frames": frame})
    elif FRAMES_EXTENSION in scope.get("extensions", {}):
        frames = text_frame(b'{"extension": true}') + text_frame(b'{"second": true}')
        await send({"type": FRAMES_EXTENSION, "frames": frames})
    else:
        await send({"type": "websocket.send", "text": json.dumps({"extension": False})})
    while (await receive())["type"] != "websocket.disconnect":
        pass
