"""The fetch stage: the contract's logs over block ranges, several ranges in flight at once,
handed on in block order.

A node far away answers each request a round trip later, so ranges are read concurrently: as
many requests in flight as the node bears (indexer.pacing adapts the number and keeps the plan's
budget), each range's answer waiting until those before it have been handed on, so that the
stages after this one see the chain in order, exactly once. A range's span adapts as before: it
shrinks to what the node's refusal allows and grows while ranges hold few logs, and the ranges
planned after a change take the new span.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from indexer.errors import (
    BatchTooLarge,
    ChainChanged,
    IndexerError,
    NodeBehind,
    RangeTooLarge,
    RetriesExhausted,
    RpcError,
    Stopped,
)
from indexer.events import RECORD_EVENT_TOPICS, RecordEvent, UndecodableLog, decode_log
from indexer.explorer import ExplorerGuide
from indexer.refusals import RefusalKind
from indexer.rpc import RpcClient, RpcCounts, is_not_served

logger = logging.getLogger(__name__)

Logs = list[dict[str, Any]]
QUIET_BATCH_SECONDS = 1.0  # at most this long between the commits of a stretch without events
_WAIT_STEP = 0.1  # seconds between looks at `stop` while waiting for a range
NO_CAP = 50_000  # BOUNTY_GETLOGS_MAX_BLOCKS's default: no cap known until the node refuses a range
GROWING_AHEAD = 2  # ranges planned ahead while the span still doubles (OrderedRanges)
PROBE_EVERY = 256  # ranges answered between two probes past a ceiling that a refusal left
# Blocks below the head past which no reorganisation is expected (two epochs of Ethereum; an OP
# Stack chain's blocks that deep are derived from L1 data): an event block that deep takes its hash
# and time from its logs' `blockTimestamp`, without a header.
STAMPED_DEPTH = 64


@dataclass
class LogFetcher:
    """eth_getLogs over block ranges that adapt to the node: they grow while ranges hold few logs
    and keep to what the node's refusals teach (indexer.refusals): a cap the node names is never
    asked past again; a range it suggests is asked once, and its size, or half the refused one,
    becomes the ceiling, which a range probes upwards only once every PROBE_EVERY ranges. A node
    behind the blocks asked for is asked again, the same range. A refusal nobody recognises is
    halved too; only a node that does not serve eth_getLogs, or refuses a single block, stops the
    indexer."""

    rpc: RpcClient
    address: str
    span: int = 2_000
    max_span: int = NO_CAP  # the node's cap, as configured (BOUNTY_GETLOGS_MAX_BLOCKS) or named by the node
    target_logs: int = 4_000  # a range with more logs than this makes the next one shorter (the batch size)
    ceiling: int | None = None  # the largest span that a refusal without a cap left (None: none yet)
    refused: int | None = None  # the smallest span refused
    _since_refusal: int = 0  # ranges answered since the last refusal or probe
    _probing: int | None = None  # the ceiling before a probe past it
    grown: bool = False  # the span has stopped doubling: a refusal, the cap, or ranges that hold many logs
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # ranges are read on several threads

    def fetch(self, start: int, end: int) -> tuple[int, list[dict[str, Any]]]:
        """Logs of the record events in [start, to] for some start <= to <= end; returns (to, logs)."""
        suggested: int | None = None  # a range end the node suggested, asked once
        while True:
            to = min(end, start + self._span() - 1) if suggested is None else min(end, suggested)
            suggested = None
            try:
                logs: list[dict[str, Any]] = self.rpc.call(
                    "eth_getLogs",
                    [{"address": self.address, "fromBlock": hex(start), "toBlock": hex(to),
                      "topics": [RECORD_EVENT_TOPICS]}],
                )
            except RangeTooLarge as exc:
                with self._lock:
                    suggested = self._refused(start, to, exc)
                continue
            except (RetriesExhausted, BatchTooLarge):
                raise
            except RpcError as exc:
                if is_not_served(exc):
                    raise IndexerError(f"the node at {self.rpc.node} cannot serve eth_getLogs: {exc}") from exc
                with self._lock:
                    self._refused(start, to, RangeTooLarge(str(exc), refusal=RefusalKind.TOO_MUCH, provider="unknown",
                                                           code=exc.code, data=exc.data))
                continue
            if not isinstance(logs, list):
                raise IndexerError(f"eth_getLogs answered {type(logs).__name__}, not a list")
            for log in logs:  # ranges are handed on together: a stray log would be applied twice
                block = _block_of(log)
                if block is not None and not start <= block <= to:
                    raise IndexerError(f"the node at {self.rpc.node} answered eth_getLogs for blocks {start}-{to} "
                                       f"with a log of block {block}: {log}")
            with self._lock:
                self._answered(to - start + 1, len(logs))
            return to, logs

    def _span(self) -> int:
        return max(1, min(self.span, self._cap()))

    def _cap(self) -> int:
        return self.max_span if self.ceiling is None else min(self.max_span, self.ceiling)

    def cap(self) -> int | None:
        """The widest range the node allows, as configured or as its refusals taught; None while
        neither says (BOUNTY_GETLOGS_MAX_BLOCKS left at its default, no refusal yet)."""
        with self._lock:
            return self._cap() if self.max_span < NO_CAP or self.ceiling is not None else None

    def _answered(self, size: int, logs: int) -> None:
        """A range of `size` blocks held `logs` logs: the span for the next ones."""
        self._since_refusal += 1
        if self._probing is not None and size > self._probing:  # the probe held: the ceiling stays raised
            self._probing = None
        if logs > self.target_logs:
            self.span = max(1, size * self.target_logs // logs)
            self.grown = True
            return
        if size >= self.span and logs < self.target_logs // 2:
            self.span = min(self.max_span, self.span * 2)
        if self.span >= self.max_span or logs >= self.target_logs // 2:
            self.grown = True
        ceiling, refused = self.ceiling, self.refused
        if (ceiling is not None and size >= ceiling and self._since_refusal >= PROBE_EVERY
                and logs < self.target_logs // 2 and (refused is None or ceiling < refused - 1)):
            self._since_refusal = 0  # the next range probes past the ceiling, once
            self._probing = ceiling
            self.ceiling = min(ceiling * 2, self.max_span, refused - 1 if refused is not None else ceiling * 2)
            self.span = max(self.span, self.ceiling)

    def _refused(self, start: int, to: int, exc: RangeTooLarge) -> int | None:
        """Learns from a refusal of [start, to]; the end of a range the node suggests, to ask once."""
        size = to - start + 1
        if size == 1:
            raise IndexerError(f"the node at {self.rpc.node} refuses eth_getLogs even for the single block "
                               f"{start}: {exc}")
        self._since_refusal = 0
        self.grown = True
        if self._probing is not None and size > self._probing:  # a probe refused: back to the ceiling before it
            self.ceiling = self.span = self._probing
            self._probing = None
            if exc.refusal == RefusalKind.CAP:
                self.refused = size if self.refused is None else min(self.refused, size)
            return None
        suggested = exc.last if exc.last is not None and start <= exc.last < to else None
        if exc.refusal == RefusalKind.CAP and exc.cap is not None and exc.cap < size:
            self.max_span = min(self.max_span, exc.cap)  # the node's cap: never asked past again
            allowed = exc.cap
        elif suggested is not None:
            allowed = suggested - start + 1
        else:
            allowed = max(1, size // 2)
        self.span = allowed
        if not (exc.refusal == RefusalKind.CAP and exc.cap is not None):
            self.ceiling = allowed if self.ceiling is None else min(self.ceiling, allowed)
        if exc.refusal == RefusalKind.CAP and exc.cap is None:  # a cap it does not name: never probed past
            self.refused = size if self.refused is None else min(self.refused, size)
        logger.info("the node at %s refused blocks %d-%d (%s: %s); asking %d blocks", self.rpc.node, start, to,
                    exc.provider, exc.refusal, allowed)
        return suggested

    def fetch_all(self, start: int, end: int, abandoned: threading.Event | None = None) -> FetchedRange:
        """Every log of the record events in [start, end], in as many requests as the node needs;
        after a failure, the blocks read before it and the failure. Once `abandoned` is set, no
        further request is sent."""
        fetched = FetchedRange(start - 1, [])
        while fetched.to < end and not (abandoned is not None and abandoned.is_set()):
            try:
                to, part = self.fetch(fetched.to + 1, end)
            except Exception as exc:  # raised to the caller once the blocks before are handed on
                fetched.error = exc
                return fetched
            fetched.to = to
            fetched.logs.extend(part)
        return fetched


@dataclass
class Batch:
    """Blocks start..to as read from the node: their record events, in chain order, and the
    headers of their event blocks and of `to`."""

    start: int
    to: int
    head: int
    safe: int
    events: list[RecordEvent]
    headers: dict[int, dict[str, Any]]
    parent_hash: str | None  # the hash of block start - 1 when this was read (None: before the start block)
    rpc: RpcCounts = field(default_factory=RpcCounts)  # the calls made to read it, for the metrics
    by_range: bool = True  # read by range (below the realtime phase's blocks), not block by block
    guided: bool = False  # its empty blocks empty on an explorer's word (indexer.explorer), proven later
    explorer_set_aside: str | None = None  # why the reader set the explorer aside, if it has (told to the writer)

    @property
    def final(self) -> bool:
        """Whether it reaches the safe head it was read for."""
        return self.to >= self.safe


def _block_of(log: Any) -> int | None:
    """A log's block number; None where it does not read (decoding reports those)."""
    try:
        return int(log["blockNumber"], 16)
    except (KeyError, TypeError, ValueError):
        return None


@dataclass
class FetchedRange:
    to: int  # the last block read
    logs: Logs
    error: Exception | None = None


class OrderedRanges:
    """Ranges from `start` to `end` read by up to `rpc.pacer.max_concurrency` threads, yielded in
    order as (first block, last block, logs, whether a failure follows). At most `ahead` ranges
    wait beyond the one being handed on, which bounds memory however fast the node answers.
    Leaving the iteration early drops the ranges not yet started; those in flight end with their
    request, on daemon threads that never hold up the process's exit. Once the client's `stop`
    is set, waiting for a range raises Stopped."""

    def __init__(self, fetcher: LogFetcher, start: int, end: int, *, ahead: int = 64) -> None:
        self._fetcher = fetcher
        self._next = start
        self._end = end
        self._ahead = max(1, ahead)
        self._pending: collections.deque[tuple[int, concurrent.futures.Future[FetchedRange]]] = collections.deque()
        self._tasks: queue.SimpleQueue[tuple[int, int, concurrent.futures.Future[FetchedRange]] | None] = \
            queue.SimpleQueue()
        self._abandoned = threading.Event()  # the iteration ended: the ranges still in flight are not wanted
        # Started as ranges are planned, up to the cap: following the head plans one range at a time.
        self._workers: list[threading.Thread] = []

    def ready(self) -> bool:
        """Whether the next range's logs are here (iterating would not wait for the node)."""
        return bool(self._pending) and self._pending[0][1].done()

    def __iter__(self) -> Iterator[tuple[int, int, Logs, bool]]:
        """A range that failed part-way comes as the blocks read before the failure, with True,
        then the failure is raised: the stages after this one can keep the blocks before it."""
        try:
            while True:
                self._plan()
                if not self._pending:
                    return
                first, future = self._pending.popleft()
                fetched = self._result(future)
                if fetched.to >= first:
                    yield first, fetched.to, fetched.logs, fetched.error is not None
                if fetched.error is not None:
                    raise fetched.error
        finally:
            self._abandoned.set()
            for _, future in self._pending:
                future.cancel()
            for _ in self._workers:
                self._tasks.put(None)

    def _plan(self) -> None:
        """Submits ranges until enough are in flight or waiting: twice what the node bears now."""
        # While the span still doubles, few ranges are planned ahead: the ones planned now take the
        # span known now, and a deep queue of short ranges costs a call each (a first sync's start).
        wanted = min(self._ahead, 2 * self._fetcher.rpc.pacer.limit if self._fetcher.grown else GROWING_AHEAD)
        while self._next <= self._end and len(self._pending) < wanted:
            first, last = self._next, min(self._end, self._next + self._fetcher.span - 1)
            future: concurrent.futures.Future[FetchedRange] = concurrent.futures.Future()
            self._tasks.put((first, last, future))
            self._pending.append((first, future))
            self._next = last + 1
            if len(self._workers) < min(len(self._pending), self._fetcher.rpc.pacer.max_concurrency):
                worker = threading.Thread(target=self._work, name="indexer-fetch", daemon=True)
                worker.start()
                self._workers.append(worker)

    def _result(self, future: concurrent.futures.Future[FetchedRange]) -> FetchedRange:
        stop = self._fetcher.rpc.stop
        while True:
            try:
                return future.result(timeout=_WAIT_STEP)
            except concurrent.futures.TimeoutError:
                if stop.is_set():
                    raise Stopped("stopped while waiting for the node's logs") from None

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            first, last, future = task
            if future.set_running_or_notify_cancel():
                future.set_result(self._fetcher.fetch_all(first, last, self._abandoned))


class BatchReader:
    """The fetch and decode stages: the record events of a span of blocks, in batches of about
    `batch_logs` events, each with the block headers the commit needs and the reorganisation
    checks use."""

    def __init__(self, rpc: RpcClient, *, address: str, start_block: int, span: int, max_span: int,
                 batch_logs: int, guide: ExplorerGuide | None = None) -> None:
        self.rpc = rpc
        self.guide = guide  # an explorer that names the blocks to read, ahead of the ranges
        self.fetcher = LogFetcher(rpc, address, span=span, max_span=max_span, target_logs=batch_logs)
        self.address = address
        self.start_block = start_block
        self.batch_logs = batch_logs
        self.sizes: Iterator[int] = itertools.repeat(batch_logs)  # the sizes of the next batches
        self._last_read: tuple[int, str] | None = None  # the last block of the last batch read, and its hash

    def use(self, rpc: RpcClient) -> None:
        """Reads through this client from now on (a forked process's own)."""
        self.rpc = self.fetcher.rpc = rpc
        if self.guide is not None:
            self.guide.use(rpc)

    def read(self, start: int, safe: int, head: int, final: int | None = None, *,
             guided: bool = False) -> Iterator[Batch]:
        """The record events of blocks start..safe in batches of about `batch_logs` events, each
        with the headers of its event blocks, of its last block and of the block before it,
        decoded one batch at a time so the first can be committed while the rest are read.

        The ranges are read several at once (indexer.fetch). A batch ends when it holds enough
        events, at `safe`, or when the next range has not come yet and the batch holds events (so
        they are committed without waiting) or has gathered ranges for QUIET_BATCH_SECONDS: a quiet
        stretch costs one request for headers a second, not one a range. ChainChanged when blocks
        changed while being read: the caller checks the indexed blocks again. Each batch carries
        the safe head the sync runs to, `final` (default `safe`): the realtime phase reads on from
        `safe` when it is lower.

        `guided` (Historical.guided says when it pays): the blocks the explorer (`guide`) has
        indexed come first, as it guides (indexer.explorer), in batches marked `guided`; the
        blocks after them by range."""
        if guided and self.guide is not None:
            for first, to, guided_logs in self.guide.read(start, safe):
                for part_first, part_last, part in split_logs(self._relevant(guided_logs), first, to, self.sizes):
                    batch = self._batch(part_first, part_last, part, head, safe if final is None else final)
                    batch.guided = True
                    yield batch
                start = to + 1
            if start > safe:
                return
        gathered: list[tuple[int, dict[str, Any]]] = []
        first = start
        cut_by = time.monotonic() + QUIET_BATCH_SECONDS
        ranges = OrderedRanges(self.fetcher, start, safe)
        for _, to, raw_logs, failing in ranges:
            gathered.extend(self._relevant(raw_logs))
            waiting = not ranges.ready()
            if to >= safe or failing or len(gathered) >= self.batch_logs or (
                    waiting and (gathered or time.monotonic() >= cut_by)):
                for part_first, part_last, part in split_logs(gathered, first, to, self.sizes):
                    yield self._batch(part_first, part_last, part, head, safe if final is None else final)
                first, gathered, cut_by = to + 1, [], time.monotonic() + QUIET_BATCH_SECONDS

    def _batch(self, first: int, last: int, raw_logs: list[dict[str, Any]], head: int, safe: int) -> Batch:
        """A batch of blocks first..last with the headers the commit needs: of its event blocks (their
        hash and time), of `last`, and of the block before it (whose hash must be the one indexed).
        An event block at least STAMPED_DEPTH below the head whose logs all carry its
        `blockTimestamp` (geth 1.16 on, reth, anvil) needs no header: its logs say its hash and
        time. A shallower one's header is asked after its logs, which a reorganisation between the
        two shows (ChainChanged)."""
        events = self._decode(raw_logs, first, last)
        stamped = {number: header for number, header in _stamped_blocks(raw_logs).items()
                   if number <= head - STAMPED_DEPTH and number != last}
        numbers = {e.log.block_number for e in events} | {last}
        parent_number = first - 1 if first > self.start_block else None
        # The block before, read as the last of the batch before, STAMPED_DEPTH deep: its hash as read then.
        known = self._last_read if parent_number is not None and parent_number <= head - STAMPED_DEPTH and \
            self._last_read is not None and self._last_read[0] == parent_number else None
        asked = {n for n in numbers if n not in stamped} | \
            ({parent_number} if parent_number is not None and known is None else set())
        headers = self._headers(sorted(asked), head)
        if headers is None:
            raise ChainChanged(f"blocks {first}-{last} changed while being read (a reorganisation)")
        headers.update({n: stamped[n] for n in numbers if n not in headers})
        if any(headers[e.log.block_number]["hash"] != e.log.block_hash for e in events):
            raise ChainChanged(f"blocks {first}-{last} changed while being read (a reorganisation)")
        parent = (known[1] if known is not None else headers.pop(parent_number)["hash"]) \
            if parent_number is not None else None
        self._last_read = (last, headers[last]["hash"])
        return Batch(first, last, head, safe, events, {n: headers[n] for n in sorted(numbers)}, parent,
                     self.rpc.tally.take(),
                     explorer_set_aside=self.guide.set_aside_because if self.guide is not None else None)

    def events_of(self, raw_logs: list[dict[str, Any]], first: int, last: int) -> list[RecordEvent]:
        """The record events of the contract's logs among `raw_logs`, of blocks first..last, in chain order."""
        return self._decode([raw for _, raw in self._relevant(raw_logs)], first, last)

    def _relevant(self, raw_logs: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
        """(block number, log) of the contract's logs that are not removed, in block order; a
        log whose block number does not read goes first, for `_decode` to report."""
        relevant = []
        for raw in raw_logs:
            if raw.get("removed") or str(raw.get("address", "")).lower() != self.address:
                continue
            try:
                block = int(raw["blockNumber"], 16)
            except (KeyError, TypeError, ValueError):
                block = -1
            relevant.append((block, raw))
        relevant.sort(key=lambda item: item[0])
        return relevant

    def _decode(self, raw_logs: list[dict[str, Any]], start: int, to: int) -> list[RecordEvent]:
        events: list[RecordEvent] = []
        for raw in raw_logs:
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

    def _headers(self, numbers: list[int], head: int) -> dict[int, dict[str, Any]] | None:
        """The headers of these blocks; None when the node lacks one near its head (a reorganisation
        under way). One it lacks STAMPED_DEPTH or more below `head`, where no reorganisation is
        expected, is a node behind (NodeBehind: a backend behind the others, or one that lost
        blocks), waited for as one: taken for a reorganisation, it had the same batch read again at
        once, step after step, for as long as the node lacked it."""
        answers = self.rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n in numbers])
        lacking = [number for number, header in zip(numbers, answers, strict=True) if not isinstance(header, dict)]
        if lacking and lacking[0] <= head - STAMPED_DEPTH:
            raise NodeBehind(f"the node at {self.rpc.node} lacks block {lacking[0]}, {head - lacking[0]} blocks "
                             f"below the head it gave ({head}): no reorganisation goes that deep")
        if lacking:
            return None
        for number, header in zip(numbers, answers, strict=True):
            if header.get("number") not in (None, hex(number)):
                raise IndexerError(f"the node at {self.rpc.node} answered the header of block "
                                   f"{header.get('number')} when asked for block {number}")
        return dict(zip(numbers, answers, strict=True))


def _stamped_blocks(raw_logs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """What the logs say of their blocks, as headers of the fields the commit reads (number, hash,
    timestamp): for each block whose every log carries its
    `blockTimestamp`, all of one block hash. A block whose logs disagree, or lack it, is left out,
    for its header to be asked."""
    said: dict[int, dict[str, Any]] = {}
    unsure: set[int] = set()
    for raw in raw_logs:
        number, block_hash, timestamp = _block_of(raw), raw.get("blockHash"), raw.get("blockTimestamp")
        if number is None:
            continue
        known = said.get(number)
        if not isinstance(timestamp, str) or not isinstance(block_hash, str) or (
                known is not None and (known["hash"], known["timestamp"]) != (block_hash, timestamp)):
            unsure.add(number)
            continue
        said[number] = {"number": hex(number), "hash": block_hash, "timestamp": timestamp}
    return {number: header for number, header in said.items() if number not in unsure}


def split_logs(logs: list[tuple[int, dict[str, Any]]], start: int, to: int,
           sizes: Iterator[int]) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """Blocks start..to as consecutive ranges (first, last, their logs) of about the next of
    `sizes` logs each, cut only between blocks; `logs` are (block, log) in block order."""
    first, part, size = start, [], next(sizes)
    for i, (block, raw) in enumerate(logs):
        part.append(raw)
        if len(part) >= size and block < to and first <= block and (i + 1 == len(logs) or logs[i + 1][0] != block):
            yield first, block, part
            first, part, size = block + 1, [], next(sizes)
    yield first, to, part


def batch_sizes(size: int) -> Iterator[int]:
    """A catch-up's batch sizes: the first batches smaller, so that the pipeline's stages get to
    work early (the first batch is read, decoded, applied and written one stage after another),
    then `size`."""
    small = max(1, size // 8)
    while small < size:
        yield small
        small *= 2
    yield from itertools.repeat(size)
