"""GET /bounties/{id}/overview: the bounty, its submissions and their disputes.
test_single_record_routes.py pins what every single-record route does."""

from __future__ import annotations

from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission

TEMPLATE = "/bounties/{b}/overview"


def test_it_answers_the_bounty_its_submissions_and_their_disputes_with_counts(api: Client,
                                                                             active: Deployment) -> None:
    tree = h.make_tree(active, disputes_per_submission=(2, 0, 1))
    h.make_tree(active)
    body = h.get_json(api, TEMPLATE.format(**tree.ids))
    assert list(body) == ["bounty", "submissions", "disputes"]
    assert body == h.expected_bounty_overview(tree.bounty)
    assert body["bounty"]["submission_count"] == 3
    assert [row["dispute_count"] for row in body["submissions"]] == [2, 0, 1]
    assert h.ids(body["submissions"]) == h.record_ids(tree.submissions)
    assert h.ids(body["disputes"]) == h.record_ids(tree.disputes)


def test_its_arrays_are_ordered_by_id_ascending(api: Client, active: Deployment) -> None:
    bounty = make_bounty(active)
    submissions = {n: make_submission(bounty, submission_id=n) for n in (90, 60, 75)}
    for dispute, submission in ((900, 90), (600, 60), (750, 75), (601, 60)):
        make_dispute(submissions[submission], dispute_id=dispute)
    body = h.get_json(api, f"/bounties/{bounty.bounty_id}/overview")
    assert (h.ids(body["submissions"]), h.ids(body["disputes"])) == ([60, 75, 90], [600, 601, 750, 900])
    assert [row["dispute_count"] for row in body["submissions"]] == [2, 1, 1]


def test_a_bounty_without_submissions_has_empty_arrays(api: Client, active: Deployment) -> None:
    bounty = make_bounty(active)
    assert h.get_json(api, f"/bounties/{bounty.bounty_id}/overview") == {
        "bounty": h.expected_bounty(bounty, with_count=True), "submissions": [], "disputes": []}

