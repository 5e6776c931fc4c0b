"""The JSON shapes the read service returns (its API reference, docs/api.md: Records,
Lists, Single records and overviews, `GET /health`).

The service's OpenAPI schema, committed as clients/openapi.json, is the contract: these TypedDicts
are written by hand and tests/client/test_schema.py holds them to it (every property, which are
required, which are nullable, every enum's values).

Amounts are decimal strings of base units, addresses EIP-55 checksummed, hashes `0x` + 64
lowercase hex digits, timestamps RFC 3339 in UTC.
"""

from __future__ import annotations

from typing import Generic, Literal, NotRequired, TypedDict, TypeVar

BountyStatus = Literal["open", "resolved", "refunded"]
SubmissionStatus = Literal["submitted", "disputed", "accepted", "rejected", "refunded"]
DisputeStatus = Literal["pending_human_review", "upheld", "rejected", "cancelled"]


class BountyRecord(TypedDict):
    """A bounty; `submission_count` is present on page rows and in overviews."""

    id: int
    chain_id: int
    contract_address: str
    prompt: str
    bounty_amount: str
    fee_amount: str
    bond_amount: str
    duration: int
    status: BountyStatus
    poster: str
    deadline: str
    challenge_window: int
    metadata_uri: str
    metadata_hash: str
    tx_hash: str
    block_number: int
    log_index: int
    created_at: str
    submission_count: NotRequired[int]


class SubmissionRecord(TypedDict):
    """A submission; `dispute_count` is present on page rows and in overviews."""

    id: int
    chain_id: int
    contract_address: str
    bounty_id: int
    tile_id: str
    content: str
    bond_amount: str
    review_deadline: str
    status: SubmissionStatus
    claimant: str
    metadata_uri: str
    metadata_hash: str
    tx_hash: str
    block_number: int
    log_index: int
    created_at: str
    dispute_count: NotRequired[int]


class DisputeRecord(TypedDict):
    """A dispute against a submission."""

    id: int
    chain_id: int
    contract_address: str
    bounty_id: int
    submission_id: int
    challenger_id: str
    reason: str
    bond_amount: str
    status: DisputeStatus
    metadata_uri: str
    metadata_hash: str
    tx_hash: str
    block_number: int
    log_index: int
    created_at: str


RecordT = TypeVar("RecordT", BountyRecord, SubmissionRecord, DisputeRecord)


class Page(TypedDict, Generic[RecordT]):
    """One page of a list: `cursor` is the offset read from (None when none was sent) and
    `next_cursor` the cursor of the next page (None on the last page)."""

    items: list[RecordT]
    total: int
    limit: int
    cursor: str | None
    next_cursor: str | None


class BountyOverview(TypedDict):
    """`/bounties/{id}/overview`: the bounty, its submissions and their disputes (by id)."""

    bounty: BountyRecord
    submissions: list[SubmissionRecord]
    disputes: list[DisputeRecord]


class SubmissionOverview(TypedDict):
    """`/submissions/{id}/overview`: the submission, its bounty and its disputes (by id).

    `bounty` is None when the service's mirror lacks it (never on a consistent mirror)."""

    submission: SubmissionRecord
    bounty: BountyRecord | None
    disputes: list[DisputeRecord]


class DisputeOverview(TypedDict):
    """`/disputes/{id}/overview`: the dispute, its submission and bounty, and the other
    disputes of the same submission (by id).

    `submission` and `bounty` are None when the service's mirror lacks them (never on a
    consistent mirror)."""

    dispute: DisputeRecord
    submission: SubmissionRecord | None
    bounty: BountyRecord | None
    sibling_disputes: list[DisputeRecord]


class HealthDeployment(TypedDict):
    """The service's active deployment; the addresses are None when it has none configured."""

    chain_id: int
    contract_address: str | None
    usdc_address: str | None


class HealthBackfill(TypedDict):
    """A backfill of more than one batch under way; `to_block` is the safe head it runs to."""

    from_block: int
    to_block: int
    done_blocks: int
    total_blocks: int
    percent: float


class HealthIndexerProcess(TypedDict):
    """An indexer process seen within the heartbeat: the `writer` or a `standby`."""

    name: str
    role: Literal["writer", "standby"]
    last_seen: str


class HealthIndexer(TypedDict):
    """The indexer's state (docs/api.md, `GET /health`)."""

    enabled: bool
    running: bool
    synced: bool
    start_block: int | None
    start_block_found: bool
    last_indexed_block: int | None
    head_block: int | None
    lag_blocks: int | None
    confirmations: int
    confirmations_tag: Literal["safe", "finalized"] | None
    rate_limited: bool
    rpc_calls_per_block: float | None
    rpc_calls_per_day: float | None
    rpc_calls_by_phase: dict[str, int]
    block_rhythm_seconds: float | None
    block_rhythm_since: str | None
    node_unreachable_since: str | None
    node_unreachable_seconds: int | None
    node_last_asked_at: str | None
    node_last_asked_seconds: int | None
    node_ask_overdue: bool
    last_heartbeat: str | None
    indexes: Literal["ready", "deferred", "building"]
    backfill: HealthBackfill | None
    processes: list[HealthIndexerProcess]


class HealthRedis(TypedDict):
    """`/health`'s `redis`: whether the answering web process reaches Redis."""

    status: Literal["ok", "unreachable", "not_configured"]
    unreachable_since: str | None
    unreachable_seconds: int | None


class HealthReplica(TypedDict):
    """`/health`'s `replicas`: a database replica as the answering web process checks it."""

    name: str
    host: str
    status: Literal["in_use", "set_aside"]
    reason: str | None
    lag_seconds: float | None
    checked_at: str | None


class HealthWebhookWorker(TypedDict):
    """A delivery worker (run_webhooks) in `/health`'s `webhooks`."""

    name: str
    last_seen: str


class HealthWebhooks(TypedDict):
    """`/health`'s `webhooks`: the webhook endpoints and their delivery workers."""

    endpoints: int
    disabled: int
    retrying: int
    failing_since: str | None
    workers: list[HealthWebhookWorker]
    running: bool


class Health(TypedDict):
    """`/health`: the service's status and version, its active deployment, its indexer, Redis,
    the database replicas (null without), and the webhooks."""

    status: Literal["ok", "degraded", "error"]
    version: str
    deployment: HealthDeployment
    indexer: HealthIndexer
    redis: HealthRedis
    replicas: list[HealthReplica] | None
    webhooks: HealthWebhooks
