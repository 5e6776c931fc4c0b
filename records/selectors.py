"""The read side: typed selector functions over the mirrored records.

Views parse and validate request parameters into a `ListQuery` or a deployment and an ID, call
these functions, and serialize what they return; no query of the read API, the admin or the web
metrics is built anywhere else, but `/health`'s: the indexer's state is indexer.health's
(`indexer_health`), and records.health asks the database a `SELECT 1` to know that it answers.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from django.conf import settings
from django.db.models import Count, F, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from bountysite.databases import read_connection
from indexer.models import ChangeLogEntry, SyncState
from records.chronology import AnyOf, EpochMicroseconds
from records.history import NO_DATA, DataVersion, DeploymentVersion, Position, genesis_digest
from records.kinds import BOUNTY, DISPUTE, SUBMISSION, Kind, RecordKind, registry
from records.merged_order import Key, page_elements
from records.models import Bounty, Deployment, Dispute, DisputeReviewQueue, ModeratorNote, Submission
from records.representation import JsonRecord
from records.search import matching, search_term
from records.snapshot import read_snapshot

RecordT = TypeVar("RecordT", Bounty, Submission, Dispute)
BIGINT_MAX = 2**63 - 1  # the database's integer
MAX_OFFSET = BIGINT_MAX  # no table holds that many rows


@dataclass(frozen=True)
class DeploymentFilter:
    """Which deployments a list spans: all, one chain, or one deployment."""

    chain_id: int | None = None
    contract_address: str | None = None


@dataclass(frozen=True)
class ListQuery:
    kind: RecordKind
    deployments: DeploymentFilter
    # Exact filters as ORM lookups, (("bounty_id", 7), ("status__in", ("open",))): records.api.filters
    # declares them. A parent's ID is only meaningful within one deployment.
    filters: tuple[tuple[str, Any], ...] = ()
    q: str | None = None
    sort: str = "id"
    descending: bool = True
    matches_nothing: bool = False  # qualified by a deployment or parent that cannot exist

    def identity(self) -> tuple[Any, ...]:
        """What the records it reads, and their order, depend on: equal for equivalent queries
        (the response cache's key), with the sort alias resolved, `q` lowercased (its match
        ignores case) and the filters and their values in one order."""
        filters = tuple(sorted((lookup, tuple(sorted(value)) if isinstance(value, tuple) else value)
                               for lookup, value in self.filters))
        return (self.kind.name, self.deployments, filters, None if self.q is None else self.q.lower(),
                self.kind.sort_keys.get(self.sort, self.kind.id_field), self.descending, self.matches_nothing)

    @property
    def narrowed(self) -> bool:
        """Whether it picks records within its deployments (so their totals do not count it)."""
        return bool(self.filters) or bool(self.q) or self.matches_nothing


class PageRow(NamedTuple):
    """A list row as stored: the record's JSON body, and its counter where the resource has one."""

    body: str
    counter: int | None


@dataclass(frozen=True)
class Overview(Generic[RecordT]):
    record: RecordT
    bounty: Bounty | None
    submission: Submission | None
    submissions: list[Submission]
    disputes: list[Dispute]


def active_deployment() -> Deployment | None:
    """The service's configured deployment (BOUNTY_CHAIN_ID + BOUNTY_CONTRACT_ADDRESS), once indexed."""
    if not settings.BOUNTY_CONTRACT_ADDRESS:
        return None
    return deployment_get(settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS)


def indexer_heartbeat(deployment: Deployment) -> datetime | None:
    """When the deployment's writing indexer last beat (the web metrics' heartbeat age)."""
    heartbeat: datetime | None = (SyncState.objects.filter(deployment=deployment)
                                  .values_list("last_heartbeat", flat=True).first())
    return heartbeat


def deployment_get(chain_id: int, contract_address: str) -> Deployment | None:
    return Deployment.objects.filter(chain_id=chain_id, contract_address=contract_address.lower()).first()


def deployment_qualified(chain_id: int | None, contract_address: str | None) -> Deployment | None:
    """The deployment a single-record route or a parent filter addresses (docs/api.md,
    Deployments): the one `chain_id` and `contract_address` name (the caller has checked they come
    together), or the active deployment when neither is given; None when the service does not
    index it."""
    if chain_id is None or contract_address is None:
        return active_deployment()
    return None if chain_id > BIGINT_MAX else deployment_get(chain_id, contract_address)


def data_version(deployments: DeploymentFilter | Deployment | None = None) -> DataVersion:
    """A token that changes whenever the records of the given deployments change.

    Every indexer commit that changes records advances its deployment's change-log `last_seq`
    in the same transaction, so the sequence numbers version everything the API serves, with the
    digest of the changes up to them (records.history), which tells apart two histories that
    number their changes alike (a restored backup, a promoted standby, a re-index); but a
    bulk backfill writes no entries until it has caught up, so meanwhile its last indexed block
    versions it too. Every request reads it first, so it is one short statement, spared the
    ORM's building."""
    connection = read_connection()
    quote = connection.ops.quote_name
    sync, deployment = quote(SyncState._meta.db_table), quote(Deployment._meta.db_table)
    sql = (f"SELECT s.deployment_id, s.last_seq, s.last_digest, CASE WHEN s.bulk_from_block IS NULL THEN NULL "
           f"ELSE s.last_indexed_block END FROM {sync} s")
    conditions: list[str] = []
    params: list[Any] = []
    if isinstance(deployments, Deployment):
        conditions, params = ["s.deployment_id = %s"], [deployments.pk]
    elif deployments is not None and deployments.chain_id is not None and deployments.chain_id > BIGINT_MAX:
        return NO_DATA  # no deployment has it (nor could the database compare it)
    elif deployments is not None and (deployments.chain_id is not None or deployments.contract_address is not None):
        sql += f" JOIN {deployment} d ON d.id = s.deployment_id"
        for column in ("chain_id", "contract_address"):
            if getattr(deployments, column) is not None:
                conditions.append(f"d.{column} = %s")
                params.append(getattr(deployments, column))
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    with connection.cursor() as cursor:
        cursor.execute(sql + " ORDER BY s.deployment_id", params)
        return DataVersion(tuple(DeploymentVersion(pk, Position(seq, digest or ""), bulk)
                                 for pk, seq, digest, bulk in cursor.fetchall()))


def deployment_ids(deployments: DeploymentFilter) -> list[int]:
    """The IDs of the indexed deployments a filter names (all of them without a filter)."""
    query = Deployment.objects.all()
    if deployments.chain_id is not None:
        query = query.filter(chain_id=deployments.chain_id)
    if deployments.contract_address is not None:
        query = query.filter(contract_address=deployments.contract_address)
    return list(query.order_by("pk").values_list("pk", flat=True))


def _filtered(query: ListQuery, ids: list[int]) -> QuerySet[Any]:
    records: QuerySet[Any] = query.kind.model.objects.all()
    if query.matches_nothing or not ids:
        return records.none()
    records = records.filter(deployment_id=ids[0]) if len(ids) == 1 else records.filter(deployment_id__in=ids)
    if query.filters:
        records = records.filter(**dict(query.filters))
    if query.q:
        term = search_term(query.q)
        if term is None:
            return records.none()
        records = matching(records, term)
    return records


def _ordering(query: ListQuery, ids: list[int]) -> list[str]:
    id_field = query.kind.id_field
    key = query.kind.sort_keys.get(query.sort, id_field)
    sign = "-" if query.descending else ""
    order = [f"{sign}{key}"]
    if key != id_field:
        order.append(f"{sign}{id_field}")
    if len(ids) > 1:  # IDs repeat across deployments: the deployment completes the order
        order.append(f"{sign}deployment_id")
    return order


def record_list(query: ListQuery) -> QuerySet[Any]:
    """The records a list query matches, in its order (ties broken by ID, then deployment)."""
    ids = deployment_ids(query.deployments)
    return _filtered(query, ids).order_by(*_ordering(query, ids))


def record_page(query: ListQuery, offset: int, limit: int) -> list[PageRow]:
    """One page of the list, as stored bodies with their counters.

    On the default (ID) order the page is read as an ID range instead of skipping `offset` rows:
    on-chain IDs run without gaps in each deployment (a reorganisation only removes the newest),
    so the position of any ID in the merged order of several deployments is arithmetic, and a
    deep page costs what the first one does. A deep page sorted by created_at over deployments
    whose records are in chain order (records.chronology) is found from IDs too: one deployment's
    created_at order is then its ID order, and several deployments' is a merge of those
    (records.merged_order). Other orders skip rows in an index-only scan that reads just the
    natural keys, from the nearer end of the list, then fetch the page's rows by key."""
    if offset > MAX_OFFSET:
        return []
    ids = deployment_ids(query.deployments)
    records = _filtered(query, ids).order_by(*_ordering(query, ids))
    id_field = query.kind.id_field
    key = query.kind.sort_keys.get(query.sort, id_field)
    plain = bool(ids) and not query.narrowed
    by_time = key == "created_at" and offset >= DEFERRED_OFFSET
    if offset and plain and (key == id_field or by_time):
        if key == id_field or len(ids) == 1:
            ranges = _dense_id_ranges(query.kind, ids, in_chain_order=key != id_field)
            if ranges is not None:
                by_id = records if key == id_field else _filtered(query, ids).order_by(
                    *_ordering(replace(query, sort="id"), ids))
                return _id_range_page(query.kind, by_id, ranges, offset, limit, descending=query.descending)
        else:
            with read_snapshot():  # its reads build on one another
                ranges = _dense_id_ranges(query.kind, ids, in_chain_order=True)
                page = None if ranges is None else _merged_time_page(query.kind, ranges, offset, limit,
                                                                     descending=query.descending)
            if page is not None:
                return page
    if offset >= DEFERRED_OFFSET:
        total = _plain_total(query, ids)
        if total is not None and offset > total - offset:  # nearer the end: skip from there, backwards
            backwards = replace(query, descending=not query.descending)
            count = min(limit, total - offset)
            if count <= 0:
                return []
            records = _filtered(query, ids).order_by(*_ordering(backwards, ids))
            return _deferred_page(query.kind, records, total - offset - count, count)[::-1]
        return _deferred_page(query.kind, records, offset, limit)
    return _page_rows(query.kind, records[offset : offset + limit])


def _plain_total(query: ListQuery, ids: list[int]) -> int | None:
    """The number of records of a list without filters or `q`, from the deployments' totals
    (None for other lists, which would need a COUNT)."""
    if query.narrowed:
        return None
    totals = Deployment.objects.filter(pk__in=ids).values_list(query.kind.total_field, flat=True)
    return int(sum(totals))


def _page_rows(kind: RecordKind, records: QuerySet[Any]) -> list[PageRow]:
    count = kind.counter
    if count is None:
        return [PageRow(body, None) for body in records.values_list("body", flat=True)]
    return [PageRow(*row) for row in records.values_list("body", count)]


DEFERRED_OFFSET = 1_000  # from here on, skipping whole rows costs more than a second lookup


class IdRange(NamedTuple):
    """A deployment's records of a kind, whose IDs run from `low` to `high` without gaps."""

    deployment: int
    low: int
    high: int


def _dense_id_ranges(kind: RecordKind, ids: list[int], *, in_chain_order: bool = False) -> list[IdRange] | None:
    """Each deployment's lowest and highest ID, if its IDs run without gaps (None otherwise):
    one query, two index probes per deployment beside its total. With `in_chain_order`, None
    also unless every deployment's records of the resource are in chain order."""
    id_field = kind.id_field
    mine = kind.model.objects.filter(deployment_id=OuterRef("pk")).values(id_field)
    deployments = Deployment.objects.filter(pk__in=ids)
    if in_chain_order:
        deployments = deployments.filter(**{kind.in_chain_order_field: True})
    edges = list(deployments.order_by("pk").values_list(
        "pk",
        kind.total_field,
        Subquery(mine.order_by(id_field)[:1]),
        Subquery(mine.order_by(f"-{id_field}")[:1]),
    ))
    if len(edges) != len(ids):  # a deployment left out: not in chain order
        return None
    ranges: list[IdRange] = []
    for deployment, total, low, high in edges:
        if low is None and high is None and not total:
            continue  # no records: nothing to place
        if low is None or high is None or high - low + 1 != total:
            return None
        ranges.append(IdRange(deployment, low, high))
    return ranges


def _id_range_page(kind: RecordKind, records: QuerySet[Any], ranges: list[IdRange], offset: int,
                   limit: int, *, descending: bool) -> list[PageRow]:
    """The page at `offset` of records ordered by ID, then deployment, over dense ID ranges.

    Finds the ID at that position by bisection over the arithmetic count of rows before an ID;
    the page then starts at that ID, less the few deployments sharing it that come earlier."""
    if not ranges or offset >= sum(high - low + 1 for _, low, high in ranges):
        return []

    def before(edge: int) -> int:
        """Rows that come before every row with ID `edge` in the requested direction."""
        if descending:
            return sum(max(0, high - max(edge, low - 1)) for _, low, high in ranges)
        return sum(max(0, min(edge, high + 1) - low) for _, low, high in ranges)

    lowest, highest = min(r.low for r in ranges), max(r.high for r in ranges)
    # The ID of the row at `offset` is the one whose rows start at or before it and end after it.
    below, above = lowest, highest
    if descending:  # before() falls as the ID rises: the lowest ID with before <= offset
        while below < above:
            middle = (below + above) // 2
            below, above = (below, middle) if before(middle) <= offset else (middle + 1, above)
    else:  # before() rises with the ID: the highest ID with before <= offset
        while below < above:
            middle = (below + above + 1) // 2
            below, above = (middle, above) if before(middle) <= offset else (below, middle - 1)
    skip = offset - before(below)  # rows of other deployments with the same ID that come first
    id_field = kind.id_field
    edge = {f"{id_field}__lte" if descending else f"{id_field}__gte": below}
    return _page_rows(kind, records.filter(**edge)[skip : skip + limit])


def _merged_time_page(kind: RecordKind, ranges: list[IdRange], offset: int, limit: int, *,
                      descending: bool) -> list[PageRow] | None:
    """A deep page sorted by created_at over several deployments in chain order. Each
    deployment's records are then sorted by (created_at, ID) in ID order, and the list is their
    merge: records.merged_order finds the page from keys read by ID, a few hundred index probes
    per read. None if the records changed under the reads."""
    model, id_field = kind.model, kind.id_field
    sign = -1 if descending else 1  # merged_order runs ascending: descending keys are negated

    def id_at(edges: IdRange, position: int) -> int:
        return edges.high - position if descending else edges.low + position

    def ids_in(edges: IdRange, window: range) -> Q:
        if window.step == 1:  # a whole window: one index range
            ends = sorted((id_at(edges, window[0]), id_at(edges, window[-1])))
            return Q(deployment_id=edges.deployment, **{f"{id_field}__range": ends})
        return Q(AnyOf(F(id_field), [id_at(edges, p) for p in window]), deployment_id=edges.deployment)

    def keys_at(windows: Sequence[range]) -> list[list[Key]] | None:
        wanted = [ids_in(edges, window) for edges, window in zip(ranges, windows, strict=True) if window]
        found = {(deployment, n): created for deployment, n, created in model.objects.filter(
            reduce(operator.or_, wanted)).values_list("deployment_id", id_field, EpochMicroseconds("created_at"))
        } if wanted else {}
        keys: list[list[Key]] = []
        for edges, window in zip(ranges, windows, strict=True):
            keys.append([])
            for position in window:
                n = id_at(edges, position)
                created = found.get((edges.deployment, n))
                if created is None:
                    return None
                keys[-1].append((sign * created, sign * n, sign * edges.deployment))
        return keys

    elements = page_elements([high - low + 1 for _, low, high in ranges], offset, limit, keys_at)
    if elements is None:
        return None
    return _rows_by_key(kind, [(ranges[e.sequence].deployment, id_at(ranges[e.sequence], e.position))
                                   for e in elements])


def _deferred_page(kind: RecordKind, records: QuerySet[Any], offset: int, limit: int) -> list[PageRow]:
    """A deep page of any order: the natural keys of the page from an index-only scan (the sort
    indexes end in the ID and the deployment), then those rows."""
    id_field = kind.id_field
    return _rows_by_key(kind, list(records.values_list("deployment_id", id_field)[offset : offset + limit]))


def _rows_by_key(kind: RecordKind, keys: list[tuple[int, int]]) -> list[PageRow]:
    """The rows of the given (deployment, ID) keys, in their order."""
    if not keys:
        return []
    id_field = kind.id_field
    count = kind.counter
    ids_by_deployment: dict[int, set[int]] = {}
    for deployment, n in keys:
        ids_by_deployment.setdefault(deployment, set()).add(n)
    wanted = reduce(operator.or_, (Q(deployment_id=deployment, **{f"{id_field}__in": ids})
                                   for deployment, ids in ids_by_deployment.items()))
    rows = kind.model.objects.filter(wanted).values_list(
        "deployment_id", id_field, "body", *([count] if count else []))
    by_key = {(row[0], row[1]): PageRow(row[2], row[3] if count else None) for row in rows}
    return [by_key[key] for key in keys if key in by_key]


def record_bodies(query: ListQuery, chunk_size: int = 5_000) -> Iterator[str]:
    """The stored JSON body of every matching record, in order, streamed from the database in
    chunks: unpaged arrays of any size in bounded memory, without rendering a row."""
    bodies: Iterator[str] = record_list(query).values_list("body", flat=True).iterator(chunk_size=chunk_size)
    return bodies


def record_count(query: ListQuery) -> int:
    """How many records the query matches: the deployments' totals or a parent's counter where
    they answer it, a COUNT otherwise."""
    if query.matches_nothing:
        return 0
    ids = deployment_ids(query.deployments)
    total = _plain_total(query, ids)
    if total is not None:
        return total
    if len(query.filters) == 1 and not query.q and len(ids) == 1:
        ((field, value),) = query.filters
        if query.kind is SUBMISSION and field == "bounty_id":
            counter = Bounty.objects.filter(deployment_id=ids[0], bounty_id=value).values_list(
                "submission_count", flat=True).first()
            return counter or 0
        if query.kind is DISPUTE and field == "submission_id":
            counter = Submission.objects.filter(deployment_id=ids[0], submission_id=value).values_list(
                "dispute_count", flat=True).first()
            return counter or 0
    return _filtered(query, ids).count()


def record_get(kind: RecordKind, deployment: Deployment, record_id: int) -> Bounty | Submission | Dispute | None:
    """One record of the kind, by its on-chain ID within the deployment."""
    if record_id > BIGINT_MAX:
        return None
    return kind.model.objects.filter(deployment=deployment, **{kind.id_field: record_id}).first()


# Each record kind's overview, by the kind's name (records.kinds): its relatives differ per kind.
OVERVIEWS: dict[Kind, Callable[[Deployment, int], Overview[Any] | None]] = {}


_overview_of = registry(OVERVIEWS, "overview")


def record_overview(kind: RecordKind, deployment: Deployment, record_id: int) -> Overview[Any] | None:
    """The record with its relatives (bounty_overview, submission_overview, dispute_overview)."""
    if record_id > BIGINT_MAX:
        return None
    return OVERVIEWS[kind.name](deployment, record_id)


def bounty_get(deployment: Deployment, bounty_id: int) -> Bounty | None:
    return Bounty.objects.filter(deployment=deployment, bounty_id=bounty_id).first()


def submission_get(deployment: Deployment, submission_id: int) -> Submission | None:
    return Submission.objects.filter(deployment=deployment, submission_id=submission_id).first()


def dispute_get(deployment: Deployment, dispute_id: int) -> Dispute | None:
    return Dispute.objects.filter(deployment=deployment, dispute_id=dispute_id).first()


@_overview_of(BOUNTY)
def bounty_overview(deployment: Deployment, bounty_id: int) -> Overview[Bounty] | None:
    """The bounty, its submissions and their disputes (arrays by ID ascending)."""
    bounty = bounty_get(deployment, bounty_id)
    if bounty is None:
        return None
    submissions = list(Submission.objects.filter(deployment=deployment, bounty_id=bounty_id)
                       .order_by("submission_id"))
    disputes = list(Dispute.objects.filter(deployment=deployment, bounty_id=bounty_id).order_by("dispute_id"))
    return Overview(record=bounty, bounty=None, submission=None, submissions=submissions, disputes=disputes)


@_overview_of(SUBMISSION)
def submission_overview(deployment: Deployment, submission_id: int) -> Overview[Submission] | None:
    """The submission, its bounty and its disputes."""
    submission = submission_get(deployment, submission_id)
    if submission is None:
        return None
    disputes = list(Dispute.objects.filter(deployment=deployment, submission_id=submission_id)
                    .order_by("dispute_id"))
    return Overview(record=submission, bounty=bounty_get(deployment, submission.bounty_id), submission=None,
                    submissions=[], disputes=disputes)


@_overview_of(DISPUTE)
def dispute_overview(deployment: Deployment, dispute_id: int) -> Overview[Dispute] | None:
    """The dispute, its submission, its bounty and its sibling disputes (same submission, not itself)."""
    dispute = dispute_get(deployment, dispute_id)
    if dispute is None:
        return None
    siblings = list(Dispute.objects.filter(deployment=deployment, submission_id=dispute.submission_id)
                    .exclude(dispute_id=dispute_id).order_by("dispute_id"))
    return Overview(record=dispute, bounty=bounty_get(deployment, dispute.bounty_id),
                    submission=submission_get(deployment, dispute.submission_id), submissions=[],
                    disputes=siblings)


# ---------------------------------------------------------------------------- the change log


class Change(NamedTuple):
    """A change-log entry as the websocket sends it (records.changes.MessageType), with the
    position after it (records.history)."""

    seq: int
    type: str
    payload: JsonRecord
    digest: str
    committed: datetime | None = None  # when the indexer wrote it

    @property
    def position(self) -> Position:
        return Position(self.seq, self.digest)


def active_deployment_id() -> int | None:
    deployment = active_deployment()
    return deployment.pk if deployment is not None else None


def genesis_position(deployment_id: int) -> Position:
    """The position before the deployment's first change."""
    chain_id, contract_address = Deployment.objects.values_list("chain_id", "contract_address").get(pk=deployment_id)
    return Position(0, genesis_digest(chain_id, contract_address))


def head_position(deployment_id: int) -> Position:
    """The position after the deployment's newest change (its genesis before the first). Its
    digest is empty when that change was written before digests were (one no client can resume
    from: records.history)."""
    row = (SyncState.objects.filter(deployment_id=deployment_id)
           .values_list("last_seq", "last_digest", "deployment__chain_id", "deployment__contract_address").first())
    if row is None:  # not indexed yet
        return genesis_position(deployment_id)
    seq, digest, chain_id, contract_address = row
    return Position(seq, digest or "") if seq else Position(0, genesis_digest(chain_id, contract_address))


def changes_after(deployment_id: int, after: Position, last: int, limit: int) -> list[Change] | None:
    """The entries after `after` through seq `last`, in order, at most `limit` of them; None when
    this history cannot vouch for `after`: the entry at its seq has another digest (a position of
    another history), or is no longer held (pruned), or the position is past the newest change."""
    rows = changes_between(deployment_id, after.seq, last, limit + 1)
    if not rows:
        # None held from its seq on: the newest position (the genesis before the first change,
        # or every entry pruned), or one this history does not reach. The newest is read after the
        # entries, so a change committed in between is read again, not taken for another history.
        if after == head_position(deployment_id):
            return []
        rows = changes_between(deployment_id, after.seq, last, limit + 1)
    if rows and rows[0].seq == after.seq:
        return rows[1:] if rows[0].digest == after.digest else None
    if after.seq == 0 and rows and rows[0].seq == 1:  # the genesis, while the first change is held
        return rows[:limit] if after == genesis_position(deployment_id) else None
    return None  # its own entry is no longer held (pruned), or it is past the newest change


def changes_between(deployment_id: int, first: int, last: int, limit: int) -> list[Change]:
    """The entries of seqs first..last, in order, at most `limit` of them."""
    rows = (ChangeLogEntry.objects.filter(deployment_id=deployment_id, seq__gte=first, seq__lte=last)
            .order_by("seq").values_list("seq", "type", "payload", "digest", "created_at")[:limit])
    return [Change(seq, type_, payload, digest or "", committed) for seq, type_, payload, digest, committed in rows]


# ---------------------------------------------------------------------------- the admin's and the review page's reads


if TYPE_CHECKING:
    from typing import TypedDict

    from django_stubs_ext import WithAnnotations

    class NoteCount(TypedDict):
        note_count: int

    QueueRow = WithAnnotations[DisputeReviewQueue, NoteCount]


def bounty_admin_list() -> QuerySet[Bounty]:
    """The admin's bounties (list and change page), with what their columns show."""
    return Bounty.objects.select_related("deployment")


def submission_admin_list() -> QuerySet[Submission]:
    """The admin's submissions, each with its bounty's key (the list links to it): prefetched
    rather than joined, since a join would hide a submission whose bounty is not mirrored."""
    bounty_keys = Bounty.objects.only("deployment_id", "bounty_id")
    return Submission.objects.select_related("deployment").prefetch_related(Prefetch("bounty", bounty_keys))


def dispute_admin_list() -> QuerySet[Dispute]:
    """The admin's disputes, with what their columns show."""
    return Dispute.objects.select_related("deployment")


def review_queue_list() -> QuerySet[QueueRow]:
    """The disputes pending review, oldest first, each with how many notes moderators left on it."""
    notes = (ModeratorNote.objects.filter(deployment_id=OuterRef("deployment_id"), dispute_id=OuterRef("dispute_id"))
             .order_by().values("deployment_id", "dispute_id").annotate(count=Count("pk")).values("count"))
    return (DisputeReviewQueue.objects.select_related("deployment")
            .annotate(note_count=Coalesce(Subquery(notes, output_field=IntegerField()), 0))
            .order_by("created_at", "dispute_id"))


def review_queue_count() -> int:
    """How many disputes wait for review (every deployment's)."""
    return DisputeReviewQueue.objects.count()


def record_search(records: QuerySet[Any], text: str) -> QuerySet[Any]:
    """The records whose search text holds every word of `text` (the admin's search box)."""
    for word in text.split():
        term = search_term(word)
        records = records.none() if term is None else matching(records, term)
    return records


def dispute_get_by_pk(pk: int) -> Dispute | None:
    """The dispute of a review page's URL, with its deployment."""
    return Dispute.objects.select_related("deployment").filter(pk=pk).first()


def moderator_note_list(deployment: Deployment, dispute_id: int) -> list[ModeratorNote]:
    """The notes on a dispute, oldest first, with their authors."""
    return list(ModeratorNote.objects.filter(deployment=deployment, dispute_id=dispute_id).select_related("author"))
