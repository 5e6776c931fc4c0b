"""Conditional responses: weak ETags, If-None-Match, and a cache of rendered bodies.

A body is cached under a key made of the route, the parameters that shape it, and the data
version of the deployments it reads (their change-log sequence numbers, which every indexer
commit advances). A request whose data has not changed is answered from the cache without
touching the records; with a matching If-None-Match it is a 304 without even a body.

ETags are weak and derived from the body's bytes (`W/"<sha256 prefix>"`), so equal bodies have
equal tags in every worker process and after restarts. Streamed arrays cannot be hashed before
they are sent; their tag is derived from the cache key instead (equal for equal data).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

CACHE_CONTROL = "public, no-cache"


def cache_key(request: HttpRequest, params: Iterable[str], version: str) -> str:
    """The route, the given query parameters as sent (sorted), and the data version."""
    shaped = sorted((name, request.GET.getlist(name)) for name in params if name in request.GET)
    raw = orjson.dumps([request.path, shaped, version])
    return "api:" + hashlib.sha256(raw).hexdigest()


def etag_of(content: bytes) -> str:
    return f'W/"{hashlib.sha256(content).hexdigest()[:32]}"'


def if_none_match(request: HttpRequest, etag: str) -> bool:
    """Weak comparison against If-None-Match, which may list several tags or be `*`."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    opaque = etag.removeprefix("W/")
    for candidate in header.split(","):
        tag = candidate.strip()
        if tag == "*" or tag.removeprefix("W/") == opaque:
            return True
    return False


def not_modified(etag: str) -> HttpResponse:
    response = HttpResponse(status=304)
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    return response


def cached_json(request: HttpRequest, key: str, build: Callable[[], Any]) -> HttpResponseBase:
    """The JSON body of `build()`, from the cache when the key's data has not changed."""
    hit: tuple[str, bytes] | None = cache.get(key)
    if hit is None:
        content = orjson.dumps(build())
        etag = etag_of(content)
        cache.set(key, (etag, content), settings.BOUNTY_API_CACHE_SECONDS)
    else:
        etag, content = hit
    if if_none_match(request, etag):
        return not_modified(etag)
    response = HttpResponse(content, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    return response


def streamed_json_array(request: HttpRequest, key: str, chunks: Callable[[], Iterable[bytes]]) -> HttpResponseBase:
    """A JSON array streamed chunk by chunk, tagged by its cache key."""
    etag = f'W/"{key.removeprefix("api:")[:32]}"'
    if if_none_match(request, etag):
        return not_modified(etag)
    response = StreamingHttpResponse(chunks(), content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    return response
