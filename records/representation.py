"""The JSON representation of records (docs/api.md, Records), the same everywhere.

REST rows, single records, overviews and websocket payloads all come from these functions, so
a record has one JSON shape: integer IDs and counters as numbers, amounts as exact decimal
strings, addresses EIP-55 checksummed, hashes lowercase, times RFC 3339 UTC with `Z`.

Every record also keeps its JSON, rendered once when it is written (`record_body`, in the
`body` column), so that lists and streams send stored bytes instead of rendering rows per
request. A change to these functions must come with a data migration that re-renders the bodies
(`render_bodies`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import orjson

from bounty_client.validation import to_checksum_address
from records.kinds import BOUNTY, DISPUTE, SUBMISSION, Kind, kind_of, registry
from records.models import Bounty, Dispute, Submission

JsonRecord = dict[str, Any]

# Each record kind's JSON, by the kind's name (records.kinds): `record_json` dispatches on it.
RENDERERS: dict[Kind, Callable[..., JsonRecord]] = {}


_renders = registry(RENDERERS, "renderer")


# Addresses repeat across records (posters, grouts, the contract): cache their checksums.
checksum_address = lru_cache(maxsize=65_536)(to_checksum_address)


def rfc3339(moment: datetime) -> str:
    """`2026-01-01T00:00:00Z` (microseconds only when present)."""
    utc = moment.astimezone(UTC)
    if utc.year >= 1000:
        # isoformat() is strftime's format here, `+00:00` for the `Z`, at a fraction of the cost.
        return utc.isoformat()[:-6] + "Z"
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")  # the platform's year below 1000 (unpadded on glibc)
    if utc.microsecond:
        text += f".{utc.microsecond:06d}"
    return text + "Z"


@lru_cache(maxsize=64)  # only ever splatted into a new dict, so sharing the cached one is safe
def _deployment_fields(contract_address: str, chain_id: int) -> JsonRecord:
    return {"chain_id": chain_id, "contract_address": checksum_address(contract_address)}


def _source_fields(record: Bounty | Submission | Dispute) -> JsonRecord:
    return {
        "metadata_uri": record.metadata_uri,
        "metadata_hash": record.metadata_hash,
        "tx_hash": record.tx_hash,
        "block_number": record.block_number,
        "log_index": record.log_index,
        "created_at": rfc3339(record.created_at),
    }


@_renders(BOUNTY)
def bounty_json(bounty: Bounty, *, chain_id: int, contract_address: str) -> JsonRecord:
    return {
        "id": bounty.bounty_id,
        **_deployment_fields(contract_address, chain_id),
        "prompt": bounty.prompt,
        "bounty_amount": str(bounty.bounty_amount),
        "fee_amount": str(bounty.fee_amount),
        "bond_amount": str(bounty.bond_amount),
        "duration": bounty.duration,
        "status": bounty.status,
        "poster": checksum_address(bounty.poster),
        "deadline": rfc3339(bounty.deadline),
        "challenge_window": bounty.challenge_window,
        **_source_fields(bounty),
    }


@_renders(SUBMISSION)
def submission_json(submission: Submission, *, chain_id: int, contract_address: str) -> JsonRecord:
    return {
        "id": submission.submission_id,
        **_deployment_fields(contract_address, chain_id),
        "bounty_id": submission.bounty_id,
        "tile_id": checksum_address(submission.tile_id),
        "content": submission.content,
        "bond_amount": str(submission.bond_amount),
        "review_deadline": rfc3339(submission.review_deadline),
        "status": submission.status,
        "claimant": checksum_address(submission.claimant),
        **_source_fields(submission),
    }


@_renders(DISPUTE)
def dispute_json(dispute: Dispute, *, chain_id: int, contract_address: str) -> JsonRecord:
    return {
        "id": dispute.dispute_id,
        **_deployment_fields(contract_address, chain_id),
        "bounty_id": dispute.bounty_id,
        "submission_id": dispute.submission_id,
        "challenger_id": checksum_address(dispute.challenger_id),
        "reason": dispute.reason,
        "bond_amount": str(dispute.bond_amount),
        "status": dispute.status,
        **_source_fields(dispute),
    }


def record_json(record: Bounty | Submission | Dispute, *, chain_id: int, contract_address: str) -> JsonRecord:
    """The record's JSON without its counter, whatever its kind. (Dispatches on the kind of the
    model's name, so that migrations can render their historical models too.)"""
    return RENDERERS[kind_of(record).name](record, chain_id=chain_id, contract_address=contract_address)


def record_body(record: Bounty | Submission | Dispute, *, chain_id: int, contract_address: str) -> str:
    """The record's JSON text without its counter: what the `body` column keeps."""
    return orjson.dumps(record_json(record, chain_id=chain_id, contract_address=contract_address)).decode()


def with_counter(body: str, name: str, value: int) -> str:
    """A stored body with its kind's counter appended (`counter`, records.kinds): a page's
    rows and an overview's records carry it, the stored body does not."""
    return f'{body[:-1]},"{name}":{value}}}'
