"""The read client against a real HTTP server on loopback, checking the requests it receives."""

from __future__ import annotations

import httpx
import pytest

from bounty_client import ConfigurationError, ReadClient, RequestFailedError, ResponseError, ValidationError
from tests.client.conftest import (
    CHAIN_ID,
    CONTRACT,
    DEPLOYMENT,
    ReceivedRequest,
    bounty_record,
    dispute_record,
    exactly,
    submission_record,
)

QUALIFIED = {"chain_id": str(CHAIN_ID), "contract_address": CONTRACT}


@pytest.fixture
def service(read_service):
    read_service.bounties = [bounty_record(i) for i in range(1, 8)]
    read_service.submissions = [submission_record(i, bounty_id=1 + i % 2) for i in range(1, 6)]
    read_service.disputes = [dispute_record(i, submission_id=1 + i % 2, bounty_id=2 - i % 2) for i in range(1, 6)]
    return read_service


@pytest.fixture
def client(service):
    with ReadClient(service.url + "/", timeout=5) as client:
        yield client


def test_it_learns_the_deployment_from_health_once_and_qualifies_every_request(client, service):
    client.get_bounty(1)
    client.get_submission(2)
    assert service.requests == [
        ReceivedRequest("/health", {}),
        ReceivedRequest("/bounties/1", QUALIFIED),
        ReceivedRequest("/submissions/2", QUALIFIED),
    ]
    assert client.deployment() == DEPLOYMENT


@pytest.mark.parametrize(
    ("call", "path", "filters"),
    [
        (lambda c: c.list_bounties(), "/bounties", {}),
        (lambda c: c.get_bounty(3), "/bounties/3", {}),
        (lambda c: c.bounty_overview(1), "/bounties/1/overview", {}),
        (lambda c: c.list_submissions(), "/submissions", {}),
        (lambda c: c.list_submissions(1), "/submissions", {"bounty_id": "1"}),
        (lambda c: c.get_submission("2"), "/submissions/2", {}),
        (lambda c: c.submission_overview(2), "/submissions/2/overview", {}),
        (lambda c: c.list_disputes(), "/disputes", {}),
        (lambda c: c.list_disputes(2), "/disputes", {"submission_id": "2"}),
        (lambda c: c.get_dispute(4), "/disputes/4", {}),
        (lambda c: c.dispute_overview(3), "/disputes/3/overview", {}),
        (lambda c: c.list_bounties(sort="reward", direction="asc"), "/bounties", {"sort": "reward", "dir": "asc"}),
    ],
)
def test_each_route_is_requested_with_the_deployment(client, service, call, path, filters):
    call(client)
    assert service.requests[1:] == [ReceivedRequest(path, {**QUALIFIED, **filters})]


def test_it_returns_the_spec_shaped_bodies(client, service):
    assert client.list_bounties() == service.bounties
    assert client.get_bounty(3) == service.bounties[2]
    assert [s["id"] for s in client.list_submissions(1)] == [2, 4]
    assert [d["id"] for d in client.list_disputes(2)] == [1, 3, 5]
    overview = client.dispute_overview(3)
    assert overview["dispute"]["id"] == 3
    assert overview["submission"]["id"] == 2
    assert [d["id"] for d in overview["sibling_disputes"]] == [1, 5]
    assert [s["id"] for s in client.bounty_overview(2)["submissions"]] == [1, 3, 5]
    assert client.submission_overview(1)["bounty"]["id"] == 2


def test_the_iterators_walk_every_page(client, service):
    assert [b["id"] for b in client.iter_bounties(page_size=3)] == [1, 2, 3, 4, 5, 6, 7]
    assert service.requests[1:] == [
        ReceivedRequest("/bounties", {**QUALIFIED, "limit": "3"}),
        ReceivedRequest("/bounties", {**QUALIFIED, "limit": "3", "cursor": "3"}),
        ReceivedRequest("/bounties", {**QUALIFIED, "limit": "3", "cursor": "6"}),
    ]


def test_submission_and_dispute_iterators_filter_and_walk(client, service):
    assert [s["id"] for s in client.iter_submissions(2, page_size=2)] == [1, 3, 5]
    assert [d["id"] for d in client.iter_disputes(bounty_id=1, q="pending", page_size=2)] == [1, 3, 5]
    assert service.requests[-1] == ReceivedRequest(
        "/disputes", {**QUALIFIED, "bounty_id": "1", "limit": "2", "q": "pending", "cursor": "2"}
    )


def test_listing_disputes_of_a_bounty_reads_every_page_of_the_always_paged_route(client, service):
    service.disputes = [dispute_record(i, submission_id=1, bounty_id=1) for i in range(1, 121)]
    assert [d["id"] for d in client.list_disputes(bounty_id=1)] == list(range(1, 121))
    assert service.requests[1:] == [
        ReceivedRequest("/disputes", {**QUALIFIED, "bounty_id": "1"}),
        ReceivedRequest("/disputes", {**QUALIFIED, "bounty_id": "1", "cursor": "50"}),
        ReceivedRequest("/disputes", {**QUALIFIED, "bounty_id": "1", "cursor": "100"}),
    ]


def test_a_page_method_returns_one_page_object(client, service):
    page = client.bounty_page(limit=2, cursor="4", direction="desc")
    assert page == {"items": service.bounties[4:6], "total": 7, "limit": 2, "cursor": "4", "next_cursor": "6"}
    assert service.requests[-1] == ReceivedRequest(
        "/bounties", {**QUALIFIED, "limit": "2", "cursor": "4", "dir": "desc"}
    )
    assert client.submission_page(1)["items"] == service.submissions[1::2]
    assert client.dispute_page(submission_id=1, limit=1)["next_cursor"] == "1"


def test_a_given_deployment_is_used_without_reading_health(service):
    with ReadClient(service.url, chain_id="31337", contract_address=CONTRACT.lower()) as client:
        client.get_dispute(1)
    assert service.requests == [ReceivedRequest("/disputes/1", {"chain_id": "31337", "contract_address": CONTRACT})]


def test_an_unqualified_client_sends_no_deployment(service):
    with ReadClient(service.url, qualify=False) as client:
        client.list_bounties()
        client.get_bounty(1)
    assert service.requests == [ReceivedRequest("/bounties", {}), ReceivedRequest("/bounties/1", {})]


@pytest.mark.parametrize("status", [400, 404, 429, 500, 503])
def test_a_non_ok_response_raises_request_failed_with_the_status_and_the_services_detail(client, service, status):
    service.responses["/bounties/1"] = (status, {"detail": "nope"})
    with pytest.raises(RequestFailedError, match=exactly(f"request failed: {status}")) as raised:
        client.get_bounty(1)
    assert (raised.value.status, raised.value.detail) == (status, "nope")
    assert raised.value.status_code == status
    assert raised.value.url == f"{service.url}/bounties/1?chain_id={CHAIN_ID}&contract_address={CONTRACT}"


def test_a_missing_record_is_request_failed_404(client):
    with pytest.raises(RequestFailedError, match=exactly("request failed: 404")) as raised:
        client.get_submission(999)
    assert (raised.value.status, raised.value.detail) == (404, "Not found.")


@pytest.mark.parametrize(
    "body", [b"<html>502 Bad Gateway</html>", {"detail": {"nested": "object"}}, ["detail"], "detail"],
    ids=["html", "detail-not-a-string", "array", "string"],
)
def test_an_error_body_not_of_the_error_shape_leaves_detail_none(client, service, body):
    service.responses["/bounties/1"] = (502, body)
    with pytest.raises(RequestFailedError, match=exactly("request failed: 502")) as raised:
        client.get_bounty(1)
    assert (raised.value.status, raised.value.detail) == (502, None)


def test_an_unhealthy_service_fails_the_first_qualified_request(client, service):
    service.responses["/health"] = (503, {"status": "error"})
    with pytest.raises(RequestFailedError, match=exactly("request failed: 503")):
        client.list_bounties()


def test_a_health_body_without_a_deployment_is_a_configuration_error(client, service):
    service.responses["/health"] = (200, {"status": "ok"})
    with pytest.raises(ConfigurationError, match="no deployment"):
        client.list_bounties()


def test_a_slow_service_times_out(service):
    service.delay = 1.0
    with ReadClient(service.url, timeout=0.2) as client, pytest.raises(httpx.TimeoutException):
        client.health()


def test_an_unexpected_body_is_a_response_error(client, service):
    service.responses["/bounties"] = (200, {"unexpected": True})
    with pytest.raises(ResponseError, match="expected an array or a page object"):
        client.list_bounties()


@pytest.mark.parametrize("bad_id", ["1/../2", -1, 1.5, "abc"])
def test_an_invalid_id_is_refused_before_any_request(client, service, bad_id):
    with pytest.raises(ValidationError, match=exactly("number must be a safe uint")):
        client.get_bounty(bad_id)
    assert service.requests == []


@pytest.mark.parametrize("limit", [0, 101, 2.5])
def test_a_page_size_outside_1_to_100_is_refused_before_any_request(client, service, limit):
    with pytest.raises(ValidationError, match=exactly("limit must be an int from 1 to 100")):
        client.bounty_page(limit=limit)
    assert service.requests == []


def test_half_a_deployment_is_refused():
    with pytest.raises(ValidationError, match="both chain_id and contract_address"):
        ReadClient("http://127.0.0.1:9", chain_id=CHAIN_ID)
