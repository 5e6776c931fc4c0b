"""A Content-Security-Policy on every page, through a real daphne: the admin's pages, the
browsable API, the front page and the JSON answers carry the service's policy (scripts from this
service only, or with the request's nonce), the API docs pages keep their own."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import Browser

from records.api.docs import ONLY_THIS_SERVICE
from records.models import Dispute
from tests.admin.conftest import PASSWORD
from tests.admin.visitor import INDEX, Visitor
from tests.browser_wallet import record_policy_violations
from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server() -> Iterator[Server]:
    env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_TRUSTED_PROXIES": "127.0.0.1"}
    for name in ("BOUNTY_RPC_URL", "DJANGO_DEBUG", "REDIS_URL"):
        env.pop(name, None)
    server = start_daphne(env)
    yield server
    stop(server.process)


def directives(policy: str) -> dict[str, list[str]]:
    parts = (part.split() for part in policy.split(";") if part.strip())
    return {name: values for name, *values in parts}


def assert_the_services_policy(policy: str | None) -> dict[str, list[str]]:
    assert policy is not None
    found = directives(policy)
    assert found["default-src"] == ["'self'"]
    assert found["script-src"][0] == "'self'" and all(
        value == "'self'" or value.startswith("'nonce-") for value in found["script-src"]), found
    assert found["object-src"] == ["'none'"] and found["frame-ancestors"] == ["'none'"]
    assert found["base-uri"] == ["'self'"] and found["form-action"] == ["'self'"]
    return found


@pytest.mark.parametrize(("path", "accept"), [
    ("/", "text/html"), ("/", "application/json"), ("/bounties", "text/html"), ("/bounties", "application/json"),
    ("/health", "application/json"), ("/no/such/route", "application/json"), ("/admin/login/", "text/html"),
])
def test_every_public_page_and_answer_carries_the_policy(server: Server, path: str, accept: str) -> None:
    visitor = Visitor(server, "198.51.100.40")
    reply = visitor.send("GET", path, accept=accept)
    assert reply.status in (200, 404), reply.body[:300]
    assert_the_services_policy(reply.headers.get("content-security-policy"))



def test_the_admins_pages_carry_the_policy_and_the_review_pages_script_its_nonce(
        server: Server, dispute: Dispute, moderator: User) -> None:
    hasher = PBKDF2PasswordHasher()  # the server's hasher, not the tests' fast one
    User.objects.filter(pk=moderator.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
    visitor = Visitor(server, "198.51.100.41")
    assert visitor.log_in(PASSWORD).status == 302
    for path in (INDEX, reverse("admin:records_dispute_changelist"), reverse("admin:records_dispute_change",
                                                                             args=[dispute.pk])):
        reply = visitor.get(path)
        assert reply.status == 200, (path, reply.body[:300])
        assert_the_services_policy(reply.headers.get("content-security-policy"))
    review = visitor.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    policy = assert_the_services_policy(review.headers.get("content-security-policy"))
    nonces = [value.removeprefix("'nonce-").removesuffix("'") for value in policy["script-src"][1:]]
    assert len(nonces) == 1
    scripts = re.findall(r"<script\b[^>]*>", review.body)
    assert [tag for tag in scripts if " src=" not in tag] == [f'<script nonce="{nonces[0]}">']
    assert all(re.search(r' src="/static/', tag) for tag in scripts if " src=" in tag)
    again = visitor.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    assert nonces[0] not in again.headers["content-security-policy"]  # a new one each time


def test_the_api_docs_pages_keep_their_own_policy(server: Server) -> None:
    for path in ("/api/docs/", "/api/redoc/"):
        reply = Visitor(server, "198.51.100.42").get(path)
        assert reply.status == 200
        assert reply.headers["content-security-policy"] == ONLY_THIS_SERVICE


def test_the_pages_break_no_rule_of_their_policy_in_a_browser(browser: Browser, live_server: object,
                                                               dispute: Dispute, moderator: User) -> None:
    page = browser.new_page()
    violations = record_policy_violations(page)
    base = str(live_server)
    for path in ("/", "/bounties", "/bounties?limit=2", "/admin/login/"):
        response = page.goto(base + path)
        assert response is not None and response.ok, path
        assert_the_services_policy(response.headers["content-security-policy"])
    page.fill("#id_username", "mod")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.goto(base + reverse("admin:records_dispute_review", args=[dispute.pk]))
    page.wait_for_selector("#wallet-hint", state="visible")  # the page's own script ran (no wallet here)
    page.goto(base + reverse("admin:records_dispute_changelist"))
    page.close()
    assert violations == []
