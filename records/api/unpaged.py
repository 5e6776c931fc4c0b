"""Unpaged lists (the plain JSON arrays) from their spools: each read from the database once per
data version and answer into a spool (records.spools), BOUNTY_HTTP_MAX_STREAMS at a time per
process, then sent from it at each client's pace, one list at a time per client
(records.limits.unpaged_list_claims); tagged by the answer and the version they were read at
(records.api.etags.list_etag).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Iterator
from typing import Any, cast

from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

from records.api.errors import RETRY_AFTER_SECONDS, error_response
from records.api.etags import CACHE_CONTROL, if_none_match, list_etag, not_modified
from records.history import DataVersion
from records.limits import (
    Claim,
    list_streams,
    list_streams_per_client,
    list_wait_seconds,
    request_client,
    unpaged_list_claims,
)
from records.spools import Produce, Producers, Spool, SpoolCutOff, Spools, SpoolUnavailable, open_reading


class _ClosingStream(StreamingHttpResponse):
    """A streamed response that closes its source when Django stops reading it.

    Django closes only the outermost of the generators wrapped around the source (its own, and
    bountysite.access's) when the client goes away; the source, which holds a spool and its
    client's claim, would be closed only whenever the garbage collector finalises it."""

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


# The unpaged lists (records.spools): each read from the database once per data version into a
# spool, BOUNTY_HTTP_MAX_STREAMS at a time per process, then sent from it at each client's pace.
_LISTS = Spools("unpaged list", Producers(list_streams))
# What a body message holds: the server waits, before the next, until the client has taken what
# it holds (its 64 KiB and this), so a client keeps up with BOUNTY_HTTP_STALL_SECONDS at about
# (64 KiB + this) per stall limit: 72 KiB in 30 s, about 2.4 KB/s. (Smaller pieces cost a fast
# client more messages: 8 KiB, 23,000 for a list of 180 MB.)
BODY_PIECE_BYTES = 8 * 1024


def client_streams_busy() -> HttpResponse:
    limit = list_streams_per_client()
    response = error_response(
        f"this client is already reading {limit} unpaged list{'s' if limit > 1 else ''}, as many as one client may "
        "at once (BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT); finish it first, or read pages (limit, cursor)", 429)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def lists_busy(reason: str) -> HttpResponse:
    response = error_response(f"{reason} (BOUNTY_HTTP_MAX_STREAMS, BOUNTY_HTTP_LIST_WAIT_SECONDS, "
                              "BOUNTY_SPOOL_MAX_BYTES); or read pages (limit, cursor)", 503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


async def _deliver(spool: Spool, claim: Claim) -> AsyncGenerator[bytes]:
    """The spool's bytes a piece at a time, each read when the client has taken the one before
    (bountysite.daphne_http); the claim and the spool are held from the first piece to the end."""
    try:
        reading = open_reading(spool)
    except SpoolCutOff:
        claim.release()
        raise
    try:
        claim.start()
        for offset, length, _ in spool.pieces(BODY_PIECE_BYTES, at_marks=False):
            yield spool.read(offset, length)
    finally:
        reading.close()
        claim.release()


def _deliver_sync(spool: Spool) -> Iterator[bytes]:
    """`_deliver` for a WSGI server, whose workers (each serving one request at a time) bound its
    clients' reads."""
    reading = open_reading(spool)
    try:
        for offset, length, _ in spool.pieces(BODY_PIECE_BYTES, at_marks=False):
            yield spool.read(offset, length)
    finally:
        reading.close()


def spooled_json_array(request: HttpRequest, answer: Hashable, version: DataVersion,
                       produce: Produce) -> HttpResponseBase:
    """A JSON array from its spool (records.spools), made by `produce` unless one is current for
    the answer at `version`, tagged by the answer and the version it was read at; a 503 when no
    spool can be made in time, a 429 when the client already reads as many as it may. A HEAD
    makes no spool: its headers are GET's but for the Content-Length, which it has only when the
    spool is made already."""
    etag = list_etag(answer, version)
    if if_none_match(request, etag):
        return not_modified(etag)
    if request.method == "HEAD":
        spool = _LISTS.ready(answer, version, to_read=False)
        # A body-less stream: no Content-Length (as HttpResponse's 0 would say) unless it is known.
        head = StreamingHttpResponse(iter(()), content_type="application/json")
        head["ETag"] = etag if spool is None else list_etag(answer, spool.version)
        if spool is not None:
            head["Content-Length"] = str(spool.size)
        head["Cache-Control"] = CACHE_CONTROL
        head["Vary"] = "Accept"
        return head
    served_by_asgi = isinstance(getattr(request, "_request", request), ASGIRequest)  # DRF wraps the request
    claim = unpaged_list_claims.claim(request_client(request)) if served_by_asgi else None
    if served_by_asgi and claim is None:
        return client_streams_busy()
    try:
        spool = _LISTS.get(answer, version, produce, list_wait_seconds())
    except SpoolUnavailable as refusal:
        if claim is not None:
            claim.release()
        return lists_busy(refusal.reason)
    except BaseException:
        if claim is not None:
            claim.release()
        raise
    if claim is not None:
        claim.answered()
        # The request's database connections go back to their pools now, not when the client has
        # taken the body (Django gives them back when the response ends).
        for connection in connections.all(initialized_only=True):
            connection.close()
    streamed = (StreamingHttpResponse(_deliver_sync(spool), content_type="application/json") if claim is None
                else _ClosingStream(_deliver(spool, claim), content_type="application/json"))
    streamed["Content-Length"] = str(spool.size)
    streamed["ETag"] = list_etag(answer, spool.version)
    streamed["Cache-Control"] = CACHE_CONTROL
    streamed["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return streamed
