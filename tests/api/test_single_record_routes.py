"""GET /bounties/{id}, /submissions/{id}, /disputes/{id} and their /overview: what every
single-record route does, pinned for each of the six.

The record of the active deployment, or of the one named by chain_id and contract_address
(docs/api.md, Deployments); 400 and 404 for the rest. What one route alone answers (a
record's JSON types, an overview's arrays) stays in that route's own file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h


@dataclass(frozen=True)
class RecordRoute:
    template: str  # with {b}/{s}/{d} placeholders for a Tree's IDs
    looked_up: str  # the placeholder of the record the route reads
    expected: Callable[[h.Tree], Any]  # the route's answer for a Tree
    members: frozenset[str]  # the answer's top-level members

    def path(self, tree: h.Tree) -> str:
        return self.template.format(**tree.ids)


ROUTES = [
    RecordRoute("/bounties/{b}", "b", lambda t: h.expected_bounty(t.bounty), frozenset(h.BOUNTY_FIELDS)),
    RecordRoute("/submissions/{s}", "s", lambda t: h.expected_submission(t.submissions[0]),
                frozenset(h.SUBMISSION_FIELDS)),
    RecordRoute("/disputes/{d}", "d", lambda t: h.expected_dispute(t.disputes[0]), frozenset(h.DISPUTE_FIELDS)),
    RecordRoute("/bounties/{b}/overview", "b", lambda t: h.expected_bounty_overview(t.bounty),
                frozenset({"bounty", "submissions", "disputes"})),
    RecordRoute("/submissions/{s}/overview", "s", lambda t: h.expected_submission_overview(t.submissions[0]),
                frozenset({"submission", "bounty", "disputes"})),
    RecordRoute("/disputes/{d}/overview", "d", lambda t: h.expected_dispute_overview(t.disputes[0]),
                frozenset({"dispute", "submission", "bounty", "sibling_disputes"})),
]
# IDs no record has, up to 2^256-1, the largest a contract's uint256 holds
MISSING_IDS = [0, 9, 2**31, 2**63 - 1, 2**63, 2**64, h.HUGE, h.UINT256_MAX]


@pytest.fixture(params=ROUTES, ids=[route.template for route in ROUTES])
def route(request: pytest.FixtureRequest) -> RecordRoute:
    chosen: RecordRoute = request.param
    return chosen


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    """Bounty 7 of the active deployment, with the IDs every deployment's colliding tree has."""
    return h.colliding_tree(active)


def test_it_answers_the_record_with_its_documented_members(api: Client, route: RecordRoute, tree: h.Tree) -> None:
    body = h.get_json(api, route.path(tree))
    assert body == route.expected(tree)
    assert set(body) == route.members


def test_a_missing_record_is_a_404_naming_its_id(api: Client, route: RecordRoute, tree: h.Tree) -> None:
    """Other records exist; the ID is missing however large."""
    for missing in MISSING_IDS:
        path = route.template.format(**{**tree.ids, route.looked_up: missing})
        assert str(missing) in h.error_detail(api, path, status=404), missing


def test_the_active_deployment_is_read_unless_a_request_names_another(api: Client, route: RecordRoute,
                                                                      active: Deployment,
                                                                      other: Deployment) -> None:
    """Every deployment has the same IDs; qualifiers in any letter case name the one read."""
    trees = {deployment.pk: h.colliding_tree(deployment) for deployment in (active, other)}
    path = route.path(trees[active.pk])
    assert route.expected(trees[active.pk]) != route.expected(trees[other.pk])
    assert h.get_json(api, path) == route.expected(trees[active.pk])
    for deployment in (active, other):
        for case_name, case in h.ADDRESS_CASES.items():
            answer = h.get_json(api, path, h.qualifiers(deployment, case))
            assert answer == route.expected(trees[deployment.pk]), (deployment.chain_id, case_name)


def test_a_half_qualified_request_is_a_400_naming_both_qualifiers(api: Client, route: RecordRoute,
                                                                  tree: h.Tree) -> None:
    for params in h.HALF_QUALIFIED:
        detail = h.error_detail(api, route.path(tree), params, status=400)
        assert "chain_id" in detail and "contract_address" in detail, params


def test_a_malformed_qualifier_is_a_400_naming_it(api: Client, route: RecordRoute, tree: h.Tree) -> None:
    for params, name in h.MALFORMED_QUALIFIERS:
        assert name in h.error_detail(api, route.path(tree), params, status=400), params


def test_a_record_of_an_unknown_deployment_is_a_404(api: Client, route: RecordRoute, tree: h.Tree) -> None:
    for params in h.UNKNOWN_DEPLOYMENTS:
        h.error_detail(api, route.path(tree), params, status=404)


def test_without_an_indexed_active_deployment_only_a_qualified_request_finds_the_record(
        api: Client, route: RecordRoute, other_chain: Deployment) -> None:
    """The configured deployment is not indexed (yet): an unqualified request finds nothing."""
    elsewhere = h.colliding_tree(other_chain)
    h.error_detail(api, route.path(elsewhere), status=404)
    assert h.get_json(api, route.path(elsewhere), h.qualifiers(other_chain)) == route.expected(elsewhere)
