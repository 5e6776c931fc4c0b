"""The indexer: start-up checks, then catch-up and following, over the pipeline's stages: fetch and
decode (indexer.fetch, read ahead by indexer.pipeline), apply (indexer.transitions), commit (here).

Each batch is one database transaction holding the records it changes, the applied-log ledger,
the change log, the hashes of its blocks and the new progress, so a crash at any instant
leaves either all of a batch or none of it, and a restart resumes right after the last
committed block. Only blocks at least `confirmations` deep are indexed. Each batch's parent must
be the indexed tip; when it is not, or when no new block came for a while, the tip is compared
with the chain and a reorganisation undone (indexer.reorg).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import multiprocessing
import os
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone
from eth_utils.crypto import keccak

from indexer import indexes
from indexer.bulk import ConvertedRows, RowStream, batch_session, json_text
from indexer.changelog import CHANGE_COLUMNS, change_rows
from indexer.errors import ChainChanged, IndexerError, NodeBehind
from indexer.fetch import Batch, BatchReader, batch_sizes
from indexer.locks import LockWaitInterrupted, deployment_lock
from indexer.metrics import IndexerMetrics
from indexer.models import (
    AppliedLog,
    ChangeLogEntry,
    IndexedBlock,
    IndexerProcess,
    IndexerRole,
    IndexStateChoice,
    SyncState,
)
from indexer.pacing import Pacer
from indexer.pipeline import (
    BatchWriter,
    ReadAhead,
    RecordMemory,
    collections_between_batches,
    database_connections_of_our_own,
)
from indexer.realtime import BlockClock, CallMeter, HeaderChain, LiveReader
from indexer.reorg import Reorganisations
from indexer.reread import Rereads
from indexer.rpc import RpcClient, RpcCounts, RpcError, Stopped
from indexer.transitions import RecordStore, Writes, apply_event, chain_time
from records.changes import MessageType, notify_changes
from records.models import Deployment

logger = logging.getLogger(__name__)

_LEDGER_COLUMNS = ("deployment_id", "block_number", "block_hash", "tx_hash", "log_index", "event", "undo")
_BLOCK_COLUMNS = ("deployment_id", "number", "hash", "parent_hash", "timestamp")
# The contract's record counters, read at the safe head to tell how many rows a backfill adds.
_COUNTERS = [("0x" + keccak(text=f"{name}()")[:4].hex()) for name in ("bountyCount", "submissionCount", "disputeCount")]
# Whether a bulk backfill also defers the secondary indexes, by backend: bench/indexer_backfill.py
# measured building them afterwards faster on both (SQLite, 50,041 events: 3.8 s end to end
# with the build against 4.3 s keeping them).
DEFER_INDEXES_ON = {"postgresql": True, "sqlite": True}
# The first getLogs span, in blocks: it doubles while ranges hold few logs and shrinks when they
# hold many, so a small start costs a few quick requests on a quiet chain and keeps the first
# batch of a busy one small (its decoding waits for the whole answer).
INITIAL_SPAN = 16
IDLE_CHECK_SECONDS = 5.0  # without new blocks, how often the tip is checked and the heartbeat written
BUILD_RETRY_SECONDS = 60  # after a failed index build
RECORD_MEMORY = 200_000  # records a catch-up keeps in memory between batches (about 2 KB each)
_RELEASED = 2**62  # `committed` once the writing process stops: past any block
USDC_DECIMALS = 6  # the amounts the service shows are in units of 10^-6 USDC
ANNOUNCE_SECONDS = 5.0  # how often a process records itself in IndexerProcess (for /health)


@dataclass(frozen=True)
class IndexerConfig:
    rpc_url: str
    chain_id: int
    contract_address: str
    usdc_address: str
    start_block: int
    confirmations: int | str  # blocks, or a block tag the node resolves (safe, finalized)
    poll_interval: float = 0.25
    live_blocks: int = 32  # below the head: read one by one, then once more by range (BOUNTY_LIVE_BLOCKS)
    initial_span: int = INITIAL_SPAN
    max_span: int = 50_000
    kept_blocks: int = 1_024
    batch_logs: int = 4_000  # about this many logs per getLogs range and per committed batch
    read_ahead: int = 3  # batches read and decoded ahead of the one being committed
    rpc_timeout: float = 20.0  # seconds for each request to the node
    max_concurrency: int = 16  # requests to the node in flight at most
    requests_per_second: int | None = None  # the plan's budget of calls (None: the node's 429s tell)

    @classmethod
    def from_settings(cls) -> IndexerConfig:
        """The configuration from settings; IndexerError naming every missing variable."""
        rpc_url: str | None = settings.BOUNTY_RPC_URL
        contract_address: str | None = settings.BOUNTY_CONTRACT_ADDRESS
        usdc_address: str | None = settings.BOUNTY_USDC_ADDRESS
        required = {"BOUNTY_RPC_URL": rpc_url, "BOUNTY_CONTRACT_ADDRESS": contract_address,
                    "BOUNTY_USDC_ADDRESS": usdc_address}
        missing = [name for name, value in required.items() if not value]
        if missing or rpc_url is None or contract_address is None or usdc_address is None:
            raise IndexerError(f"missing configuration: {', '.join(missing)} (see docs/operations.md, Configuration)")
        return cls(
            rpc_url=rpc_url,
            chain_id=settings.BOUNTY_CHAIN_ID,
            contract_address=contract_address.lower(),
            usdc_address=usdc_address,
            start_block=settings.BOUNTY_START_BLOCK,
            confirmations=settings.BOUNTY_CONFIRMATIONS,
            poll_interval=settings.BOUNTY_INDEXER_POLL_SECONDS,
            live_blocks=settings.BOUNTY_LIVE_BLOCKS,
            initial_span=min(INITIAL_SPAN, settings.BOUNTY_GETLOGS_MAX_BLOCKS),
            max_span=settings.BOUNTY_GETLOGS_MAX_BLOCKS,
            rpc_timeout=settings.BOUNTY_RPC_TIMEOUT_SECONDS,
            max_concurrency=settings.BOUNTY_RPC_MAX_CONCURRENCY,
            requests_per_second=settings.BOUNTY_RPC_MAX_REQUESTS_PER_SECOND,
        )


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


class Indexer:
    """Mirrors one deployment's record events into the database."""

    def __init__(self, config: IndexerConfig, rpc: RpcClient | None = None,
                 stop: threading.Event | None = None) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.rpc = rpc or RpcClient(config.rpc_url, timeout=config.rpc_timeout, stop=self.stop,
                                    pacer=Pacer(max_concurrency=config.max_concurrency,
                                                requests_per_second=config.requests_per_second))
        self.metrics = IndexerMetrics(config.chain_id, config.contract_address)
        self.name = f"{socket.gethostname()}:{os.getpid()}"  # as /health lists the deployment's indexers
        self.reorganisations = Reorganisations(self.rpc, start_block=config.start_block,
                                               kept_blocks=config.kept_blocks, metrics=self.metrics)
        self.reader = BatchReader(self.rpc, address=config.contract_address, start_block=config.start_block,
                                  span=config.initial_span, max_span=config.max_span, batch_logs=config.batch_logs)
        self.live = LiveReader(self.rpc, config.contract_address)
        self.headers = HeaderChain()
        self.clock = BlockClock(config.poll_interval)
        self.calls = CallMeter()
        self.rereads = Rereads(self.reader.fetcher, self.reorganisations, self.metrics, config.start_block)
        self.deployment: Deployment | None = None
        self.progress: Progress | None = None
        self.next_build = 0.0  # monotonic time from which a deferred index build may start
        self._pid = os.getpid()
        self._head_time: datetime | None = None  # of the head block last seen, for the lag in seconds
        self._seen_safe: int | None = None
        self._rate_limited_at: datetime | None = None  # when the node last limited the rate (for /health)
        self._latest: dict[str, Any] | None = None  # the head's header as last polled
        self._newest_seen = -1  # the highest head polled
        self._new_head_at = time.monotonic()  # when the head last moved
        self._tip_unchecked = True  # the indexed tip must be compared with the chain before reading on
        self._role: IndexerRole | None = None  # as last announced
        self._next_announce = 0.0

    # ------------------------------------------------------------------ lifecycle

    def check_node(self) -> None:
        """Refuses a node on another chain, and a deployment the chain contradicts: no contract at
        BOUNTY_CONTRACT_ADDRESS, one that does not answer the bounty contract's views, a token
        other than the one it holds in BOUNTY_USDC_ADDRESS, or a token without 6 decimals. One
        request: a far node costs one round trip here."""
        contract, usdc = self.config.contract_address, self.config.usdc_address.lower()
        chain_id, code = self.rpc.batch([("eth_chainId", []), ("eth_getCode", [contract, "latest"])])
        chain_id = int(chain_id, 16)
        if chain_id != self.config.chain_id:
            raise IndexerError(
                f"the node at {self.rpc.node} is on chain {chain_id}, "
                f"but BOUNTY_CHAIN_ID is {self.config.chain_id}"
            )
        if code in (None, "0x", "0x0"):
            raise IndexerError(f"no contract at BOUNTY_CONTRACT_ADDRESS {contract} on chain {chain_id}")
        if isinstance(tag := self.config.confirmations, str):
            try:
                self._head()
            except (RpcError, IndexerError) as exc:
                raise IndexerError(f"the node at {self.rpc.node} does not give its {tag} block "
                                   f"(BOUNTY_CONFIRMATIONS={tag}): {exc}; set BOUNTY_CONFIRMATIONS to a number "
                                   "of blocks") from exc
        holds, decimals = self._view_words([(contract, "usdc()"), (usdc, "decimals()")])
        if holds is None or int(holds, 16) >> 160:
            raise IndexerError(
                f"the contract at BOUNTY_CONTRACT_ADDRESS {contract} is not a bounty contract: usdc() answered "
                f"{'nothing' if holds is None else holds} (is BOUNTY_CONTRACT_ADDRESS the token's address?)"
            )
        token = "0x" + holds[-40:].lower()
        if token != usdc:
            raise IndexerError(
                f"the bounty contract at BOUNTY_CONTRACT_ADDRESS {contract} holds the token {token}, "
                f"but BOUNTY_USDC_ADDRESS is {usdc}: set BOUNTY_USDC_ADDRESS={token}"
            )
        if decimals is None or int(decimals, 16) != USDC_DECIMALS:
            raise IndexerError(
                f"the token at BOUNTY_USDC_ADDRESS {usdc} answered decimals() = "
                f"{'nothing' if decimals is None else int(decimals, 16)}, not {USDC_DECIMALS}"
            )

    def _view_words(self, views: list[tuple[str, str]]) -> list[str | None]:
        """The 32-byte words views without arguments return at the latest block, as 64 hex digits
        each, asked in one request; None for a view that reverts or returns something else."""
        calls = [("eth_call", [{"to": address, "data": "0x" + keccak(text=signature)[:4].hex()}, "latest"])
                 for address, signature in views]
        try:
            answers: list[Any] = self.rpc.batch(calls)
        except RpcError:  # a revert (no such function, no fallback that answers) fails the whole batch
            answers = []
            for call in calls:
                try:
                    answers.append(self.rpc.call(*call))
                except RpcError:
                    answers.append(None)
        return [answer[2:] if isinstance(answer, str) and re.fullmatch(r"0x[0-9a-fA-F]{64}", answer) else None
                for answer in answers]

    def ensure_deployment(self) -> Deployment:
        deployment, _ = Deployment.objects.get_or_create(
            chain_id=self.config.chain_id, contract_address=self.config.contract_address,
            defaults={"usdc_address": self.config.usdc_address, "bounty_in_chain_order": True,  # no records yet
                      "submission_in_chain_order": True, "dispute_in_chain_order": True},
        )
        if deployment.usdc_address != self.config.usdc_address:
            deployment.usdc_address = self.config.usdc_address
            deployment.save(update_fields=["usdc_address"])
        SyncState.objects.get_or_create(deployment=deployment)
        self.deployment = deployment
        return deployment

    def run(self) -> None:
        """Backfills, then follows the head until `stop` is set. Another process holding the
        deployment's writer lock makes this one stand by until the lock is free."""
        try:
            self.check_node()
            self.ensure_deployment()
            self.metrics.is_writer.set(0)
            self.announce(IndexerRole.STANDBY)
            with deployment_lock(self.config.chain_id, self.config.contract_address, self.stop,
                                 poll=min(2.0, self.config.poll_interval),
                                 on_wait=lambda: self.announce(IndexerRole.STANDBY)):
                self.metrics.is_writer.set(1)
                self.announce(IndexerRole.WRITER)
                depth = self.config.confirmations
                logger.info("indexing chain %d contract %s from block %d up to %s",
                            self.config.chain_id, self.config.contract_address, self.config.start_block,
                            f"the node's {depth} block" if isinstance(depth, str) else f"{depth} confirmations")
                try:
                    self._follow()
                finally:
                    self.metrics.is_writer.set(0)
        except (Stopped, LockWaitInterrupted) as stopped:
            logger.info("%s", stopped)
        finally:
            if self.deployment is not None:
                with contextlib.suppress(DatabaseError):
                    IndexerProcess.objects.filter(deployment=self.deployment, name=self.name).delete()
        logger.info("indexer stopped")

    def _follow(self) -> None:
        self.prepare()
        builder: threading.Thread | None = None
        try:
            while not self.stop.is_set():
                if self.catch_up():
                    continue
                idle = builder is None or not builder.is_alive()
                if idle and time.monotonic() >= self.next_build and self.indexes_to_build():
                    builder = self._start_index_build()
                self.stop.wait(self.clock.wait())  # until the next block is due (indexer.realtime.BlockClock)
        finally:
            if builder is not None:
                builder.join()

    def announce(self, role: IndexerRole) -> None:
        """Records this process and its role for /health: at once on a change of role, then
        every ANNOUNCE_SECONDS at most. A killed process leaves its row: the first announcement
        deletes rows not seen for longer than the health heartbeat, and taking the writer's role
        deletes the row of the writer before (the lock is free, so it is gone)."""
        now = time.monotonic()
        if role == self._role and now < self._next_announce:
            return
        deployment = self.deployment or self.ensure_deployment()
        seen = timezone.now()
        try:
            if self._role is None:
                stale = seen - timedelta(seconds=settings.BOUNTY_HEALTH_HEARTBEAT_SECONDS)
                IndexerProcess.objects.filter(deployment=deployment, last_seen__lt=stale).delete()
            if role == IndexerRole.WRITER and self._role != role:  # a writer before this one holds no lock: it died
                IndexerProcess.objects.filter(deployment=deployment, role=IndexerRole.WRITER).exclude(
                    name=self.name).delete()
            IndexerProcess.objects.update_or_create(
                deployment=deployment, name=self.name, defaults={"role": role, "last_seen": seen},
                create_defaults={"role": role, "last_seen": seen, "started_at": seen})
        except DatabaseError:  # only /health's list: the indexing goes on, and the next one tries again
            logger.warning("could not record this indexer as %s for /health", role, exc_info=True)
            return
        self._role, self._next_announce = role, now + ANNOUNCE_SECONDS

    # ------------------------------------------------------------------ bulk backfills

    def prepare(self) -> None:
        """Before indexing: drops the indexes an interrupted build left invalid, and decides
        whether what lies ahead is a bulk backfill (indexes deferred, no change-log entry per change)."""
        deployment = self.deployment or self.ensure_deployment()
        indexes.repair()
        state = SyncState.objects.get(deployment=deployment)
        if state.bulk_from_block is not None:
            logger.info("resuming the bulk backfill begun at block %d (%s)", state.bulk_from_block,
                        f"indexes {indexes.index_state()}")
            return
        _, safe = self._head()
        last = state.last_indexed_block if state.last_indexed_block is not None else self.config.start_block - 1
        if safe - last <= settings.BOUNTY_HEALTH_MAX_LAG_BLOCKS or not self._is_bulk(deployment, safe):
            return
        with transaction.atomic():  # the bulk backfill and its deferred indexes, or neither
            SyncState.objects.filter(pk=state.pk).update(bulk_from_block=last + 1)
            dropped = indexes.defer(deployment) if DEFER_INDEXES_ON.get(connection.vendor, False) else 0
        logger.info("bulk backfill from block %d: %d secondary indexes deferred until it has caught up",
                    last + 1, dropped)

    def _is_bulk(self, deployment: Deployment, safe: int) -> bool:
        mode: str = settings.BOUNTY_DEFER_INDEXES
        if mode != "auto":
            return mode == "always"
        held = Deployment.objects.aggregate(n=Sum(F("bounty_total") + F("submission_total") + F("dispute_total")))["n"]
        held = int(held or 0)
        adding = self._rows_to_add(deployment, safe)
        logger.info("the backfill adds %s rows to the %d the record tables hold",
                    "an unknown number of" if adding is None else f"{adding:,}", held)
        return held == 0 if adding is None else adding > held

    def _rows_to_add(self, deployment: Deployment, safe: int) -> int | None:
        """The contract's record counts at the safe head less what the deployment holds; None
        when the node cannot tell (no state kept for that block, another contract)."""
        try:
            counts = self.rpc.batch([("eth_call", [{"to": self.config.contract_address, "data": selector}, hex(safe)])
                                     for selector in _COUNTERS])
            total = sum(int(count, 16) for count in counts)
        except (RpcError, ValueError, TypeError):
            return None
        deployment.refresh_from_db(fields=["bounty_total", "submission_total", "dispute_total"])
        return max(0, total - deployment.bounty_total - deployment.submission_total - deployment.dispute_total)

    def indexes_to_build(self) -> bool:
        """Whether the secondary indexes wait for this indexer to build them: deferred by its
        deployment's backfill (or by none still known), which has caught up."""
        if indexes.index_state() == IndexStateChoice.READY:
            return False
        owner = indexes.deferred_by()
        return owner is None or owner == (self.deployment or self.ensure_deployment()).pk

    def build_indexes(self) -> float:
        """Builds the deferred secondary indexes; returns the seconds it took. When the record
        tables hold only this deployment's records (a first sync), nobody else writes to them:
        on PostgreSQL the indexes are then built side by side without CONCURRENTLY, a third
        faster, while this indexer's next commit waits for the build; otherwise CONCURRENTLY,
        which lets every deployment's indexer write meanwhile."""
        deployment = self.deployment or self.ensure_deployment()
        others = Deployment.objects.exclude(pk=deployment.pk).filter(
            Q(bounty_total__gt=0) | Q(submission_total__gt=0) | Q(dispute_total__gt=0)).exists()
        return indexes.build(deployment, report=logger.info, stop=self.stop, concurrently=others)

    def _start_index_build(self) -> threading.Thread | None:
        """On PostgreSQL the build runs beside the indexing (readers are never blocked); SQLite
        builds here."""
        if connection.vendor != "postgresql":
            self._build_and_report()
            return None

        def build() -> None:
            try:
                self._build_and_report()
            finally:
                connection.close()

        thread = threading.Thread(target=build, name="indexer-index-build", daemon=True)
        thread.start()
        return thread

    def _build_and_report(self) -> None:
        try:
            self.build_indexes()
        except indexes.BuildStopped as stopped:
            logger.info("%s", stopped)
        except DatabaseError:
            logger.exception("the index build failed; trying again in %d s", BUILD_RETRY_SECONDS)
            self.next_build = time.monotonic() + BUILD_RETRY_SECONDS

    # ------------------------------------------------------------------ indexing

    def catch_up(self) -> bool:
        """One step of indexing, after one poll of the head (one call; two with a block tag): the
        historical phase by ranges up to the head less `live_blocks`, then the realtime phase block
        by block up to the safe head (indexer.realtime), with the second reading of the blocks
        that phase read once they are deep enough (indexer.reread). False once it has indexed
        what the poll showed, or when the node answered as a backend behind the others: then
        the next poll waits for the next block."""
        deployment = self.deployment or self.ensure_deployment()
        state = SyncState.objects.get(deployment=deployment)
        last = state.last_indexed_block if state.last_indexed_block is not None else self.config.start_block - 1
        try:
            if self._tip_unchecked:
                if self.reorganisations.undo(deployment):
                    self.headers.clear()
                    return True
                self._tip_unchecked = False
            head, safe = self._poll()
            if head < last:  # a backend behind the others: never a reorganisation, never progress
                return False
            if self._reorganised_at_tip(deployment, head, last):
                return True
            settled = min(safe, head - self.config.live_blocks)
            if self.rereads.due(state, settled) and self.rereads.reread(deployment, state, settled):
                self.headers.clear()
                return True
            if last < settled:
                self._historical(deployment, state, last, settled, head)
                return True
            if last >= safe:
                self._caught_up(state, head, safe)
                return False
            return self._realtime(deployment, last, head, safe)
        except NodeBehind as behind:
            logger.info("%s; asking again", behind)
            self.clock.missed()
            return False
        except ChainChanged as changed:
            logger.warning("%s; checking the indexed blocks", changed)
            self._tip_unchecked = True
            self.headers.clear()
            return True

    def _poll(self) -> tuple[int, int]:
        """The head and safe head, teaching the block clock whether the head moved; a head that
        stays IDLE_CHECK_SECONDS asks for a check of the indexed tip (a reorganisation that kept
        the height)."""
        sent = time.time()
        head, safe = self._head()
        latest = self._latest
        if head > self._newest_seen and latest is not None:
            self.clock.seen(head, int(latest["timestamp"], 16), sent)
            self._newest_seen, self._new_head_at = head, time.monotonic()
        else:
            self.clock.missed()
            if time.monotonic() - self._new_head_at >= IDLE_CHECK_SECONDS:
                self._new_head_at = time.monotonic()
                self._tip_unchecked = True
        return head, safe

    def _reorganised_at_tip(self, deployment: Deployment, head: int, last: int) -> bool:
        """Whether the polled head is the indexed tip's height with another hash: a check of the
        tip is due (without a call: the poll brought the header)."""
        latest = self._latest
        if head != last or latest is None or isinstance(self.config.confirmations, str) or self.config.confirmations:
            return False
        if latest["hash"] == self._tip_hash(deployment, last):
            return False
        self._tip_unchecked = True
        return True

    def _historical(self, deployment: Deployment, state: SyncState, last: int, settled: int, head: int) -> None:
        """The historical phase: blocks last+1..settled by ranges, read ahead while it writes."""
        self.calls.reset()  # what following costs is measured while following
        # As the database has them: a batch clears them on this object before it commits.
        deployment.refresh_from_db(fields=[f"{kind}_in_chain_order" for kind in ("bounty", "submission", "dispute")])
        parent = self._tip_hash(deployment, last)
        self.reader.sizes = batch_sizes(self.config.batch_logs)
        if state.bulk_from_block is not None:
            self._bulk_catch_up(deployment, state, parent, last + 1, settled, head)
            return
        memory = RecordMemory()
        with ReadAhead(lambda start: self.reader.read(start, settled, head), last + 1, settled,
                       self.config.read_ahead, self.stop) as batches, collections_between_batches():
            for n, batch in enumerate(batches, start=1):
                if batch.parent_hash != parent:
                    raise ChainChanged(f"block {batch.start - 1} changed while blocks after it were read")
                self._commit(deployment, batch, memory)
                parent = batch.headers[batch.to]["hash"]
                self.announce(IndexerRole.WRITER)
                if memory.size() > RECORD_MEMORY:
                    memory.clear()
                if n % 64 == 0:
                    gc.collect(1)

    def _realtime(self, deployment: Deployment, last: int, head: int, safe: int) -> bool:
        """The realtime phase: blocks last+1..safe one by one, through headers that hang together
        up to the head (indexer.realtime). True when it should run again at once (headers were
        dropped, or the tip changed)."""
        numbered = not isinstance(self.config.confirmations, str)
        top = head if numbered else safe  # the blocks indexed must be ancestors of the newest header known
        if numbered and self._latest is not None:
            self.headers.add(self._latest)
        self.headers.forget_to(last)
        missing = self.headers.missing(last + 1, top)
        for header in self.live.headers(missing):
            if header is not None:  # None: a backend behind the others; asked again next time
                self.headers.add(header)
        parent = self._tip_hash(deployment, last)
        newest, broken = self.headers.linked(last + 1, top, parent)
        if broken and newest == last:  # the block after the tip is not the tip's child
            self._tip_unchecked = True
            return True
        memory = RecordMemory()
        for number in range(last + 1, min(newest, safe) + 1):
            header = self.headers.get(number)
            assert header is not None  # linked
            events = self.reader.events_of(self.live.logs(header), number, number)
            batch = Batch(number, number, head, number, events, {number: header}, parent, self.rpc.tally.take(),
                          by_range=False)
            self._commit(deployment, batch, memory)
            parent = header["hash"]
            self.headers.forget_to(number)
        self.calls.blocks(min(newest, safe), self.metrics)
        self.announce(IndexerRole.WRITER)
        return broken

    def _bulk_catch_up(self, deployment: Deployment, state: SyncState, parent: str | None,
                       first: int, safe: int, head: int) -> None:
        """A bulk backfill's catch-up over three processes: a reader process reads and decodes,
        a second one applies and renders (`_prepare_ahead`, which forks the reader), and this
        one writes (`_commit_prepared`), on PostgreSQL from a thread of its own (BatchWriter) so
        that receiving the next batch overlaps the server's work on this one. `committed` tells
        the preparing process the last block written."""
        committed = multiprocessing.get_context("fork").Value("q", first - 1, lock=False)
        memory = RecordMemory()  # the preparing process's

        def commit(prepared: Prepared) -> None:
            self._commit_prepared(deployment, prepared)
            committed.value = prepared.batch.to

        writer: BatchWriter[Prepared] | None = None
        try:
            with ReadAhead(lambda start: self._prepare_ahead(deployment, state, memory, committed, start, safe, head),
                           first, safe, self.config.read_ahead, self.stop, in_process=True,
                           on_start=self._own_connections) as prepared_batches, collections_between_batches():
                try:
                    if connection.vendor == "postgresql":  # after the fork: no thread of ours in the reader
                        writer = BatchWriter(commit)
                    for n, prepared in enumerate(prepared_batches, start=1):
                        batch = prepared.batch
                        if batch.parent_hash != parent:
                            raise ChainChanged(f"block {batch.start - 1} changed while blocks after it were read")
                        if writer is None:
                            commit(prepared)
                        else:
                            writer.submit(prepared)
                        parent = batch.headers[batch.to]["hash"]
                        self.announce(IndexerRole.WRITER)
                        if n % 64 == 0:
                            gc.collect(1)
                finally:
                    committed.value = _RELEASED  # a reader waiting for a commit goes on, to find it closed
        finally:
            if writer is not None:
                writer.close()

    def _prepare_ahead(self, deployment: Deployment, state: SyncState, memory: RecordMemory, committed: Any,
                       start: int, safe: int, head: int) -> Iterator[Prepared]:
        """(In a bulk backfill's preparing process.) Every batch from `start` to `safe`, read
        ahead by a reader process of its own, applied to the records in `memory` and rendered,
        with its rows converted for the database. Before the memory forgets its
        records, the batches that wrote them must be committed: the records are read back from
        the database after that."""
        with ReadAhead(lambda first: self.reader.read(first, safe, head), start, safe, self.config.read_ahead,
                       self.stop, in_process=True, on_start=self._own_connections) as batches, \
                collections_between_batches(collect_at_end=False):  # this process exits after
            for batch in batches:
                if memory.size() > RECORD_MEMORY:
                    while committed.value < batch.start - 1:
                        if os.getppid() != self._pid:  # the indexer died
                            return
                        time.sleep(0.005)
                    memory.clear()
                yield self._prepare(deployment, batch, memory, state).shipped()

    def _own_connections(self) -> None:
        """In a reader process: connections of its own to the node and to the database (the
        ones it inherited are the parent's)."""
        if os.getpid() != self._pid:
            self.rpc = self.rpc.fresh()
            self.reader.use(self.rpc)
            database_connections_of_our_own()

    def _head(self) -> tuple[int, int]:
        """The chain head's number (its time kept for the metrics) and the safe head's: the newest
        block deep enough to index, by BOUNTY_CONFIRMATIONS' count or block tag. One request."""
        depth = self.config.confirmations
        calls = [("eth_getBlockByNumber", ["latest", False])]
        if isinstance(depth, str):
            calls.append(("eth_getBlockByNumber", [depth, False]))
        answers = self.rpc.batch(calls)
        for tag, header in zip(("latest", depth), answers, strict=False):
            if not isinstance(header, dict) or "number" not in header:
                raise IndexerError(f"the node at {self.rpc.node} answered {header!r} for its {tag} block")
        head = int(answers[0]["number"], 16)
        self._latest = answers[0]
        self._head_time = chain_time(int(answers[0]["timestamp"], 16))
        self._count_rpc(self.rpc.tally.take())
        safe = int(answers[1]["number"], 16) if isinstance(depth, str) else head - depth
        self._seen_safe = safe
        return head, safe

    def _count_rpc(self, counts: RpcCounts) -> None:
        """The metrics of the calls and failures of a tally; a rate limit among them is noted for
        /health with the next write of the sync state."""
        self.metrics.rpc(counts)
        self.calls.count(counts)
        if counts.errors["rate_limited"]:
            self._rate_limited_at = timezone.now()

    def _caught_up(self, state: SyncState, head: int, safe: int) -> None:
        self.calls.blocks(state.last_indexed_block, self.metrics)
        SyncState.objects.filter(pk=state.pk).update(head_block=head, safe_block=max(0, safe),
                                                     rate_limited_at=self._rate_limited_at,
                                                     rpc_calls_per_block=self.calls.per_block,
                                                     rpc_calls_per_day=self.calls.per_day,
                                                     last_heartbeat=timezone.now())
        self.progress = None
        self.announce(IndexerRole.WRITER)
        last = state.last_indexed_block
        last_time = IndexedBlock.objects.filter(deployment_id=state.deployment_id, number=last).values_list(
            "timestamp", flat=True).first() if last is not None else None
        self.metrics.position(last=last, head=head, safe=safe,
                              last_time=last_time, head_time=self._head_time)
        self._count_rpc(self.rpc.tally.take())

    def _tip_hash(self, deployment: Deployment, last: int) -> str | None:
        if last < self.config.start_block:
            return None
        return IndexedBlock.objects.filter(deployment=deployment, number=last).values_list("hash", flat=True).first()

    def _commit(self, deployment: Deployment, batch: Batch, memory: RecordMemory | None = None) -> None:
        """Applies and writes one batch with the progress it makes, in one transaction. `memory`
        holds the records written by the batches before (of this catch-up), as they are in the
        database, so that they need not be read back; it is dropped with the catch-up on an error."""
        started = time.perf_counter()
        with transaction.atomic():
            locked = self._lock(deployment, batch)
            prepared = self._prepare(deployment, batch, memory or RecordMemory(), locked)
            self._write(deployment, locked, prepared)
        self._committed(prepared, time.perf_counter() - started)

    def _commit_prepared(self, deployment: Deployment, prepared: Prepared) -> None:
        """Writes a batch `_prepare` applied ahead, with its progress, in one transaction (a
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
        self._count_rpc(batch.rpc)
        self.metrics.position(last=batch.to, head=batch.head, safe=batch.safe,
                              last_time=prepared.times.get(batch.to), head_time=self._head_time)

    def _lock(self, deployment: Deployment, batch: Batch) -> SyncState:
        locked = SyncState.objects.select_for_update().get(deployment=deployment)
        expected = batch.start - 1 if batch.start > self.config.start_block else None
        if locked.last_indexed_block != expected:
            raise IndexerError("the sync state moved under this indexer: is another writer running without the lock?")
        return locked

    def _prepare(self, deployment: Deployment, batch: Batch, memory: RecordMemory, state: SyncState) -> Prepared:
        """Applies a batch's events in memory and renders what it writes. It reads the database
        only for records that `memory` lacks, which no batch of this catch-up has written."""
        bulk = state.bulk_from_block is not None
        store = RecordStore(deployment, memory.bounties, memory.submissions, memory.disputes,
                            messages=None if bulk else [])
        store.load(batch.events)
        times = {number: chain_time(int(header["timestamp"], 16)) for number, header in batch.headers.items()}
        # A reorganisation never rolls back to below the oldest block hash kept after this batch
        # (see indexer.reorg), so the logs of the blocks up to there need no undo entries.
        undo_floor = batch.to - self.config.kept_blocks
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
            entries = change_rows(deployment, locked.last_seq, store, messages) if store is not None else []
            if locked.bulk_from_block is not None and batch.final:  # the bulk backfill is over: clients need
                entries.append((deployment.pk, locked.last_seq + 1, MessageType.RESYNC,  # a new snapshot
                                {"from_block": locked.bulk_from_block, "to_block": batch.to}, batch.to,
                                timezone.now()))
                locked.bulk_from_block = None
            stream.insert(ChangeLogEntry, CHANGE_COLUMNS, entries)
            stream.insert(AppliedLog, _LEDGER_COLUMNS, prepared.ledger)
            stream.insert(IndexedBlock, _BLOCK_COLUMNS, [(deployment.pk, number, header["hash"], header["parentHash"],
                                                          prepared.times[number])
                                                         for number, header in batch.headers.items()])
        if entries:  # wake the websocket feeds of every server process once this commits
            transaction.on_commit(notify_changes)
        IndexedBlock.objects.filter(deployment=deployment, number__lt=batch.to - self.config.kept_blocks).delete()
        if batch.final:
            locked.backfill_from_block = locked.backfill_to_block = None
        else:
            locked.backfill_from_block = locked.backfill_from_block or batch.start
            locked.backfill_to_block = batch.safe
        if batch.by_range and locked.reread_block == locked.last_indexed_block:  # read by range from the start
            locked.reread_block = batch.to
        locked.last_indexed_block = batch.to
        locked.rpc_calls_per_block, locked.rpc_calls_per_day = self.calls.per_block, self.calls.per_day
        locked.last_seq += len(entries)
        locked.head_block = batch.head
        locked.safe_block = batch.safe
        locked.rate_limited_at = self._rate_limited_at
        locked.last_heartbeat = timezone.now()
        locked.save()
        self._report(batch, prepared.applied, Counter(message.type for message in messages))

    # ------------------------------------------------------------------ reporting

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
    """A batch applied in memory, with everything it writes rendered (Indexer._prepare)."""

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


