"""What the indexer remembers about each deployment it mirrors.

All of it is written in the same database transaction as the records it describes, so that
progress, the applied-log ledger and the change log never disagree with the records after a
crash:

- `SyncState`: how far the deployment is indexed, and the health data `/health` reports.
- `IndexedBlock`: hash and parent hash of each indexed block, to detect reorganisations.
- `AppliedLog`: one row per applied contract log, keyed by (deployment, tx_hash, log_index),
  so a log is never applied twice; `undo` holds what rolling the log back must restore.
- `ChangeLogEntry`: the ordered change log per deployment that the websocket serves (entries
  older than the retention go with `manage.py prune_changelog`: indexer.changelog).
- `IndexerProcess`: each running `run_indexer` process of a deployment, the writer and those
  standing by for its lock, as `/health` lists them (written outside the batches).

The ledger tables (`AppliedLog`, `ChangeLogEntry`, `IndexedBlock`) grow by one row per log,
change or block, so their writes are kept lean: their deployment is not checked by a database
foreign key (a trigger per row, most of the cost of a batch's commit); every batch writes them
under the `SyncState` row it holds locked, whose own foreign key guarantees the deployment, and
Django still deletes them with their deployment. The unique constraints, which lead with the
deployment, are their only deployment indexes.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from records.changes import MessageType
from records.dialect import dialect
from records.fields import Bytes32Field
from records.history import DIGEST_HEX
from records.models import Deployment


class JSONDocumentField(models.JSONField):
    """A JSON document stored as written: PostgreSQL `json` (validated text) instead of
    `jsonb`, which parses every value into a binary tree on insert, for documents that are only
    ever read back whole. (Key order is kept as written, as a bonus.)"""

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if dialect(connection).json_text_column:
            return "json"
        return super().db_type(connection)

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        if not isinstance(value, str):
            return value  # psycopg parses `json` itself
        return super().from_db_value(value, expression, connection)


def _ledger_deployment() -> models.ForeignKey[Deployment, Deployment]:
    return models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="+", db_constraint=False,
                             db_index=False)


class SyncState(models.Model):
    deployment = models.OneToOneField(Deployment, on_delete=models.CASCADE, related_name="sync_state")
    last_indexed_block = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="highest block whose logs are all applied"
    )
    found_start_block = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="the contract's deployment block found on the chain (no BOUNTY_START_BLOCK)"
    )
    last_seq = models.PositiveBigIntegerField(default=0, help_text="seq of the newest change log entry")
    # Nullable, as `ChangeLogEntry.digest`, for the release before, which does not write it.
    last_digest = models.CharField(max_length=DIGEST_HEX, null=True, blank=True,  # noqa: DJ001
                                   help_text="chained digest of the newest change log entry (records.history)")
    head_block = models.PositiveBigIntegerField(null=True, blank=True, help_text="chain head at the last poll")
    safe_block = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="the newest block deep enough to index at the last poll"
    )
    rate_limited_at = models.DateTimeField(null=True, blank=True, help_text="when the node last limited the rate")
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    rpc_calls_by_phase = models.JSONField(default=dict, blank=True,
                                          help_text="JSON-RPC calls by the writer's phase, since it started")
    node_asked_at = models.DateTimeField(null=True, blank=True,
                                         help_text="when the indexer last sent the node a request")
    # The backfill under way (None when caught up), for /health's progress.
    backfill_from_block = models.PositiveBigIntegerField(null=True, blank=True)
    backfill_to_block = models.PositiveBigIntegerField(null=True, blank=True)
    # A bulk backfill writes no change-log entry per change from this block on; the batch that
    # catches up writes one `resync` entry instead (records.ws.feed sends its clients a new snapshot).
    bulk_from_block = models.PositiveBigIntegerField(null=True, blank=True)
    # The newest block read by range (indexer.reread): the blocks above it up to the last indexed
    # one were read block by block near the head and wait for their second reading.
    reread_block = models.PositiveBigIntegerField(null=True, blank=True, help_text="newest block read by range")
    # The first block of a sync guided by an explorer (indexer.explorer) whose blocks are not yet
    # proven against the contract's state (indexer.proof); until they are, every batch keeps its
    # block hashes and undo entries, so that a log the explorer hid can be repaired by rolling back.
    guided_from_block = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="first block guided by the explorer, not yet proven against the contract")
    # What following the head costs, measured over the last minutes (for /health).
    rpc_calls_per_block = models.FloatField(null=True, blank=True)
    rpc_calls_per_day = models.FloatField(null=True, blank=True)
    node_unreachable_since = models.DateTimeField(null=True, blank=True,
                                                  help_text="since when the node has not answered (None: it does)")
    # The block rhythm the poll schedule trusts (indexer.clock), for /health.
    block_rhythm_seconds = models.FloatField(
        null=True, blank=True, help_text="a block every so many seconds, as the polls bear out (None: none trusted)")
    block_rhythm_since = models.DateTimeField(null=True, blank=True, help_text="since when that rhythm is trusted")

    def __str__(self) -> str:
        return f"sync state of {self.deployment}"

    def indexed_to(self, start_block: int) -> int:
        """The newest block whose logs are all applied; before any, the block before `start_block`."""
        return self.last_indexed_block if self.last_indexed_block is not None else start_block - 1

    def read_twice_to(self, start_block: int) -> int:
        """The newest block read by range; before any, the block before `start_block`."""
        return self.reread_block if self.reread_block is not None else start_block - 1


class IndexerRole(models.TextChoices):
    WRITER = "writer"  # holds the deployment's writer lock (indexer.locks)
    STANDBY = "standby"  # waits for the lock, to take over when the writer stops


class IndexerProcess(models.Model):
    """A `run_indexer` process of the deployment, seen at `last_seen` in `role`.

    Each process announces itself every few seconds and deletes its row when it stops; a killed
    one's row stays until its `last_seen` is older than the health heartbeat (then `/health`
    leaves it out) and is deleted by the next process to start."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="indexer_processes")
    name = models.CharField(max_length=300, help_text="host name and process ID")
    role = models.CharField(max_length=16, choices=IndexerRole.choices)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["deployment", "name"], name="indexer_process_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.role} indexer {self.name}"


class IndexedBlock(models.Model):
    deployment = _ledger_deployment()
    number = models.PositiveBigIntegerField()
    hash = Bytes32Field()
    timestamp = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["deployment", "number"], name="indexed_block_unique"),
        ]

    def __str__(self) -> str:
        return f"block {self.number} {self.hash}"


class AppliedLog(models.Model):
    deployment = _ledger_deployment()
    block_number = models.PositiveBigIntegerField()
    block_hash = Bytes32Field()
    tx_hash = Bytes32Field()
    log_index = models.PositiveIntegerField()
    event = models.CharField(max_length=64)
    undo = JSONDocumentField(default=list, help_text="record states to restore when this log is rolled back")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["deployment", "tx_hash", "log_index"], name="applied_log_unique"),
        ]
        indexes = [models.Index(fields=["deployment", "block_number"], name="applied_log_block_idx")]

    def __str__(self) -> str:
        return f"{self.event} {self.tx_hash}:{self.log_index}"


class ChangeLogEntry(models.Model):
    deployment = _ledger_deployment()
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=24, choices=MessageType.choices)
    payload = JSONDocumentField(help_text="the record as the API serializes it")
    block_number = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    # Chained over the entries before it (records.history). None on entries written before digests
    # were: nullable so that the release before, which does not write it, runs on this schema.
    digest = models.CharField(max_length=DIGEST_HEX, null=True, blank=True)  # noqa: DJ001

    class Meta:
        verbose_name_plural = "change log entries"
        constraints = [
            models.UniqueConstraint(fields=["deployment", "seq"], name="change_log_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"


class IndexStateChoice(models.TextChoices):
    READY = "ready"
    DEFERRED = "deferred"
    BUILDING = "building"


class IndexState(models.Model):
    """Whether the record tables' secondary indexes are deferred by a bulk backfill (indexer.indexes).

    One row at most (pk SINGLETON); none means `ready`. The indexes span every deployment, so the
    deployment whose backfill deferred them is kept: its indexer builds them when it catches up."""

    SINGLETON = 1

    state = models.CharField(max_length=8, choices=IndexStateChoice.choices, default=IndexStateChoice.READY)
    deployment = models.ForeignKey(Deployment, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    changed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"secondary indexes {self.state}"
