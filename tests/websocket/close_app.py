"""A bare ASGI websocket application for test_close_codes.py: it accepts, then closes with the code
of its query string (`?code=1008`), served by daphne with the patch of bountysite/daphne_close_codes.py
installed as bountysite/asgi.py installs it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from bountysite import daphne_close_codes

daphne_close_codes.install()


async def application(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                      send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    assert scope["type"] == "websocket"
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    code = int(parse_qs(scope["query_string"].decode())["code"][0])
    await send({"type": "websocket.close", "code": code})
    while (await receive())["type"] != "websocket.disconnect":
        pass
