"""GET /disputes/{id}/overview: the dispute, its submission, its bounty and its sibling disputes."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from records.models import Deployment, Dispute
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission

TEMPLATE = "/disputes/{d}/overview"


def expected(dispute: Dispute) -> dict[str, Any]:
    siblings = dispute.submission.disputes.exclude(pk=dispute.pk).order_by("dispute_id")
    return {"dispute": h.expected_dispute(dispute),
            "submission": h.expected_submission(dispute.submission, with_count=True),
            "bounty": h.expected_bounty(dispute.bounty, with_count=True),
            "sibling_disputes": [h.expected_dispute(d) for d in siblings]}


def test_it_answers_the_dispute_its_submission_bounty_and_siblings(api: Client, active: Deployment) -> None:
    tree = h.make_tree(active, disputes_per_submission=(3, 1))
    body = h.get_json(api, TEMPLATE.format(**tree.ids))
    assert list(body) == ["dispute", "submission", "bounty", "sibling_disputes"]
    assert body == expected(tree.disputes[0])
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


def test_a_missing_dispute_is_a_404(api: Client, active: Deployment) -> None:
    h.check_missing(api, TEMPLATE, active)


def test_it_reads_the_active_deployment_unless_qualified_with_another(api: Client, active: Deployment,
                                                                     other: Deployment) -> None:
    h.check_reads_the_qualified_deployment(api, TEMPLATE, [active, other], lambda t: expected(t.disputes[0]))


def test_half_qualified_is_a_400(api: Client, active: Deployment) -> None:
    h.check_half_qualified(api, TEMPLATE, active)


def test_a_malformed_qualifier_is_a_400_naming_it(api: Client, active: Deployment) -> None:
    h.check_malformed_qualifiers(api, TEMPLATE, active)


def test_an_unknown_deployment_is_a_404(api: Client, active: Deployment) -> None:
    h.check_unknown_deployments(api, TEMPLATE, active)


def test_without_an_indexed_active_deployment_it_is_a_404(api: Client, other_chain: Deployment) -> None:
    h.check_no_active_deployment(api, TEMPLATE, other_chain)
