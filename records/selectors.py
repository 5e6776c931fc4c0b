"""The read side: typed selector functions over the mirrored records.

Views parse and validate request parameters into a `ListQuery` or a deployment and an ID, call
these functions, and serialize what they return; no query is built anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from django.conf import settings
from django.db.models import Max, Min, QuerySet

from indexer.models import SyncState
from records.models import Bounty, Deployment, Dispute, Submission
from records.search import matching, search_term

Resource = Literal["bounties", "submissions", "disputes"]
RecordT = TypeVar("RecordT", Bounty, Submission, Dispute)

# Sort keys of the spec (decisions.md section 4) and the model field each one sorts by.
SORT_FIELDS: dict[Resource, dict[str, str]] = {
    "bounties": {
        "id": "bounty_id", "created_at": "created_at", "deadline": "deadline", "reward": "bounty_amount",
        "bounty_amount": "bounty_amount", "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status",
        "poster": "poster", "prompt": "prompt", "submissions": "submission_count",
        "submission_count": "submission_count",
    },
    "submissions": {
        "id": "submission_id", "created_at": "created_at", "submitted": "created_at", "bounty": "bounty_id",
        "bounty_id": "bounty_id", "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status",
        "claimant": "claimant", "content": "content", "review": "review_deadline",
        "review_deadline": "review_deadline", "disputes": "dispute_count", "dispute_count": "dispute_count",
    },
    "disputes": {
        "id": "dispute_id", "created_at": "created_at", "submitted": "created_at", "bounty": "bounty_id",
        "bounty_id": "bounty_id", "submission": "submission_id", "submission_id": "submission_id",
        "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status", "challenger": "challenger_id",
        "reason": "reason",
    },
}
MAX_OFFSET = 2**63 - 1  # the database's integer; no table holds that many rows
TOTAL_FIELDS: dict[Resource, str] = {
    "bounties": "bounty_total", "submissions": "submission_total", "disputes": "dispute_total",
}
ID_FIELDS: dict[Resource, str] = {"bounties": "bounty_id", "submissions": "submission_id", "disputes": "dispute_id"}
MODELS: dict[Resource, type[Bounty] | type[Submission] | type[Dispute]] = {
    "bounties": Bounty, "submissions": Submission, "disputes": Dispute,
}


@dataclass(frozen=True)
class DeploymentFilter:
    """Which deployments a list spans: all, one chain, or one deployment."""

    chain_id: int | None = None
    contract_address: str | None = None


@dataclass(frozen=True)
class ListQuery:
    resource: Resource
    deployments: DeploymentFilter
    parents: tuple[tuple[str, int], ...] = ()  # (("bounty_id", 7),): only within one deployment
    q: str | None = None
    sort: str = "id"
    descending: bool = True
    matches_nothing: bool = False  # qualified by a deployment or parent that cannot exist


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


def deployment_get(chain_id: int, contract_address: str) -> Deployment | None:
    return Deployment.objects.filter(chain_id=chain_id, contract_address=contract_address.lower()).first()


def deployments_by_id() -> dict[int, Deployment]:
    return {d.pk: d for d in Deployment.objects.all()}


def data_version(deployments: DeploymentFilter | Deployment | None = None) -> str:
    """A token that changes whenever the records of the given deployments change.

    Every indexer commit advances its deployment's change-log `last_seq` in the same
    transaction as the records, so the sequence numbers version everything the API serves."""
    query = SyncState.objects.all()
    if isinstance(deployments, Deployment):
        query = query.filter(deployment=deployments)
    elif deployments is not None:
        if deployments.chain_id is not None:
            query = query.filter(deployment__chain_id=deployments.chain_id)
        if deployments.contract_address is not None:
            query = query.filter(deployment__contract_address=deployments.contract_address)
    return ",".join(f"{pk}:{seq}" for pk, seq in query.order_by("deployment_id").values_list("deployment_id",
                                                                                                "last_seq"))


def deployment_ids(deployments: DeploymentFilter) -> list[int]:
    """The IDs of the indexed deployments a filter names (all of them without a filter)."""
    query = Deployment.objects.all()
    if deployments.chain_id is not None:
        query = query.filter(chain_id=deployments.chain_id)
    if deployments.contract_address is not None:
        query = query.filter(contract_address=deployments.contract_address)
    return list(query.order_by("pk").values_list("pk", flat=True))


def _filtered(query: ListQuery, ids: list[int]) -> QuerySet[Any]:
    records: QuerySet[Any] = MODELS[query.resource].objects.all()
    if query.matches_nothing or not ids:
        return records.none()
    records = records.filter(deployment_id=ids[0]) if len(ids) == 1 else records.filter(deployment_id__in=ids)
    if query.parents:
        records = records.filter(**dict(query.parents))
    if query.q:
        term = search_term(query.q)
        if term is None:
            return records.none()
        records = matching(records, term)
    return records


def _ordering(query: ListQuery, ids: list[int]) -> list[str]:
    id_field = ID_FIELDS[query.resource]
    key = SORT_FIELDS[query.resource].get(query.sort, id_field)
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


def record_page(query: ListQuery, offset: int, limit: int) -> list[Any]:
    """One page of the list. On the default order of one deployment the page is read as an ID
    range instead of skipping `offset` rows: on-chain IDs run 1..N without gaps (a
    reorganisation only removes the newest), so a deep page costs what the first one does."""
    ids = deployment_ids(query.deployments)
    records = _filtered(query, ids).order_by(*_ordering(query, ids))
    id_field = ID_FIELDS[query.resource]
    by_id = SORT_FIELDS[query.resource].get(query.sort, id_field) == id_field
    if offset > MAX_OFFSET:
        return []
    if offset and by_id and len(ids) == 1 and not query.parents and not query.q and not query.matches_nothing:
        one = MODELS[query.resource].objects.filter(deployment_id=ids[0])
        total = Deployment.objects.filter(pk=ids[0]).values_list(TOTAL_FIELDS[query.resource], flat=True).get()
        low = one.aggregate(v=Min(id_field))["v"]
        high = one.aggregate(v=Max(id_field))["v"]
        if low is not None and high is not None and high - low + 1 == total:
            edge = {f"{id_field}__lte": high - offset} if query.descending else {f"{id_field}__gte": low + offset}
            return list(records.filter(**edge)[:limit])
    return list(records[offset : offset + limit])


def record_rows(query: ListQuery, chunk_size: int = 2_000) -> Iterator[Any]:
    """Every matching record as a light named row (attribute access like a model instance),
    streamed from the database in chunks: for unpaged arrays of any size in bounded memory."""
    model = MODELS[query.resource]
    fields = [f.attname for f in model._meta.concrete_fields if f.attname not in {"id", "search_text"}]
    return record_list(query).values_list(*fields, named=True).iterator(chunk_size=chunk_size)


def record_count(query: ListQuery) -> int:
    """How many records the query matches: the deployments' totals or a parent's counter where
    they answer it, a COUNT otherwise."""
    if query.matches_nothing:
        return 0
    ids = deployment_ids(query.deployments)
    if not query.parents and not query.q:
        totals = Deployment.objects.filter(pk__in=ids).values_list(TOTAL_FIELDS[query.resource], flat=True)
        return int(sum(totals))
    if len(query.parents) == 1 and not query.q and len(ids) == 1:
        ((field, value),) = query.parents
        if query.resource == "submissions" and field == "bounty_id":
            counter = Bounty.objects.filter(deployment_id=ids[0], bounty_id=value).values_list(
                "submission_count", flat=True).first()
            return counter or 0
        if query.resource == "disputes" and field == "submission_id":
            counter = Submission.objects.filter(deployment_id=ids[0], submission_id=value).values_list(
                "dispute_count", flat=True).first()
            return counter or 0
    return _filtered(query, ids).count()


def bounty_get(deployment: Deployment, bounty_id: int) -> Bounty | None:
    return Bounty.objects.filter(deployment=deployment, bounty_id=bounty_id).first()


def submission_get(deployment: Deployment, submission_id: int) -> Submission | None:
    return Submission.objects.filter(deployment=deployment, submission_id=submission_id).first()


def dispute_get(deployment: Deployment, dispute_id: int) -> Dispute | None:
    return Dispute.objects.filter(deployment=deployment, dispute_id=dispute_id).first()


def bounty_overview(deployment: Deployment, bounty_id: int) -> Overview[Bounty] | None:
    """The bounty, its submissions and their disputes (arrays by ID ascending)."""
    bounty = bounty_get(deployment, bounty_id)
    if bounty is None:
        return None
    submissions = list(Submission.objects.filter(deployment=deployment, bounty_id=bounty_id)
                       .order_by("submission_id"))
    disputes = list(Dispute.objects.filter(deployment=deployment, bounty_id=bounty_id).order_by("dispute_id"))
    return Overview(record=bounty, bounty=None, submission=None, submissions=submissions, disputes=disputes)


def submission_overview(deployment: Deployment, submission_id: int) -> Overview[Submission] | None:
    """The submission, its bounty and its disputes."""
    submission = submission_get(deployment, submission_id)
    if submission is None:
        return None
    disputes = list(Dispute.objects.filter(deployment=deployment, submission_id=submission_id)
                    .order_by("dispute_id"))
    return Overview(record=submission, bounty=bounty_get(deployment, submission.bounty_id), submission=None,
                    submissions=[], disputes=disputes)


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
