"""Conditional responses: weak ETags, If-None-Match, and a cache of rendered bodies.

A body is cached under a key made of the parsed request (so equivalent requests share one entry)
and the data version of the deployments it reads (their change-log sequence numbers, which every
indexer commit advances). What one client adds is bounded: bodies past a size are not stored, nor
more than a number of new entries per client and cache lifetime (`may_store`). A request whose
data has not changed is answered from the cache without touching the records; with a matching
If-None-Match it is a 304 without even a body.

ETags are weak and derived from the body's bytes (`W/"<sha256 prefix>"`), so equal bodies have
equal tags in every worker process and after restarts. Streamed arrays cannot be hashed before
they are sent; their tag is derived from the cache key instead (equal for equal data).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Iterator
from typing import Any, cast

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.core.handlers.asgi import ASGIRequest
from django.db import connection as db_connection
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseNotModified, StreamingHttpResponse
from django.utils.http import parse_etags
from rest_framework.request import Request
from rest_framework.response import Response

from bountysite.ratelimit import request_client, shared_count
from records.api.errors import RETRY_AFTER_SECONDS, error_response

CACHE_CONTROL = "public, no-cache"


def cache_key(answer: Hashable, version: str) -> str:
    """The answer, as the parsed request that asks for it (the same for equivalent requests:
    parameters in any order, `limit=050` or `50`, a sort alias or its key, a default sent or
    left out), and the data version."""
    return "api:" + hashlib.sha256(repr((answer, version)).encode()).hexdigest()


def may_store(request: HttpRequest, size: int) -> bool:
    """Whether a rendered body of `size` bytes may go in the cache: not past
    BOUNTY_API_CACHE_MAX_BODY_BYTES, and while its client has added fewer than
    BOUNTY_API_CACHE_ENTRIES_PER_CLIENT entries in the current window of
    BOUNTY_API_CACHE_SECONDS, so one client adds at most twice that many at once (two windows'
    worth outlive their window), each of a bounded size."""
    lifetime: int = settings.BOUNTY_API_CACHE_SECONDS
    if size > settings.BOUNTY_API_CACHE_MAX_BODY_BYTES or not lifetime:
        return False
    window_start = int(time.time() // lifetime) * lifetime
    added = shared_count(f"cache-budget:{request_client(request)}:{window_start}", timeout=lifetime + 1)
    return added <= settings.BOUNTY_API_CACHE_ENTRIES_PER_CLIENT


def etag_of(content: bytes) -> str:
    return f'W/"{hashlib.sha256(content).hexdigest()[:32]}"'


def if_none_match(request: HttpRequest, etag: str) -> bool:
    """Weak comparison against If-None-Match, which may list several tags or be `*`."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    opaque = etag.removeprefix("W/")
    return any(tag == "*" or tag.removeprefix("W/") == opaque for tag in parse_etags(header))


def not_modified(etag: str) -> HttpResponse:
    """A 304: the 200's ETag and caching headers, no Content-Type (Django's class drops it), no body."""
    response = HttpResponseNotModified()
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return response


def cached_json(request: HttpRequest, key: str, build: Callable[[], Any]) -> HttpResponseBase:
    """The JSON body of `build()`, from the cache when the key's data has not changed.

    The tag is cached apart from the body, so a matching If-None-Match costs one small cache
    read and never fetches or renders the body."""
    tag_key, body_key = f"etag:{key}", f"body:{key}"
    etag: str | None = cache.get(tag_key) if request.headers.get("If-None-Match") else None
    if etag is not None and if_none_match(request, etag):
        return not_modified(etag)
    hits = cache.get_many([body_key, tag_key])
    content: bytes | None = hits.get(body_key)
    etag = hits.get(tag_key)
    if content is None or etag is None:
        content = orjson.dumps(build())
        etag = etag_of(content)
        if may_store(request, len(content)):
            cache.set_many({body_key: content, tag_key: etag}, settings.BOUNTY_API_CACHE_SECONDS)
    if if_none_match(request, etag):
        return not_modified(etag)
    response = HttpResponse(content, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return response


def respond(request: Request, key: str, build: Callable[[], Any]) -> HttpResponseBase:
    """JSON clients from the conditional cache (`cached_json`), browsers through DRF's browsable API."""
    if request.accepted_renderer.format == "json":
        return cached_json(request, key, build)
    return Response(orjson.loads(orjson.dumps(build())))  # stored bodies parsed, to be shown indented


async def _pull(chunks: Iterator[bytes]) -> AsyncGenerator[bytes]:
    """Each chunk of a synchronous (database) iterator, fetched when the client is ready for it.

    Under ASGI, Django would turn a synchronous iterator into a list before sending the first
    byte; stepping it through sync_to_async keeps memory bounded. Thread-sensitive calls all
    run on the request's one sync thread, so the database cursor stays on its connection, and is
    closed there too when the response is abandoned (a client gone, or cut off for stalling)."""
    def following() -> bytes | None:
        return next(chunks, None)

    step = sync_to_async(following, thread_sensitive=True)
    try:
        while (chunk := await step()) is not None:
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


class _ClosingStream(StreamingHttpResponse):
    """A streamed response that closes its source when Django stops reading it.

    Django closes only the outermost of the generators wrapped around the source (its own, and
    bountysite.access's) when the client goes away; the source would be closed whenever the
    garbage collector finalises it, after the request has given its database connection back, so
    its cursor would then be closed on a connection another request may be using."""

    def __init__(self, source: AsyncGenerator[bytes], **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.source = source

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = cast(AsyncIterator[bytes], self.streaming_content)  # asynchronous, as the source is
        try:
            async for part in parts:
                yield part
        finally:
            await self.source.aclose()


# Each streamed array holds a database connection (on PostgreSQL, one of the pool's) for as long
# as its client takes to read it: a process streams at most BOUNTY_HTTP_MAX_STREAMS at once, so
# that slow readers cannot take the connections every other request needs, and at most
# BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT to one client, so that one client's slow readers cannot take
# every stream the others need.
_STREAM_SLOTS = threading.BoundedSemaphore(settings.BOUNTY_HTTP_MAX_STREAMS)
STREAM_SLOT_WAIT_SECONDS = 5  # how long a request waits for a stream to end before its 503
_streams_of: dict[str, int] = {}  # the streams each client holds, by its key (bountysite.ratelimit)
_streams_of_lock = threading.Lock()


def _take_client_stream(client: str) -> bool:
    with _streams_of_lock:
        if _streams_of.get(client, 0) >= settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT:
            return False
        _streams_of[client] = _streams_of.get(client, 0) + 1
        return True


def _give_back_client_stream(client: str) -> None:
    with _streams_of_lock:
        left = _streams_of.pop(client, 1) - 1
        if left:
            _streams_of[client] = left


class _Slot:
    """A stream's chunks, holding one of the process's stream slots and one of its client's until
    they are closed."""

    def __init__(self, chunks: Iterator[bytes], client: str) -> None:
        self.chunks = chunks
        self.client = client
        self.held = True

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self.chunks)

    def close(self) -> None:
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()
        self._release()

    def __del__(self) -> None:  # dropped unread: its request was cancelled before the body began
        self._release()

    def _release(self) -> None:
        if self.held:
            self.held = False
            _STREAM_SLOTS.release()
            _give_back_client_stream(self.client)


def client_streams_busy() -> HttpResponse:
    limit = settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT
    response = error_response(
        f"this client is already reading {limit} unpaged list{'s' if limit > 1 else ''}, as many as one client may "
        "at once (BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT); finish it first, or read pages (limit, cursor)", 429)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def streams_busy() -> HttpResponse:
    response = error_response(
        f"this server is streaming as many unpaged lists as it may ({settings.BOUNTY_HTTP_MAX_STREAMS}, "
        "BOUNTY_HTTP_MAX_STREAMS); try again shortly, or read pages (limit, cursor)", 503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def streamed_json_array(request: HttpRequest, key: str, chunks: Callable[[], Iterator[bytes]]) -> HttpResponseBase:
    """A JSON array streamed chunk by chunk, tagged by its cache key, under ASGI in one of the
    process's stream slots (a 503 when none frees up in time) and one of its client's (a 429 when
    the client holds them all). A HEAD reads no records: its headers are GET's (no
    Content-Length, which a stream never has) and its body would be dropped."""
    etag = f'W/"{key.removeprefix("api:")[:32]}"'
    if if_none_match(request, etag):
        return not_modified(etag)
    served_by_asgi = isinstance(getattr(request, "_request", request), ASGIRequest)  # DRF wraps the request
    array: Iterator[bytes]
    if request.method == "HEAD":
        array = iter(())
    elif not served_by_asgi:  # a WSGI server's workers bound its streams (each serves one request at a time)
        array = chunks()
    else:
        client = request_client(request)
        if not _take_client_stream(client):
            return client_streams_busy()
        if not _STREAM_SLOTS.acquire(blocking=False):
            # Waiting, the request gives its database connection back: on PostgreSQL, requests
            # waiting here would otherwise take the pool's connections from every other request.
            db_connection.close()
            if not _STREAM_SLOTS.acquire(timeout=STREAM_SLOT_WAIT_SECONDS):
                _give_back_client_stream(client)
                return streams_busy()
        array = _Slot(chunks(), client)
    response = (_ClosingStream(_pull(array), content_type="application/json") if served_by_asgi
                else StreamingHttpResponse(array, content_type="application/json"))
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return response
