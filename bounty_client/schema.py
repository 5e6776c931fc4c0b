"""The JSON shapes the read service returns (its API reference, docs/api.md: Records,
Lists, Single records and overviews).

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
    """`/submissions/{id}/overview`: the submission, its bounty and its disputes (by id)."""

    submission: SubmissionRecord
    bounty: BountyRecord
    disputes: list[DisputeRecord]


class DisputeOverview(TypedDict):
    """`/disputes/{id}/overview`: the dispute, its submission and bounty, and the other
    disputes of the same submission (by id)."""

    dispute: DisputeRecord
    submission: SubmissionRecord
    bounty: BountyRecord
    sibling_disputes: list[DisputeRecord]
