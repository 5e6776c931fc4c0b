"""`manage.py demo_moderator`: a moderator account for trying the admin on the embedded default."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from records.moderation import ensure_moderators_group


class Command(BaseCommand):
    help = "Create (or reset) a staff account in the Moderators group and print its password. DEBUG only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="moderator")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("demo_moderator is for development only: set DJANGO_DEBUG=1")
        password = secrets.token_urlsafe(12)
        user, created = User.objects.get_or_create(username=options["username"])
        user.is_staff = True
        user.is_superuser = False
        user.set_password(password)
        user.save()
        user.groups.set([ensure_moderators_group()])
        verb = "created" if created else "reset"
        self.stdout.write(f"demo moderator {verb}: username {user.username!r}, password {password!r}")
