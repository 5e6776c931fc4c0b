"""Change-log histories as tests need them: appended as the indexer appends them
(indexer.changelog.advance_change_log), and replaced from a seq on, as a database restored from
a backup, a promoted standby or a re-index into a new database holds another history that
numbers its changes alike (records.history)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from django.db import transaction

from indexer.bulk import insert_rows
from indexer.changelog import CHANGE_COLUMNS, Change, advance_change_log
from indexer.models import ChangeLogEntry, SyncState
from records.changes import MessageType, notify_changes
from records.history import Position
from records.models import Deployment


def updates(*ids: int, text: str = "") -> list[Change]:
    """A `bounty.updated` change per ID, with payload {"id": id} (and {"text": text} if given)."""
    return [(MessageType.BOUNTY_UPDATED, {"id": n, **({"text": text} if text else {})}, 1) for n in ids]


def append_changes(deployment: Deployment, changes: Iterable[Change]) -> Position:
    """Appends `changes` as the indexer does (the next seqs, in one transaction with the sync
    state) and notifies the feeds after the commit; returns the position after the last."""
    with transaction.atomic():
        state = SyncState.objects.select_for_update().get(deployment=deployment)
        insert_rows(ChangeLogEntry, CHANGE_COLUMNS, advance_change_log(deployment, state, changes))
        state.save(update_fields=["last_seq", "last_digest"])
        transaction.on_commit(partial(notify_changes, deployment.pk, state.last_seq))
    return Position(state.last_seq, state.last_digest or "")


def replace_history(deployment: Deployment, keep: int, changes: Iterable[Change]) -> Position:
    """Puts another history in place of the change log after seq `keep`, in one transaction: its
    later entries go, the sync state goes back to the position of `keep` (as a backup taken there
    has it) and `changes` are appended from there as the indexer would append them on it. The
    records are the caller's to change. Returns the position after the last change."""
    with transaction.atomic():
        state = SyncState.objects.select_for_update().get(deployment=deployment)
        ChangeLogEntry.objects.filter(deployment=deployment, seq__gt=keep).delete()
        state.last_seq = keep
        state.last_digest = (ChangeLogEntry.objects.filter(deployment=deployment, seq=keep)
                             .values_list("digest", flat=True).first())
        assert keep == 0 or state.last_digest, f"the change log holds no digest of seq {keep}"
        insert_rows(ChangeLogEntry, CHANGE_COLUMNS, advance_change_log(deployment, state, changes))
        state.save(update_fields=["last_seq", "last_digest"])
        transaction.on_commit(partial(notify_changes, deployment.pk, state.last_seq))
    return Position(state.last_seq, state.last_digest or "")
