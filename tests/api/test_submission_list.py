"""GET /submissions and /submissions?bounty_id=: array or page object, paging, sort keys, q, filters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from operator import attrgetter
from typing import Any

import pytest
from django.test import Client

from records.models import Bounty, Deployment, Submission
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, T0, make_bounty, make_dispute, make_submission, set_status

RESOURCE = "submissions"
OWN_ID = "submission_id"
OTHER_RESOURCES_SORT_KEYS = ["poster", "reward", "challenger", "prompt"]
PATH = "/submissions"


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


def test_page_rows_carry_their_exact_dispute_count(api: Client, active: Deployment) -> None:
    submissions = h.seed(RESOURCE, active, 3)
    for submission, count in zip(submissions, [2, 0, 1], strict=True):
        for _ in range(count):
            make_dispute(submission)  # type: ignore[arg-type]
    items = h.page(api, PATH, {"dir": "asc", "q": ""})["items"]
    assert [row["dispute_count"] for row in items] == [2, 0, 1]
    assert items == h.expected_rows(RESOURCE, submissions, paged=True)
    assert all("dispute_count" not in row for row in h.array(api, PATH))


# ------------------------------------------------------------------ sort keys

SORT_KEYS: dict[str, Callable[[Submission], Any]] = {
    "id": attrgetter("submission_id"),
    "created_at": (CREATED := attrgetter("created_at")),
    "submitted": CREATED,
    "bounty": (BOUNTY := attrgetter("bounty_id")),
    "bounty_id": BOUNTY,
    "bond": (BOND := attrgetter("bond_amount")),
    "bond_amount": BOND,
    "status": attrgetter("status"),
    "claimant": attrgetter("claimant"),
    "content": attrgetter("content"),
    "review": (REVIEW := attrgetter("review_deadline")),
    "review_deadline": REVIEW,
    "disputes": (DISPUTES := attrgetter("dispute_count")),
    "dispute_count": DISPUTES,
}


@pytest.fixture
def sortable(active: Deployment) -> list[Submission]:
    """Submissions whose every sort key has ties and runs against the ID order."""
    bounties = [make_bounty(active) for _ in range(3)]
    rows = [
        # bounty, created_at, review_deadline (seconds after T0), bond, status, claimant, content, disputes
        (2, 3, 50, 10, "submitted", "0x" + "b0" * 20, "b", 2),
        (0, 1, 50, 9, "disputed", "0x" + "A0" * 20, "B", 0),
        (2, 3, 20, 2**70, "accepted", "0x" + "c0" * 20, "a", 1),
        (1, 2, 90, 10, "rejected", "0x" + "a1" * 20, "\u00e9", 2),
        (0, 0, 0, 0, "refunded", "0x" + "0F" * 20, "10", 0),
        (1, 5, 10, h.UINT256_MAX, "submitted", "0x" + "b0" * 20, "9\U0001f600", 1),
    ]
    submissions = []
    for bounty, created, review, bond, status, claimant, text, disputes in rows:
        submission = make_submission(bounties[bounty], created_at=T0 + timedelta(seconds=created),
                                     review_deadline=T0 + timedelta(seconds=review), bond_amount=bond,
                                     status=status, claimant=claimant, content=text)
        for _ in range(disputes):
            make_dispute(submission)
        submissions.append(submission)
    return submissions


@pytest.mark.parametrize("keys", h.alias_groups(SORT_KEYS), ids="/".join)
def test_every_sort_key_and_alias_orders_with_an_id_tie_break_in_the_same_direction(
        api: Client, sortable: list[Submission], keys: list[str]) -> None:
    h.check_sort_keys(api, RESOURCE, sortable, keys, SORT_KEYS[keys[0]])


def test_amounts_sort_as_numbers(api: Client, sortable: list[Submission]) -> None:
    rows = h.page(api, PATH, {"sort": "bond", "dir": "asc", "q": ""})["items"]
    assert [int(row["bond_amount"]) for row in rows] == [0, 9, 10, 10, 2**70, h.UINT256_MAX]


def test_the_array_is_sorted_too(api: Client, sortable: list[Submission]) -> None:
    wanted = h.expected_order(sortable, SORT_KEYS["review"], descending=True)
    assert h.ids(h.array(api, PATH, {"sort": "review"})) == wanted


@pytest.mark.parametrize("key", ["bounty", "disputes", "submitted"])
def test_pages_of_a_sort_with_ties_never_repeat_or_skip_a_row(api: Client, sortable: list[Submission],
                                                               key: str) -> None:
    wanted = h.expected_order(sortable, SORT_KEYS[key], descending=False)
    assert h.walk_pages(api, PATH, {"sort": key, "dir": "asc", "limit": "4"}) == wanted


# ------------------------------------------------------------------ q

PARENT: dict[str, Any] = {"bounty_id": 5151515, "metadata_uri": "ipfs://parent", "prompt": "parent prompt"}
TARGET: dict[str, Any] = {
    "submission_id": 424242, "status": "accepted", "tile_id": "0x" + "a1b2c3d4e5" * 4,
    "claimant": "0x" + "f9e8d7c6b5" * 4, "metadata_uri": "ipfs://target-uri", "metadata_hash": "0x" + "cd" * 32,
    "tx_hash": "0x" + "ef" * 32, "content": "My \u00c9clair answer", "bond_amount": 777777,
    "block_number": 616161,
}
DECOY: dict[str, Any] = {
    "submission_id": 313131, "status": "submitted", "tile_id": "0x" + "5a" * 20, "claimant": "0x" + "6b" * 20,
    "metadata_uri": "ipfs://decoy", "metadata_hash": "0x" + "11" * 32, "tx_hash": "0x" + "22" * 32,
    "content": "other",
}
Q_MATCHES = {
    "own id": "2424",
    "parent bounty id": "151515",
    "status": "accepted",
    "status in capitals": "ACCEPTED",
    "tile_id": "a1b2c3d4e5a1",
    "tile_id checksummed": h.checksummed(TARGET["tile_id"]),
    "claimant": "F9E8D7",
    "claimant checksummed": h.checksummed(TARGET["claimant"]),
    "metadata_uri": "target-uri",
    "metadata_hash": "cdcdcd",
    "tx_hash": "efefef",
    "content": "\u00e9CLAIR ANS",
}
Q_MISSES = {
    "bond": "777777", "block number": "616161", "chain id": "91342", "parent's prompt": "parent prompt",
    "parent's metadata": "ipfs://parent", "across two fields": "accepted0x", "nothing": "zzzz",
}


@pytest.fixture
def searchable(active: Deployment) -> tuple[Submission, Submission]:
    return (make_submission(make_bounty(active, **PARENT), **TARGET),
            make_submission(make_bounty(active, bounty_id=6262626), **DECOY))


@pytest.mark.parametrize("q", list(Q_MATCHES.values()), ids=list(Q_MATCHES))
def test_q_matches_each_field_it_covers(api: Client, searchable: tuple[Submission, Submission], q: str) -> None:
    h.assert_q(api, RESOURCE, q, [TARGET["submission_id"]])


@pytest.mark.parametrize("q", list(Q_MISSES.values()), ids=list(Q_MISSES))
def test_q_does_not_match_other_fields(api: Client, searchable: tuple[Submission, Submission], q: str) -> None:
    h.assert_q(api, RESOURCE, q, [])


def test_q_follows_a_status_change(api: Client, searchable: tuple[Submission, Submission]) -> None:
    set_status(searchable[1], "disputed")
    h.assert_q(api, RESOURCE, "disputed", [313131])
    h.assert_q(api, RESOURCE, "submitted", [])


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
    *(({"bounty_id": value}, "bounty_id") for value in ("abc", "-1", "1.0", "", " 7", "0x7", "\u0667")),
    ({"bounty_id": "abc", "chain_id": "91342", "contract_address": ACTIVE_CONTRACT}, "bounty_id"),
    ({"bounty_id": "7", "chain_id": "x", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"bounty_id": "7", "chain_id": "91342", "contract_address": "0x7"}, "contract_address"),
]


def test_a_malformed_filter_is_a_400_naming_it(api: Client, active: Deployment) -> None:
    h.check_malformed_filters(api, RESOURCE, MALFORMED_FILTERS)


# ------------------------------------------------------------------ ?bounty_id=


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    return h.colliding_tree(active)


@pytest.fixture
def trees(active: Deployment, other: Deployment) -> dict[int, h.Tree]:
    return {deployment.pk: h.colliding_tree(deployment) for deployment in (active, other)}


def test_bounty_id_without_qualifiers_lists_the_active_deployments_bounty(api: Client, active: Deployment,
                                                                          trees: dict[int, h.Tree]) -> None:
    h.check_parent_filter(api, RESOURCE, "bounty_id", 7, trees[active.pk].submissions, {})


def test_bounty_id_with_qualifiers_lists_that_deployments_bounty(api: Client, active: Deployment,
                                                                 other: Deployment,
                                                                 trees: dict[int, h.Tree]) -> None:
    for deployment in (active, other):
        for case in h.ADDRESS_CASES.values():
            params = h.qualifiers(deployment, case)
            h.check_parent_filter(api, RESOURCE, "bounty_id", 7, trees[deployment.pk].submissions, params)


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


def test_bounty_id_half_qualified_is_a_400(api: Client, tree: h.Tree) -> None:
    h.check_parent_half_qualified(api, RESOURCE, "bounty_id")


def test_bounty_id_of_an_unknown_deployment_or_a_missing_bounty_matches_nothing(api: Client, tree: h.Tree) -> None:
    h.check_parent_matches_nothing(api, RESOURCE, [
        *({"bounty_id": "7", **params} for params in h.UNKNOWN_DEPLOYMENTS),
        *({"bounty_id": value} for value in ("9", "0", "70", str(2**63), str(h.HUGE))),
    ])


@pytest.mark.parametrize("contract", [None, h.UNKNOWN_CONTRACT])
def test_bounty_id_without_an_indexed_active_deployment_matches_nothing(
        api: Client, settings: Any, other_chain: Deployment, contract: str | None) -> None:
    h.colliding_tree(other_chain)
    settings.BOUNTY_CONTRACT_ADDRESS = contract
    h.check_parent_matches_nothing(api, RESOURCE, [{"bounty_id": "7"}])


def test_the_parent_filter_keeps_every_status(api: Client, active: Deployment, tree: h.Tree) -> None:
    """The parent filter lists the submissions of that bounty whatever their status."""
    submission = tree.submissions[0]
    set_status(submission, "rejected")
    rows = h.array(api, PATH, {"bounty_id": "7"})
    assert [row["status"] for row in rows] == ["submitted", "rejected"]
    assert Bounty.objects.get(deployment=active, bounty_id=7).submission_count == 2
