"""The commit stage, which both phases use (indexer.historical, indexer.realtime): a batch's
events applied to the records (indexer.transitions, on an indexer.store.RecordStore), and
everything it writes in one database transaction: the records (indexer.writes), the applied-log
ledger, the change log, the hashes of its blocks and the new progress, so a crash at any instant
leaves either all of a batch or none of it, and a restart resumes right after the last committed
block.

A bulk backfill prepares its batches in a process of its own (`prepare`, then `Prepared.shipped`)
and writes them here (`commit_prepared`); every other batch is prepared and written at once
(`commit`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from indexer.bulk import ConvertedRows, RowStream, batch_session, json_text
from indexer.changelog import CHANGE_COLUMNS, advance_change_log, message_changes
from indexer.config import IndexerConfig
from indexer.errors import IndexerError
from indexer.fetch import Batch
from indexer.metrics import CallMeter, IndexerMetrics
from indexer.models import AppliedLog, ChangeLogEntry, IndexedBlock, SyncState
from indexer.pipeline import RecordMemory
from indexer.rpc import PHASES, RpcCounts
from indexer.store import RecordStore
from indexer.transitions import apply_event, chain_time, references
from indexer.writes import Writes
from records.changes import MessageType, notify_changes
from records.models import Deployment

logger = logging.getLogger(__name__)

_LEDGER_COLUMNS = ("deployment_id", "block_number", "block_hash", "tx_hash", "log_index", "event", "undo")
_BLOCK_COLUMNS = ("deployment_id", "number", "hash", "timestamp")


@dataclass
class Progress:
    """Backfill progress: blocks done of total, events/s, time left."""

    first_block: int
    target_block: int
    started: float = field(default_factory=time.monotonic)
    events: int = 0

    def line(self, done_block: int) -> str:
        total = max(1, self.target_block - self.first_block + 1)
        done = min(total, max(0, done_block - self.first_block + 1))
        elapsed = max(1e-6, time.monotonic() - self.started)
        rate = done / elapsed
        left = (total - done) / rate if rate > 0 else 0.0
        return (
            f"backfill: block {done_block} of {self.target_block} ({done} of {total} blocks, "
            f"{100 * done / total:.1f}%), {self.events} events at {self.events / elapsed:,.0f} events/s, "
            f"about {left:,.0f} s left"
        )


class Committer:
    """Applies and writes batches for one deployment's indexer, and keeps what the metrics and
    /health report of it: the calls made (`calls`), the backfill's progress, the head's time
    and when the node last limited the rate."""

    def __init__(self, config: IndexerConfig, metrics: IndexerMetrics) -> None:
        self.start_block = config.start_block or 0  # as the indexer found it (Indexer._assemble)
        self.kept_blocks = config.kept_blocks
        self.metrics = metrics
        self.calls = CallMeter()
        self.progress: Progress | None = None
        self.head_time: datetime | None = None  # of the head block last seen, for the lag in seconds
        self.rhythm: float | None = None  # the block time the poll schedule trusts (indexer.clock), if any
        self.rhythm_since: datetime | None = None  # since when
        self.rate_limited_at: datetime | None = None  # when the node last limited the rate (for /health)
        self.node_asked: float | None = None  # when a request was last sent to the node, by any process
        self.calls_by_phase: Counter[str] = Counter()  # since this process started (for /health)
        self.guided_prepared = False  # a batch an explorer guided was prepared (until the proof: indexer.proof)
        self._phases_lock = threading.Lock()  # counted from a bulk backfill's writer thread too

    @property
    def node_asked_at(self) -> datetime | None:
        return None if self.node_asked is None else datetime.fromtimestamp(self.node_asked, tz=UTC)

    def rhythm_kept(self, seconds: float | None, since: datetime | None) -> None:
        """The block rhythm the poll schedule trusts after a poll, for the metrics now and /health
        with the next write of the sync state."""
        self.metrics.block_rhythm_seconds.set(seconds or 0)
        self.metrics.block_rhythm_since.set(since.timestamp() if since is not None else 0)
        self.rhythm, self.rhythm_since = seconds, since

    def count_rpc(self, counts: RpcCounts) -> None:
        """The metrics of the calls and failures of a tally; a rate limit among them, and when
        the newest was sent, are noted for /health with the next write of the sync state."""
        self.metrics.rpc(counts)
        self.calls.count(counts)
        with self._phases_lock:
            self.calls_by_phase.update(counts.phases)
        self._asked(counts)
        if counts.errors["rate_limited"]:
            self.rate_limited_at = timezone.now()

    def phase_calls(self, pending: RpcCounts | None = None) -> dict[str, int]:
        """The calls by phase since this process started, with those of `pending` not counted yet."""
        with self._phases_lock:
            calls = self.calls_by_phase + (pending.phases if pending is not None else Counter())
        return {phase: calls[phase] for phase in PHASES}

    def _asked(self, counts: RpcCounts) -> None:
        if counts.last_sent is not None and (self.node_asked is None or counts.last_sent > self.node_asked):
            self.node_asked = counts.last_sent

    def commit(self, deployment: Deployment, batch: Batch, memory: RecordMemory | None = None) -> None:
        """Applies and writes one batch with the progress it makes, in one transaction. `memory`
        holds the records written by the batches before (of this catch-up), as they are in the
        database, so that they need not be read back; it is dropped with the catch-up on an error."""
        started = time.perf_counter()
        with transaction.atomic():
            locked = self._lock(deployment, batch)
            prepared = self.prepare(deployment, batch, memory or RecordMemory(), locked)
            self._write(deployment, locked, prepared)
        self._committed(prepared, time.perf_counter() - started)

    def commit_prepared(self, deployment: Deployment, prepared: Prepared) -> None:
        """Writes a batch `prepare` applied ahead, with its progress, in one transaction (a
        BatchWriter's thread)."""
        started = time.perf_counter()
        with transaction.atomic():
            locked = self._lock(deployment, prepared.batch)
            if (locked.last_seq, locked.bulk_from_block) != (prepared.last_seq, prepared.bulk_from_block):
                raise IndexerError("the sync state moved under this indexer: is another writer running without "
                                   "the lock?")
            self._write(deployment, locked, prepared)
        self._committed(prepared, time.perf_counter() - started)

    def _committed(self, prepared: Prepared, seconds: float) -> None:
        """The metrics of a committed batch."""
        batch = prepared.batch
        self.metrics.batch_seconds.observe(seconds)
        self.metrics.events_applied(prepared.events_by_type)
        self.count_rpc(batch.rpc)
        self.metrics.position(last=batch.to, head=batch.head, safe=batch.safe,
                              last_time=prepared.times.get(batch.to), head_time=self.head_time)

    def _lock(self, deployment: Deployment, batch: Batch) -> SyncState:
        locked = SyncState.objects.select_for_update().get(deployment=deployment)
        expected = batch.start - 1 if batch.start > self.start_block else None
        if locked.last_indexed_block != expected:
            raise IndexerError("the sync state moved under this indexer: is another writer running without the lock?")
        return locked

    def prepare(self, deployment: Deployment, batch: Batch, memory: RecordMemory, state: SyncState) -> Prepared:
        """Applies a batch's events in memory and renders what it writes. It reads the database
        only for records that `memory` lacks, which no batch of this catch-up has written."""
        bulk = state.bulk_from_block is not None
        store = RecordStore(deployment, memory.records, messages=None if bulk else [])
        store.load(references(batch.events))
        times = {number: chain_time(int(header["timestamp"], 16)) for number, header in batch.headers.items()}
        # A reorganisation never rolls back to below the oldest block hash kept after this batch
        # (see indexer.reorg), so the logs of the blocks up to there need no undo entries; unless
        # an explorer guided the sync, until its proof (indexer.proof.GuidedSyncProof).
        # `state` is the catch-up's start in a bulk backfill's preparing process: a guided batch
        # prepared before this one in the same process counts too.
        self.guided_prepared = self.guided_prepared or batch.guided
        unproven = self.guided_prepared or state.guided_from_block is not None
        undo_floor = -1 if unproven else batch.to - self.kept_blocks
        # The ledger's rows as the database takes them (bulk.ConvertedRows): the decoder checked
        # the hashes, and the undo entries are JSON text.
        ledger = ConvertedRows()
        for event in batch.events:
            log = event.log
            undo = apply_event(store, event, times[log.block_number], undo=log.block_number > undo_floor)
            ledger.append((deployment.pk, log.block_number, log.block_hash, log.tx_hash, log.log_index,
                           type(event).__name__, json_text(undo)))
        return Prepared(batch, store, store.render(), ledger, times, state.last_seq, state.bulk_from_block,
                        len(batch.events), Counter(row[5] for row in ledger))

    def _write(self, deployment: Deployment, locked: SyncState, prepared: Prepared) -> None:
        batch, store = prepared.batch, prepared.store
        messages = (store.messages or []) if store is not None else []
        batch_session(bulk=locked.bulk_from_block is not None)
        # The records first: the database indexes them while the payloads are rendered.
        with RowStream() as stream:
            prepared.writes.write(stream)
            changes = message_changes(store, messages) if store is not None else []
            if locked.bulk_from_block is not None and batch.final:  # the bulk backfill is over: clients need
                changes.append((MessageType.RESYNC,  # a new snapshot
                                {"from_block": locked.bulk_from_block, "to_block": batch.to}, batch.to))
                locked.bulk_from_block = None
            entries = advance_change_log(deployment, locked, changes)
            stream.insert(ChangeLogEntry, CHANGE_COLUMNS, entries)
            stream.insert(AppliedLog, _LEDGER_COLUMNS, prepared.ledger)
            stream.insert(IndexedBlock, _BLOCK_COLUMNS, [(deployment.pk, number, header["hash"], prepared.times[number])
                                                         for number, header in batch.headers.items()])
        if entries:  # wake the websocket feeds of every server process once this commits
            transaction.on_commit(partial(notify_changes, deployment.pk, locked.last_seq))
        if batch.guided and locked.guided_from_block is None:
            locked.guided_from_block = batch.start
        if locked.guided_from_block is None:  # else kept until the proof: a repair may roll back to them
            IndexedBlock.objects.filter(deployment=deployment, number__lt=batch.to - self.kept_blocks).delete()
        if batch.final:
            locked.backfill_from_block = locked.backfill_to_block = None
        else:
            locked.backfill_from_block = locked.backfill_from_block or batch.start
            locked.backfill_to_block = batch.safe
        if batch.by_range and locked.reread_block == locked.last_indexed_block:  # read by range from the start
            locked.reread_block = batch.to
        locked.last_indexed_block = batch.to
        locked.rpc_calls_per_block, locked.rpc_calls_per_day = self.calls.per_block, self.calls.per_day
        locked.block_rhythm_seconds, locked.block_rhythm_since = self.rhythm, self.rhythm_since
        locked.head_block = batch.head
        locked.safe_block = batch.safe
        locked.rate_limited_at = self.rate_limited_at
        self._asked(batch.rpc)
        locked.node_asked_at = self.node_asked_at
        locked.rpc_calls_by_phase = self.phase_calls(batch.rpc)
        locked.last_heartbeat = timezone.now()
        locked.save()
        self._report(batch, prepared.applied, Counter(message.type for message in messages))

    def _report(self, batch: Batch, applied: int, counts: Counter[str]) -> None:
        if not batch.final or (self.progress is not None and batch.to < self.progress.target_block):
            if self.progress is None:
                self.progress = Progress(first_block=batch.start, target_block=batch.safe)
            self.progress.events += applied
            logger.info(self.progress.line(batch.to))
            return
        if self.progress is not None:
            self.progress.events += applied
            logger.info(self.progress.line(batch.to))
            logger.info("backfill done; following the head")
            self.progress = None
        if counts:
            detail = ", ".join(f"{kind} x{n}" for kind, n in sorted(counts.items()))
            logger.info("applied blocks %d-%d: %s", batch.start, batch.to, detail)
        elif applied:
            logger.info("applied blocks %d-%d: %d events", batch.start, batch.to, applied)


@dataclass
class Prepared:
    """A batch applied in memory, with everything it writes rendered (Committer.prepare)."""

    batch: Batch
    store: RecordStore | None  # None once shipped
    writes: Writes
    ledger: Sequence[Sequence[Any]]
    times: dict[int, Any]
    last_seq: int  # the sync state it was applied against
    bulk_from_block: int | None
    applied: int = 0  # events
    events_by_type: Counter[str] = field(default_factory=Counter)

    @property
    def to(self) -> int:
        return self.batch.to

    def shipped(self) -> Prepared:
        """What the writing process needs (to send from a reader process): no store, whose
        records stay with the reader, and no events, which the writes and the ledger hold."""
        return dataclasses.replace(self, store=None, batch=dataclasses.replace(self.batch, events=[]),
                                   writes=self.writes.converted())
