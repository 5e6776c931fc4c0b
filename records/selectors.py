"""The read side: typed selector functions over the mirrored records.

Views parse and validate request parameters into a `ListQuery` or a deployment and an ID, call
these functions, and serialize what they return; no query is built anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from django.conf import settings
from django.db.models import QuerySet

from indexer.models import SyncState
from records.models import Bounty, Deployment, Dispute, Submission
from records.search import search_term

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
    parent: tuple[str, int] | None = None  # ("bounty_id", 7): only within one deployment
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


def record_list(query: ListQuery) -> QuerySet[Bounty] | QuerySet[Submission] | QuerySet[Dispute]:
    """The records a list query matches, in its order (ties broken by ID, then deployment)."""
    model = MODELS[query.resource]
    records = model.objects.all()
    if query.matches_nothing:
        return records.none()
    if query.deployments.chain_id is not None:
        records = records.filter(deployment__chain_id=query.deployments.chain_id)
    if query.deployments.contract_address is not None:
        records = records.filter(deployment__contract_address=query.deployments.contract_address)
    if query.parent is not None:
        field, value = query.parent
        records = records.filter(**{field: value})
    if query.q:
        term = search_term(query.q)
        if term is None:
            return records.none()
        records = records.filter(search_text__contains=term)
    key = SORT_FIELDS[query.resource].get(query.sort, ID_FIELDS[query.resource])
    sign = "-" if query.descending else ""
    order = [f"{sign}{key}"]
    if key != ID_FIELDS[query.resource]:
        order.append(f"{sign}{ID_FIELDS[query.resource]}")
    order.append(f"{sign}deployment_id")
    return records.order_by(*order)


def record_count(query: ListQuery) -> int:
    """How many records the query matches; a parent's counter serves where it can."""
    if query.matches_nothing:
        return 0
    if query.parent is not None and not query.q and query.deployments.contract_address is not None:
        field, value = query.parent
        deployment = deployment_get(query.deployments.chain_id or 0, query.deployments.contract_address)
        if query.resource == "submissions" and field == "bounty_id":
            bounty = bounty_get(deployment, value) if deployment else None
            return bounty.submission_count if bounty else 0
        if query.resource == "disputes" and field == "submission_id":
            submission = submission_get(deployment, value) if deployment else None
            return submission.dispute_count if submission else 0
    return record_list(query).order_by().count()


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
