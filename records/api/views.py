"""The read routes as DRF viewsets: one read-only viewset class (list, retrieve and the overview
action) over the selectors, of which each record kind's viewset only sets attributes (its
descriptor, records.kinds, and its FilterSet), with the lists' filters, search and sort as filter
backends (records.api.filters) and their paging as a pagination class (records.api.pagination);
and /health (records.health assembles it).

JSON clients get the cached, ETag-tagged body (or a stream for unpaged arrays); a browser gets
DRF's browsable API around the same data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, ClassVar

import orjson
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from bountysite.databases import PRIMARY, read_alias
from records.api import schema
from records.api.caching import respond
from records.api.errors import DATABASE_UNREACHABLE
from records.api.etags import etag_floor
from records.api.filters import (
    BountyFilterSet,
    DisputeFilterSet,
    RecordFilterBackend,
    RecordFilterSet,
    SearchBackend,
    SortBackend,
    SubmissionFilterSet,
    qualified_deployment,
)
from records.api.pagination import RecordPagination
from records.api.unpaged import spooled_json_array
from records.health import service_health
from records.history import DataVersion
from records.kinds import BOUNTY, DISPUTE, KINDS, SUBMISSION, Kind, RecordKind, kind_of, registry
from records.models import Bounty, Deployment, Dispute, Submission
from records.reads import read
from records.representation import with_counter
from records.selectors import (
    DeploymentFilter,
    ListQuery,
    Overview,
    data_version,
    record_bodies,
    record_get,
    record_overview,
)
from records.snapshot import read_snapshot
from records.spools import SpoolWriter

# Rows a streamed list reads from the database and sends at a time: what it holds per client while
# the client takes its body (with 1,000 rows a chunk and 5,000 a fetch, 20 slow readers grew the
# process by 178 MB; with 200, by 64 MB, and a fast read took as long: bench/http_slow_readers.py).
STREAM_CHUNK = 200


def stored(record: Bounty | Submission | Dispute, *, with_count: bool = False) -> orjson.Fragment:
    """The record's JSON as the indexer rendered and stored it (records.representation.record_body:
    the one place a record's shape is made); `with_count` appends its kind's counter
    (submission_count, dispute_count) where it has one."""
    counter = kind_of(record).counter
    if with_count and counter is not None:
        return orjson.Fragment(with_counter(record.body, counter, getattr(record, counter)))
    return orjson.Fragment(record.body)


def overview_body(kind: RecordKind, overview: Overview[Any]) -> dict[str, Any]:
    """An overview: the record with its counter, its parents (with theirs, or null if the mirror
    lacks them) and its children or siblings, each array by ID ascending."""
    body: dict[str, Any] = {kind.name: stored(overview.record, with_count=True)}
    if kind is BOUNTY:
        body["submissions"] = [stored(submission, with_count=True) for submission in overview.submissions]
    if kind is DISPUTE:
        body["submission"] = _optional(overview.submission)
    if kind is not BOUNTY:
        body["bounty"] = _optional(overview.bounty)
    body["sibling_disputes" if kind is DISPUTE else "disputes"] = [stored(d) for d in overview.disputes]
    return body


def _optional(record: Bounty | Submission | None) -> orjson.Fragment | None:
    return None if record is None else stored(record, with_count=True)


def _stream(query: ListQuery) -> Iterator[bytes]:
    """`[`, the stored bodies joined by commas a chunk at a time, `]`."""
    first = True
    batch: list[str] = []
    yield b"["
    for body in record_bodies(query, chunk_size=STREAM_CHUNK):
        batch.append(body)
        if len(batch) == STREAM_CHUNK:
            yield ("" if first else ",").encode() + ",".join(batch).encode()
            first = False
            batch = []
    if batch:
        yield ("" if first else ",").encode() + ",".join(batch).encode()
    yield b"]"


def _spool_list(query: ListQuery, spool: SpoolWriter) -> tuple[DataVersion, None]:
    """Writes the unpaged list into its spool from one consistent read; returns the data version
    it was read at (what its ETag names)."""
    with read_snapshot(within=spool.deadline - time.monotonic(), statements_within=spool.statements_within):
        version = data_version(query.deployments)
        for chunk in _stream(query):
            spool.write(chunk)
    return version, None


_VIEWSETS: dict[Kind, type[RecordViewSet]] = {}  # each kind's viewset, as it is defined


class RecordViewSet(GenericViewSet[Any]):
    """A record kind's list, one record (`retrieve`) and its overview, all read-only; each kind's
    viewset only sets the attributes below.

    A list's "queryset" is a `ListQuery` (records.selectors), not a QuerySet: the filter backends
    narrow it and the pagination class cuts it (or leaves it unpaged), and the selectors read the
    page, the total or the stream with the fast paths only a whole query can choose. Single
    records are qualified by a deployment (or the active one)."""

    kind: ClassVar[RecordKind]
    filterset_class: ClassVar[type[RecordFilterSet]]
    always_paged_by: ClassVar[tuple[str, ...]] = ()  # filters that ask for a page object by themselves
    filter_backends = [RecordFilterBackend, SearchBackend, SortBackend]
    pagination_class = RecordPagination
    lookup_url_kwarg = "record_id"
    lookup_value_converter = "int"  # an ID of more digits than Python converts is no route

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        registry(_VIEWSETS, "viewset")(cls.kind)(cls)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """The request's reads on a replica at least as new as the data its If-None-Match tags
        were read at, or on the primary (records.reads, which reads it again on the primary when
        its replica fails under it)."""
        try:
            return read(partial(super().dispatch, request, *args, **kwargs), etag_floor(request), request=True)
        except DATABASE_UNREACHABLE as error:  # a replica's failure of the request's own (a statement timeout)
            return self.finalize_response(self.request, super().handle_exception(error), *args, **kwargs)

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, DATABASE_UNREACHABLE) and read_alias() != PRIMARY:
            raise exc  # records.reads judges a replica's failure: read again on the primary, or answered below
        return super().handle_exception(exc)

    def get_queryset(self) -> Any:
        """Every record of the kind, in every deployment, by ID, newest first."""
        return ListQuery(kind=self.kind, deployments=DeploymentFilter())

    def list(self, request: Request) -> HttpResponseBase:
        query = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(query)
        if page is None:
            return self._unpaged(request, query)
        return self.get_paginated_response(page)

    def _unpaged(self, request: Request, query: Any) -> HttpResponseBase:
        if request.accepted_renderer.format == "json":
            return spooled_json_array(request, ("unpaged", *query.identity()), data_version(query.deployments),
                                      partial(_spool_list, query))
        return Response([orjson.loads(body) for body in record_bodies(query)])

    def retrieve(self, request: Request, record_id: int) -> HttpResponseBase:
        def body(deployment: Deployment) -> Any:
            record = record_get(self.kind, deployment, record_id)
            if record is None:
                raise self._missing(record_id)
            return stored(record)

        return self._one(request, body)

    @action(detail=True, methods=["get"])
    def overview(self, request: Request, record_id: int) -> HttpResponseBase:
        def body(deployment: Deployment) -> Any:
            overview = record_overview(self.kind, deployment, record_id)
            if overview is None:
                raise self._missing(record_id)
            return overview_body(self.kind, overview)

        return self._one(request, body)

    def _one(self, request: Request, body: Callable[[Deployment], Any]) -> HttpResponseBase:
        """One record's answer, of the deployment the request qualifies (or the active one)."""
        deployment = qualified_deployment(request.query_params)
        if deployment is None:
            raise self._missing(self.kwargs["record_id"])
        answer = (self.kind.name, self.action, deployment.pk, self.kwargs["record_id"])
        return respond(request, answer, deployment, lambda _: body(deployment))

    def _missing(self, record_id: int) -> NotFound:
        return NotFound(f"{self.kind.name} {record_id} not found")


@schema.record_schema
class BountyViewSet(RecordViewSet):
    kind = BOUNTY
    filterset_class = BountyFilterSet


@schema.record_schema
class SubmissionViewSet(RecordViewSet):
    kind = SUBMISSION
    filterset_class = SubmissionFilterSet


@schema.record_schema
class DisputeViewSet(RecordViewSet):
    kind = DISPUTE
    filterset_class = DisputeFilterSet
    always_paged_by = ("bounty_id",)  # `/disputes?bounty_id=`: a bounty's disputes, always a page


RECORD_VIEWSETS: tuple[type[RecordViewSet], ...] = tuple(_VIEWSETS[kind.name] for kind in KINDS)  # the routes


@extend_schema_view(get=extend_schema(operation_id="health", summary="Service status and indexer flags",
                                      responses={200: schema.HealthSerializer, 503: schema.ErrorSerializer}))
class Health(APIView):
    """Service status and the indexer's flags; never cached, never rate limited."""

    def get(self, request: Request) -> HttpResponseBase:  # the body: records.health
        body = service_health()
        response = JsonResponse(body, status=503) if body["status"] == "error" else Response(body)
        response["Cache-Control"] = "no-store"
        return response
