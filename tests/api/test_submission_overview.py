"""GET /submissions/{id}/overview: the submission, its bounty and its disputes."""

from __future__ import annotations

from typing import Any

from django.test import Client

from records.models import Deployment, Submission
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission

TEMPLATE = "/submissions/{s}/overview"


def expected(submission: Submission) -> dict[str, Any]:
    return {"submission": h.expected_submission(submission, with_count=True),
            "bounty": h.expected_bounty(submission.bounty, with_count=True),
            "disputes": [h.expected_dispute(d) for d in submission.disputes.order_by("dispute_id")]}


def test_it_answers_the_submission_its_bounty_and_its_disputes_with_counts(api: Client,
                                                                          active: Deployment) -> None:
    tree = h.make_tree(active, disputes_per_submission=(2, 1, 0))
    body = h.get_json(api, TEMPLATE.format(**tree.ids))
    assert list(body) == ["submission", "bounty", "disputes"]
    assert body == expected(tree.submissions[0])
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


def test_a_missing_submission_is_a_404(api: Client, active: Deployment) -> None:
    h.check_missing(api, TEMPLATE, active)


def test_it_reads_the_active_deployment_unless_qualified_with_another(api: Client, active: Deployment,
                                                                     other: Deployment) -> None:
    h.check_reads_the_qualified_deployment(api, TEMPLATE, [active, other], lambda t: expected(t.submissions[0]))


def test_half_qualified_is_a_400(api: Client, active: Deployment) -> None:
    h.check_half_qualified(api, TEMPLATE, active)


def test_a_malformed_qualifier_is_a_400_naming_it(api: Client, active: Deployment) -> None:
    h.check_malformed_qualifiers(api, TEMPLATE, active)


def test_an_unknown_deployment_is_a_404(api: Client, active: Deployment) -> None:
    h.check_unknown_deployments(api, TEMPLATE, active)


def test_without_an_indexed_active_deployment_it_is_a_404(api: Client, other_chain: Deployment) -> None:
    h.check_no_active_deployment(api, TEMPLATE, other_chain)
