"""GET /submissions/{id}/overview: the submission, its bounty and its disputes.
test_single_record_routes.py pins what every single-record route does."""

from __future__ import annotations

from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission

TEMPLATE = "/submissions/{s}/overview"


def test_it_answers_the_submission_its_bounty_and_its_disputes_with_counts(api: Client,
                                                                          active: Deployment) -> None:
    tree = h.make_tree(active, disputes_per_submission=(2, 1, 0))
    body = h.get_json(api, TEMPLATE.format(**tree.ids))
    assert list(body) == ["submission", "bounty", "disputes"]
    assert body == h.expected_submission_overview(tree.submissions[0])
    assert (body["submission"]["dispute_count"], body["bounty"]["submission_count"]) == (2, 3)
    assert h.ids(body["disputes"]) == h.record_ids(tree.disputes[:2])


def test_its_disputes_are_ordered_by_id_ascending(api: Client, active: Deployment) -> None:
    submission = make_submission(make_bounty(active))
    for dispute in (900, 600, 750):
        make_dispute(submission, dispute_id=dispute)
    body = h.get_json(api, f"/submissions/{submission.submission_id}/overview")
    assert (h.ids(body["disputes"]), body["submission"]["dispute_count"]) == ([600, 750, 900], 3)


def test_a_submission_without_disputes_has_an_empty_array(api: Client, active: Deployment) -> None:
    submission = make_submission(make_bounty(active))
    body = h.get_json(api, f"/submissions/{submission.submission_id}/overview")
    assert (body["disputes"], body["submission"]["dispute_count"], body["bounty"]["submission_count"]) == ([], 0, 1)

