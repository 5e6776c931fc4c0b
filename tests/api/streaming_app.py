"""A bare ASGI application for test_bodiless.py: it answers any request with a body in three
messages, as Django streams a StreamingHttpResponse, and the status of its query string (`?304`).
`application` is served as it is; `bodiless` through bountysite/bodiless.py's BodilessResponses,
as bountysite/asgi.py serves Django."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bountysite.bodiless import BodilessResponses

PARTS = (b"one,", b"two,", b"three")


async def application(scope: dict[str, Any], receive: Callable[[], Awaitable[Mapping[str, Any]]],
                      send: Callable[[Mapping[str, Any]], Awaitable[None]]) -> None:
    assert scope["type"] == "http"
    status = int(scope["query_string"] or b"200")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"0")] if status == 304
                else [(b"content-type", b"text/plain")]})
    for number, part in enumerate(PARTS, start=1):
        await send({"type": "http.response.body", "body": part, "more_body": number < len(PARTS)})


bodiless = BodilessResponses(application)
