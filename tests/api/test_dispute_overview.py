"""GET /disputes/{id}/overview: the dispute, its submission, its bounty and its sibling disputes.
test_single_record_routes.py pins what every single-record route does."""

from __future__ import annotations

import pytest
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission

TEMPLATE = "/disputes/{d}/overview"


def test_it_answers_the_dispute_its_submission_bounty_and_siblings(api: Client, active: Deployment) -> None:
    tree = h.make_tree(active, disputes_per_submission=(3, 1))
    body = h.get_json(api, TEMPLATE.format(**tree.ids))
    assert list(body) == ["dispute", "submission", "bounty", "sibling_disputes"]
    assert body == h.expected_dispute_overview(tree.disputes[0])
    assert "dispute_count" not in body["dispute"] and "submission_count" not in body["dispute"]
    assert (body["submission"]["dispute_count"], body["bounty"]["submission_count"]) == (3, 2)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_its_siblings_are_the_other_disputes_of_its_submission_by_id_ascending(api: Client, active: Deployment,
                                                                             position: int) -> None:
    bounty = make_bounty(active)
    submission = make_submission(bounty)
    disputes = [make_dispute(submission, dispute_id=n) for n in (900, 600, 750)]
    make_dispute(make_submission(bounty), dispute_id=700)
    body = h.get_json(api, f"/disputes/{disputes[position].dispute_id}/overview")
    assert h.ids(body["sibling_disputes"]) == sorted({600, 750, 900} - {disputes[position].dispute_id})


def test_a_lone_dispute_has_no_siblings(api: Client, active: Deployment) -> None:
    dispute = make_dispute(make_submission(make_bounty(active)))
    body = h.get_json(api, f"/disputes/{dispute.dispute_id}/overview")
    assert (body["sibling_disputes"], body["submission"]["dispute_count"]) == ([], 1)

