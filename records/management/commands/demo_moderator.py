"""`manage.py demo_moderator`: a moderator account for trying the admin on the embedded default."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from records.moderation import ensure_moderators_group


def _kept_password(path: Path) -> str:
    """The password stored at `path`, or a new one stored there (readable by its owner only)."""
    if path.exists():
        password = path.read_text(encoding="utf-8").strip()
        if password:
            return password
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
        file.write(password + "\n")
    return password


class Command(BaseCommand):
    help = (
        "Create (or reset) a staff account in the Moderators group and print its password, which is kept "
        "in a file beside the dev state so that it stays the same across restarts. DEBUG only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="moderator")
        parser.add_argument(
            "--password-file", type=Path, default=Path(settings.VAR_DIR) / "demo-moderator-password",
            help="where the password is kept (made with a new password when missing)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("demo_moderator is for development only: set DJANGO_DEBUG=1")
        password_file: Path = options["password_file"]
        password = _kept_password(password_file)
        user, created = User.objects.get_or_create(username=options["username"])
        user.is_staff = True
        user.is_superuser = False
        user.set_password(password)
        user.save()
        user.groups.set([ensure_moderators_group()])
        verb = "created" if created else "ready"
        self.stdout.write(f"demo moderator {verb}: username {user.username!r}, password {password!r} "
                          f"(kept in {password_file})")
