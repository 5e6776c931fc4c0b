"""Factories for mirrored records: valid rows with sequential IDs, any field overridable.

They write as the indexer does: the search text is filled in, the parent's counter goes up,
and the deployment's change-log sequence advances (it versions cached API responses)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import F

from indexer.models import SyncState
from records.models import Bounty, Deployment, Dispute, Submission
from records.representation import record_body
from records.search import join_fields, search_fields

_counter = itertools.count(1)
ACTIVE_CONTRACT = "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512"
ACTIVE_USDC = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _hex(n: int, width: int) -> str:
    return "0x" + format(n, "x").zfill(width)


def make_deployment(chain_id: int = 91342, contract_address: str = ACTIVE_CONTRACT, **fields: Any) -> Deployment:
    fields.setdefault("usdc_address", ACTIVE_USDC)
    deployment, _ = Deployment.objects.get_or_create(
        chain_id=chain_id, contract_address=contract_address, defaults=fields
    )
    SyncState.objects.get_or_create(deployment=deployment)
    return deployment


def bump_version(deployment: Deployment) -> None:
    """Advances the deployment's change-log sequence, as every indexer commit does."""
    SyncState.objects.filter(deployment=deployment).update(last_seq=F("last_seq") + 1)


_TOTALS = {Bounty: "bounty_total", Submission: "submission_total", Dispute: "dispute_total"}


def _save(record: Any) -> Any:
    created = record.pk is None
    record.search_text = join_fields(search_fields(record))  # as the indexer's store renders a new record
    record.save()  # first, so that the fields refuse malformed values before the body renders them
    record.refresh_from_db()  # the values as stored (hex lowercased, times in UTC), as the indexer has them
    deployment = record.deployment
    record.body = record_body(record, chain_id=deployment.chain_id, contract_address=deployment.contract_address)
    record.save(update_fields=["body"])
    if created:
        total = _TOTALS[type(record)]
        Deployment.objects.filter(pk=record.deployment_id).update(**{total: F(total) + 1})
    bump_version(record.deployment)
    return record


def set_status(record: Any, status: str) -> Any:
    """Changes a record's status as a contract event would."""
    record.status = status
    return _save(record)


def _source(n: int) -> dict[str, Any]:
    return {
        "metadata_uri": f"data:application/json,{{\"n\":{n}}}",
        "metadata_hash": _hex(n, 64),
        "tx_hash": _hex(10**6 + n, 64),
        "block_number": n,
        "log_index": 0,
        "created_at": T0 + timedelta(seconds=n),
    }


def _number(model: type[Any], deployment: Deployment, id_field: str, fields: dict[str, Any]) -> int:
    """The next factory number; when it is also the record's ID, one that the deployment has not
    used, since tests make records with fixed IDs too (whichever number the counter has reached)."""
    n = next(_counter)
    while id_field not in fields and model.objects.filter(deployment=deployment, **{id_field: n}).exists():
        n = next(_counter)
    return n


def make_bounty(deployment: Deployment | None = None, **fields: Any) -> Bounty:
    deployment = deployment or make_deployment()
    n = _number(Bounty, deployment, "bounty_id", fields)
    values: dict[str, Any] = {
        "deployment": deployment,
        "bounty_id": n,
        "bounty_amount": 100_000_000,
        "fee_amount": 2_500_000,
        "bond_amount": 10_000_000,
        "duration": 86_400,
        "poster": _hex(n, 40),
        "deadline": T0 + timedelta(days=1, seconds=n),
        "challenge_window": 86_400,
        **_source(n),
    }
    values.update(fields)
    values.setdefault("prompt", values["metadata_uri"])
    bounty: Bounty = _save(Bounty(**values))
    return bounty


def make_submission(bounty: Bounty, **fields: Any) -> Submission:
    n = _number(Submission, bounty.deployment, "submission_id", fields)
    values: dict[str, Any] = {
        "deployment": bounty.deployment,
        "submission_id": n,
        "bounty_id": bounty.bounty_id,
        "tile_id": _hex(n, 40),
        "claimant": _hex(n, 40),
        "bond_amount": bounty.bond_amount,
        "review_deadline": T0 + timedelta(days=2, seconds=n),
        **_source(n),
    }
    values.update(fields)
    values.setdefault("content", values["metadata_uri"])
    Bounty.objects.filter(pk=bounty.pk).update(submission_count=F("submission_count") + 1)
    bounty.refresh_from_db(fields=["submission_count"])
    submission: Submission = _save(Submission(**values))
    return submission


def make_dispute(submission: Submission, **fields: Any) -> Dispute:
    n = _number(Dispute, submission.deployment, "dispute_id", fields)
    values: dict[str, Any] = {
        "deployment": submission.deployment,
        "dispute_id": n,
        "bounty_id": submission.bounty_id,
        "submission_id": submission.submission_id,
        "challenger_id": _hex(n, 40),
        "bond_amount": 5_000_000,
        **_source(n),
    }
    values.update(fields)
    values.setdefault("reason", values["metadata_uri"])
    Submission.objects.filter(pk=submission.pk).update(dispute_count=F("dispute_count") + 1)
    submission.refresh_from_db(fields=["dispute_count"])
    dispute: Dispute = _save(Dispute(**values))
    return dispute
