"""`manage.py add_totp_device <username>`: an authenticator for a moderator, for BOUNTY_ADMIN_TOTP."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_otp.plugins.otp_totp.models import TOTPDevice


class Command(BaseCommand):
    help = (
        "Give a staff account a TOTP authenticator and print its otpauth:// URL, to add to the moderator's "
        "authenticator app (as a QR code: qrencode -t ansiutf8 '<url>'). With --replace, the account's "
        "earlier authenticators are removed first (a lost phone)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--replace", action="store_true", help="remove the account's earlier authenticators")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = User.objects.get(username=options["username"])
        except User.DoesNotExist:
            raise CommandError(f"no account named {options['username']!r}") from None
        if not user.is_staff:
            raise CommandError(f"{user.username!r} is not staff: the admin would not let it in anyway")
        if options["replace"]:
            TOTPDevice.objects.filter(user=user).delete()
        device = TOTPDevice.objects.create(user=user, name="authenticator", confirmed=True)
        self.stdout.write(f"authenticator added for {user.username!r}; add this URL to its app, then keep it secret:")
        self.stdout.write(device.config_url)
