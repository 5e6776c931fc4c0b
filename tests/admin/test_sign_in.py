"""Moderators' sign-in through a real daphne: the admin's password forms refuse weak passwords, an
account locks after wrong passwords from any number of addresses, a staff session lasts a working
day, not Django's default two weeks, and with BOUNTY_ADMIN_TOTP the sign-in asks for an
authenticator's code too."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.utils import timezone
from django_otp.oath import totp

from tests.admin.conftest import PASSWORD
from tests.admin.visitor import INDEX, Visitor
from tests.servers import PROJECT_DIR, Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD_CHANGE = "/admin/password_change/"
WORKING_DAY = 8 * 3600


def server_env() -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_TRUSTED_PROXIES": "127.0.0.1"}
    for name in ("BOUNTY_RPC_URL", "DJANGO_DEBUG", "REDIS_URL", "BOUNTY_ADMIN_SESSION_HOURS",
                 "BOUNTY_ADMIN_LOCKOUT_FAILURES", "BOUNTY_ADMIN_LOCKOUT_MINUTES"):
        env.pop(name, None)
    return env


@pytest.fixture
def server() -> Iterator[Server]:
    server = start_daphne(server_env())
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


def test_wrong_passwords_from_many_addresses_lock_the_account_until_an_operator_unlocks_it(
        server: Server, server_hashed: User) -> None:
    for n in range(15):  # one attempt an address: the per-address login limit never sees more than one
        wrong = Visitor(server, f"198.51.100.{100 + n}").log_in("not the password")
        assert wrong.status in (200, 429), wrong.body[:300]
    refused = Visitor(server, "198.51.100.200").log_in(PASSWORD)
    assert refused.status == 429, refused.body[:300]
    assert refused.headers["content-type"] == "application/json"
    assert refused.body == '{"detail":"this account is locked after 10 failed sign-ins; try again in 30 minutes"}'
    assert int(refused.headers["retry-after"]) == 30 * 60
    assert "sessionid" not in refused.set_cookies
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=30) as scrape:  # as Prometheus
        metrics = scrape.read().decode()
    assert re.search(r"^bounty_admin_sign_in_locked_out_total [1-9]", metrics, re.M), metrics[-2000:]

    subprocess.run([sys.executable, "manage.py", "axes_reset_username", "mod"], cwd=PROJECT_DIR, check=True,
                   env=server_env(), capture_output=True)
    assert Visitor(server, "198.51.100.201").log_in(PASSWORD).status == 302


def test_an_unknown_username_locks_alike_so_a_lock_tells_nothing(server: Server, server_hashed: User) -> None:
    visitor = Visitor(server, "198.51.100.210")
    for n in range(10):
        reply = Visitor(server, f"198.51.100.{220 + n}").form("/admin/login/", {
            "username": "nobody", "password": "guess", "next": INDEX})
        assert reply.status in (200, 429)
    assert visitor.form("/admin/login/", {"username": "nobody", "password": "guess", "next": INDEX}).status == 429
    assert visitor.log_in(PASSWORD).status == 302  # another account is not touched


@pytest.fixture
def totp_server() -> Iterator[Server]:
    server = start_daphne({**server_env(), "BOUNTY_ADMIN_TOTP": "1"})
    yield server
    stop(server.process)


def add_totp_device(username: str) -> bytes:
    """The secret key of a new authenticator for `username`, as the operator's command prints it."""
    printed = subprocess.run([sys.executable, "manage.py", "add_totp_device", username], cwd=PROJECT_DIR,
                             check=True, env=server_env(), capture_output=True, text=True).stdout
    url = re.search(r"otpauth://\S+", printed)
    assert url is not None, printed
    return base64.b32decode(parse_qs(urlsplit(url.group()).query)["secret"][0])


def test_with_totp_on_a_moderator_signs_in_with_the_password_and_the_authenticators_code(
        totp_server: Server, server_hashed: User) -> None:
    key = add_totp_device("mod")
    visitor = Visitor(totp_server, "198.51.100.30")
    fields = {"username": "mod", "password": PASSWORD, "next": INDEX}
    # The password alone is not enough; the form then offers the account's authenticators.
    asked = visitor.form("/admin/login/", fields)
    assert asked.status == 200 and 'class="errornote' in asked.body, asked.body[:300]
    device = re.search(r'<option value="(otp_totp[^"]+)"', asked.body)
    assert device is not None, asked.body
    assert visitor.get(INDEX).status == 302

    signed_in = visitor.form("/admin/login/", {**fields, "otp_device": device.group(1),
                                               "otp_token": f"{totp(key):06d}"})
    assert (signed_in.status, signed_in.headers.get("location")) == (302, INDEX), signed_in.body[:300]
    assert visitor.get(INDEX).status == 200

    other = Visitor(totp_server, "198.51.100.32")
    wrong = f"{(totp(key) + 1) % 1_000_000:06d}"
    refused = other.form("/admin/login/", {**fields, "otp_device": device.group(1), "otp_token": wrong})
    assert refused.status == 200 and 'class="errornote' in refused.body
    assert other.get(INDEX).status == 302


def test_with_totp_on_a_moderator_without_an_authenticator_cannot_sign_in(
        totp_server: Server, server_hashed: User) -> None:
    visitor = Visitor(totp_server, "198.51.100.31")
    refused = visitor.form("/admin/login/", {"username": "mod", "password": PASSWORD, "otp_token": "123456",
                                             "next": INDEX})
    assert refused.status == 200 and 'class="errornote' in refused.body
    assert visitor.get(INDEX).status == 302
