"""Where the service bends daphne 4.2's HTTP side (and the Twisted under it). Every bend of daphne's
HTTP side lives here, each with its reason beside its code; the websocket side's live in
bountysite/daphne_ws.py, and what Django (not daphne) adds to a bodiless response is undone by the
ASGI layer bountysite/bodiless.py, which holds under any ASGI server. `bountysite.asgi` calls
`install()` with the setting BOUNTY_HTTP_STALL_SECONDS, so `daphne bountysite.asgi:application` and
`manage.py runserver` (daphne's) both get the bends; it is idempotent.

tests/websocket/test_daphne_http.py serves one bare ASGI application from two real daphne
processes, one with the bends and one without: for each bend one test fails if the bend is wrong,
and one fails once an upgrade makes it unnecessary (upstream then does it alone: delete the bend
and its tests); tests/api/test_slow_readers.py checks the first two through Django, with a
database cursor to close and a spool taken back for room, and tests/api/test_reason_phrases.py the
reason phrases through the service's rate limit.

**HTTP bodies with backpressure, and a stall limit.** Upstream: `http.response.body` completes at
once, as `websocket.send` did before bountysite/daphne_ws.py's backpressure: a streamed body (an
unpaged list of 200,000 records is about 180 MB) is read from the database and buffered by Twisted
as fast as the application makes it, whatever the client takes, so 20 clients reading slowly made
the process hold 20 whole bodies. We need a body to be made as the client takes it. Twisted's HTTP
channel is already the transport's producer (it pauses reading the next request while the socket is
full) and hands the pause on to the request's own producer, if one is registered: the bend
registers one on the request (a bountysite.daphne_ws.Writable, through `Request.registerProducer`,
never on the transport, which has its producer) when the response starts, and unregisters it
before daphne finishes the request (Twisted's request logs an error for a producer left
registered, and a keep-alive connection's next request could not register its own). An
`http.response.body` with more to come then waits while the transport holds more than its
`bufferSize` (64 KiB) beyond what the socket took, until the socket has taken all of it. A client
that has not taken it within `http_stall_seconds` (the setting BOUNTY_HTTP_STALL_SECONDS: the 64 KiB
and the next message, 8 KiB of an unpaged list, in 30 s: about 2.4 KB/s) is cut off (the connection
aborted): daphne then sends the application `http.disconnect`, Django cancels the response, and the
application closes its iterator (records.api.unpaged closes the database cursor on the request's
thread). Without the limit, a client that stops reading would hold its response, with its database
cursor and connection, for as long as it keeps the socket open.

**A failure after the response started.** Upstream: daphne answers an application that raised with
a 500 (`WebRequest.handle_exception`), even when its response has started: `basic_error` then
raises `ValueError("HTTP response has already been started")` inside the server's
`application_checker`, which never runs again, so no application of the process is reaped any
longer, and this client and every later one whose application fails are left waiting. We need an
unpaged list whose spool was taken back for room (records.spools) to end its reader's response
and leave the server as it was. The bend aborts such a connection instead: the client sees the
body end short of its Content-Length.

**Reason phrases.** Upstream: daphne sets a response's status with Twisted's
`Request.setResponseCode(status)`, and an ASGI application cannot pass a phrase; Twisted takes the
phrase from its table `twisted.web.http.RESPONSES`, which stops at RFC 2616's statuses, and writes
`Unknown Status` for any other: the rate limit's 429 goes out as `HTTP/1.1 429 Unknown Status`
(and so would 422, 428 or 451). Clients show that phrase: Python's `requests` raises `429 Client
Error: Unknown Status for url`, a browser's `fetch` gives `statusText` "Unknown Status". We need
every status to carry its own phrase. The bend gives daphne's requests a `setResponseCode` that
passes Twisted the phrase of `http.HTTPStatus` (today's wording, RFC 9110's: `408 Request
Timeout`, not Twisted's `Request Time-out`) for any status it knows, and leaves a status it does
not know to Twisted; Twisted's table, which other code in the process may read, is not changed.
"""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus
from typing import Any

from daphne.http_protocol import WebRequest
from daphne.server import Server

from bountysite.daphne_ws import Writable

HTTP_STALL_SECONDS = 30.0  # the stall limit unless install() is given the setting

logger = logging.getLogger(__name__)


class Upstream:
    """daphne's own methods, as they were before `install()` (the tests serve them too).
    `server_handle_reply` is taken when `install()` first runs, so that it chains to the websocket
    side's bend (bountysite.daphne_ws) whichever is installed first."""

    server_handle_reply: Any = None
    request_finish = WebRequest.finish
    handle_exception = WebRequest.handle_exception
    set_response_code = WebRequest.setResponseCode


class Limits:
    """What install() was given."""

    http_stall_seconds = HTTP_STALL_SECONDS


# -------------------------------------------------------------------- bodies with backpressure, and a stall limit


async def _server_handle_reply(self: Any, protocol: Any, message: dict[str, Any]) -> None:
    await Upstream.server_handle_reply(self, protocol, message)
    if isinstance(protocol, WebRequest):
        await _http_reply_sent(protocol, message)


async def _http_reply_sent(request: Any, message: dict[str, Any]) -> None:
    """After daphne has handled an HTTP response's message: the producer registered at its start;
    a body message with more to come returns once the transport has room again, or once the
    client has been cut off for not making room within `Limits.http_stall_seconds`."""
    if request.finished or request.channel is None:  # done, or the connection is gone
        return
    kind = message.get("type")
    if kind == "http.response.start" and request.producer is None:
        request._bounty_writable = Writable()
        request.registerProducer(request._bounty_writable, True)
    elif kind == "http.response.body" and message.get("more_body", False):
        writable: Writable | None = getattr(request, "_bounty_writable", None)
        if writable is None or writable.event.is_set():
            return
        try:
            await asyncio.wait_for(writable.event.wait(), Limits.http_stall_seconds)
        except TimeoutError:
            logger.warning("Closed an HTTP connection whose client did not take its response for %s s: %s %s",
                           Limits.http_stall_seconds, request.method.decode("ascii", "replace"),
                           request.path.decode("ascii", "replace"))
            request.transport.abortConnection()  # daphne then tells the application (http.disconnect)


def _request_finish(self: Any) -> None:
    if self.producer is not None and self.channel is not None:
        self.unregisterProducer()
    Upstream.request_finish(self)


# ---------------------------------------------------------------------------- a failure after the response started


def _handle_exception(self: Any, exception: BaseException) -> None:
    """daphne's answer to an application that raised: a 500 before the response started, the
    connection aborted after."""
    if getattr(self, "_response_started", False):
        self.transport.abortConnection()
        return
    Upstream.handle_exception(self, exception)


# -------------------------------------------------------------------------------------------------- reason phrases

PHRASES = {status.value: status.phrase.encode("ascii") for status in HTTPStatus}


def _set_response_code(self: Any, code: int, message: bytes | None = None) -> None:
    Upstream.set_response_code(self, code, PHRASES.get(code) if message is None else message)


def install(*, http_stall_seconds: float = HTTP_STALL_SECONDS) -> None:
    """Applies every HTTP bend (idempotent); `http_stall_seconds` is the stall limit."""
    Limits.http_stall_seconds = http_stall_seconds
    if Upstream.server_handle_reply is None:  # once: a second time would wrap this bend in itself
        Upstream.server_handle_reply = Server.handle_reply
        Server.handle_reply = _server_handle_reply  # bodies with backpressure, the stall limit
    WebRequest.finish = _request_finish  # the same: the request's producer unregistered
    WebRequest.handle_exception = _handle_exception  # a failure after the response started
    WebRequest.setResponseCode = _set_response_code  # reason phrases
