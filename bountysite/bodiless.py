"""`BodilessResponses`: the ASGI layer in front of Django that sends no body for a HEAD, a 204 or
a 304. Not a patch of daphne: it also undoes what Django, not daphne, adds, and holds under any
ASGI server. `bountysite.asgi` serves Django's HTTP side through it; tests/api/test_bodiless.py
checks it on a real daphne, with a test that fails once daphne makes its HEAD part unnecessary.

A HEAD's, a 204's and a 304's response must have no body. Upstream: Django's ASGI handler sends a
HEAD response's body as it would for GET (its test client strips the body itself, so tests through
it never see one), leaving it to the server to send nothing. daphne fails at that for a body of
more than one message: Twisted's `Request.write` sends the headers on its first call and, for a
HEAD, 204 or 304, replaces the instance's `write` with a no-op, but daphne writes every
`http.response.body` through the class, `http.Request.write(self, ...)`, which skips that no-op. A
one-message body is swallowed by the first call; every message of a streamed one after the first
goes out raw after the headers (`HEAD /bounties` answered its headers, then the array's last
bytes), and a client on a keep-alive connection reads them as the start of the next response. A
204 or 304 also carries the `Content-Length: 0` Django's CommonMiddleware sets from the empty body,
which RFC 9110 (section 8.6) forbids on a 204 and allows on a 304 only if it is the length the 200
would have. We need neither to reach the client. The layer wraps Django's application, so every
HTTP response passes it, whichever part of Django made it (a DRF view, the error handlers, the
admin, the docs, Django's own 400 and 413), under any ASGI server. It keeps the headers as the
application made them, so a HEAD carries the Content-Length its GET would (a streamed response has
none; GET sends it chunked, HEAD sends no chunk), passes on every body message emptied, so the
headers leave at once and the response ends when the application's does, and drops a 204's or
304's Content-Length. Not computing a body that is then dropped is the application's part
(records.api.unpaged skips the records of a streamed list for a HEAD). When daphne keeps a HEAD
bodiless itself, only the Content-Length part remains needed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

NO_CONTENT_STATUSES = frozenset({204, 304})


class BodilessResponses:
    """The ASGI application `app`, sending no body for a HEAD, 204 or 304."""

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
