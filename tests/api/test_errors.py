"""One error shape, `{"detail": "<message>"}`: unknown routes, refused methods, bad parameters;
and no server error for any input."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from django.http import HttpResponseBase
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT

HUGE_DIGITS = "9" * 5_000  # more digits than Python converts to an int by default


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    return h.make_tree(active, disputes_per_submission=(1,))


def detail_of(response: HttpResponseBase, status: int) -> str:
    """The detail of the one error shape: compact JSON `{"detail": "<message>"}`, as application/json."""
    assert response.status_code == status, h.content(response)[:300]
    assert response["Content-Type"] == "application/json"
    body = json.loads(h.content(response))
    assert list(body) == ["detail"] and isinstance(body["detail"], str) and body["detail"]
    assert h.content(response) == orjson.dumps(body)
    return str(body["detail"])


UNKNOWN_ROUTES = [
    "/nope", "/bounties/", "/bounties/abc", "/bounties/-1", "/bounties/1.5", "/bounties/0x1",
    "/bounties/1/overview/", "/bounties/1/extra", "/BOUNTIES", "/Bounties/1", "/submissions/1/disputes",
    "/health/", "/api/", "/bounties/%F0%9F%98%80", "/bounties/%D9%A3", "/bounties/%00", "/%00",
    f"/bounties/{HUGE_DIGITS}", f"/disputes/{HUGE_DIGITS}/overview", "/static/nothing.css",
]


@pytest.mark.parametrize("path", UNKNOWN_ROUTES)
def test_an_unknown_route_is_a_json_404_for_every_method(active: Deployment, path: str) -> None:
    """A POST without a CSRF token too, as programs send it (not CSRF's HTML 403)."""
    client = Client(HTTP_ACCEPT="application/json", enforce_csrf_checks=True)
    for method in ("get", "post", "put", "patch", "delete", "options"):
        detail_of(getattr(client, method)(path), 404)
    head = client.head(path)
    assert (head.status_code, head["Content-Type"]) == (404, "application/json")


@pytest.mark.parametrize("path", ["/nope", "/bounties/abc", "/bounties/1/overview/"])
def test_an_unknown_route_is_a_json_404_with_debug_on_too(api: Client, settings: Any, path: str) -> None:
    settings.DEBUG = True
    detail_of(api.get(path), 404)


@pytest.mark.parametrize("template", h.ROUTE_PATHS)
def test_any_method_but_get_head_and_options_is_a_405(api: Client, tree: h.Tree, template: str) -> None:
    path = template.format(**tree.ids)
    for method in ("post", "put", "patch", "delete", "trace"):
        response = getattr(api, method)(path, data=b'{"id": 1}', content_type="application/json")
        detail_of(response, 405)
        assert "GET" in response["Allow"] and "POST" not in response["Allow"], method


@pytest.mark.parametrize("template", h.ROUTE_PATHS)
def test_options_is_not_refused(api: Client, tree: h.Tree, template: str) -> None:
    assert api.options(template.format(**tree.ids)).status_code == 200


BAD_REQUESTS: list[tuple[str, dict[str, str], str]] = [
    ("/bounties", {"contract_address": ACTIVE_CONTRACT}, "contract_address"),
    ("/bounties", {"chain_id": "ninety"}, "chain_id"),
    ("/bounties", {"q": "a" * 10_000}, "q"),
    ("/submissions", {"q": "a" * 60_000}, "q"),
    ("/bounties", {"chain_id": "1", "contract_address": "0xZZ"}, "contract_address"),
    ("/submissions", {"bounty_id": "seven"}, "bounty_id"),
    ("/submissions", {"bounty_id": "7", "chain_id": "91342"}, "contract_address"),
    ("/disputes", {"submission_id": "-70"}, "submission_id"),
    ("/disputes", {"bounty_id": "7", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ("/bounties/{b}", {"chain_id": "91342"}, "contract_address"),
    ("/bounties/{b}/overview", {"contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ("/submissions/{s}", {"chain_id": "91342", "contract_address": "nope"}, "contract_address"),
    ("/submissions/{s}/overview", {"chain_id": "x", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ("/disputes/{d}", {"chain_id": "\u0663", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ("/disputes/{d}/overview", {"chain_id": "1", "contract_address": "0x" + "\u00e9" * 40}, "contract_address"),
]


@pytest.mark.parametrize(("template", "params", "name"), BAD_REQUESTS)
def test_a_bad_parameter_is_a_json_400_naming_it(api: Client, tree: h.Tree, template: str, params: dict[str, str],
                                                 name: str) -> None:
    response = h.get(api, template.format(**tree.ids), params)
    assert name in detail_of(response, 400)


# Odd input that can match nothing: an empty answer, never a server error.
MATCHING_NOTHING: list[tuple[str, dict[str, str]]] = [
    ("/bounties", {"chain_id": str(h.HUGE)}),
    ("/bounties", {"chain_id": str(2**64), "contract_address": ACTIVE_CONTRACT}),
    ("/submissions", {"bounty_id": str(h.HUGE)}),
    ("/submissions", {"bounty_id": str(h.UINT256_MAX), "chain_id": str(h.HUGE), "contract_address": ACTIVE_CONTRACT}),
    ("/disputes", {"submission_id": str(h.HUGE)}),
    ("/disputes", {"bounty_id": str(2**63)}),
    ("/bounties", {"q": "\u00e9\U0001f600\u4e2d"}),
    ("/bounties", {"q": "a" * 256}),
    ("/submissions", {"q": "_" * 256}),
    ("/disputes", {"q": "%" * 256}),
    ("/bounties", {"q": "\\"}),
    ("/bounties", {"q": "'; DROP TABLE records_bounty; --"}),
]


@pytest.mark.parametrize(("path", "params"), MATCHING_NOTHING)
def test_odd_input_matches_nothing_without_a_server_error(api: Client, tree: h.Tree, path: str,
                                                          params: dict[str, str]) -> None:
    body = h.get_json(api, path, params)
    assert (body if isinstance(body, list) else body["items"]) == []


@pytest.mark.parametrize("query", [
    "q=%ED%A0%80", "q=%FF%FE", "sort=%F0%9F%98%80&dir=%00&limit=%D9%A3&cursor=%C2%BD", "chain_id=%FF",
    "limit=1&limit=2&cursor=1&cursor=x", "x=" + "y" * 10_000, "%FF=1", "q",
])
def test_odd_query_strings_are_not_server_errors(api: Client, tree: h.Tree, query: str) -> None:
    for path in h.LIST_PATHS.values():
        response = api.get(f"{path}?{query}")
        assert response.status_code in (200, 400), h.content(response)[:300]
        json.loads(h.content(response))


@pytest.mark.parametrize("template", ["/bounties/{b}", "/bounties/{b}/overview", "/submissions/{s}",
                                      "/submissions/{s}/overview", "/disputes/{d}", "/disputes/{d}/overview"])
def test_a_huge_chain_id_on_a_single_route_is_a_404(api: Client, tree: h.Tree, template: str) -> None:
    for chain_id in (str(h.HUGE), str(2**64), str(2**63)):
        params = {"chain_id": chain_id, "contract_address": ACTIVE_CONTRACT}
        detail_of(h.get(api, template.format(**tree.ids), params), 404)


def test_a_null_character_in_q_matches_nothing(api: Client, tree: h.Tree) -> None:
    """No record holds a NUL; "0x" (which every record holds) before it must not match."""
    for path in h.LIST_PATHS.values():
        for q in ("0x\u0000zzz", "\u0000"):
            body = h.page(api, path, {"q": q})
            assert (body["items"], body["total"]) == ([], 0), (path, q)


@pytest.mark.parametrize("path", list(h.LIST_PATHS.values()))
def test_a_limit_of_more_digits_than_python_parses_means_100(api: Client, tree: h.Tree, path: str) -> None:
    assert h.page(api, path, {"limit": HUGE_DIGITS})["limit"] == 100


@pytest.mark.parametrize(("path", "params"), [
    ("/bounties", {"chain_id": HUGE_DIGITS}),
    ("/submissions", {"bounty_id": HUGE_DIGITS}),
    ("/disputes", {"submission_id": HUGE_DIGITS, "limit": "5"}),
    ("/bounties/1", {"chain_id": HUGE_DIGITS, "contract_address": ACTIVE_CONTRACT}),
])
def test_an_id_of_more_digits_than_python_parses_is_not_a_server_error(api: Client, tree: h.Tree, path: str,
                                                                        params: dict[str, str]) -> None:
    response = h.get(api, path, params)
    assert response.status_code < 500, h.content(response)[:300]
    json.loads(h.content(response))


def test_a_client_without_an_accept_header_gets_json(tree: h.Tree) -> None:
    plain = Client()
    assert isinstance(json.loads(h.content(plain.get("/bounties"))), list)
    detail_of(plain.get("/bounties/0"), 404)
    detail_of(plain.get("/bounties?chain_id=x"), 400)
    detail_of(plain.post("/bounties"), 405)
