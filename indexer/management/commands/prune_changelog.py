"""`manage.py prune_changelog`: drop change-log entries older than the retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from indexer.changelog import prune_change_log


class Command(BaseCommand):
    help = ("Delete change-log entries written more than BOUNTY_CHANGELOG_KEEP_DAYS days ago (websocket clients "
            "resuming from before the oldest entry left get a snapshot instead). Safe beside a running indexer.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--keep-days", type=int, default=None,
                            help="days of entries to keep (default: BOUNTY_CHANGELOG_KEEP_DAYS)")
        parser.add_argument("--dry-run", action="store_true", help="count what would go, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        keep_days: int = settings.BOUNTY_CHANGELOG_KEEP_DAYS if options["keep_days"] is None else options["keep_days"]
        if keep_days < 1:
            raise CommandError(f"--keep-days must be at least 1, got {keep_days}")
        cutoff = timezone.now() - timedelta(days=keep_days)
        verb = "would delete" if options["dry_run"] else "deleted"
        for pruned in prune_change_log(cutoff, dry_run=options["dry_run"]):
            left = f"oldest kept seq {pruned.oldest_kept}" if pruned.oldest_kept is not None else "none left"
            self.stdout.write(f"deployment {pruned.deployment_id}: {verb} {pruned.deleted} entries written before "
                              f"{cutoff:%Y-%m-%dT%H:%M:%SZ} ({left})")
