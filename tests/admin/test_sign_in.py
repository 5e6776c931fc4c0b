"""Moderators' sign-in through a real daphne: the admin's password forms refuse weak passwords,
and a staff session lasts a working day, not Django's default two weeks."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.utils import timezone

from tests.admin.conftest import PASSWORD
from tests.admin.visitor import INDEX, Visitor
from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD_CHANGE = "/admin/password_change/"
WORKING_DAY = 8 * 3600


@pytest.fixture
def server() -> Iterator[Server]:
    env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_TRUSTED_PROXIES": "127.0.0.1"}
    for name in ("BOUNTY_RPC_URL", "DJANGO_DEBUG", "REDIS_URL", "BOUNTY_ADMIN_SESSION_HOURS"):
        env.pop(name, None)
    server = start_daphne(env)
    yield server
    stop(server.process)


def is_password(password: str) -> bool:
    return PBKDF2PasswordHasher().verify(password, User.objects.get(username="mod").password)


@pytest.fixture
def server_hashed(moderator: User) -> User:
    """The moderator, its password hashed as the server's hashers read it (the tests' own are faster)."""
    hasher = PBKDF2PasswordHasher()
    User.objects.filter(pk=moderator.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
    return moderator


@pytest.fixture
def signed_in(server: Server, server_hashed: User) -> Visitor:
    visitor = Visitor(server, "198.51.100.20")
    reply = visitor.log_in(PASSWORD)
    assert (reply.status, reply.headers.get("location")) == (302, INDEX), reply.body[:300]
    return visitor


@pytest.mark.parametrize("weak", ["1", "password", "12345678", "mod12345678", "aaaaaaaaaaa"])
def test_the_password_change_form_refuses_a_weak_password(signed_in: Visitor, weak: str) -> None:
    reply = signed_in.form(PASSWORD_CHANGE, {"old_password": PASSWORD, "new_password1": weak, "new_password2": weak})
    assert reply.status == 200 and 'class="errorlist' in reply.body, reply.body[:300]
    assert is_password(PASSWORD)


def test_the_password_change_form_takes_a_strong_password(signed_in: Visitor) -> None:
    strong = "violet tractor minus seventeen"
    reply = signed_in.form(PASSWORD_CHANGE, {"old_password": PASSWORD, "new_password1": strong,
                                             "new_password2": strong})
    assert reply.status == 302, reply.body[:300]
    assert is_password(strong)


def test_a_staff_session_ends_within_a_working_day_of_signing_in(server: Server, server_hashed: User) -> None:
    reply = Visitor(server, "198.51.100.21").log_in(PASSWORD)
    assert reply.status == 302, reply.body[:300]
    session = reply.set_cookies["sessionid"]
    assert int(session["max-age"]) == WORKING_DAY
    expires = Session.objects.get(session_key=session.value).expire_date
    assert WORKING_DAY - 60 < (expires - timezone.now()).total_seconds() <= WORKING_DAY
