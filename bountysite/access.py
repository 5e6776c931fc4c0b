"""Every HTTP answer counted for the metrics and logged as one access line.

The first middleware, so that it sees every answer: the rate limit's 429s, redirects, errors.
The route is the URL pattern the path matched (`/bounties/<int:record_id>`), so that the metrics
have one series per route, not per path: the admin's pages count as `/admin/`, and paths that
match no route as `unmatched`; a method outside HTTP's usual ones counts as `other`, so that no
client can add series at will. A streamed answer (the plain-array lists) is counted and logged
when its last chunk is sent, with its full duration, and as a 500 if it failed part-way.

The access line goes to the `records.access` logger with the request's `method`, `path`,
`route`, `status`, `duration_ms` and `client` as fields of its own (LOG_FORMAT=json gives them as
members). daphne's own access log is then not needed: the deploy unit starts it with `-v 0`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.urls import Resolver404, ResolverMatch, resolve

from records.api.errors import not_found
from records.limits import request_address
from records.metrics import HTTP_LATENCY, HTTP_REQUESTS

access_log = logging.getLogger("records.access")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_of(request: HttpRequest) -> str:
    """The route label of a request: its URL pattern, `/admin/`, or `unmatched`."""
    match: ResolverMatch | None = getattr(request, "resolver_match", None)
    if match is None:  # answered before the view was resolved (a 429, a redirect)
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return "unmatched"
    if match.func is not_found:
        return "unmatched"
    if match.app_name == "admin" or match.route.startswith("admin/"):
        return "/admin/"
    return "/" + match.route


def _record(request: HttpRequest, status: int, started: float) -> None:
    seconds = time.perf_counter() - started
    route = route_of(request)
    method = request.method if request.method in METHODS else "other"
    HTTP_REQUESTS.labels(route, method, str(status)).inc()
    HTTP_LATENCY.labels(route).observe(seconds)
    duration_ms = round(seconds * 1000, 2)
    path = request.get_full_path()
    client = request_address(request)
    access_log.info("%s %s %d %.2f ms", request.method, path, status, duration_ms,
                    extra={"method": request.method, "path": path, "route": route, "status": status,
                           "duration_ms": duration_ms, "client": client})


def _failed(error: BaseException) -> bool:
    """Whether a stream ended by `error` failed (rather than the client going away)."""
    return not isinstance(error, GeneratorExit | asyncio.CancelledError)


async def _async_then(chunks: AsyncIterator[Any], done: Callable[[bool], None]) -> AsyncIterator[Any]:
    failed = False
    try:
        async for chunk in chunks:
            yield chunk
    except BaseException as error:
        failed = _failed(error)
        raise
    finally:
        done(failed)


def _then(chunks: Iterator[Any], done: Callable[[bool], None]) -> Iterator[Any]:
    failed = False
    try:
        yield from chunks
    except BaseException as error:
        failed = _failed(error)
        raise
    finally:
        done(failed)


class AccessMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        if not isinstance(response, StreamingHttpResponse):
            _record(request, response.status_code, started)
            return response

        def done(failed: bool) -> None:
            _record(request, 500 if failed else response.status_code, started)

        if response.is_async:
            response.streaming_content = _async_then(response.streaming_content, done)  # type: ignore[arg-type]
        else:
            response.streaming_content = _then(response.streaming_content, done)  # type: ignore[arg-type]
        return response
