"""The thirteen read routes: parse parameters, call a selector, serialize, answer conditionally.

JSON clients get the cached, ETag-tagged body (or a stream for unpaged arrays); a browser gets
DRF's browsable API around the same data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection
from django.http import HttpResponseBase, JsonResponse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from indexer.health import indexer_health
from records.api import schema
from records.api.caching import cache_key, cached_json, streamed_json_array
from records.api.params import NoSuchDeployment, Page, parse_list, qualified_deployment
from records.models import Bounty, Deployment, Submission
from records.representation import (
    JsonRecord,
    bounty_json,
    checksum_address,
    dispute_json,
    rfc3339,
    submission_json,
    with_counter,
)
from records.selectors import (
    COUNT_FIELDS,
    ListQuery,
    Resource,
    active_deployment,
    bounty_get,
    bounty_overview,
    data_version,
    dispute_get,
    dispute_overview,
    record_bodies,
    record_count,
    record_page,
    submission_get,
    submission_overview,
)

LIST_PARAMS = ("limit", "cursor", "q", "sort", "dir", "chain_id", "contract_address", "bounty_id", "submission_id")
QUALIFIERS = ("chain_id", "contract_address")
STREAM_CHUNK = 1_000
SERVICE_VERSION = "0.1.0"


def serialize(resource: Resource, record: Any, deployment: Deployment, *, with_count: bool = False) -> JsonRecord:
    """The record's JSON (a model instance or a named row of its fields); `with_count` adds
    submission_count / dispute_count where the spec has them."""
    chain_id, address = deployment.chain_id, deployment.contract_address
    if resource == "bounties":
        return bounty_json(record, chain_id=chain_id, contract_address=address, with_count=with_count)
    if resource == "submissions":
        return submission_json(record, chain_id=chain_id, contract_address=address, with_count=with_count)
    return dispute_json(record, chain_id=chain_id, contract_address=address)


class ReadView(APIView):
    """Answers JSON clients from the conditional cache, browsers through DRF."""

    def respond(self, request: Request, key: str, build: Callable[[], Any]) -> HttpResponseBase:
        if request.accepted_renderer.format == "json":
            return cached_json(request, key, build)
        return Response(orjson.loads(orjson.dumps(build())))  # stored bodies parsed, to be shown indented


class RecordListView(ReadView):
    resource: Resource

    def get(self, request: Request) -> HttpResponseBase:
        query, page = parse_list(self.resource, request.GET)
        version = data_version(query.deployments)
        key = cache_key(request, LIST_PARAMS, version)
        if page is None:
            if request.accepted_renderer.format == "json":
                return streamed_json_array(request, key, lambda: _stream(query))
            return Response([orjson.loads(body) for body in record_bodies(query)])
        return self.respond(request, key, lambda: _page_body(query, page, version))


def _items(query: ListQuery, page: Page) -> list[orjson.Fragment]:
    """The page's stored bodies, with submission_count / dispute_count where the spec has them."""
    counter = COUNT_FIELDS.get(query.resource)
    return [orjson.Fragment(body if counter is None else with_counter(body, counter, count))  # type: ignore[arg-type]
            for body, count in record_page(query, page.offset, page.limit)]


def _count(query: ListQuery, version: str, page: Page, shown: int) -> int:
    """The total, cached per filter and data version: every page and sort of a filter shares it.
    A page that is not full but not past the end tells it without counting."""
    filters = (query.resource, query.deployments, query.parents, query.q, query.matches_nothing, version)
    key = "count:" + hashlib.sha256(repr(filters).encode()).hexdigest()
    total = cache.get(key)
    if total is None:
        total = page.offset + shown if 0 < shown < page.limit or (shown == 0 == page.offset) else record_count(query)
        cache.set(key, total, settings.BOUNTY_API_CACHE_SECONDS)
    return int(total)


def _page_body(query: ListQuery, page: Page, version: str) -> dict[str, Any]:
    items = _items(query, page)
    total = _count(query, version, page, len(items))
    following = page.offset + page.limit
    return {
        "items": items,
        "total": total,
        "limit": page.limit,
        "cursor": page.cursor,
        "next_cursor": str(following) if following < total else None,
    }


def _stream(query: ListQuery) -> Iterator[bytes]:
    """`[`, the stored bodies joined by commas a chunk at a time, `]`."""
    first = True
    batch: list[str] = []
    yield b"["
    for body in record_bodies(query):
        batch.append(body)
        if len(batch) == STREAM_CHUNK:
            yield ("" if first else ",").encode() + ",".join(batch).encode()
            first = False
            batch = []
    if batch:
        yield ("" if first else ",").encode() + ",".join(batch).encode()
    yield b"]"


@schema.list_schema("bounties", schema.BountyRow, schema.BountyPage, schema.Bounty)
class BountyList(RecordListView):
    resource = "bounties"


@schema.list_schema("submissions", schema.SubmissionRow, schema.SubmissionPage, schema.Submission)
class SubmissionList(RecordListView):
    resource = "submissions"


@schema.list_schema("disputes", schema.Dispute, schema.DisputePage, schema.Dispute)
class DisputeList(RecordListView):
    resource = "disputes"


class RecordDetailView(ReadView):
    """One record, or an overview, of a qualified deployment."""

    noun = "record"

    def get(self, request: Request, record_id: int) -> HttpResponseBase:
        try:
            deployment = qualified_deployment(request.GET)
        except NoSuchDeployment:
            raise self.missing(record_id) from None
        key = cache_key(request, QUALIFIERS, data_version(deployment))
        return self.respond(request, key, lambda: self.body(deployment, record_id))

    def body(self, deployment: Deployment, record_id: int) -> Any:
        raise NotImplementedError

    def missing(self, record_id: int) -> NotFound:
        return NotFound(f"{self.noun} {record_id} not found")

    def found(self, record: Any, record_id: int) -> Any:
        """The record, or the 404 for it."""
        if record is None:
            raise self.missing(record_id)
        return record


@schema.record_schema("bounty_get", schema.Bounty, "One bounty")
class BountyDetail(RecordDetailView):
    noun = "bounty"

    def body(self, deployment: Deployment, record_id: int) -> Any:
        return serialize("bounties", self.found(bounty_get(deployment, record_id), record_id), deployment)


@schema.record_schema("submission_get", schema.Submission, "One submission")
class SubmissionDetail(RecordDetailView):
    noun = "submission"

    def body(self, deployment: Deployment, record_id: int) -> Any:
        return serialize("submissions", self.found(submission_get(deployment, record_id), record_id), deployment)


@schema.record_schema("dispute_get", schema.Dispute, "One dispute")
class DisputeDetail(RecordDetailView):
    noun = "dispute"

    def body(self, deployment: Deployment, record_id: int) -> Any:
        return serialize("disputes", self.found(dispute_get(deployment, record_id), record_id), deployment)


@schema.record_schema("bounty_overview", schema.BountyOverview, "A bounty, its submissions and their disputes")
class BountyOverview(RecordDetailView):
    noun = "bounty"

    def body(self, deployment: Deployment, record_id: int) -> Any:
        overview = self.found(bounty_overview(deployment, record_id), record_id)
        return {
            "bounty": serialize("bounties", overview.record, deployment, with_count=True),
            "submissions": [serialize("submissions", s, deployment, with_count=True) for s in overview.submissions],
            "disputes": [serialize("disputes", d, deployment) for d in overview.disputes],
        }


@schema.record_schema("submission_overview", schema.SubmissionOverview, "A submission, its bounty and its disputes")
class SubmissionOverview(RecordDetailView):
    noun = "submission"

    def body(self, deployment: Deployment, record_id: int) -> Any:
        overview = self.found(submission_overview(deployment, record_id), record_id)
        return {
            "submission": serialize("submissions", overview.record, deployment, with_count=True),
            "bounty": _optional("bounties", overview.bounty, deployment),
            "disputes": [serialize("disputes", d, deployment) for d in overview.disputes],
        }


@schema.record_schema("dispute_overview", schema.DisputeOverview, "A dispute with its submission, bounty, siblings")
class DisputeOverview(RecordDetailView):
    noun = "dispute"

    def body(self, deployment: Deployment, record_id: int) -> Any:
        overview = self.found(dispute_overview(deployment, record_id), record_id)
        return {
            "dispute": serialize("disputes", overview.record, deployment),
            "submission": _optional("submissions", overview.submission, deployment),
            "bounty": _optional("bounties", overview.bounty, deployment),
            "sibling_disputes": [serialize("disputes", d, deployment) for d in overview.disputes],
        }


def _optional(resource: Resource, record: Bounty | Submission | None, deployment: Deployment) -> Any:
    """A parent in an overview (with its count), or None if the mirror lacks it."""
    return None if record is None else serialize(resource, record, deployment, with_count=True)


@extend_schema_view(get=extend_schema(operation_id="health", summary="Service status and indexer flags",
                                      responses={200: schema.Health, 503: schema.Error}))
class Health(APIView):
    """Service status and the indexer's flags; never cached, never rate limited."""

    def get(self, request: Request) -> HttpResponseBase:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            health = indexer_health(active_deployment())
        except DatabaseError as exc:
            unreachable = JsonResponse({"status": "error", "version": SERVICE_VERSION,
                                     "detail": f"database unreachable: {type(exc).__name__}"}, status=503)
            unreachable["Cache-Control"] = "no-store"
            return unreachable
        degraded = health["enabled"] and not (health["running"] and health["synced"])
        contract = settings.BOUNTY_CONTRACT_ADDRESS
        usdc = settings.BOUNTY_USDC_ADDRESS
        body = {
            "status": "degraded" if degraded else "ok",
            "version": SERVICE_VERSION,
            "deployment": {
                "chain_id": settings.BOUNTY_CHAIN_ID,
                "contract_address": checksum_address(contract) if contract else None,
                "usdc_address": checksum_address(usdc) if usdc else None,
            },
            "indexer": {
                **health,
                "last_heartbeat": rfc3339(health["last_heartbeat"]) if health["last_heartbeat"] else None,
                "processes": [{**process, "last_seen": rfc3339(process["last_seen"])}
                              for process in health["processes"]],
            },
        }
        response = Response(body)
        response["Cache-Control"] = "no-store"
        return response

