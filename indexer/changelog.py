"""The change log: its rows as the indexer writes them, and pruning (entries older than the
retention go, oldest first).

The websocket serves the change log to clients that resume with `?since=` (docs/api.md,
Resuming) while the service still holds the entries: a client whose `since` is older than the
oldest entry left gets a snapshot instead. Entries go only as a prefix of each deployment's seqs, so what is
left stays gap-free, and in batches of their own short transactions, so the indexer's commits
never wait long behind a prune.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from indexer.models import ChangeLogEntry, SyncState
from indexer.store import Message, RecordStore
from records.models import Deployment

BATCH = 10_000
CHANGE_COLUMNS = ("deployment_id", "seq", "type", "payload", "block_number", "created_at")


def change_rows(deployment: Deployment, last_seq: int, store: RecordStore,
                messages: list[Message]) -> list[tuple[Any, ...]]:
    """Change-log rows of these messages in the order of CHANGE_COLUMNS, numbered after `last_seq`."""
    now = timezone.now()
    return [(deployment.pk, seq, message.type, store.payload(message), message.block_number, now)
            for seq, message in enumerate(messages, start=last_seq + 1)]


@dataclass(frozen=True)
class Pruned:
    deployment_id: int
    deleted: int
    oldest_kept: int | None  # the seq a client can resume after, less one; None: nothing left


def prune_change_log(written_before: datetime, *, dry_run: bool = False, batch: int = BATCH) -> list[Pruned]:
    """Deletes every deployment's change-log entries written before `written_before` (only the
    oldest run of them: an entry is kept with everything after it once one newer is found)."""
    return [_prune(deployment_id, written_before, dry_run, batch)
            for deployment_id in SyncState.objects.order_by("deployment_id").values_list("deployment_id", flat=True)]


def _prune(deployment_id: int, written_before: datetime, dry_run: bool, batch: int) -> Pruned:
    entries = ChangeLogEntry.objects.filter(deployment_id=deployment_id)
    deleted, after = 0, -1
    while True:
        with transaction.atomic():
            oldest = list(entries.filter(seq__gt=after).order_by("seq").values_list("seq", "created_at")[:batch])
            old = next((i for i, (_, written) in enumerate(oldest) if written >= written_before), len(oldest))
            if old:
                after = oldest[old - 1][0]
                if not dry_run:
                    entries.filter(seq__lte=after).delete()
                deleted += old
        if old < batch:
            break
    kept = entries.filter(seq__gt=after).order_by("seq").values_list("seq", flat=True).first()
    return Pruned(deployment_id, deleted, kept)
