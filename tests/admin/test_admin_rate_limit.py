"""The admin and the rate limits, through real daphne processes: a moderator behind the same proxy
or NAT as busy API clients still logs in and reviews disputes, the admin spends nothing of the
public budget, and the login form has a budget of its own against password guessing (shared by
every process through Redis)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.urls import reverse

from records.models import Dispute
from tests.admin.conftest import PASSWORD
from tests.admin.visitor import INDEX, LOGIN, Reply, Visitor
from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3  # the public budget
LOGIN_LIMIT = 2
# Far longer than a test run: windows start at multiples of their length in Unix time, so every
# request of a run falls in the same one (the first) and no run crosses a window's end.
WINDOW = 2**40


def server_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_TRUSTED_PROXIES": "127.0.0.1",
           "BOUNTY_RATE_LIMIT": str(LIMIT), "BOUNTY_RATE_WINDOW_SECONDS": str(WINDOW),
           "BOUNTY_ADMIN_LOGIN_RATE_LIMIT": str(LOGIN_LIMIT),
           "BOUNTY_ADMIN_LOGIN_RATE_WINDOW_SECONDS": str(WINDOW), **extra}
    for name in ("BOUNTY_RPC_URL", "DJANGO_DEBUG", *(() if "REDIS_URL" in extra else ("REDIS_URL",))):
        env.pop(name, None)
    return env


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(**extra: str) -> Server:
        server = start_daphne(server_env(**extra))
        started.append(server)
        return server

    yield start
    for server in started:
        stop(server.process)


@pytest.fixture
def server(serve: Callable[..., Server]) -> Server:
    """One daphne with a process-local cache: budgets of its own."""
    return serve()


@pytest.fixture
def moderator_password(moderator: User) -> str:
    """The moderator's password, hashed as the servers' hashers read it (the tests' own are faster)."""
    hasher = PBKDF2PasswordHasher()
    User.objects.filter(pk=moderator.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
    return PASSWORD


def review_page(dispute: Dispute) -> str:
    return reverse("admin:records_dispute_review", args=[dispute.pk])


def assert_refused(reply: Reply, window: int = WINDOW) -> None:
    assert reply.status == 429, reply.body[:300]
    assert reply.headers["content-type"] == "application/json"
    assert 1 <= int(reply.headers["retry-after"]) <= window


def test_a_moderator_behind_an_address_that_spent_the_public_budget_still_reviews_disputes(
        server: Server, dispute: Dispute, moderator_password: str) -> None:
    nat = Visitor(server, "198.51.100.7")
    assert [nat.get("/bounties").status for _ in range(LIMIT + 1)] == [200] * LIMIT + [429]

    redirected = nat.get(INDEX)
    assert (redirected.status, redirected.headers["location"]) == (302, f"{LOGIN}?next={INDEX}")
    logged_in = nat.log_in(moderator_password)
    assert (logged_in.status, logged_in.headers["location"]) == (302, INDEX), logged_in.body[:300]
    for _ in range(LIMIT + 1):
        index = nat.get(INDEX)
        assert index.status == 200 and 'id="review-waiting"' in index.body
        review = nat.get(review_page(dispute))
        assert review.status == 200 and 'id="dispute-panel"' in review.body
        assert not any(name.startswith("x-ratelimit") for name in index.headers | review.headers)
    assert_refused(nat.get("/bounties"))


def test_admin_requests_spend_nothing_of_the_public_budget(server: Server, dispute: Dispute,
                                                           moderator_password: str) -> None:
    visitor = Visitor(server, "198.51.100.8")
    for _ in range(LIMIT + 1):  # anonymous: redirects to the login form, and the form
        assert visitor.get(INDEX).status == 302
        assert visitor.get(review_page(dispute)).status == 302
        assert visitor.get(LOGIN).status == 200
    assert visitor.log_in(moderator_password).status == 302
    for _ in range(LIMIT + 1):
        assert visitor.get(INDEX).status == visitor.get(review_page(dispute)).status == 200
    api = visitor.get("/bounties")
    assert (api.status, api.headers["x-ratelimit-remaining"]) == (200, str(LIMIT - 1))


def test_login_attempts_beyond_the_login_limit_are_refused_though_the_public_budget_is_untouched(
        server: Server, moderator_password: str) -> None:
    guesser = Visitor(server, "198.51.100.9")
    for _ in range(LOGIN_LIMIT):
        wrong = guesser.log_in("not the password")
        assert wrong.status == 200 and "Please enter the correct username and password" in wrong.body
    refused = guesser.log_in(moderator_password)  # even the right password, until the window ends
    assert_refused(refused)
    assert refused.body == f'{{"detail":"login rate limit of {LOGIN_LIMIT} attempts per {WINDOW} s exceeded"}}'
    assert "sessionid" not in guesser.cookies
    assert guesser.get(LOGIN).status == 200  # the form itself is no attempt

    api = guesser.get("/bounties")
    assert (api.status, api.headers["x-ratelimit-remaining"]) == (200, str(LIMIT - 1))
    assert Visitor(server, "198.51.100.10").log_in(moderator_password).status == 302  # each address its own


def test_every_process_shares_the_budgets_through_redis(serve: Callable[..., Server], shared_redis: str,
                                                        dispute: Dispute, moderator_password: str) -> None:
    a, b = serve(REDIS_URL=shared_redis), serve(REDIS_URL=shared_redis)
    on_a, on_b = Visitor(a, "198.51.100.11"), Visitor(b, "198.51.100.11")
    assert [(on_a, on_b)[n % 2].get("/bounties").status for n in range(LIMIT + 1)] == [200] * LIMIT + [429]

    assert on_a.log_in("not the password").status == on_b.log_in("not the password").status == 200
    assert_refused(on_a.log_in(moderator_password))
    assert_refused(on_b.log_in(moderator_password))

    moderator = Visitor(a, "198.51.100.12")
    moderator.get("/bounties")
    assert moderator.log_in(moderator_password).status == 302
    on_b.cookies["sessionid"] = moderator.cookies["sessionid"]  # the moderator's session, from the spent address
    assert on_b.get(INDEX).status == on_b.get(review_page(dispute)).status == 200
    assert Visitor(b, "198.51.100.12").get("/bounties").headers["x-ratelimit-remaining"] == str(LIMIT - 2)
