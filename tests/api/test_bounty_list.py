"""GET /bounties: array or page object, paging, sort keys, q and the deployment filters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from operator import attrgetter
from typing import Any

import pytest
from django.test import Client

from records.models import Bounty, Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, T0, make_bounty, make_submission, set_status

RESOURCE = "bounties"
OWN_ID = "bounty_id"
OTHER_RESOURCES_SORT_KEYS = ["claimant", "challenger", "review", "disputes"]
PATH = "/bounties"


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


def test_an_empty_table_is_an_empty_array_or_an_empty_page(api: Client, active: Deployment) -> None:
    assert h.array(api, PATH) == []
    assert h.page(api, PATH, {"limit": "5"}) == {"items": [], "total": 0, "limit": 5, "cursor": None,
                                                 "next_cursor": None}


def test_page_rows_carry_their_exact_submission_count(api: Client, active: Deployment) -> None:
    bounties = [make_bounty(active) for _ in range(3)]
    for bounty, count in zip(bounties, [0, 3, 1], strict=True):
        for _ in range(count):
            make_submission(bounty)
    items = h.page(api, PATH, {"dir": "asc", "limit": "3"})["items"]
    assert [row["submission_count"] for row in items] == [0, 3, 1]
    assert items == [h.expected_bounty(b, with_count=True) for b in bounties]
    assert all("submission_count" not in row for row in h.array(api, PATH))


@pytest.mark.parametrize("numbers", [[3, 4, 5, 6, 7, 8], [1, 2, 5, 6, 9, 12]], ids=["contiguous", "gaps"])
def test_deep_pages_of_one_deployment_follow_its_ids(api: Client, active: Deployment, other_chain: Deployment,
                                                     numbers: list[int]) -> None:
    """Pages of one deployment's default order, with and without gaps in its IDs."""
    for number in numbers:
        make_bounty(active, bounty_id=number)
        make_bounty(other_chain, bounty_id=number + 1)
    for direction, wanted in (("asc", numbers), ("desc", numbers[::-1])):
        for size in ("1", "2", "4"):
            params = {**h.qualifiers(active), "dir": direction, "limit": size}
            assert h.walk_pages(api, PATH, params) == wanted, (direction, size)
        deep = h.page(api, PATH, {**h.qualifiers(active), "dir": direction, "cursor": "3", "limit": "2"})
        assert (h.ids(deep["items"]), deep["total"], deep["next_cursor"]) == (wanted[3:5], 6, "5")


def test_deep_pages_across_deployments_follow_the_merged_order(api: Client, active: Deployment,
                                                               other_chain: Deployment) -> None:
    """Without chain_id, pages at every offset follow (ID, deployment) over both deployments,
    whose IDs run without gaps over different ranges."""
    for number in range(1, 8):
        make_bounty(active, bounty_id=number)
    for number in range(3, 6):
        make_bounty(other_chain, bounty_id=number)
    merged = sorted([(n, active.pk, active.chain_id) for n in range(1, 8)]
                    + [(n, other_chain.pk, other_chain.chain_id) for n in range(3, 6)], reverse=True)
    for direction, wanted in (("desc", merged), ("asc", merged[::-1])):
        for offset in range(len(merged) + 1):
            items = h.page(api, PATH, {"dir": direction, "cursor": str(offset), "limit": "3"})["items"]
            assert [(row["id"], row["chain_id"]) for row in items] == [
                (n, chain) for n, _, chain in wanted[offset:offset + 3]], (direction, offset)


def test_the_default_page_holds_50_and_the_largest_100(api: Client, active: Deployment) -> None:
    newest_first = h.record_ids(reversed([make_bounty(active) for _ in range(101)]))
    first = h.page(api, PATH, {"q": ""})
    assert (h.ids(first["items"]), first["limit"], first["next_cursor"], first["total"]) == (
        newest_first[:50], 50, "50", 101)
    largest = h.page(api, PATH, {"limit": "101"})
    assert (h.ids(largest["items"]), largest["limit"], largest["next_cursor"]) == (newest_first[:100], 100, "100")
    assert h.ids(h.page(api, PATH, {"limit": "100", "cursor": "100"})["items"]) == newest_first[100:]
    assert len(h.array(api, PATH)) == 101


# ------------------------------------------------------------------ sort keys

SORT_KEYS: dict[str, Callable[[Bounty], Any]] = {
    "id": attrgetter("bounty_id"),
    "created_at": attrgetter("created_at"),
    "deadline": attrgetter("deadline"),
    "reward": (REWARD := attrgetter("bounty_amount")),
    "bounty_amount": REWARD,
    "bond": (BOND := attrgetter("bond_amount")),
    "bond_amount": BOND,
    "status": attrgetter("status"),
    "poster": attrgetter("poster"),
    "prompt": attrgetter("prompt"),
    "submissions": (SUBMISSIONS := attrgetter("submission_count")),
    "submission_count": SUBMISSIONS,
}


@pytest.fixture
def sortable(active: Deployment) -> list[Bounty]:
    """Bounties whose every sort key has ties and runs against the ID order."""
    rows = [
        # created_at, deadline (seconds after T0), reward, bond, status, poster, prompt, submissions
        (3, 50, 10, 7, "open", "0x" + "b0" * 20, "b", 2),
        (1, 50, 9, 2**70, "resolved", "0x" + "A0" * 20, "B", 0),
        (3, 20, 2**70, 7, "refunded", "0x" + "c0" * 20, "a", 1),
        (2, 90, 10, h.UINT256_MAX, "open", "0x" + "a1" * 20, "\u00e9", 2),
        (0, 0, 0, 0, "resolved", "0x" + "0F" * 20, "10", 0),
        (5, 10, h.UINT256_MAX, 9, "open", "0x" + "b0" * 20, "9\U0001f600", 1),
    ]
    bounties = []
    for created, deadline, reward, bond, status, poster, prompt, submissions in rows:
        bounty = make_bounty(active, created_at=T0 + timedelta(seconds=created),
                             deadline=T0 + timedelta(seconds=deadline), bounty_amount=reward, bond_amount=bond,
                             status=status, poster=poster, prompt=prompt)
        for _ in range(submissions):
            make_submission(bounty)
        bounties.append(bounty)
    return bounties


@pytest.mark.parametrize("keys", h.alias_groups(SORT_KEYS), ids="/".join)
def test_every_sort_key_and_alias_orders_with_an_id_tie_break_in_the_same_direction(
        api: Client, sortable: list[Bounty], keys: list[str]) -> None:
    h.check_sort_keys(api, RESOURCE, sortable, keys, SORT_KEYS[keys[0]])


def test_amounts_sort_as_numbers(api: Client, sortable: list[Bounty]) -> None:
    rows = h.page(api, PATH, {"sort": "reward", "dir": "asc", "q": ""})["items"]
    assert [int(row["bounty_amount"]) for row in rows] == [0, 9, 10, 10, 2**70, h.UINT256_MAX]


def test_the_array_is_sorted_too(api: Client, sortable: list[Bounty]) -> None:
    wanted = h.expected_order(sortable, SORT_KEYS["bond"], descending=False)
    assert h.ids(h.array(api, PATH, {"sort": "bond", "dir": "asc"})) == wanted


@pytest.mark.parametrize("key", ["status", "submissions", "created_at"])
def test_pages_of_a_sort_with_ties_never_repeat_or_skip_a_row(api: Client, sortable: list[Bounty],
                                                               key: str) -> None:
    wanted = h.expected_order(sortable, SORT_KEYS[key], descending=True)
    assert h.walk_pages(api, PATH, {"sort": key, "limit": "2"}) == wanted


# ------------------------------------------------------------------ q

TARGET: dict[str, Any] = {
    "bounty_id": 424242, "status": "resolved", "poster": "0x" + "a1b2c3d4e5" * 4,
    "metadata_uri": "ipfs://target-uri", "metadata_hash": "0x" + "cd" * 32, "tx_hash": "0x" + "ef" * 32,
    "prompt": "Find the \u00c9clair 100%_done", "bounty_amount": 777777, "fee_amount": 333333,
    "bond_amount": 555555, "duration": 864864, "block_number": 616161,
}
DECOY: dict[str, Any] = {
    "bounty_id": 313131, "status": "open", "poster": "0x" + "5a" * 20, "metadata_uri": "ipfs://decoy",
    "metadata_hash": "0x" + "11" * 32, "tx_hash": "0x" + "22" * 32, "prompt": "other",
}
Q_MATCHES = {
    "own id": "2424",
    "whole id": "424242",
    "status": "resolved",
    "status in capitals": "RESOLVED",
    "poster lowercase": "a1b2c3d4e5a1",
    "poster uppercase": "0XA1B2C3D4E5A1B2",
    "poster checksummed": h.checksummed(TARGET["poster"]),
    "metadata_uri": "target-uri",
    "metadata_hash": "cdcdcd",
    "tx_hash": "0x" + "ef" * 32,
    "prompt": "\u00e9CLAIR",
    "literal percent": "%",
    "literal underscore": "_",
    "literal percent and underscore": "0%_d",
}
Q_MISSES = {
    "reward": "777777", "fee": "333333", "bond": "555555", "duration": "864864", "block number": "616161",
    "chain id": "91342", "contract address": ACTIVE_CONTRACT[2:12], "wildcard lookalike": "1%0",
    "across two fields": "resolved0x", "separator": "\x1f", "nothing": "zzzz",
}


@pytest.fixture
def searchable(active: Deployment) -> tuple[Bounty, Bounty]:
    return make_bounty(active, **TARGET), make_bounty(active, **DECOY)


@pytest.mark.parametrize("q", list(Q_MATCHES.values()), ids=list(Q_MATCHES))
def test_q_matches_each_field_it_covers(api: Client, searchable: tuple[Bounty, Bounty], q: str) -> None:
    h.assert_q(api, RESOURCE, q, [TARGET["bounty_id"]])


@pytest.mark.parametrize("q", list(Q_MISSES.values()), ids=list(Q_MISSES))
def test_q_does_not_match_other_fields(api: Client, searchable: tuple[Bounty, Bounty], q: str) -> None:
    h.assert_q(api, RESOURCE, q, [])


def test_q_matching_several_records_keeps_the_sort(api: Client, searchable: tuple[Bounty, Bounty]) -> None:
    h.assert_q(api, RESOURCE, "ipfs://", [424242, 313131])
    assert h.sorted_ids(api, RESOURCE, "prompt", "asc", {"q": "ipfs"}) == [424242, 313131]


def test_an_empty_q_filters_nothing_but_answers_a_page(api: Client, searchable: tuple[Bounty, Bounty]) -> None:
    h.assert_q(api, RESOURCE, "", [424242, 313131])


@pytest.mark.parametrize("length", [999, 1_001, 5_000])
def test_a_long_q_still_matches_a_long_field(api: Client, active: Deployment, length: int) -> None:
    """Inline metadata makes long URIs and prompts; any substring of them is a q that finds them."""
    prompt = "".join(chr(0x61 + n % 26) for n in range(length + 10))
    long_one = make_bounty(active, prompt=prompt)
    make_bounty(active, prompt=prompt[:length - 1])
    h.assert_q(api, RESOURCE, prompt[5 : 5 + length], [long_one.bounty_id])


def test_q_follows_a_status_change(api: Client, searchable: tuple[Bounty, Bounty]) -> None:
    target, _ = searchable
    set_status(target, "refunded")
    h.assert_q(api, RESOURCE, "resolved", [])
    h.assert_q(api, RESOURCE, "refunded", [424242])


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


def test_a_malformed_filter_is_a_400_naming_it(api: Client, active: Deployment) -> None:
    h.check_malformed_filters(api, RESOURCE, h.MALFORMED_QUALIFIERS)


def test_filters_combine_with_q_sort_and_paging(api: Client, active: Deployment, other_chain: Deployment,
                                                other_contract: Deployment) -> None:
    for deployment in (active, other_chain, other_contract):
        for amount in (3, 1, 2):
            make_bounty(deployment, bounty_amount=amount, prompt=f"wanted {amount}")
        make_bounty(deployment, bounty_amount=5, prompt="unwanted")
    wanted = Bounty.objects.filter(deployment__chain_id=91342, prompt__startswith="wanted")
    order = h.expected_order(list(wanted), lambda b: b.bounty_amount, descending=False)
    params = {"chain_id": "91342", "q": "WANTED ", "sort": "reward", "dir": "asc", "limit": "4"}
    first = h.page(api, PATH, params)
    assert (h.ids(first["items"]), first["total"], first["next_cursor"]) == (order[:4], 6, "4")
    second = h.page(api, PATH, {**params, "cursor": "4"})
    assert (h.ids(second["items"]), second["cursor"], second["next_cursor"]) == (order[4:], "4", None)
    one = h.page(api, PATH, {**params, **h.qualifiers(other_contract), "limit": "1"})
    assert (len(one["items"]), one["total"], one["items"][0]["contract_address"]) == (
        1, 3, h.checksummed(other_contract.contract_address))
