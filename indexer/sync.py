"""The indexer pipeline: fetch logs, decode, apply, commit; detect and undo reorganisations.

Each batch is one database transaction holding the records it changes, the applied-log ledger,
the change log, the hashes of its blocks and the new progress, so a crash at any instant
leaves either all of a batch or none of it, and a restart resumes right after the last
committed block. Only blocks at least `confirmations` deep are indexed. Before each batch the
stored tip's hash is compared with the chain; on a mismatch the indexer walks back through the
kept hashes to the common ancestor, undoes everything above it, and indexes the new branch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from indexer.bulk import RowStream, defer_search_index_merge, insert_rows
from indexer.events import RECORD_EVENT_TOPICS, RecordEvent, UndecodableLog, decode_log
from indexer.locks import deployment_lock
from indexer.models import AppliedLog, ChangeLogEntry, IndexedBlock, SyncState
from indexer.rpc import RangeTooLarge, RpcClient
from indexer.transitions import Message, RecordStore, apply_event, chain_time, undo_entries
from records.live import notify_changes
from records.models import Deployment

logger = logging.getLogger(__name__)

_LEDGER_COLUMNS = ("deployment_id", "block_number", "block_hash", "tx_hash", "log_index", "event", "undo")
_CHANGE_COLUMNS = ("deployment_id", "seq", "type", "payload", "block_number", "created_at")
_BLOCK_COLUMNS = ("deployment_id", "number", "hash", "parent_hash", "timestamp")


class IndexerError(RuntimeError):
    """A condition the indexer cannot continue from; the message says what to do."""


class ReorgTooDeep(IndexerError):
    pass


@dataclass(frozen=True)
class IndexerConfig:
    rpc_url: str
    chain_id: int
    contract_address: str
    usdc_address: str
    start_block: int
    confirmations: int
    poll_interval: float = 2.0
    initial_span: int = 2_000
    max_span: int = 50_000
    kept_blocks: int = 1_024

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
            initial_span=min(2_000, settings.BOUNTY_GETLOGS_MAX_BLOCKS),
            max_span=settings.BOUNTY_GETLOGS_MAX_BLOCKS,
        )


@dataclass
class LogFetcher:
    """eth_getLogs over block ranges that adapt to the node: grow on success, split on refusal."""

    rpc: RpcClient
    address: str
    span: int = 2_000
    max_span: int = 50_000

    def fetch(self, start: int, end: int) -> tuple[int, list[dict[str, Any]]]:
        """Logs of the record events in [start, to] for some start <= to <= end; returns (to, logs)."""
        while True:
            to = min(end, start + self.span - 1)
            try:
                logs: list[dict[str, Any]] = self.rpc.call(
                    "eth_getLogs",
                    [{"address": self.address, "fromBlock": hex(start), "toBlock": hex(to),
                      "topics": [RECORD_EVENT_TOPICS]}],
                )
            except RangeTooLarge as exc:
                if to == start:
                    raise IndexerError(
                        f"the node refuses eth_getLogs even for the single block {start}: {exc}"
                    ) from exc
                allowed = to - start  # at least halve... unless the node says better
                if exc.suggested_to is not None and start <= exc.suggested_to < to:
                    allowed = exc.suggested_to - start + 1
                elif exc.max_span is not None and exc.max_span < to - start + 1:
                    allowed = exc.max_span
                    self.max_span = min(self.max_span, exc.max_span)  # the node's limit: never grow past it
                else:
                    allowed = max(1, (to - start + 1) // 2)
                logger.info("node refused blocks %d-%d (%s); trying %d blocks", start, to, exc, allowed)
                self.span = max(1, allowed)
                continue
            if not isinstance(logs, list):
                raise IndexerError(f"eth_getLogs answered {type(logs).__name__}, not a list")
            if to - start + 1 >= self.span:
                self.span = min(self.max_span, self.span * 2)
            return to, logs


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
        self.rpc = rpc or RpcClient(config.rpc_url)
        self.stop = stop or threading.Event()
        self.fetcher = LogFetcher(self.rpc, config.contract_address, span=config.initial_span,
                                  max_span=config.max_span)
        self.deployment: Deployment | None = None
        self.progress: Progress | None = None

    # ------------------------------------------------------------------ lifecycle

    def check_node(self) -> None:
        """Refuses a node on another chain or without the contract."""
        chain_id = int(self.rpc.call("eth_chainId", []), 16)
        if chain_id != self.config.chain_id:
            raise IndexerError(
                f"the node at {self.config.rpc_url} is on chain {chain_id}, "
                f"but BOUNTY_CHAIN_ID is {self.config.chain_id}"
            )
        code = self.rpc.call("eth_getCode", [self.config.contract_address, "latest"])
        if code in (None, "0x", "0x0"):
            raise IndexerError(
                f"no contract at BOUNTY_CONTRACT_ADDRESS {self.config.contract_address} on chain {chain_id}"
            )

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
        """Backfills, then follows the head until `stop` is set."""
        self.check_node()
        self.ensure_deployment()
        with deployment_lock(self.config.chain_id, self.config.contract_address, self.stop):
            logger.info("indexing chain %d contract %s from block %d with %d confirmations",
                        self.config.chain_id, self.config.contract_address, self.config.start_block,
                        self.config.confirmations)
            while not self.stop.is_set():
                if not self.step():
                    self.stop.wait(self.config.poll_interval)
        logger.info("indexer stopped")

    # ------------------------------------------------------------------ one step

    def step(self) -> bool:
        """Indexes one batch (or undoes a reorg); False when caught up with the safe head."""
        deployment = self.deployment or self.ensure_deployment()
        head = int(self.rpc.call("eth_blockNumber", []), 16)
        safe = head - self.config.confirmations
        state = SyncState.objects.get(deployment=deployment)
        if self._undo_reorg(deployment, state):
            return True
        last = state.last_indexed_block if state.last_indexed_block is not None else self.config.start_block - 1
        if last >= safe:
            SyncState.objects.filter(pk=state.pk).update(head_block=head, last_heartbeat=timezone.now())
            self.progress = None
            return False
        to, raw_logs = self.fetcher.fetch(last + 1, safe)
        events = self._decode(raw_logs, last + 1, to)
        headers = self._headers(sorted({e.log.block_number for e in events} | {to}))
        if headers is None or any(headers[e.log.block_number]["hash"] != e.log.block_hash for e in events):
            logger.warning("blocks %d-%d changed while being read (a reorganisation); reading them again", last + 1, to)
            return True
        counts = self._commit(deployment, state, last, to, head, events, headers)
        self._report(last + 1, to, safe, counts)
        return True

    def _decode(self, raw_logs: list[dict[str, Any]], start: int, to: int) -> list[RecordEvent]:
        events: list[RecordEvent] = []
        for raw in raw_logs:
            if raw.get("removed") or str(raw.get("address", "")).lower() != self.config.contract_address:
                continue
            try:
                event = decode_log(raw)
            except (UndecodableLog, KeyError, ValueError, TypeError) as exc:
                logger.error("skipping a log that does not decode (%s): %s", exc, raw)
                continue
            if not start <= event.log.block_number <= to:
                raise IndexerError(f"the node returned a log of block {event.log.block_number} for blocks {start}-{to}")
            events.append(event)
        events.sort(key=lambda e: (e.log.block_number, e.log.log_index))
        return events

    def _headers(self, numbers: list[int]) -> dict[int, dict[str, Any]] | None:
        headers: dict[int, dict[str, Any]] = {}
        for start in range(0, len(numbers), 200):
            chunk = numbers[start : start + 200]
            answers = self.rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n in chunk])
            for number, header in zip(chunk, answers, strict=True):
                if not header:
                    return None
                headers[number] = header
        return headers

    @transaction.atomic
    def _commit(self, deployment: Deployment, state: SyncState, last: int, to: int, head: int,
                events: list[RecordEvent], headers: dict[int, dict[str, Any]]) -> Counter[str]:
        defer_search_index_merge()
        locked = SyncState.objects.select_for_update().get(pk=state.pk)
        if locked.last_indexed_block != state.last_indexed_block:
            raise IndexerError("the sync state moved under this indexer: is another writer running without the lock?")
        store = RecordStore(deployment)
        store.load(events)
        times = {number: chain_time(int(header["timestamp"], 16)) for number, header in headers.items()}
        # A reorganisation never rolls back to below the oldest block hash kept after this batch
        # (see _common_ancestor), so the logs of the blocks up to there need no undo entries.
        undo_floor = to - self.config.kept_blocks
        ledger: list[tuple[Any, ...]] = []
        messages: list[Message] = []
        for event in events:
            log = event.log
            applied = apply_event(store, event, times[log.block_number])
            ledger.append((deployment.pk, log.block_number, log.block_hash, log.tx_hash, log.log_index,
                           type(event).__name__, applied.undo if log.block_number > undo_floor else []))
            messages.extend(applied.messages)
        # The records first: the database indexes them while the payloads are rendered.
        with RowStream() as stream:
            store.save(stream)
            stream.insert(ChangeLogEntry, _CHANGE_COLUMNS, self._entries(deployment, locked.last_seq, store, messages))
            stream.insert(AppliedLog, _LEDGER_COLUMNS, ledger)
            stream.insert(IndexedBlock, _BLOCK_COLUMNS, [(deployment.pk, number, header["hash"], header["parentHash"],
                                                          times[number]) for number, header in sorted(headers.items())])
        if messages:  # wake the websocket feeds of every server process once this commits
            transaction.on_commit(notify_changes)
        IndexedBlock.objects.filter(deployment=deployment, number__lt=to - self.config.kept_blocks).delete()
        locked.last_indexed_block = to
        locked.last_seq += len(messages)
        locked.head_block = head
        locked.last_heartbeat = timezone.now()
        locked.save()
        return Counter(message.type for message in messages)

    @staticmethod
    def _entries(deployment: Deployment, last_seq: int, store: RecordStore,
                 messages: list[Message]) -> list[tuple[Any, ...]]:
        """Change-log rows in the order of _CHANGE_COLUMNS, numbered after `last_seq`."""
        now = timezone.now()
        return [(deployment.pk, seq, message.type, store.payload(message), message.block_number, now)
                for seq, message in enumerate(messages, start=last_seq + 1)]

    # ------------------------------------------------------------------ reorganisations

    def _undo_reorg(self, deployment: Deployment, state: SyncState) -> bool:
        tip = IndexedBlock.objects.filter(deployment=deployment).order_by("-number").first()
        if tip is None:
            return False
        header = self.rpc.call("eth_getBlockByNumber", [hex(tip.number), False])
        if header and header["hash"] == tip.hash:
            return False
        ancestor = self._common_ancestor(deployment, tip.number)
        self._roll_back(deployment, ancestor, tip.number)
        return True

    def _common_ancestor(self, deployment: Deployment, tip: int) -> int:
        stored = list(IndexedBlock.objects.filter(deployment=deployment).order_by("-number")
                      .values_list("number", "hash"))
        for start in range(0, len(stored), 200):
            chunk = stored[start : start + 200]
            answers = self.rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n, _ in chunk])
            for (number, stored_hash), header in zip(chunk, answers, strict=True):
                if header and header["hash"] == stored_hash:
                    return int(number)
        base = self.config.start_block - 1
        if base >= tip - self.config.kept_blocks:
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
        insert_rows(ChangeLogEntry, _CHANGE_COLUMNS, self._entries(deployment, state.last_seq, store, messages))
        if messages:  # wake the websocket feeds of every server process once this commits
            transaction.on_commit(notify_changes)
        state.last_seq += len(messages)
        state.last_indexed_block = ancestor if ancestor >= self.config.start_block else None
        state.save()
        logger.warning("reorganisation: rolled back blocks %d-%d (%d logs, %d records corrected); "
                       "indexing the new branch", ancestor + 1, tip, len(orphaned), len(messages))

    # ------------------------------------------------------------------ reporting

    def _report(self, start: int, to: int, safe: int, counts: Counter[str]) -> None:
        applied = sum(counts.values())
        if to < safe or (self.progress is not None and to < self.progress.target_block):
            if self.progress is None:
                self.progress = Progress(first_block=start, target_block=safe)
            self.progress.events += applied
            logger.info(self.progress.line(to))
            return
        if self.progress is not None:
            self.progress.events += applied
            logger.info(self.progress.line(to))
            logger.info("backfill done; following the head")
            self.progress = None
        if applied:
            detail = ", ".join(f"{kind} x{n}" for kind, n in sorted(counts.items()))
            logger.info("applied blocks %d-%d: %s", start, to, detail)
