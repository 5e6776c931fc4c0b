"""Factories for mirrored records: valid rows with sequential IDs, any field overridable."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from records.models import Bounty, Deployment, Dispute, Submission

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
    return deployment


def _source(n: int) -> dict[str, Any]:
    return {
        "metadata_uri": f"data:application/json,{{\"n\":{n}}}",
        "metadata_hash": _hex(n, 64),
        "tx_hash": _hex(10**6 + n, 64),
        "block_number": n,
        "log_index": 0,
        "created_at": T0 + timedelta(seconds=n),
    }


def make_bounty(deployment: Deployment | None = None, **fields: Any) -> Bounty:
    n = next(_counter)
    values: dict[str, Any] = {
        "deployment": deployment or make_deployment(),
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
    return Bounty.objects.create(**values)


def make_submission(bounty: Bounty, **fields: Any) -> Submission:
    n = next(_counter)
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
    return Submission.objects.create(**values)


def make_dispute(submission: Submission, **fields: Any) -> Dispute:
    n = next(_counter)
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
    return Dispute.objects.create(**values)
