"""The HTTP rate limits: the public budget, a fixed window per client on every route but /health
and the admin, and the admin's password forms' budget of their own.

Time is travelled by replacing the `time` module seen by records.limits with a clock
that the test sets; nothing else in the process sees it.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from django.http import HttpResponseBase
from django.test import Client
from django.urls import reverse

from bountysite import ratelimit
from records import limits
from records.models import Deployment
from tests.api import helpers as h

LIMIT = 3
WINDOW = 10
START = 1_800_000_000.25  # inside the window [1_800_000_000, 1_800_000_010)
WINDOW_END = 1_800_000_010
LOGIN_LIMIT = 2
LOGIN_WINDOW = 30  # the window [1_800_000_000, 1_800_000_030)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def limited(api_settings: Any) -> None:
    api_settings.BOUNTY_RATE_LIMIT = LIMIT
    api_settings.BOUNTY_RATE_WINDOW_SECONDS = WINDOW
    api_settings.BOUNTY_ADMIN_LOGIN_RATE_LIMIT = LOGIN_LIMIT
    api_settings.BOUNTY_ADMIN_LOGIN_RATE_WINDOW_SECONDS = LOGIN_WINDOW


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock(START)
    monkeypatch.setattr(limits, "time", clock)
    return clock


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    return h.make_tree(active, disputes_per_submission=(1,))


def call(api: Client, path: str, *, peer: str = "127.0.0.1", forwarded: str | None = None,
         method: str = "get", **headers: str) -> HttpResponseBase:
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    response: HttpResponseBase = getattr(api, method)(path, headers=headers, REMOTE_ADDR=peer)
    return response


def rate_headers(response: HttpResponseBase) -> tuple[str, str, str]:
    return response["X-RateLimit-Limit"], response["X-RateLimit-Remaining"], response["X-RateLimit-Reset"]


def assert_limited(response: HttpResponseBase, retry_after: int) -> None:
    assert response.status_code == 429
    assert response["Content-Type"].startswith("application/json")
    if response.request["REQUEST_METHOD"] != "HEAD":  # type: ignore[attr-defined]
        body = json.loads(response.content)  # type: ignore[attr-defined]
        assert list(body) == ["detail"] and isinstance(body["detail"], str) and body["detail"]
    assert response["Retry-After"] == str(retry_after)
    assert rate_headers(response) == (str(LIMIT), "0", str(WINDOW_END))


@pytest.mark.parametrize("template", ["/bounties", "/bounties?limit=1", "/bounties/{b}", "/bounties/0",
                                      "/bounties?chain_id=x", "/nope", "/health/"])
def test_counted_responses_carry_limit_remaining_and_the_window_end(api: Client, clock: Clock, tree: h.Tree,
                                                                    template: str) -> None:
    for remaining in (2, 1, 0):
        response = call(api, template.format(**tree.ids))
        assert rate_headers(response) == (str(LIMIT), str(remaining), str(WINDOW_END))
        assert "Retry-After" not in response


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_every_read_route_is_limited(api: Client, clock: Clock, tree: h.Tree, template: str) -> None:
    path = template.format(**tree.ids)
    for _ in range(LIMIT):
        assert call(api, path).status_code == 200
    assert_limited(call(api, path), retry_after=10)
    assert_limited(call(api, path, method="head"), retry_after=10)


def test_retry_after_is_whole_seconds_and_at_least_one(api: Client, clock: Clock, active: Deployment) -> None:
    clock.now = WINDOW_END - 0.01
    for _ in range(LIMIT):
        call(api, "/bounties")
    assert_limited(call(api, "/bounties"), retry_after=1)
    clock.now = WINDOW_END - 5.5
    assert_limited(call(api, "/bounties"), retry_after=6)


def test_the_counter_starts_again_in_the_next_window(api: Client, clock: Clock, active: Deployment) -> None:
    for _ in range(LIMIT + 2):
        call(api, "/bounties")
    clock.now = WINDOW_END
    response = call(api, "/bounties")
    assert response.status_code == 200
    assert rate_headers(response) == (str(LIMIT), str(LIMIT - 1), str(WINDOW_END + WINDOW))


def test_health_is_neither_counted_nor_limited(api: Client, clock: Clock, active: Deployment) -> None:
    for _ in range(LIMIT + 2):
        response = call(api, "/health")
        assert response.status_code == 200
        assert "X-RateLimit-Remaining" not in response and "Retry-After" not in response
    assert rate_headers(call(api, "/bounties"))[1] == str(LIMIT - 1)
    for _ in range(LIMIT):
        call(api, "/bounties")
    assert call(api, "/health").status_code == 200


@pytest.mark.parametrize(("path", "method"), [("/no/such/route", "get"), ("/bounties", "post"),
                                              ("/bounties/1", "delete"), ("/disputes?bounty_id=x", "get")])
def test_unknown_routes_errors_and_refused_methods_count(api: Client, clock: Clock, active: Deployment, path: str,
                                                        method: str) -> None:
    for _ in range(LIMIT):
        assert call(api, path, method=method).status_code in (400, 404, 405)
    assert_limited(call(api, "/bounties"), retry_after=10)


def test_not_modified_answers_count(api: Client, clock: Clock, active: Deployment) -> None:
    etag = call(api, "/bounties")["ETag"]
    for remaining in (1, 0):
        response = call(api, "/bounties", **{"If-None-Match": etag})
        assert (response.status_code, response["X-RateLimit-Remaining"]) == (304, str(remaining))
    assert_limited(call(api, "/bounties", **{"If-None-Match": etag}), retry_after=10)


def test_each_peer_has_its_own_budget(api: Client, clock: Clock, active: Deployment) -> None:
    for _ in range(LIMIT):
        call(api, "/bounties", peer="10.0.0.1")
    assert_limited(call(api, "/bounties", peer="10.0.0.1"), retry_after=10)
    assert call(api, "/bounties", peer="10.0.0.2").status_code == 200
    assert call(api, "/bounties", peer="2001:db8::1").status_code == 200


def test_x_forwarded_for_from_an_untrusted_peer_is_ignored(api: Client, clock: Clock, active: Deployment) -> None:
    for n in range(LIMIT):
        call(api, "/bounties", forwarded=f"198.51.100.{n}")
    assert_limited(call(api, "/bounties", forwarded="198.51.100.99"), retry_after=10)


@pytest.fixture
def trusted_proxy(api_settings: Any) -> None:
    api_settings.BOUNTY_TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]


def test_x_forwarded_for_from_a_trusted_proxy_names_the_client(api: Client, clock: Clock, active: Deployment,
                                                               trusted_proxy: None) -> None:
    for _ in range(LIMIT):
        call(api, "/bounties", forwarded="198.51.100.1")
    assert_limited(call(api, "/bounties", forwarded="198.51.100.1"), retry_after=10)
    assert call(api, "/bounties", forwarded="198.51.100.2").status_code == 200
    assert call(api, "/bounties", peer="10.9.9.9", forwarded="198.51.100.2").status_code == 200


def test_an_ipv6_client_is_its_64_and_an_ipv4_client_its_address(api: Client, clock: Clock, active: Deployment,
                                                                   trusted_proxy: None) -> None:
    """A host given a /64 may take a new address for every request: they all spend one budget."""
    for n in range(LIMIT):
        call(api, "/bounties", forwarded=f"2001:db8:1:2::{n + 1:x}")
    assert_limited(call(api, "/bounties", forwarded="2001:db8:1:2:ffff::1"), retry_after=10)
    assert call(api, "/bounties", forwarded="2001:db8:1:3::1").status_code == 200
    for _ in range(LIMIT):
        call(api, "/bounties", forwarded="198.51.100.1")
    assert call(api, "/bounties", forwarded="198.51.100.2").status_code == 200


def test_a_client_cannot_dodge_the_limit_by_prepending_forwarded_hops(api: Client, clock: Clock,
                                                                      active: Deployment,
                                                                      trusted_proxy: None) -> None:
    """The trusted proxy appends the address it saw; what the client wrote before that is not believed."""
    for n in range(LIMIT):
        call(api, "/bounties", forwarded=f"203.0.113.{n}, 198.51.100.1")
    assert_limited(call(api, "/bounties", forwarded="203.0.113.99, 198.51.100.1"), retry_after=10)
    assert_limited(call(api, "/bounties", forwarded="198.51.100.1"), retry_after=10)


def test_without_x_forwarded_for_a_trusted_proxy_is_the_client(api: Client, clock: Clock, active: Deployment,
                                                               trusted_proxy: None) -> None:
    for _ in range(LIMIT):
        call(api, "/bounties")
    assert_limited(call(api, "/bounties"), retry_after=10)
    assert call(api, "/bounties", forwarded="198.51.100.7").status_code == 200


def test_the_admins_paths_are_where_the_admin_is_mounted() -> None:
    assert reverse("admin:index") == ratelimit.ADMIN + "/"
    assert {reverse("admin:login"), reverse("admin:password_change")} == ratelimit.PASSWORD_FORMS


@pytest.mark.parametrize(("path", "method"), [
    ("/admin", "get"), ("/admin/", "get"), ("/admin/login/", "get"), ("/admin/records/dispute/", "get"),
    ("/admin/no/such/page/", "get"), ("/admin/logout/", "post"), ("/admin/records/moderatornote/add/", "post"),
])
def test_the_admin_spends_nothing_of_the_public_budget(api: Client, clock: Clock, active: Deployment, path: str,
                                                       method: str) -> None:
    for _ in range(LIMIT + 2):
        response = call(api, path, method=method)
        assert response.status_code in (200, 301, 302)
        assert "X-RateLimit-Limit" not in response and "Retry-After" not in response
    assert rate_headers(call(api, "/bounties")) == (str(LIMIT), str(LIMIT - 1), str(WINDOW_END))


def assert_login_limited(response: HttpResponseBase, retry_after: int) -> None:
    assert response.status_code == 429
    assert json.loads(response.content) == {  # type: ignore[attr-defined]
        "detail": f"login rate limit of {LOGIN_LIMIT} attempts per {LOGIN_WINDOW} s exceeded"}
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == str(retry_after)
    assert "X-RateLimit-Limit" not in response  # those describe the public budget


@pytest.mark.parametrize("form", ["/admin/login/", "/admin/password_change/"])
def test_the_admins_password_forms_have_a_budget_of_their_own(api: Client, clock: Clock, active: Deployment,
                                                              form: str) -> None:
    for _ in range(LOGIN_LIMIT):
        assert call(api, form, method="post").status_code in (200, 302)
    assert_login_limited(call(api, form, method="post"), retry_after=LOGIN_WINDOW)
    assert call(api, form).status_code in (200, 302)  # showing the form is no attempt
    assert rate_headers(call(api, "/bounties"))[1] == str(LIMIT - 1)
    assert call(api, form, method="post", peer="10.0.0.2").status_code in (200, 302)


def test_both_password_forms_spend_one_budget_until_its_window_ends(api: Client, clock: Clock,
                                                                    active: Deployment) -> None:
    call(api, "/admin/login/", method="post")
    call(api, "/admin/password_change/", method="post")
    clock.now = START + LOGIN_WINDOW - 1
    assert_login_limited(call(api, "/admin/login/", method="post"), retry_after=1)
    clock.now = START + LOGIN_WINDOW
    assert call(api, "/admin/login/", method="post").status_code == 200


def test_a_login_limit_of_zero_turns_it_off(api: Client, clock: Clock, active: Deployment,
                                            api_settings: Any) -> None:
    api_settings.BOUNTY_ADMIN_LOGIN_RATE_LIMIT = 0
    for _ in range(LOGIN_LIMIT + 2):
        assert call(api, "/admin/login/", method="post").status_code == 200
