"""GET /bounties/{id}: what only the bounty route does.
test_single_record_routes.py pins what every single-record route does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission


def test_its_fields_have_the_documented_json_types(api: Client, active: Deployment) -> None:
    bounty = make_bounty(
        active, bounty_amount=h.UINT256_MAX, fee_amount=0, bond_amount=2**70, duration=2**40,
        challenge_window=0, poster="0x" + "aBcDeF0123" * 4, metadata_hash="0x" + "AB" * 32,
        tx_hash="0x" + "Cd" * 32, block_number=2**53 + 1, log_index=7,
        created_at=datetime(2026, 3, 1, 12, 30, 15, 250000, tzinfo=timezone(timedelta(hours=2))),
        deadline=datetime(2026, 3, 2, tzinfo=UTC),
    )
    body = h.get_json(api, f"/bounties/{bounty.bounty_id}")
    assert h.mistyped_fields(body, amounts=["bounty_amount", "fee_amount", "bond_amount"],
                             addresses=["contract_address", "poster"],
                             integers=["id", "chain_id", "duration", "challenge_window", "block_number", "log_index"],
                             times=["created_at", "deadline"]) == []
    assert (body["bounty_amount"], body["fee_amount"], body["bond_amount"]) == (str(h.UINT256_MAX), "0",
                                                                                str(2**70))
    assert (body["duration"], body["block_number"]) == (2**40, 2**53 + 1)
    assert body["poster"] == h.checksummed("0x" + "abcdef0123" * 4) != body["poster"].lower()
    assert body["contract_address"] == "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
    assert (body["metadata_hash"], body["tx_hash"]) == ("0x" + "ab" * 32, "0x" + "cd" * 32)
    assert (body["created_at"], body["deadline"]) == ("2026-03-01T10:30:15.250000Z", "2026-03-02T00:00:00Z")


def test_the_bounty_has_the_same_json_in_every_route(api: Client, active: Deployment) -> None:
    bounty = make_bounty(active, bounty_amount=2**70, poster="0x" + "aBcDeF0123" * 4)
    submission = make_submission(bounty)
    dispute = make_dispute(submission)
    detail = h.get_json(api, f"/bounties/{bounty.bounty_id}")
    seen = [
        *h.array(api, "/bounties"),
        *(h.without(row, "submission_count") for row in h.page(api, "/bounties", {"q": ""})["items"]),
        h.without(h.get_json(api, f"/bounties/{bounty.bounty_id}/overview")["bounty"], "submission_count"),
        h.without(h.get_json(api, f"/submissions/{submission.submission_id}/overview")["bounty"],
                  "submission_count"),
        h.without(h.get_json(api, f"/disputes/{dispute.dispute_id}/overview")["bounty"], "submission_count"),
    ]
    assert seen == [detail] * 5
