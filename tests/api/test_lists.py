"""GET /bounties, /submissions and /disputes: what every list does, pinned for each of the three.

Arrays or page objects, paging, sort keys, q and the deployment filters (docs/api.md, Lists).
What tells the lists apart is data in list_specs.py; what one list alone does, its parent
filters and counts, stays in that list's own file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

import pytest
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.api.list_specs import SPECS, ListSpec, Record
from tests.factories import set_status


@pytest.fixture(params=SPECS, ids=[spec.resource for spec in SPECS])
def spec(request: pytest.FixtureRequest) -> ListSpec:
    chosen: ListSpec = request.param
    return chosen


def per_list(cases: Callable[[ListSpec], Mapping[str, Any]]) -> list[Any]:
    """(spec, case) parameters of every list's own cases, named `<resource>-<case>`."""
    return [pytest.param(spec, value, id=f"{spec.resource}-{name}") for spec in SPECS
            for name, value in cases(spec).items()]


def test_without_limit_cursor_or_q_it_answers_an_array_by_id_descending(api: Client, active: Deployment,
                                                                         spec: ListSpec) -> None:
    h.check_array_by_default(api, spec.resource, active)


def test_any_of_limit_cursor_or_q_asks_for_a_page_and_nothing_else_does(api: Client, active: Deployment,
                                                                         spec: ListSpec) -> None:
    h.check_page_requests(api, spec.resource, active, ignored=spec.own_id)


def test_limit_is_clamped_to_1_to_100_and_anything_else_means_50(api: Client, active: Deployment,
                                                                  spec: ListSpec) -> None:
    h.check_limits(api, spec.resource, active)


def test_an_invalid_cursor_reads_from_offset_0_and_echoes_null(api: Client, active: Deployment,
                                                                spec: ListSpec) -> None:
    h.check_invalid_cursors(api, spec.resource, active)


def test_cursor_and_next_cursor_walk_the_pages(api: Client, active: Deployment, spec: ListSpec) -> None:
    h.check_page_walk(api, spec.resource, active)


def test_a_cursor_past_the_end_however_large_gives_no_items(api: Client, active: Deployment,
                                                             spec: ListSpec) -> None:
    h.check_far_cursors(api, spec.resource, active)


def test_dir_asc_in_any_case_means_ascending(api: Client, active: Deployment, spec: ListSpec) -> None:
    h.check_dirs(api, spec.resource, active, descending=False)


def test_dir_other_than_asc_means_descending(api: Client, active: Deployment, spec: ListSpec) -> None:
    h.check_dirs(api, spec.resource, active, descending=True)


def test_an_unknown_sort_key_sorts_by_id(api: Client, active: Deployment, spec: ListSpec) -> None:
    """Besides keys no list has, the other lists' keys are unknown here."""
    others = sorted({key for other in SPECS for key in other.sort_keys} - set(spec.sort_keys))
    h.check_unknown_sorts(api, spec.resource, active, others)


def test_lenient_parameters_never_fail(api: Client, active: Deployment, spec: ListSpec) -> None:
    h.check_lenient_noise(api, spec.resource, active)


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
    h.check_sort_keys(api, spec.resource, sortable, keys, spec.sort_value(keys[0]))


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
    h.assert_q(api, spec.resource, q, [h.record_id(target)])


@pytest.mark.parametrize(("spec", "q"), per_list(attrgetter("q_misses")))
def test_q_does_not_match_other_fields(api: Client, spec: ListSpec, searchable: tuple[Record, Record],
                                       q: str) -> None:
    h.assert_q(api, spec.resource, q, [])


def test_q_matching_several_records_keeps_the_sort(api: Client, spec: ListSpec,
                                                   searchable: tuple[Record, Record]) -> None:
    """Both records' metadata URIs are ipfs:// ones; the target's text sorts first."""
    both = h.record_ids(searchable)
    h.assert_q(api, spec.resource, "ipfs://", both)
    assert h.sorted_ids(api, spec.resource, spec.text_field, "asc", {"q": "ipfs"}) == both
    assert h.sorted_ids(api, spec.resource, spec.text_field, "desc", {"q": "ipfs"}) == both[::-1]


def test_an_empty_q_filters_nothing_but_answers_a_page(api: Client, spec: ListSpec,
                                                       searchable: tuple[Record, Record]) -> None:
    h.assert_q(api, spec.resource, "", h.record_ids(searchable))


@pytest.mark.parametrize("length", [999, 1_001, 5_000])
def test_a_long_q_still_matches_a_long_field(api: Client, active: Deployment, spec: ListSpec, length: int) -> None:
    """Inline metadata makes long URIs and texts; any substring of them is a q that finds them."""
    text = "".join(chr(0x61 + n % 26) for n in range(length + 10))
    long_one = h.make_record(spec.resource, active, **{spec.text_field: text})
    h.make_record(spec.resource, active, **{spec.text_field: text[:length - 1]})
    h.assert_q(api, spec.resource, text[5 : 5 + length], [h.record_id(long_one)])


def test_q_follows_a_status_change(api: Client, spec: ListSpec, searchable: tuple[Record, Record]) -> None:
    change = spec.status_change
    changed = searchable[change.record]
    set_status(changed, change.status)
    h.assert_q(api, spec.resource, change.status, [h.record_id(changed)])
    h.assert_q(api, spec.resource, change.gone, [])


# ------------------------------------------------------------------ deployment filters


def test_without_chain_id_the_list_spans_every_deployment(api: Client, active: Deployment,
                                                          other_chain: Deployment, other_contract: Deployment,
                                                          spec: ListSpec) -> None:
    h.check_spans_every_deployment(api, spec.resource, [active, other_chain, other_contract])


def test_chain_id_alone_filters_to_that_chain_and_with_contract_address_to_one_deployment(
        api: Client, active: Deployment, other_chain: Deployment, other_contract: Deployment,
        spec: ListSpec) -> None:
    h.check_chain_filter(api, spec.resource, [active, other_chain, other_contract])


def test_contract_address_without_chain_id_is_a_400(api: Client, active: Deployment, spec: ListSpec) -> None:
    h.check_contract_without_chain(api, spec.resource)


def test_a_malformed_filter_is_a_400_naming_it(api: Client, active: Deployment, spec: ListSpec) -> None:
    h.check_malformed_filters(api, spec.resource, spec.malformed_filters)


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
