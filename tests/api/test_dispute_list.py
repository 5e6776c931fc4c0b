"""GET /disputes?bounty_id= and /disputes?submission_id=, rows without a count, and the underscore of
a dispute's status: what only the dispute list does. test_lists.py pins what every list does."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from records.models import Deployment, Dispute
from tests.api import helpers as h
from tests.api.list_specs import DISPUTES
from tests.factories import make_bounty, make_dispute, make_submission

RESOURCE = "disputes"
PATH = h.LIST_PATHS[RESOURCE]
PARENTS = ["bounty_id", "submission_id"]


def test_rows_never_carry_a_count(api: Client, active: Deployment) -> None:
    disputes = h.seed(RESOURCE, active, 2)
    assert h.page(api, PATH, {"q": ""})["items"] == [h.expected_dispute(d) for d in reversed(disputes)]  # type: ignore[arg-type]


def test_q_matches_an_underscore_literally(api: Client, active: Deployment) -> None:
    """The decoy's status, pending_human_review, holds underscores: in q they are no LIKE wildcard."""
    DISPUTES.make_searchable(active)
    assert h.q_result(api, RESOURCE, "_") == ([313131], 1)
    assert h.q_result(api, RESOURCE, "pending_human") == ([313131], 1)
    assert h.q_result(api, RESOURCE, "pendingXhuman") == ([], 0)


# ------------------------------------------------------------------ ?bounty_id= and ?submission_id=


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    return h.colliding_tree(active)


@pytest.fixture
def trees(active: Deployment, other: Deployment) -> dict[int, h.Tree]:
    return {deployment.pk: h.colliding_tree(deployment) for deployment in (active, other)}


def _children(tree: h.Tree, parent: str) -> list[Dispute]:
    """The disputes of bounty 7 or of submission 70."""
    return tree.disputes if parent == "bounty_id" else tree.disputes[:2]


PARENT_IDS = {"bounty_id": 7, "submission_id": 70}


def test_bounty_id_always_answers_a_page(api: Client, active: Deployment) -> None:
    tree = h.make_tree(active)
    body = h.page(api, PATH, {"bounty_id": str(tree.bounty.bounty_id)})
    assert body == {"items": [h.expected_dispute(d) for d in reversed(tree.disputes)], "total": 3, "limit": 50,
                    "cursor": None, "next_cursor": None}


def test_submission_id_answers_an_array_without_paging_parameters(api: Client, active: Deployment) -> None:
    tree = h.make_tree(active)
    submission = tree.submissions[0].submission_id
    assert h.array(api, PATH, {"submission_id": str(submission)}) == [h.expected_dispute(d)
                                                                      for d in reversed(tree.disputes[:2])]


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_without_qualifiers_lists_the_active_deployments_disputes(api: Client, active: Deployment,
                                                                           trees: dict[int, h.Tree],
                                                                           parent: str) -> None:
    paged = parent == "bounty_id"
    assert h.listing(api, RESOURCE, {parent: str(PARENT_IDS[parent])}, always_paged=paged) == h.expected_listing(
        RESOURCE, _children(trees[active.pk], parent), always_paged=paged)


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_with_qualifiers_lists_that_deployments_disputes(api: Client, active: Deployment,
                                                                  other: Deployment, trees: dict[int, h.Tree],
                                                                  parent: str) -> None:
    paged = parent == "bounty_id"
    for deployment in (active, other):
        for case in h.ADDRESS_CASES.values():
            params = {parent: str(PARENT_IDS[parent]), **h.qualifiers(deployment, case)}
            assert h.listing(api, RESOURCE, params, always_paged=paged) == h.expected_listing(
                RESOURCE, _children(trees[deployment.pk], parent), always_paged=paged), params


def test_bounty_id_and_submission_id_combine(api: Client, active: Deployment) -> None:
    """Filters combine with each other (docs/api.md, Lists): the disputes of submission 71 of bounty 7."""
    h.colliding_tree(active)
    body = h.page(api, PATH, {"bounty_id": "7", "submission_id": "71"})
    assert (h.ids(body["items"]), body["total"]) == ([710], 1)
    assert h.page(api, PATH, {"bounty_id": "8", "submission_id": "71"})["total"] == 0


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_combines_with_q_sort_and_paging(api: Client, active: Deployment, tree: h.Tree,
                                                  parent: str) -> None:
    submission = tree.submissions[0]
    for text in ("wanted b", "unwanted", "wanted a", "wanted c"):
        make_dispute(submission, reason=text)
    make_dispute(make_submission(make_bounty(active)), reason="wanted elsewhere")
    params = {parent: str(PARENT_IDS[parent]), "q": "WANTED ", "sort": "reason", "dir": "asc", "limit": "2"}
    body = h.page(api, PATH, params)
    assert ([row["reason"] for row in body["items"]], body["total"], body["next_cursor"]) == (
        ["wanted a", "wanted b"], 3, "2")
    rest = h.page(api, PATH, {**params, "cursor": "2"})
    assert ([row["reason"] for row in rest["items"]], rest["cursor"], rest["next_cursor"]) == (
        ["wanted c"], "2", None)


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_half_qualified_is_a_400_naming_both_qualifiers(api: Client, active: Deployment,
                                                                  parent: str) -> None:
    for params in h.HALF_QUALIFIED:
        for paging in ({}, {"limit": "5"}):
            detail = h.error_detail(api, PATH, {parent: "7", **params, **paging}, status=400)
            assert "chain_id" in detail and "contract_address" in detail, (params, paging)


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_of_an_unknown_deployment_or_a_missing_parent_matches_nothing(api: Client, tree: h.Tree,
                                                                               parent: str) -> None:
    paged = parent == "bounty_id"
    for params in [*({parent: str(PARENT_IDS[parent]), **unknown} for unknown in h.UNKNOWN_DEPLOYMENTS),
                   *({parent: value} for value in ("9", "0", "700", str(2**63), str(h.HUGE)))]:
        assert h.listing(api, RESOURCE, params, always_paged=paged) == h.expected_listing(
            RESOURCE, [], always_paged=paged), params


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_without_an_indexed_active_deployment_matches_nothing(api: Client, settings: Any,
                                                                       other_chain: Deployment,
                                                                       parent: str) -> None:
    h.colliding_tree(other_chain)
    settings.BOUNTY_CONTRACT_ADDRESS = h.UNKNOWN_CONTRACT
    paged = parent == "bounty_id"
    assert h.listing(api, RESOURCE, {parent: str(PARENT_IDS[parent])}, always_paged=paged) == h.expected_listing(
        RESOURCE, [], always_paged=paged)
