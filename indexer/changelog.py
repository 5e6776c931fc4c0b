"""The change log: its rows as the indexer writes them (numbered, and chained by digest so that
positions name their history: records.history), and pruning (entries older than the
retention go, oldest first).

The websocket serves the change log to clients that resume with `?since=` (docs/api.md,
Resuming) while the service still holds the entries: a client whose `since` is older than the
oldest entry left gets a snapshot instead. Entries go only as a prefix of each deployment's seqs, so what is
left stays gap-free, and in batches of their own short transactions, so the indexer's commits
never wait long behind a prune.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone

from indexer.models import ChangeLogEntry, SyncState
from indexer.store import Message, RecordStore
from records.changes import MessageType
from records.history import genesis_digest, next_digest
from records.models import Deployment

BATCH = 10_000
CHANGE_COLUMNS = ("deployment_id", "seq", "type", "payload", "block_number", "created_at", "digest")


Change = tuple[MessageType, Any, int]  # a change-log entry to write: its type, payload and block


def message_changes(store: RecordStore, messages: Iterable[Message]) -> list[Change]:
    """The entries of a batch's messages, each with its record as it was right after it."""
    return [(message.type, store.payload(message), message.block_number) for message in messages]


def advance_change_log(deployment: Deployment, state: SyncState,
                       changes: Iterable[Change]) -> list[tuple[Any, ...]]:
    """Change-log rows (in the order of CHANGE_COLUMNS) of `changes` (type, payload, block
    number), numbered after `state.last_seq`, each with its digest chained on the one before
    (records.history); `state`, the locked sync state, is advanced to the last of them."""
    now = timezone.now()
    digest = state.last_digest or genesis_digest(deployment.chain_id, deployment.contract_address)
    rows: list[tuple[Any, ...]] = []
    for seq, (type_, payload, block_number) in enumerate(changes, start=state.last_seq + 1):
        text = orjson.dumps(payload)  # written as it is hashed
        digest = next_digest(digest, seq, type_, block_number, text)
        rows.append((deployment.pk, seq, type_, orjson.Fragment(text), block_number, now, digest))
    if rows:
        state.last_seq, state.last_digest = rows[-1][1], digest
    return rows


@dataclass(frozen=True)
class Pruned:
    deployment_id: int
    deleted: int
    oldest_kept: int | None  # the seq a client can resume after, less one; None: nothing left


def prune_change_log(written_before: datetime, *, dry_run: bool = False, batch: int = BATCH) -> list[Pruned]:
    """Deletes every deployment's change-log entries written before `written_before` (only the
    oldest run of them: an entry is kept with everything after it once one newer is found), but
    never the newest."""
    return [_prune(deployment_id, written_before, dry_run, batch)
            for deployment_id in SyncState.objects.order_by("deployment_id").values_list("deployment_id", flat=True)]


def _prune(deployment_id: int, written_before: datetime, dry_run: bool, batch: int) -> Pruned:
    entries = ChangeLogEntry.objects.filter(deployment_id=deployment_id)
    # The newest entry stays whatever its age: its digest vouches for the position of every
    # client that is up to date (records.history), however long nothing changes.
    newest = SyncState.objects.filter(deployment_id=deployment_id).values_list("last_seq", flat=True).get()
    deleted, after = 0, -1
    while True:
        with transaction.atomic():
            oldest = list(entries.filter(seq__gt=after, seq__lt=newest).order_by("seq")
                          .values_list("seq", "created_at")[:batch])
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
