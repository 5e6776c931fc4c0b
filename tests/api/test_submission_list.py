"""GET /submissions?bounty_id= and the dispute counts of submission rows: what only the submission
list does. test_lists.py pins what every list does."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from records.models import Bounty, Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_dispute, make_submission, set_status

RESOURCE = "submissions"
PATH = h.LIST_PATHS[RESOURCE]


def test_page_rows_carry_their_exact_dispute_count(api: Client, active: Deployment) -> None:
    submissions = h.seed(RESOURCE, active, 3)
    for submission, count in zip(submissions, [2, 0, 1], strict=True):
        for _ in range(count):
            make_dispute(submission)  # type: ignore[arg-type]
    items = h.page(api, PATH, {"dir": "asc", "q": ""})["items"]
    assert [row["dispute_count"] for row in items] == [2, 0, 1]
    assert items == h.expected_rows(RESOURCE, submissions, paged=True)
    assert all("dispute_count" not in row for row in h.array(api, PATH))


# ------------------------------------------------------------------ ?bounty_id=


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    return h.colliding_tree(active)


@pytest.fixture
def trees(active: Deployment, other: Deployment) -> dict[int, h.Tree]:
    return {deployment.pk: h.colliding_tree(deployment) for deployment in (active, other)}


def test_bounty_id_without_qualifiers_lists_the_active_deployments_bounty(api: Client, active: Deployment,
                                                                          trees: dict[int, h.Tree]) -> None:
    assert h.listing(api, RESOURCE, {"bounty_id": "7"}) == h.expected_listing(RESOURCE, trees[active.pk].submissions)


def test_bounty_id_with_qualifiers_lists_that_deployments_bounty(api: Client, active: Deployment,
                                                                 other: Deployment,
                                                                 trees: dict[int, h.Tree]) -> None:
    for deployment in (active, other):
        for case in h.ADDRESS_CASES.values():
            params = {"bounty_id": "7", **h.qualifiers(deployment, case)}
            wanted = h.expected_listing(RESOURCE, trees[deployment.pk].submissions)
            assert h.listing(api, RESOURCE, params) == wanted, params


def test_bounty_id_total_and_paging(api: Client, active: Deployment) -> None:
    bounty = make_bounty(active)
    submissions = [make_submission(bounty) for _ in range(5)]
    make_submission(make_bounty(active))
    params = {"bounty_id": str(bounty.bounty_id), "limit": "2", "dir": "asc"}
    body = h.page(api, PATH, {**params, "cursor": "2"})
    assert (h.ids(body["items"]), body["total"], body["cursor"], body["next_cursor"]) == (
        h.record_ids(submissions[2:4]), 5, "2", "4")
    assert h.walk_pages(api, PATH, params) == h.record_ids(submissions)


def test_bounty_id_combines_with_q_sort_and_paging(api: Client, active: Deployment, tree: h.Tree) -> None:
    bounty = tree.bounty
    for text in ("wanted b", "unwanted", "wanted a", "wanted c"):
        make_submission(bounty, content=text)
    make_submission(make_bounty(active), content="wanted elsewhere")
    body = h.page(api, PATH, {"bounty_id": "7", "q": "WANTED ", "sort": "content", "dir": "asc", "limit": "2"})
    assert ([row["content"] for row in body["items"]], body["total"], body["next_cursor"]) == (
        ["wanted a", "wanted b"], 3, "2")


def test_bounty_id_half_qualified_is_a_400_naming_both_qualifiers(api: Client, tree: h.Tree) -> None:
    for params in h.HALF_QUALIFIED:
        for paging in ({}, {"limit": "5"}):
            detail = h.error_detail(api, PATH, {"bounty_id": "7", **params, **paging}, status=400)
            assert "chain_id" in detail and "contract_address" in detail, (params, paging)


def test_bounty_id_of_an_unknown_deployment_or_a_missing_bounty_matches_nothing(api: Client, tree: h.Tree) -> None:
    for params in [*({"bounty_id": "7", **unknown} for unknown in h.UNKNOWN_DEPLOYMENTS),
                   *({"bounty_id": value} for value in ("9", "0", "70", str(2**63), str(h.HUGE)))]:
        assert h.listing(api, RESOURCE, params) == h.expected_listing(RESOURCE, []), params


@pytest.mark.parametrize("contract", [None, h.UNKNOWN_CONTRACT])
def test_bounty_id_without_an_indexed_active_deployment_matches_nothing(
        api: Client, settings: Any, other_chain: Deployment, contract: str | None) -> None:
    h.colliding_tree(other_chain)
    settings.BOUNTY_CONTRACT_ADDRESS = contract
    assert h.listing(api, RESOURCE, {"bounty_id": "7"}) == h.expected_listing(RESOURCE, [])


def test_the_parent_filter_keeps_every_status(api: Client, active: Deployment, tree: h.Tree) -> None:
    """The parent filter lists the submissions of that bounty whatever their status."""
    submission = tree.submissions[0]
    set_status(submission, "rejected")
    rows = h.array(api, PATH, {"bounty_id": "7"})
    assert [row["status"] for row in rows] == ["submitted", "rejected"]
    assert Bounty.objects.get(deployment=active, bounty_id=7).submission_count == 2
