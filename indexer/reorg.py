"""Reorganisations: the indexed tip compared with the chain, and everything above the common
ancestor undone.

The hashes of the indexed blocks (each batch's event blocks and last block) are kept for the last
`kept_blocks` blocks, and undo entries for the logs of those blocks (indexer.transitions). On a
mismatch the kept hashes are compared with the chain from the newest down to the newest still on
it; the logs above it are undone in reverse order in one transaction, which also appends the
corrections (`<kind>.updated`, `<kind>.removed`) to the change log and moves the progress back, so
the next catch-up indexes the new branch. A reorganisation below the kept hashes stops the
indexer (ReorgTooDeep): the mirror may then hold orphaned records.
"""

from __future__ import annotations

import logging
from functools import partial

from django.db import transaction

from indexer.bulk import insert_rows
from indexer.changelog import CHANGE_COLUMNS, advance_change_log, message_changes
from indexer.errors import NodeBehind, ReorgTooDeep
from indexer.metrics import IndexerMetrics
from indexer.models import AppliedLog, ChangeLogEntry, IndexedBlock, SyncState
from indexer.rpc import RpcClient
from indexer.store import RecordStore
from indexer.transitions import undo_entries
from records.changes import notify_changes
from records.models import Deployment

logger = logging.getLogger(__name__)


class Reorganisations:
    def __init__(self, rpc: RpcClient, *, start_block: int, kept_blocks: int, metrics: IndexerMetrics) -> None:
        self.rpc = rpc
        self.start_block = start_block
        self.kept_blocks = kept_blocks
        self.metrics = metrics

    def undo(self, deployment: Deployment) -> bool:
        """Compares the indexed tip with the chain; on a mismatch undoes everything above the
        common ancestor, in one transaction, and returns True."""
        tip = IndexedBlock.objects.filter(deployment=deployment).order_by("-number").first()
        if tip is None:
            return False
        header = self.rpc.call("eth_getBlockByNumber", [hex(tip.number), False])
        if header is None:
            raise NodeBehind(f"the node lacks the indexed tip, block {tip.number}: a backend behind the others")
        if header["hash"] == tip.hash:
            return False
        ancestor = self._common_ancestor(deployment, tip.number)
        self._roll_back(deployment, ancestor, tip.number)
        return True

    def roll_back_to(self, deployment: Deployment, ancestor: int) -> None:
        """Undoes every log above block `ancestor`, as a reorganisation from there does (a log the
        first reading lost: indexer.reread)."""
        state = SyncState.objects.get(deployment=deployment)
        if state.last_indexed_block is None or state.last_indexed_block <= ancestor:
            return
        # The newest block at or below it whose hash is kept: the next batch's parent is checked against it.
        kept = IndexedBlock.objects.filter(deployment=deployment, number__lte=ancestor).order_by("-number").values_list(
            "number", flat=True).first()
        # A sync an explorer guided from the start block keeps every log's undo entries until it is
        # proven (indexer.proof.GuidedSyncProof): it rolls back to before the start block.
        if kept is None and ancestor >= self.start_block and state.guided_from_block != self.start_block:
            raise ReorgTooDeep(f"no kept block hash at or below block {ancestor} to roll back to: re-index this "
                               "deployment from BOUNTY_START_BLOCK into an empty database")
        self._roll_back(deployment, kept if kept is not None else self.start_block - 1, state.last_indexed_block)

    def _common_ancestor(self, deployment: Deployment, tip: int) -> int:
        stored = list(IndexedBlock.objects.filter(deployment=deployment).order_by("-number")
                      .values_list("number", "hash"))
        for start in range(0, len(stored), 200):
            chunk = stored[start : start + 200]
            answers = self.rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n, _ in chunk])
            for (number, stored_hash), header in zip(chunk, answers, strict=True):
                if header is None:  # not a block gone: a backend that has not seen it yet
                    raise NodeBehind(f"the node lacks block {number} while looking for the common ancestor")
                if header["hash"] == stored_hash:
                    return int(number)
        base = self.start_block - 1
        if base >= tip - self.kept_blocks:
            return base
        raise ReorgTooDeep(
            f"the chain reorganised below the {len(stored)} kept block hashes (tip {tip}, oldest kept "
            f"{stored[-1][0] if stored else 'none'}): the mirror may hold orphaned records. Stop the service and "
            "re-index this deployment from BOUNTY_START_BLOCK into an empty database."
        )

    @transaction.atomic
    def _roll_back(self, deployment: Deployment, ancestor: int, tip: int) -> None:
        state = SyncState.objects.select_for_update().get(deployment=deployment)
        orphaned = list(AppliedLog.objects.filter(deployment=deployment, block_number__gt=ancestor)
                        .order_by("-block_number", "-log_index"))
        entries = [entry for log in orphaned for entry in reversed(log.undo)]
        store = RecordStore(deployment)
        messages = undo_entries(store, entries, block_number=ancestor)
        store.save()
        AppliedLog.objects.filter(pk__in=[log.pk for log in orphaned]).delete()
        IndexedBlock.objects.filter(deployment=deployment, number__gt=ancestor).delete()
        entries = advance_change_log(deployment, state, message_changes(store, messages))
        insert_rows(ChangeLogEntry, CHANGE_COLUMNS, entries)
        if messages:  # wake the websocket feeds of every server process once this commits
            transaction.on_commit(partial(notify_changes, deployment.pk, state.last_seq))
        state.last_indexed_block = ancestor if ancestor >= self.start_block else None
        if state.reread_block is not None and state.reread_block > ancestor:
            state.reread_block = state.last_indexed_block
        state.save()
        transaction.on_commit(lambda: self.metrics.reorganised(tip - ancestor))
        logger.warning("reorganisation: rolled back blocks %d-%d (%d logs, %d records corrected); "
                       "indexing the new branch", ancestor + 1, tip, len(orphaned), len(messages))

