"""The read routes as DRF viewsets: a read-only viewset per resource (list, retrieve and the
overview action) over the selectors, with the lists' filters, search and sort as filter backends
(records.api.filters) and their paging as a pagination class (records.api.pagination), and /health.

JSON clients get the cached, ETag-tagged body (or a stream for unpaged arrays); a browser gets
DRF's browsable API around the same data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import orjson
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpResponseBase, JsonResponse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from bountysite.cache import redis_answers
from bountysite.redis_reach import REDIS
from indexer.health import indexer_health
from records.api import schema
from records.api.caching import cache_key, cached_json, streamed_json_array
from records.api.filters import (
    BountyFilterSet,
    DisputeFilterSet,
    NoSuchDeployment,
    RecordFilterBackend,
    RecordFilterSet,
    SearchBackend,
    SortBackend,
    SubmissionFilterSet,
    qualified_deployment,
)
from records.api.pagination import RecordPagination
from records.models import Bounty, Deployment, Dispute, Submission
from records.representation import checksum_address, rfc3339, with_counter
from records.selectors import (
    DeploymentFilter,
    ListQuery,
    Resource,
    active_deployment,
    bounty_get,
    bounty_overview,
    data_version,
    dispute_get,
    dispute_overview,
    record_bodies,
    submission_get,
    submission_overview,
)

QUALIFIERS = ("chain_id", "contract_address")
STREAM_CHUNK = 1_000
SERVICE_VERSION: str = settings.SERVICE_VERSION


def stored(record: Bounty | Submission | Dispute, *, with_count: bool = False) -> orjson.Fragment:
    """The record's JSON as the indexer rendered and stored it (records.representation.record_body:
    the one place a record's shape is made); `with_count` appends submission_count /
    dispute_count where the spec has them."""
    if with_count and isinstance(record, Bounty):
        return orjson.Fragment(with_counter(record.body, "submission_count", record.submission_count))
    if with_count and isinstance(record, Submission):
        return orjson.Fragment(with_counter(record.body, "dispute_count", record.dispute_count))
    return orjson.Fragment(record.body)


def respond(request: Request, key: str, build: Any) -> HttpResponseBase:
    """JSON clients from the conditional cache, browsers through DRF."""
    if request.accepted_renderer.format == "json":
        return cached_json(request, key, build)
    return Response(orjson.loads(orjson.dumps(build())))  # stored bodies parsed, to be shown indented


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


class RecordViewSet(GenericViewSet):  # type: ignore[type-arg]  # its lists' queries are not QuerySets
    """A resource's list, one record (`retrieve`) and its overview, all read-only. The lists'
    "queryset" is a `ListQuery`, which the filter backends narrow and the pagination class cuts
    (or leaves unpaged); single records are qualified by a deployment (or the active one)."""

    resource: ClassVar[Resource]
    noun: ClassVar[str]
    filterset_class: ClassVar[type[RecordFilterSet]]
    filter_backends = [RecordFilterBackend, SearchBackend, SortBackend]
    pagination_class = RecordPagination

    def get_queryset(self) -> Any:
        """Every record of the resource, in every deployment, by ID, newest first."""
        return ListQuery(resource=self.resource, deployments=DeploymentFilter())

    def list(self, request: Request) -> HttpResponseBase:
        query: ListQuery = self.filter_queryset(self.get_queryset())  # type: ignore[assignment]
        paginator: RecordPagination = self.paginator  # type: ignore[assignment]
        page = paginator.paginate_queryset(query, request, self)
        version = data_version(query.deployments)
        key = cache_key(request, self.shaping_parameters(), version)
        if page is None:
            if request.accepted_renderer.format == "json":
                return streamed_json_array(request, key, lambda: _stream(query))
            return Response([orjson.loads(body) for body in record_bodies(query)])
        return respond(request, key, lambda: paginator.page_object(query, page, version))

    def shaping_parameters(self) -> tuple[str, ...]:
        """Every query parameter that shapes a list's answer (its cache key)."""
        return ("limit", "cursor", "q", "sort", "dir", *self.filterset_class.base_filters)

    def retrieve(self, request: Request, record_id: int) -> HttpResponseBase:
        return self._one(request, record_id, self.record_body)

    @action(detail=True, methods=["get"])  # routed explicitly in records.urls; the schema knows it so
    def overview(self, request: Request, record_id: int) -> HttpResponseBase:
        return self._one(request, record_id, self.overview_body)

    def _one(self, request: Request, record_id: int, body: Any) -> HttpResponseBase:
        try:
            deployment = qualified_deployment(request.query_params)
        except NoSuchDeployment:
            raise self.missing(record_id) from None
        return respond(request, cache_key(request, QUALIFIERS, data_version(deployment)),
                       lambda: body(deployment, record_id))

    def record_body(self, deployment: Deployment, record_id: int) -> Any:
        raise NotImplementedError

    def overview_body(self, deployment: Deployment, record_id: int) -> Any:
        raise NotImplementedError

    def missing(self, record_id: int) -> NotFound:
        return NotFound(f"{self.noun} {record_id} not found")

    def found(self, record: Any, record_id: int) -> Any:
        """The record, or the 404 for it."""
        if record is None:
            raise self.missing(record_id)
        return record


@schema.resource_schema("bounties", schema.BountyPage, schema.Bounty, schema.BountyOverview,
                        "A bounty, its submissions and their disputes")
class BountyViewSet(RecordViewSet):
    resource = "bounties"
    noun = "bounty"
    filterset_class = BountyFilterSet

    def record_body(self, deployment: Deployment, record_id: int) -> Any:
        return stored(self.found(bounty_get(deployment, record_id), record_id))

    def overview_body(self, deployment: Deployment, record_id: int) -> Any:
        overview = self.found(bounty_overview(deployment, record_id), record_id)
        return {
            "bounty": stored(overview.record, with_count=True),
            "submissions": [stored(s, with_count=True) for s in overview.submissions],
            "disputes": [stored(d) for d in overview.disputes],
        }


@schema.resource_schema("submissions", schema.SubmissionPage, schema.Submission,
                        schema.SubmissionOverview, "A submission, its bounty and its disputes")
class SubmissionViewSet(RecordViewSet):
    resource = "submissions"
    noun = "submission"
    filterset_class = SubmissionFilterSet

    def record_body(self, deployment: Deployment, record_id: int) -> Any:
        return stored(self.found(submission_get(deployment, record_id), record_id))

    def overview_body(self, deployment: Deployment, record_id: int) -> Any:
        overview = self.found(submission_overview(deployment, record_id), record_id)
        return {
            "submission": stored(overview.record, with_count=True),
            "bounty": _optional(overview.bounty),
            "disputes": [stored(d) for d in overview.disputes],
        }


@schema.resource_schema("disputes", schema.DisputePage, schema.Dispute, schema.DisputeOverview,
                        "A dispute with its submission, bounty, siblings")
class DisputeViewSet(RecordViewSet):
    resource = "disputes"
    noun = "dispute"
    filterset_class = DisputeFilterSet

    def record_body(self, deployment: Deployment, record_id: int) -> Any:
        return stored(self.found(dispute_get(deployment, record_id), record_id))

    def overview_body(self, deployment: Deployment, record_id: int) -> Any:
        overview = self.found(dispute_overview(deployment, record_id), record_id)
        return {
            "dispute": stored(overview.record),
            "submission": _optional(overview.submission),
            "bounty": _optional(overview.bounty),
            "sibling_disputes": [stored(d) for d in overview.disputes],
        }


def _optional(record: Bounty | Submission | None) -> orjson.Fragment | None:
    """A parent in an overview (with its count), or None if the mirror lacks it."""
    return None if record is None else stored(record, with_count=True)


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
        redis = _redis_health()
        degraded = redis["status"] == "unreachable" or (health["enabled"] and not (
            health["running"] and health["synced"] and health["node_unreachable_since"] is None))
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
                "node_unreachable_since": rfc3339(since) if (since := health["node_unreachable_since"]) else None,
                "processes": [{**process, "last_seen": rfc3339(process["last_seen"])}
                              for process in health["processes"]],
            },
            "redis": redis,
        }
        response = Response(body)
        response["Cache-Control"] = "no-store"
        return response



def _redis_health() -> dict[str, Any]:
    """/health's `redis`: whether Redis answers this process now, and since when it has not."""
    answers = redis_answers()
    if answers is None:
        return {"status": "not_configured", "unreachable_since": None, "unreachable_seconds": None}
    since = REDIS.unreachable_since
    if answers or since is None:  # a PING that Redis refused is not an outage
        return {"status": "ok", "unreachable_since": None, "unreachable_seconds": None}
    return {"status": "unreachable", "unreachable_since": rfc3339(since),
            "unreachable_seconds": int(REDIS.unreachable_seconds())}
