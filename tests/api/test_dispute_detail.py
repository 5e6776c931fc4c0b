"""GET /disputes/{id}: what only the dispute route does.
test_single_record_routes.py pins what every single-record route does."""

from __future__ import annotations

from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission


def test_its_fields_have_the_documented_json_types(api: Client, active: Deployment) -> None:
    submission = make_submission(make_bounty(active, bounty_id=2**62), submission_id=2**63 - 1)
    dispute = make_dispute(submission, bond_amount=h.UINT256_MAX, challenger_id="0x" + "aBcDeF0123" * 4,
                           metadata_hash="0x" + "AB" * 32, tx_hash="0x" + "Cd" * 32)
    body = h.get_json(api, f"/disputes/{dispute.dispute_id}")
    assert h.mistyped_fields(body, amounts=["bond_amount"], addresses=["contract_address", "challenger_id"],
                             integers=["id", "chain_id", "bounty_id", "submission_id", "block_number", "log_index"],
                             times=["created_at"]) == []
    assert (body["bond_amount"], body["bounty_id"], body["submission_id"]) == (str(h.UINT256_MAX), 2**62,
                                                                               2**63 - 1)
    assert body["challenger_id"] == h.checksummed("0x" + "abcdef0123" * 4) != body["challenger_id"].lower()
    assert (body["metadata_hash"], body["tx_hash"]) == ("0x" + "ab" * 32, "0x" + "cd" * 32)


def test_the_dispute_has_the_same_json_in_every_route(api: Client, active: Deployment) -> None:
    bounty = make_bounty(active)
    submission = make_submission(bounty)
    dispute = make_dispute(submission, bond_amount=2**70, challenger_id="0x" + "aBcDeF0123" * 4)
    sibling = make_dispute(submission)
    detail = h.get_json(api, f"/disputes/{dispute.dispute_id}")
    mine = [row for row in [
        *h.array(api, "/disputes"),
        *h.array(api, "/disputes", {"submission_id": str(submission.submission_id)}),
        *h.page(api, "/disputes", {"bounty_id": str(bounty.bounty_id)})["items"],
        *h.page(api, "/disputes", {"cursor": "0"})["items"],
        *h.get_json(api, f"/bounties/{bounty.bounty_id}/overview")["disputes"],
        *h.get_json(api, f"/submissions/{submission.submission_id}/overview")["disputes"],
        *h.get_json(api, f"/disputes/{sibling.dispute_id}/overview")["sibling_disputes"],
    ] if row["id"] == dispute.dispute_id]
    assert mine == [detail] * 7
    assert h.get_json(api, f"/disputes/{dispute.dispute_id}/overview")["dispute"] == detail
