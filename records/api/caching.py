"""Conditional responses: weak ETags, If-None-Match, and a cache of rendered bodies.

A body is cached under a key made of the parsed request (so equivalent requests share one entry)
and the data version of the deployments it reads (their change-log sequence numbers, which every
indexer commit advances). What one client adds is bounded: bodies past a size are not stored, nor
more than a number of new entries per client and cache lifetime (records.limits.spend_cache_budget). A request whose
data has not changed is answered from the cache without touching the records; with a matching
If-None-Match it is a 304 without even a body.

ETags are weak and derived from the body's bytes (`W/"<sha256 prefix>@<floor>"`), so equal bodies
have equal tags in every worker process and after restarts; the floor after `@` names the
change-log seq of each deployment the body was read at (`1:57`, several joined by `+`). A request
whose If-None-Match names a floor is read where the data is at least that new (records.replicas),
so a client that moves to a process whose replica lags is never answered an older body; tags
match on their body part alone. A body, its cache key and its tag come from one read snapshot.
Unpaged arrays, sent from their spools (records.spools), are tagged by their answer and the data
version they were read at instead (equal for equal data).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Iterator
from typing import Any, cast

import orjson
from django.conf import settings
from django.core.cache import cache
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseNotModified, StreamingHttpResponse
from django.utils.http import parse_etags
from rest_framework.request import Request
from rest_framework.response import Response

from bountysite.databases import PRIMARY, read_alias
from records.api.errors import RETRY_AFTER_SECONDS, error_response
from records.history import MAX_SEQ
from records.limits import Claim, request_client, spend_cache_budget, unpaged_list_claims
from records.models import Deployment
from records.replicas import REPLICAS
from records.selectors import DeploymentFilter, data_version, version_floor
from records.snapshot import read_snapshot
from records.spools import Produce, Producers, Spool, SpoolCutOff, Spools, SpoolUnavailable, open_reading

CACHE_CONTROL = "public, no-cache"
# A tag's floor: `<deployment>:<seq>` items joined by `+`. What a request's tags may name is bounded.
_FLOOR_ITEM = re.compile(r"([0-9]{1,18}):([0-9]{1,19})")
MAX_FLOOR_ITEMS = 16


def cache_key(answer: Hashable, version: str) -> str:
    """The answer, as the parsed request that asks for it (the same for equivalent requests:
    parameters in any order, `limit=050` or `50`, a sort alias or its key, a default sent or
    left out), and the data version."""
    return "api:" + hashlib.sha256(repr((answer, version)).encode()).hexdigest()


def etag_of(content: bytes, version: str) -> str:
    """The tag of a body read at `version`: its bytes' digest and the version's floor."""
    return f'W/"{hashlib.sha256(content).hexdigest()[:32]}{_floor_part(version)}"'


def _floor_part(version: str) -> str:
    floor = version_floor(version)
    return "@" + "+".join(f"{deployment}:{seq}" for deployment, seq in sorted(floor.items())) if floor else ""


def _body_part(tag: str) -> str | None:
    """The tag's body digest; None when its floor is not one the service writes."""
    body, at, floor = tag.removeprefix("W/").strip('"').partition("@")
    if at and not all(_FLOOR_ITEM.fullmatch(item) for item in floor.split("+")):
        return None
    return body


def etag_floor(request: HttpRequest) -> dict[int, int]:
    """The newest seq of each deployment that the request's If-None-Match tags name: what the
    answer must be at least as new as (records.replicas). Tags of any other shape name none."""
    header = request.headers.get("If-None-Match")
    floor: dict[int, int] = {}
    if not header:
        return floor
    for tag in parse_etags(header[:4096]):
        for item in tag.removeprefix("W/").strip('"').partition("@")[2].split("+")[:MAX_FLOOR_ITEMS]:
            if (match := _FLOOR_ITEM.fullmatch(item)) and int(match[2]) <= MAX_SEQ:
                deployment, seq = int(match[1]), int(match[2])
                floor[deployment] = max(seq, floor.get(deployment, 0))
        if len(floor) >= MAX_FLOOR_ITEMS:
            break
    return floor


def if_none_match(request: HttpRequest, etag: str) -> bool:
    """Weak comparison of the body parts against If-None-Match, which may list several tags or be `*`."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    body = _body_part(etag)
    return any(tag == "*" or (body is not None and _body_part(tag) == body) for tag in parse_etags(header))


def not_modified(etag: str) -> HttpResponse:
    """A 304: the 200's ETag and caching headers, no Content-Type (Django's class drops it), no body."""
    response = HttpResponseNotModified()
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return response


def cached_json(request: HttpRequest, answer: Hashable, deployments: DeploymentFilter | Deployment,
                build: Callable[[str], Any]) -> HttpResponseBase:
    """The JSON body of `build(version)` for the answer over `deployments`, from the cache when
    their data has not changed.

    The tag is cached apart from the body, so a matching If-None-Match costs one small cache
    read and never fetches or renders the body. A body is built in one read snapshot with the
    data version it is cached and tagged under."""
    version = data_version(deployments)
    if read_alias() != PRIMARY:  # what the replica holds, learnt for the next reads that need it
        REPLICAS.learnt(read_alias(), version_floor(version))
    tag_key, body_key = _entry_keys(answer, version)
    etag: str | None = cache.get(tag_key) if request.headers.get("If-None-Match") else None
    if etag is not None and if_none_match(request, etag):
        return not_modified(etag)
    hits = cache.get_many([body_key, tag_key])
    content: bytes | None = hits.get(body_key)
    etag = hits.get(tag_key)
    if content is None or etag is None:
        with read_snapshot():
            version = data_version(deployments)
            content = orjson.dumps(build(version))
        etag = etag_of(content, version)
        if spend_cache_budget(request, len(content)):
            tag_key, body_key = _entry_keys(answer, version)
            cache.set_many({body_key: content, tag_key: etag}, settings.BOUNTY_API_CACHE_SECONDS)
    if if_none_match(request, etag):
        return not_modified(etag)
    response = HttpResponse(content, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return response


def _entry_keys(answer: Hashable, version: str) -> tuple[str, str]:
    key = cache_key(answer, version)
    return f"etag:{key}", f"body:{key}"


def respond(request: Request, answer: Hashable, deployments: DeploymentFilter | Deployment,
            build: Callable[[str], Any]) -> HttpResponseBase:
    """JSON clients from the conditional cache (`cached_json`), browsers through DRF's browsable API."""
    if request.accepted_renderer.format == "json":
        return cached_json(request, answer, deployments, build)
    with read_snapshot():
        body = build(data_version(deployments))
    return Response(orjson.loads(orjson.dumps(body)))  # stored bodies parsed, to be shown indented


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
_LISTS = Spools("unpaged list", Producers(lambda: settings.BOUNTY_HTTP_MAX_STREAMS))
# What a body message holds: the server waits, before the next, until the client has taken what
# it holds (its 64 KiB and this), so a client keeps up with BOUNTY_HTTP_STALL_SECONDS at about
# (64 KiB + this) per stall limit: 72 KiB in 30 s, about 2.4 KB/s. (Smaller pieces cost a fast
# client more messages: 8 KiB, 23,000 for a list of 180 MB.)
BODY_PIECE_BYTES = 8 * 1024


def list_etag(answer: Hashable, version: str) -> str:
    """An unpaged list's tag: its answer and the data version it was read at (equal for equal
    data), and that version's floor."""
    return f'W/"{cache_key(answer, version).removeprefix("api:")[:32]}{_floor_part(version)}"'


def client_streams_busy() -> HttpResponse:
    limit = settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT
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


def spooled_json_array(request: HttpRequest, answer: Hashable, version: str, produce: Produce) -> HttpResponseBase:
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
        spool = _LISTS.get(answer, version, produce, settings.BOUNTY_HTTP_LIST_WAIT_SECONDS)
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
