"""GET /disputes, /disputes?bounty_id= and /disputes?submission_id=: arrays or page objects, paging,
sort keys, q and filters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from operator import attrgetter
from typing import Any

import pytest
from django.test import Client

from records.models import Deployment, Dispute
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, T0, make_bounty, make_dispute, make_submission, set_status

RESOURCE = "disputes"
OWN_ID = "dispute_id"
OTHER_RESOURCES_SORT_KEYS = ["claimant", "review", "disputes", "dispute_count"]
PATH = "/disputes"
PARENTS = ["bounty_id", "submission_id"]


def test_without_limit_cursor_or_q_it_answers_an_array_by_id_descending(api: Client, active: Deployment) -> None:
    h.check_array_by_default(api, RESOURCE, active)


def test_any_of_limit_cursor_or_q_asks_for_a_page_and_nothing_else_does(api: Client, active: Deployment) -> None:
    h.check_page_requests(api, RESOURCE, active, ignored=OWN_ID)


def test_limit_is_clamped_to_1_to_100_and_anything_else_means_50(api: Client, active: Deployment) -> None:
    h.check_limits(api, RESOURCE, active)


def test_an_invalid_cursor_reads_from_offset_0_and_echoes_null(api: Client, active: Deployment) -> None:
    h.check_invalid_cursors(api, RESOURCE, active)


def test_cursor_and_next_cursor_walk_the_pages(api: Client, active: Deployment) -> None:
    h.check_page_walk(api, RESOURCE, active)


def test_a_cursor_past_the_end_however_large_gives_no_items(api: Client, active: Deployment) -> None:
    h.check_far_cursors(api, RESOURCE, active)


def test_dir_asc_in_any_case_means_ascending(api: Client, active: Deployment) -> None:
    h.check_dirs(api, RESOURCE, active, descending=False)


def test_dir_other_than_asc_means_descending(api: Client, active: Deployment) -> None:
    h.check_dirs(api, RESOURCE, active, descending=True)


def test_an_unknown_sort_key_sorts_by_id(api: Client, active: Deployment) -> None:
    h.check_unknown_sorts(api, RESOURCE, active, OTHER_RESOURCES_SORT_KEYS)


def test_lenient_parameters_never_fail(api: Client, active: Deployment) -> None:
    h.check_lenient_noise(api, RESOURCE, active)


def test_rows_never_carry_a_count(api: Client, active: Deployment) -> None:
    disputes = h.seed(RESOURCE, active, 2)
    assert h.page(api, PATH, {"q": ""})["items"] == [h.expected_dispute(d) for d in reversed(disputes)]  # type: ignore[arg-type]


# ------------------------------------------------------------------ sort keys

SORT_KEYS: dict[str, Callable[[Dispute], Any]] = {
    "id": attrgetter("dispute_id"),
    "created_at": (CREATED := attrgetter("created_at")),
    "submitted": CREATED,
    "bounty": (BOUNTY := attrgetter("bounty_id")),
    "bounty_id": BOUNTY,
    "submission": (SUBMISSION := attrgetter("submission_id")),
    "submission_id": SUBMISSION,
    "bond": (BOND := attrgetter("bond_amount")),
    "bond_amount": BOND,
    "status": attrgetter("status"),
    "challenger": attrgetter("challenger_id"),
    "reason": attrgetter("reason"),
}


@pytest.fixture
def sortable(active: Deployment) -> list[Dispute]:
    """Disputes whose every sort key has ties and runs against the ID order."""
    bounties = [make_bounty(active) for _ in range(3)]
    submissions = [make_submission(bounties[2]), make_submission(bounties[0]), make_submission(bounties[1])]
    rows = [
        # submission, created_at (seconds after T0), bond, status, challenger, reason
        (0, 3, 10, "pending_human_review", "0x" + "b0" * 20, "b"),
        (1, 1, 9, "upheld", "0x" + "A0" * 20, "B"),
        (0, 3, 2**70, "rejected", "0x" + "c0" * 20, "a"),
        (2, 2, 10, "cancelled", "0x" + "a1" * 20, "\u00e9"),
        (1, 0, 0, "upheld", "0x" + "0F" * 20, "10"),
        (2, 5, h.UINT256_MAX, "pending_human_review", "0x" + "b0" * 20, "9\U0001f600"),
    ]
    return [make_dispute(submissions[submission], created_at=T0 + timedelta(seconds=created), bond_amount=bond,
                         status=status, challenger_id=challenger, reason=reason)
            for submission, created, bond, status, challenger, reason in rows]


@pytest.mark.parametrize("keys", h.alias_groups(SORT_KEYS), ids="/".join)
def test_every_sort_key_and_alias_orders_with_an_id_tie_break_in_the_same_direction(
        api: Client, sortable: list[Dispute], keys: list[str]) -> None:
    h.check_sort_keys(api, RESOURCE, sortable, keys, SORT_KEYS[keys[0]])


def test_amounts_sort_as_numbers(api: Client, sortable: list[Dispute]) -> None:
    rows = h.page(api, PATH, {"sort": "bond_amount", "dir": "ASC", "limit": "10"})["items"]
    assert [int(row["bond_amount"]) for row in rows] == [0, 9, 10, 10, 2**70, h.UINT256_MAX]


def test_the_array_is_sorted_too(api: Client, sortable: list[Dispute]) -> None:
    wanted = h.expected_order(sortable, SORT_KEYS["reason"], descending=False)
    assert h.ids(h.array(api, PATH, {"sort": "reason", "dir": "asc"})) == wanted


@pytest.mark.parametrize("key", ["submission", "status"])
def test_pages_of_a_sort_with_ties_never_repeat_or_skip_a_row(api: Client, sortable: list[Dispute],
                                                               key: str) -> None:
    wanted = h.expected_order(sortable, SORT_KEYS[key], descending=True)
    assert h.walk_pages(api, PATH, {"sort": key, "limit": "4"}) == wanted


# ------------------------------------------------------------------ q

TARGET: dict[str, Any] = {
    "dispute_id": 424242, "status": "upheld", "challenger_id": "0x" + "a1b2c3d4e5" * 4,
    "metadata_uri": "ipfs://target-uri", "metadata_hash": "0x" + "cd" * 32, "tx_hash": "0x" + "ef" * 32,
    "reason": "Copied the \u00c9clair", "bond_amount": 777777, "block_number": 616161,
}
DECOY: dict[str, Any] = {
    "dispute_id": 313131, "status": "pending_human_review", "challenger_id": "0x" + "5a" * 20,
    "metadata_uri": "ipfs://decoy", "metadata_hash": "0x" + "11" * 32, "tx_hash": "0x" + "22" * 32,
    "reason": "other",
}
Q_MATCHES = {
    "own id": "2424",
    "parent bounty id": "151515",
    "parent submission id": "838383",
    "status": "upheld",
    "status in capitals": "UPHELD",
    "challenger": "a1b2c3d4e5a1",
    "challenger checksummed": h.checksummed(TARGET["challenger_id"]),
    "metadata_uri": "target-uri",
    "metadata_hash": "cdcdcd",
    "tx_hash": "efefef",
    "reason": "\u00e9CLAIR",
}
Q_MISSES = {
    "bond": "777777", "block number": "616161", "chain id": "91342", "parent's metadata": "ipfs://parent",
    "submission's claimant": "c1c1c1", "across two fields": "upheld0x", "nothing": "zzzz",
}


@pytest.fixture
def searchable(active: Deployment) -> tuple[Dispute, Dispute]:
    parent = make_bounty(active, bounty_id=5151515, metadata_uri="ipfs://parent")
    submission = make_submission(parent, submission_id=8383838, metadata_uri="ipfs://parent",
                                 claimant="0x" + "c1" * 20)
    decoy_parent = make_submission(make_bounty(active, bounty_id=6262626), submission_id=9494949)
    return make_dispute(submission, **TARGET), make_dispute(decoy_parent, **DECOY)


@pytest.mark.parametrize("q", list(Q_MATCHES.values()), ids=list(Q_MATCHES))
def test_q_matches_each_field_it_covers(api: Client, searchable: tuple[Dispute, Dispute], q: str) -> None:
    h.assert_q(api, RESOURCE, q, [TARGET["dispute_id"]])


@pytest.mark.parametrize("q", list(Q_MISSES.values()), ids=list(Q_MISSES))
def test_q_does_not_match_other_fields(api: Client, searchable: tuple[Dispute, Dispute], q: str) -> None:
    h.assert_q(api, RESOURCE, q, [])


def test_q_matches_an_underscore_literally(api: Client, searchable: tuple[Dispute, Dispute]) -> None:
    h.assert_q(api, RESOURCE, "_", [313131])
    h.assert_q(api, RESOURCE, "pending_human", [313131])
    h.assert_q(api, RESOURCE, "pendingXhuman", [])


def test_q_follows_a_status_change(api: Client, searchable: tuple[Dispute, Dispute]) -> None:
    set_status(searchable[1], "cancelled")
    h.assert_q(api, RESOURCE, "cancelled", [313131])
    h.assert_q(api, RESOURCE, "pending", [])


# ------------------------------------------------------------------ deployment filters


def test_without_chain_id_the_list_spans_every_deployment(api: Client, active: Deployment,
                                                          other_chain: Deployment,
                                                          other_contract: Deployment) -> None:
    h.check_spans_every_deployment(api, RESOURCE, [active, other_chain, other_contract])


def test_chain_id_alone_filters_to_that_chain_and_with_contract_address_to_one_deployment(
        api: Client, active: Deployment, other_chain: Deployment, other_contract: Deployment) -> None:
    h.check_chain_filter(api, RESOURCE, [active, other_chain, other_contract])


def test_contract_address_without_chain_id_is_a_400(api: Client, active: Deployment) -> None:
    h.check_contract_without_chain(api, RESOURCE)


MALFORMED_FILTERS = [
    *h.MALFORMED_QUALIFIERS,
    *(({parent: value}, parent) for parent in PARENTS for value in ("abc", "-1", "1.0", "", " 7", "0x7", "\u0667")),
    ({"bounty_id": "7", "chain_id": "x", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"submission_id": "70", "chain_id": "91342", "contract_address": "0x7"}, "contract_address"),
]


def test_a_malformed_filter_is_a_400_naming_it(api: Client, active: Deployment) -> None:
    h.check_malformed_filters(api, RESOURCE, MALFORMED_FILTERS)


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
    h.check_parent_filter(api, RESOURCE, parent, PARENT_IDS[parent], _children(trees[active.pk], parent), {},
                          always_paged=parent == "bounty_id")


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_with_qualifiers_lists_that_deployments_disputes(api: Client, active: Deployment,
                                                                  other: Deployment, trees: dict[int, h.Tree],
                                                                  parent: str) -> None:
    for deployment in (active, other):
        for case in h.ADDRESS_CASES.values():
            h.check_parent_filter(api, RESOURCE, parent, PARENT_IDS[parent],
                                  _children(trees[deployment.pk], parent), h.qualifiers(deployment, case),
                                  always_paged=parent == "bounty_id")


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
def test_a_parent_half_qualified_is_a_400(api: Client, active: Deployment, parent: str) -> None:
    h.check_parent_half_qualified(api, RESOURCE, parent)


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_of_an_unknown_deployment_or_a_missing_parent_matches_nothing(api: Client, tree: h.Tree,
                                                                               parent: str) -> None:
    h.check_parent_matches_nothing(api, RESOURCE, [
        *({parent: str(PARENT_IDS[parent]), **params} for params in h.UNKNOWN_DEPLOYMENTS),
        *({parent: value} for value in ("9", "0", "700", str(2**63), str(h.HUGE))),
    ], always_paged=parent == "bounty_id")


@pytest.mark.parametrize("parent", PARENTS)
def test_a_parent_without_an_indexed_active_deployment_matches_nothing(api: Client, settings: Any,
                                                                       other_chain: Deployment,
                                                                       parent: str) -> None:
    h.colliding_tree(other_chain)
    settings.BOUNTY_CONTRACT_ADDRESS = h.UNKNOWN_CONTRACT
    h.check_parent_matches_nothing(api, RESOURCE, [{parent: str(PARENT_IDS[parent])}],
                                   always_paged=parent == "bounty_id")
