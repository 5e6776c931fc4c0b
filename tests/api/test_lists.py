"""GET /bounties, /submissions and /disputes: what every list does, pinned for each of the three.

Arrays or page objects, paging, sort keys, q and the deployment filters (docs/api.md, Lists).
What tells the lists apart is data in list_specs.py; what one list alone does, its parent
filters and counts, stays in that list's own file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

import pytest
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.api.list_specs import SPECS, ListSpec, Record
from tests.factories import ACTIVE_CONTRACT, set_status


@pytest.fixture(params=SPECS, ids=[spec.resource for spec in SPECS])
def spec(request: pytest.FixtureRequest) -> ListSpec:
    chosen: ListSpec = request.param
    return chosen


def per_list(cases: Callable[[ListSpec], Mapping[str, Any]]) -> list[Any]:
    """(spec, case) parameters of every list's own cases, named `<resource>-<case>`."""
    return [pytest.param(spec, value, id=f"{spec.resource}-{name}") for spec in SPECS
            for name, value in cases(spec).items()]


# (raw limit, the page size it means)
LIMIT_CASES: list[tuple[str, int]] = [
    ("1", 1), ("2", 2), ("0", 1), ("-7", 1), ("100", 100), ("101", 100), ("1000000", 100), ("+3", 3),
    ("9" * 30, 100), ("-" + "9" * 30, 1), ("00000000000000000000000000002", 2),
    ("abc", 50), ("", 50), ("2.5", 50), ("1e2", 50), ("0x10", 50), ("\u0663", 50),
]
# Cursors that are not a non-negative integer: read from offset 0, page cursor null.
INVALID_CURSORS = ["-1", "abc", "", "1.5", "+1", "0x2", " 1", "\u0661"]
# Non-negative integers past any end: no items, however large.
FAR_CURSORS = [str(10**17), str(2**63 - 1), str(2**63), str(10**19), str(h.HUGE), "9" * 5_000]
PAGE_REQUESTS: list[dict[str, str]] = [
    {"limit": "50"}, {"limit": ""}, {"cursor": "0"}, {"cursor": "abc"}, {"q": ""}, {"q": "", "sort": "id"},
]
ARRAY_REQUESTS: list[dict[str, str]] = [
    {"sort": "id"}, {"dir": "desc"}, {"chain_id": "91342"}, {"chain_id": "91342", "contract_address": ACTIVE_CONTRACT},
    {"page": "2"}, {"offset": "1"}, {"Limit": "1"}, {"search": "x"},
]
DESCENDING_DIRS = [None, "desc", "DESC", "Desc", "", "up", "ascending", "asc ", "down"]
ASCENDING_DIRS = ["asc", "ASC", "aSc"]
UNKNOWN_SORTS = ["nope", "", "ID ", "-created_at", "id,status", "search_text", "deployment"]
# Lenient parameters never fail, whatever they hold.
LENIENT_NOISE: list[dict[str, str]] = [
    {"limit": "\u0663"}, {"cursor": "\u0663"}, {"sort": "\u00e9\u4e2d\U0001f600"}, {"dir": "\x00"},
    {"cursor": "-" + "9" * 30}, {"limit": "1_0"},
]


def test_without_limit_cursor_or_q_it_answers_an_array_by_id_descending_without_counts(
        api: Client, active: Deployment, spec: ListSpec) -> None:
    records = h.seed(spec.resource, active, 3)
    assert h.array(api, spec.path) == h.expected_rows(spec.resource, reversed(records), paged=False)


def test_any_of_limit_cursor_or_q_asks_for_a_page_and_nothing_else_does(api: Client, active: Deployment,
                                                                         spec: ListSpec) -> None:
    """Even empty, they ask for a page whose rows are the records (bounty and submission rows with
    their count); other parameters, and the record's own ID (no filter), keep the array."""
    newest_first = list(reversed(h.seed(spec.resource, active, 3)))
    for params in PAGE_REQUESTS:
        body = h.page(api, spec.path, params)
        assert (body["items"], body["total"], body["next_cursor"]) == (
            h.expected_rows(spec.resource, newest_first, paged=True), 3, None), params
    for params in [*ARRAY_REQUESTS, {spec.own_id: "1"}]:
        assert h.array(api, spec.path, params) == h.expected_rows(spec.resource, newest_first, paged=False), params


def test_limit_is_clamped_to_1_to_100_and_anything_else_means_50(api: Client, active: Deployment,
                                                                  spec: ListSpec) -> None:
    newest_first = h.record_ids(reversed(h.seed(spec.resource, active, 3)))
    for raw, size in LIMIT_CASES:
        body = h.page(api, spec.path, {"limit": raw})
        assert (body["limit"], h.ids(body["items"]), body["next_cursor"]) == (
            size, newest_first[:size], str(size) if size < 3 else None), raw


def test_an_invalid_cursor_reads_from_offset_0_and_echoes_null(api: Client, active: Deployment,
                                                                spec: ListSpec) -> None:
    newest_first = h.record_ids(reversed(h.seed(spec.resource, active, 3)))
    for raw in INVALID_CURSORS:
        body = h.page(api, spec.path, {"cursor": raw, "limit": "2"})
        assert (h.ids(body["items"]), body["cursor"], body["next_cursor"], body["total"]) == (
            newest_first[:2], None, "2", 3), raw


def test_cursor_and_next_cursor_walk_the_pages(api: Client, active: Deployment, spec: ListSpec) -> None:
    """cursor is the offset read from (null when not sent), next_cursor null on the last page."""
    newest_first = h.record_ids(reversed(h.seed(spec.resource, active, 5)))
    walk = [
        # cursor sent, the page's IDs, cursor echoed, next_cursor
        (None, newest_first[0:2], None, "2"),
        ("0", newest_first[0:2], "0", "2"),
        ("2", newest_first[2:4], "2", "4"),
        ("4", newest_first[4:], "4", None),
        ("3", newest_first[3:5], "3", None),
        ("5", [], "5", None),
        ("0050", [], "50", None),
        ("99999999999999999", [], "99999999999999999", None),
    ]
    for cursor, items, echoed, following in walk:
        body = h.page(api, spec.path, {"limit": "2", "cursor": cursor})
        assert (h.ids(body["items"]), body["cursor"], body["next_cursor"], body["total"], body["limit"]) == (
            items, echoed, following, 5, 2), cursor


def test_a_cursor_past_the_end_however_large_gives_no_items(api: Client, active: Deployment,
                                                             spec: ListSpec) -> None:
    """It is still the offset read from."""
    h.seed(spec.resource, active, 2)
    for cursor in FAR_CURSORS:
        body = h.page(api, spec.path, {"cursor": cursor})
        assert (body["items"], body["cursor"], body["next_cursor"], body["total"]) == ([], cursor, None, 2), cursor


@pytest.mark.parametrize(("raw_dirs", "descending"), [(ASCENDING_DIRS, False), (DESCENDING_DIRS, True)],
                         ids=["asc-in-any-case-is-ascending", "anything-else-is-descending"])
def test_dir_asc_in_any_case_means_ascending_and_anything_else_descending(
        api: Client, active: Deployment, spec: ListSpec, raw_dirs: list[str | None], descending: bool) -> None:
    """In pages and in arrays."""
    records = h.seed(spec.resource, active, 3)
    wanted = h.record_ids(reversed(records) if descending else records)
    for raw in raw_dirs:
        assert h.sorted_ids(api, spec.resource, None, raw) == wanted, raw
        assert h.ids(h.array(api, spec.path, {"dir": raw})) == wanted, raw


def test_an_unknown_sort_key_sorts_by_id(api: Client, active: Deployment, spec: ListSpec) -> None:
    """In either direction, although the records' other fields run against the ID order. Besides
    keys no list has, the other lists' keys are unknown here."""
    records = h.seed(spec.resource, active, 3)
    for position, record in enumerate(records):
        type(record).objects.filter(pk=record.pk).update(created_at=datetime(2030 - position, 1, 1, tzinfo=UTC))
    others = sorted({key for other in SPECS for key in other.sort_keys} - set(spec.sort_keys))
    for raw in [*UNKNOWN_SORTS, *others]:
        assert h.sorted_ids(api, spec.resource, raw, "asc") == h.record_ids(records), raw
        assert h.sorted_ids(api, spec.resource, raw, None) == h.record_ids(reversed(records)), raw


def test_lenient_parameters_never_fail(api: Client, active: Deployment, spec: ListSpec) -> None:
    records = h.seed(spec.resource, active, 2)
    for params in LENIENT_NOISE:
        body = h.page(api, spec.path, {"q": "", **params})
        assert sorted(h.ids(body["items"])) == h.record_ids(records), params


def test_an_empty_table_is_an_empty_array_or_an_empty_page(api: Client, active: Deployment,
                                                            spec: ListSpec) -> None:
    assert h.array(api, spec.path) == []
    assert h.page(api, spec.path, {"limit": "5"}) == {"items": [], "total": 0, "limit": 5, "cursor": None,
                                                      "next_cursor": None}


@pytest.mark.parametrize("numbers", [[3, 4, 5, 6, 7, 8], [1, 2, 5, 6, 9, 12]], ids=["contiguous", "gaps"])
def test_deep_pages_of_one_deployment_follow_its_ids(api: Client, active: Deployment, other_chain: Deployment,
                                                     spec: ListSpec, numbers: list[int]) -> None:
    """Pages of one deployment's default order, with and without gaps in its IDs."""
    for number in numbers:
        h.make_record(spec.resource, active, **{spec.own_id: number})
        h.make_record(spec.resource, other_chain, **{spec.own_id: number + 1})
    for direction, wanted in (("asc", numbers), ("desc", numbers[::-1])):
        for size in ("1", "2", "4"):
            params = {**h.qualifiers(active), "dir": direction, "limit": size}
            assert h.walk_pages(api, spec.path, params) == wanted, (direction, size)
        deep = h.page(api, spec.path, {**h.qualifiers(active), "dir": direction, "cursor": "3", "limit": "2"})
        assert (h.ids(deep["items"]), deep["total"], deep["next_cursor"]) == (wanted[3:5], 6, "5")


def test_deep_pages_across_deployments_follow_the_merged_order(api: Client, active: Deployment,
                                                               other_chain: Deployment, spec: ListSpec) -> None:
    """Without chain_id, pages at every offset follow (ID, deployment) over both deployments,
    whose IDs run without gaps over different ranges."""
    for number in range(1, 8):
        h.make_record(spec.resource, active, **{spec.own_id: number})
    for number in range(3, 6):
        h.make_record(spec.resource, other_chain, **{spec.own_id: number})
    merged = sorted([(n, active.pk, active.chain_id) for n in range(1, 8)]
                    + [(n, other_chain.pk, other_chain.chain_id) for n in range(3, 6)], reverse=True)
    for direction, wanted in (("desc", merged), ("asc", merged[::-1])):
        for offset in range(len(merged) + 1):
            items = h.page(api, spec.path, {"dir": direction, "cursor": str(offset), "limit": "3"})["items"]
            assert [(row["id"], row["chain_id"]) for row in items] == [
                (n, chain) for n, _, chain in wanted[offset:offset + 3]], (direction, offset)


def test_the_default_page_holds_50_and_the_largest_100(api: Client, active: Deployment, spec: ListSpec) -> None:
    newest_first = h.record_ids(reversed(h.seed(spec.resource, active, 101)))
    first = h.page(api, spec.path, {"q": ""})
    assert (h.ids(first["items"]), first["limit"], first["next_cursor"], first["total"]) == (
        newest_first[:50], 50, "50", 101)
    largest = h.page(api, spec.path, {"limit": "101"})
    assert (h.ids(largest["items"]), largest["limit"], largest["next_cursor"]) == (newest_first[:100], 100, "100")
    assert h.ids(h.page(api, spec.path, {"limit": "100", "cursor": "100"})["items"]) == newest_first[100:]
    assert len(h.array(api, spec.path)) == 101


# ------------------------------------------------------------------ sort keys


@pytest.fixture
def sortable(active: Deployment, spec: ListSpec) -> list[Record]:
    """Records whose every sort key has ties and runs against the ID order."""
    return spec.make_sortable(active)


@pytest.mark.parametrize(("spec", "keys"), per_list(lambda s: {"/".join(keys): keys for keys in s.alias_groups()}))
def test_every_sort_key_and_alias_orders_with_an_id_tie_break_in_the_same_direction(
        api: Client, spec: ListSpec, sortable: list[Record], keys: list[str]) -> None:
    for record in sortable:
        record.refresh_from_db()  # stored values: addresses lowercase, counters current
    for key in keys:
        for direction in ("asc", "desc"):
            wanted = h.expected_order(sortable, spec.sort_value(keys[0]), descending=direction == "desc")
            assert h.sorted_ids(api, spec.resource, key, direction) == wanted, (key, direction)


def test_amounts_sort_as_numbers(api: Client, spec: ListSpec, sortable: list[Record]) -> None:
    for params in ({"dir": "asc", "q": ""}, {"dir": "ASC", "limit": "10"}):
        rows = h.page(api, spec.path, {"sort": spec.amount_key, **params})["items"]
        amounts = [int(row[spec.sort_keys[spec.amount_key]]) for row in rows]
        assert amounts == [0, 9, 10, 10, 2**70, h.UINT256_MAX], params


def test_the_array_is_sorted_too(api: Client, spec: ListSpec, sortable: list[Record]) -> None:
    for direction in ("asc", None):
        wanted = h.expected_order(sortable, spec.sort_value(spec.array_sort_key), descending=direction is None)
        assert h.ids(h.array(api, spec.path, {"sort": spec.array_sort_key, "dir": direction})) == wanted, direction


@pytest.mark.parametrize(("spec", "key"), per_list(lambda spec: {key: key for key in spec.tie_sort_keys}))
def test_pages_of_a_sort_with_ties_never_repeat_or_skip_a_row(api: Client, spec: ListSpec, sortable: list[Record],
                                                               key: str) -> None:
    for direction in ("asc", None):
        wanted = h.expected_order(sortable, spec.sort_value(key), descending=direction is None)
        for limit in ("2", "4"):
            params = {"sort": key, "dir": direction, "limit": limit}
            assert h.walk_pages(api, spec.path, params) == wanted, (direction, limit)


# ------------------------------------------------------------------ q


@pytest.fixture
def searchable(active: Deployment, spec: ListSpec) -> tuple[Record, Record]:
    """The target, which each of the list's q_matches finds, and a decoy."""
    return spec.make_searchable(active)


@pytest.mark.parametrize(("spec", "q"), per_list(attrgetter("q_matches")))
def test_q_matches_each_field_it_covers(api: Client, spec: ListSpec, searchable: tuple[Record, Record],
                                        q: str) -> None:
    target, _ = searchable
    assert h.q_result(api, spec.resource, q) == ([h.record_id(target)], 1)


@pytest.mark.parametrize(("spec", "q"), per_list(attrgetter("q_misses")))
def test_q_does_not_match_other_fields(api: Client, spec: ListSpec, searchable: tuple[Record, Record],
                                       q: str) -> None:
    assert h.q_result(api, spec.resource, q) == ([], 0)


def test_q_matching_several_records_keeps_the_sort(api: Client, spec: ListSpec,
                                                   searchable: tuple[Record, Record]) -> None:
    """Both records' metadata URIs are ipfs:// ones; the target's text sorts first."""
    both = h.record_ids(searchable)
    assert h.q_result(api, spec.resource, "ipfs://") == (sorted(both, reverse=True), 2)
    assert h.sorted_ids(api, spec.resource, spec.text_field, "asc", {"q": "ipfs"}) == both
    assert h.sorted_ids(api, spec.resource, spec.text_field, "desc", {"q": "ipfs"}) == both[::-1]


def test_a_q_longer_than_the_limit_is_a_400_naming_q_and_the_limit_read_without_a_query(
        api: Client, spec: ListSpec, searchable: tuple[Record, Record], settings: Any,
        django_assert_num_queries: Any) -> None:
    limit = settings.BOUNTY_Q_MAX_LENGTH
    assert h.q_result(api, spec.resource, "ipfs://" + "x" * (limit - 7)) == ([], 0)  # at the limit: searched
    for length in (limit + 1, 8_000):
        with django_assert_num_queries(0):
            detail = h.error_detail(api, spec.path, {"q": "x" * length, "limit": "5"}, status=400)
        assert detail == f"q must be at most {limit} characters, got {length}"
    settings.BOUNTY_Q_MAX_LENGTH = 3
    assert h.error_detail(api, spec.path, {"q": "ipfs"}, status=400) == "q must be at most 3 characters, got 4"


def test_an_empty_q_filters_nothing_but_answers_a_page(api: Client, spec: ListSpec,
                                                       searchable: tuple[Record, Record]) -> None:
    assert h.q_result(api, spec.resource, "") == (sorted(h.record_ids(searchable), reverse=True), 2)


@pytest.mark.parametrize("shorter", [1, 0])
def test_a_long_q_still_matches_a_long_field(api: Client, active: Deployment, spec: ListSpec, shorter: int,
                                             settings: Any) -> None:
    """Inline metadata makes long URIs and texts; any substring of them up to q's limit finds them."""
    length = settings.BOUNTY_Q_MAX_LENGTH - shorter
    text = "".join(chr(0x61 + n % 26) for n in range(length + 10))
    long_one = h.make_record(spec.resource, active, **{spec.text_field: text})
    h.make_record(spec.resource, active, **{spec.text_field: text[:length - 1]})
    assert h.q_result(api, spec.resource, text[5 : 5 + length]) == ([h.record_id(long_one)], 1)


def test_q_follows_a_status_change(api: Client, spec: ListSpec, searchable: tuple[Record, Record]) -> None:
    change = spec.status_change
    changed = searchable[change.record]
    set_status(changed, change.status)
    assert h.q_result(api, spec.resource, change.status) == ([h.record_id(changed)], 1)
    assert h.q_result(api, spec.resource, change.gone) == ([], 0)


# ------------------------------------------------------------------ deployment filters


def test_without_chain_id_the_list_spans_every_deployment(api: Client, active: Deployment,
                                                          other_chain: Deployment, other_contract: Deployment,
                                                          spec: ListSpec) -> None:
    """Records with the same ID in every deployment, each row with its own deployment's fields."""
    records = [h.make_record(spec.resource, deployment, **{spec.own_id: 7})
               for deployment in (active, other_chain, other_contract)]

    def by_deployment(row: dict[str, Any]) -> tuple[int, str]:
        return row["chain_id"], row["contract_address"]

    assert sorted(h.array(api, spec.path), key=by_deployment) == sorted(
        h.expected_rows(spec.resource, records, paged=False), key=by_deployment)


def test_chain_id_alone_filters_to_that_chain_and_with_contract_address_to_one_deployment(
        api: Client, active: Deployment, other_chain: Deployment, other_contract: Deployment,
        spec: ListSpec) -> None:
    """contract_address in any letter case; a deployment not indexed lists nothing."""
    deployments = [active, other_chain, other_contract]
    made = {deployment.pk: h.make_record(spec.resource, deployment) for deployment in deployments}
    for deployment in deployments:
        chain = {"chain_id": str(deployment.chain_id)}
        same_chain = [made[d.pk] for d in deployments if d.chain_id == deployment.chain_id]
        wanted = sorted(h.record_ids(same_chain), reverse=True)
        assert h.ids(h.array(api, spec.path, chain)) == wanted, chain
        assert h.ids(h.page(api, spec.path, {**chain, "q": ""})["items"]) == wanted, chain
        for case_name, case in h.ADDRESS_CASES.items():
            only = h.qualifiers(deployment, case)
            assert h.ids(h.array(api, spec.path, only)) == [h.record_id(made[deployment.pk])], (only, case_name)
            assert h.page(api, spec.path, {**only, "limit": "5"})["total"] == 1, (only, case_name)
    for nothing in [*h.UNKNOWN_DEPLOYMENTS, {"chain_id": "1"}, {"chain_id": str(h.HUGE)}, {"chain_id": "0"}]:
        assert h.array(api, spec.path, nothing) == [], nothing
        assert h.page(api, spec.path, {**nothing, "limit": "5"})["total"] == 0, nothing


def test_contract_address_without_chain_id_is_a_400_naming_both(api: Client, active: Deployment,
                                                               spec: ListSpec) -> None:
    for address in (ACTIVE_CONTRACT, "nonsense"):
        detail = h.error_detail(api, spec.path, {"contract_address": address}, status=400)
        assert "contract_address" in detail and "chain_id" in detail, address


def test_a_malformed_filter_is_a_400_naming_it(api: Client, active: Deployment, spec: ListSpec) -> None:
    """For an array and for a page."""
    for params, name in spec.malformed_filters:
        for paging in ({}, {"limit": "5"}):
            assert name in h.error_detail(api, spec.path, {**params, **paging}, status=400), (params, paging)


def test_filters_combine_with_q_sort_and_paging(api: Client, active: Deployment, other_chain: Deployment,
                                                other_contract: Deployment, spec: ListSpec) -> None:
    amount = spec.sort_keys[spec.amount_key]
    wanted: list[Record] = []
    for deployment in (active, other_chain, other_contract):
        for value in (3, 1, 2):
            made = h.make_record(spec.resource, deployment, **{amount: value, spec.text_field: f"wanted {value}"})
            if deployment.chain_id == active.chain_id:
                wanted.append(made)
        h.make_record(spec.resource, deployment, **{amount: 5, spec.text_field: "unwanted"})
    order = h.expected_order(wanted, attrgetter(amount), descending=False)
    params = {"chain_id": "91342", "q": "WANTED ", "sort": spec.amount_key, "dir": "asc", "limit": "4"}
    first = h.page(api, spec.path, params)
    assert (h.ids(first["items"]), first["total"], first["next_cursor"]) == (order[:4], 6, "4")
    second = h.page(api, spec.path, {**params, "cursor": "4"})
    assert (h.ids(second["items"]), second["cursor"], second["next_cursor"]) == (order[4:], "4", None)
    one = h.page(api, spec.path, {**params, **h.qualifiers(other_contract), "limit": "1"})
    assert (len(one["items"]), one["total"], one["items"][0]["contract_address"]) == (
        1, 3, h.checksummed(other_contract.contract_address))
