"""`manage.py demo_moderator`: one password per dev state, kept in a file and said where."""

from __future__ import annotations

import io
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import RequestFactory

from records.moderation import MODERATORS

pytestmark = pytest.mark.django_db


def _run(password_file: Path) -> tuple[str, str]:
    out = io.StringIO()
    call_command("demo_moderator", "--password-file", str(password_file), stdout=out)
    printed = out.getvalue()
    match = re.search(r"password '([^']+)'", printed)
    assert match is not None, printed
    return match.group(1), printed


@pytest.fixture(autouse=True)
def _debug(settings: Any) -> None:
    settings.DEBUG = True


def sign_in(password: str) -> User | None:
    """The user the admin's login form would sign in with `password` (django-axes asks for the request)."""
    return authenticate(RequestFactory().post("/admin/login/"), username="moderator", password=password)


def test_the_password_stays_the_same_across_restarts(tmp_path: Path) -> None:
    password_file = tmp_path / "var" / "demo-moderator-password"
    first, printed = _run(password_file)
    again, _ = _run(password_file)
    assert again == first
    assert password_file.read_text().strip() == first
    assert f"(kept in {password_file})" in printed
    user = sign_in(password=first)
    assert isinstance(user, User) and user.is_staff and not user.is_superuser
    assert list(user.groups.values_list("name", flat=True)) == [MODERATORS]


def test_only_its_owner_can_read_the_password_file(tmp_path: Path) -> None:
    password_file = tmp_path / "demo-moderator-password"
    _run(password_file)
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600


def test_a_new_dev_state_gets_a_new_password(tmp_path: Path) -> None:
    first, _ = _run(tmp_path / "one")
    second, _ = _run(tmp_path / "two")
    assert second != first
    assert sign_in(password=second) is not None
    assert sign_in(password=first) is None


def test_an_existing_account_gets_the_kept_password(tmp_path: Path) -> None:
    User.objects.create_user("moderator", password="something else")
    (tmp_path / "password").write_text("kept-password\n")
    password, printed = _run(tmp_path / "password")
    assert password == "kept-password"
    assert printed.startswith("demo moderator ready: username 'moderator'")
    assert sign_in(password="kept-password") is not None


def test_it_refuses_to_run_without_debug(settings: Any, tmp_path: Path) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="development only"):
        call_command("demo_moderator", "--password-file", str(tmp_path / "password"))
    assert not (tmp_path / "password").exists()
