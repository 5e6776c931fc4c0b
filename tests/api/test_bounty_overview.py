"""GET /bounties/{id}/overview: the bounty, its submissions and their disputes."""

from __future__ import annotations

from typing import Any

from django.test import Client

from records.models import Bounty, Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission

TEMPLATE = "/bounties/{b}/overview"


def expected(bounty: Bounty) -> dict[str, Any]:
    submissions = bounty.submissions.order_by("submission_id")
    disputes = bounty.disputes.order_by("dispute_id")
    return {"bounty": h.expected_bounty(bounty, with_count=True),
            "submissions": [h.expected_submission(s, with_count=True) for s in submissions],
            "disputes": [h.expected_dispute(d) for d in disputes]}


def test_it_answers_the_bounty_its_submissions_and_their_disputes_with_counts(api: Client,
                                                                             active: Deployment) -> None:
    tree = h.make_tree(active, disputes_per_submission=(2, 0, 1))
    h.make_tree(active)
    body = h.get_json(api, TEMPLATE.format(**tree.ids))
    assert list(body) == ["bounty", "submissions", "disputes"]
    assert body == expected(tree.bounty)
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


def test_a_missing_bounty_is_a_404(api: Client, active: Deployment) -> None:
    h.check_missing(api, TEMPLATE, active)


def test_it_reads_the_active_deployment_unless_qualified_with_another(api: Client, active: Deployment,
                                                                     other: Deployment) -> None:
    h.check_reads_the_qualified_deployment(api, TEMPLATE, [active, other], lambda t: expected(t.bounty))


def test_half_qualified_is_a_400(api: Client, active: Deployment) -> None:
    h.check_half_qualified(api, TEMPLATE, active)


def test_a_malformed_qualifier_is_a_400_naming_it(api: Client, active: Deployment) -> None:
    h.check_malformed_qualifiers(api, TEMPLATE, active)


def test_an_unknown_deployment_is_a_404(api: Client, active: Deployment) -> None:
    h.check_unknown_deployments(api, TEMPLATE, active)


def test_without_an_indexed_active_deployment_it_is_a_404(api: Client, other_chain: Deployment) -> None:
    h.check_no_active_deployment(api, TEMPLATE, other_chain)
