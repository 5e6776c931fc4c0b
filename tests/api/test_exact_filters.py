"""The lists' exact filters: `status` (one or several) and the actor (`poster`, `claimant`,
`challenger`), combined with the other filters, `q`, sort and paging, and strict on bad values."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from records.models import Bounty, BountyStatus, Deployment, Dispute, DisputeStatus, Submission, SubmissionStatus
from tests.api import helpers as h

# resource -> (the statuses, the actor's parameter, its model field)
RESOURCES: dict[str, tuple[list[str], str, str]] = {
    "bounties": (list(BountyStatus.values), "poster", "poster"),
    "submissions": (list(SubmissionStatus.values), "claimant", "claimant"),
    "disputes": (list(DisputeStatus.values), "challenger", "challenger_id"),
}
ALICE = "0x" + "a1" * 20
BOB = "0x" + "b0" * 20


def seeded(resource: str, deployment: Deployment) -> list[Bounty | Submission | Dispute]:
    """Two records in each status, the first of each pair by ALICE, the second by BOB."""
    statuses, _, field = RESOURCES[resource]
    return [h.make_record(resource, deployment, status=status, **{field: actor})
            for status in statuses for actor in (ALICE, BOB)]


def ids_where(records: list[Any], **wanted: Any) -> list[int]:
    """The records' IDs with the given field values (a list: any of them), newest first."""
    def matches(record: Any) -> bool:
        return all(getattr(record, name) in (value if isinstance(value, list) else [value])
                   for name, value in wanted.items())
    return sorted((h.record_id(record) for record in records if matches(record)), reverse=True)


@pytest.mark.parametrize("resource", RESOURCES)
def test_status_filters_one_or_several_comma_separated_or_repeated(api: Client, active: Deployment,
                                                                   resource: str) -> None:
    records = seeded(resource, active)
    statuses = RESOURCES[resource][0]
    path = h.LIST_PATHS[resource]
    for status in statuses:
        assert h.ids(h.array(api, path, {"status": status.upper()})) == ids_where(records, status=status)
    two = statuses[:2]
    expected = ids_where(records, status=two)
    assert h.ids(h.array(api, path, {"status": ",".join(two)})) == expected
    assert h.ids(h.array(api, path, {"status": two})) == expected  # ?status=a&status=b
    page = h.page(api, path, {"status": ",".join(two), "limit": 1})
    assert page["total"] == len(expected) and h.ids(page["items"]) == expected[:1]


@pytest.mark.parametrize("resource", RESOURCES)
def test_the_actor_filter_matches_the_address_in_any_letter_case(api: Client, active: Deployment,
                                                                 resource: str) -> None:
    records = seeded(resource, active)
    _, parameter, field = RESOURCES[resource]
    path = h.LIST_PATHS[resource]
    for address in (ALICE, ALICE.upper().replace("0X", "0x"), h.checksummed(ALICE)):
        assert h.ids(h.array(api, path, {parameter: address})) == ids_where(records, **{field: ALICE})
    assert h.array(api, path, {parameter: "0x" + "cc" * 20}) == []
    status = RESOURCES[resource][0][-1]
    both = h.page(api, path, {parameter: BOB, "status": status, "sort": "id", "dir": "asc", "limit": 10})
    assert h.ids(both["items"]) == sorted(ids_where(records, **{field: BOB, "status": status}))


@pytest.mark.parametrize("resource", RESOURCES)
def test_each_filter_value_has_its_own_cached_answer(api: Client, active: Deployment, resource: str) -> None:
    records = seeded(resource, active)
    statuses = RESOURCES[resource][0]
    path = h.LIST_PATHS[resource]
    for status in statuses * 2:  # the second round comes from the cache
        assert h.ids(h.page(api, path, {"status": status, "limit": 50})["items"]) == ids_where(records, status=status)
        assert h.ids(h.array(api, path, {"status": status})) == ids_where(records, status=status)


@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize("value", ["", "nope", "open,nope", "0"])
def test_an_unknown_status_is_a_400_naming_the_parameter_and_the_choices(api: Client, active: Deployment,
                                                                         resource: str, value: str) -> None:
    if value == "open,nope" and resource != "bounties":
        value = f"{RESOURCES[resource][0][0]},nope"
    detail = h.error_detail(api, h.LIST_PATHS[resource], {"status": value}, status=400)
    assert detail.startswith("status must be one or several of ")
    assert all(status in detail for status in RESOURCES[resource][0])


@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize("value", ["", "0x12", "0x" + "zz" * 20, ALICE + "00"])
def test_a_malformed_actor_is_a_400_naming_it(api: Client, active: Deployment, resource: str, value: str) -> None:
    parameter = RESOURCES[resource][1]
    detail = h.error_detail(api, h.LIST_PATHS[resource], {parameter: value}, status=400)
    assert detail == f"{parameter} must be 0x followed by 40 hex digits, got {value!r}"
