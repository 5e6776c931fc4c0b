"""A cache of rendered bodies, answered conditionally (records.api.etags).

A body is cached under a key made of the parsed request (so equivalent requests share one entry)
and the data version of the deployments it reads (records.history.DataVersion: their change-log
positions, which every indexer commit advances). What one client adds is bounded: bodies past a
size are not stored, nor more than a number of new entries per client and cache lifetime
(records.limits.spend_cache_budget). A request whose data has not changed is answered from the
cache without touching the records; with a matching If-None-Match it is a 304 without even a body.
A body, its cache key and its tag come from one read snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import orjson
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response

from records.api.etags import CACHE_CONTROL, answer_digest, etag_of, if_none_match, not_modified
from records.history import DataVersion
from records.limits import spend_cache_budget
from records.models import Deployment
from records.reads import learnt_here
from records.selectors import DeploymentFilter, data_version
from records.snapshot import read_snapshot


def cache_key(answer: Hashable, version: DataVersion) -> str:
    """The cache's key of the answer at `version` (records.api.etags.answer_digest)."""
    return "api:" + answer_digest(answer, version)


def cached_json(request: HttpRequest, answer: Hashable, deployments: DeploymentFilter | Deployment,
                build: Callable[[DataVersion], Any]) -> HttpResponseBase:
    """The JSON body of `build(version)` for the answer over `deployments`, from the cache when
    their data has not changed.

    The tag is cached apart from the body, so a matching If-None-Match costs one small cache
    read and never fetches or renders the body. A body is built in one read snapshot with the
    data version it is cached and tagged under."""
    version = data_version(deployments)
    learnt_here(version.floor())  # what a replica holds, for the next reads that need it
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


def _entry_keys(answer: Hashable, version: DataVersion) -> tuple[str, str]:
    key = cache_key(answer, version)
    return f"etag:{key}", f"body:{key}"


def respond(request: Request, answer: Hashable, deployments: DeploymentFilter | Deployment,
            build: Callable[[DataVersion], Any]) -> HttpResponseBase:
    """JSON clients from the conditional cache (`cached_json`), browsers through DRF's browsable API."""
    if request.accepted_renderer.format == "json":
        return cached_json(request, answer, deployments, build)
    with read_snapshot():
        body = build(data_version(deployments))
    return Response(orjson.loads(orjson.dumps(body)))  # stored bodies parsed, to be shown indented
