"""GET /submissions/{id}: what only the submission route does.
test_single_record_routes.py pins what every single-record route does."""

from __future__ import annotations

from datetime import UTC, datetime

from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission


def test_its_fields_have_the_documented_json_types(api: Client, active: Deployment) -> None:
    submission = make_submission(
        make_bounty(active, bounty_id=2**62), bond_amount=h.UINT256_MAX, tile_id="0x" + "aBcDeF0123" * 4,
        claimant="0x" + "FF" * 20, metadata_hash="0x" + "AB" * 32, tx_hash="0x" + "Cd" * 32, log_index=2**31 - 1,
        review_deadline=datetime(2026, 3, 2, 23, 59, 59, 1, tzinfo=UTC),
    )
    body = h.get_json(api, f"/submissions/{submission.submission_id}")
    assert h.mistyped_fields(body, amounts=["bond_amount"], addresses=["contract_address", "tile_id", "claimant"],
                             integers=["id", "chain_id", "bounty_id", "block_number", "log_index"],
                             times=["created_at", "review_deadline"]) == []
    assert (body["bond_amount"], body["bounty_id"], body["log_index"]) == (str(h.UINT256_MAX), 2**62, 2**31 - 1)
    assert body["tile_id"] == h.checksummed("0x" + "abcdef0123" * 4) != body["tile_id"].lower()
    assert body["claimant"] == h.checksummed("0x" + "ff" * 20)
    assert (body["metadata_hash"], body["tx_hash"]) == ("0x" + "ab" * 32, "0x" + "cd" * 32)
    assert body["review_deadline"] == "2026-03-02T23:59:59.000001Z"


def test_the_submission_has_the_same_json_in_every_route(api: Client, active: Deployment) -> None:
    bounty = make_bounty(active)
    submission = make_submission(bounty, bond_amount=2**70, claimant="0x" + "aBcDeF0123" * 4)
    dispute = make_dispute(submission)
    detail = h.get_json(api, f"/submissions/{submission.submission_id}")
    seen = [
        *h.array(api, "/submissions"),
        *h.array(api, "/submissions", {"bounty_id": str(bounty.bounty_id)}),
        *(h.without(row, "dispute_count") for row in h.page(api, "/submissions", {"limit": "5"})["items"]),
        *(h.without(row, "dispute_count") for row in h.get_json(api, f"/bounties/{bounty.bounty_id}/overview")
          ["submissions"]),
        h.without(h.get_json(api, f"/submissions/{submission.submission_id}/overview")["submission"],
                  "dispute_count"),
        h.without(h.get_json(api, f"/disputes/{dispute.dispute_id}/overview")["submission"], "dispute_count"),
    ]
    assert seen == [detail] * 6
