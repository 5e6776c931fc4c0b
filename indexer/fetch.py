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
import logging
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from indexer.errors import IndexerError, RangeTooLarge, Stopped
from indexer.events import RECORD_EVENT_TOPICS
from indexer.rpc import RpcClient

logger = logging.getLogger(__name__)

Logs = list[dict[str, Any]]
_WAIT_STEP = 0.1  # seconds between looks at `stop` while waiting for a range


@dataclass
class LogFetcher:
    """eth_getLogs over block ranges that adapt to the node: grow on success, split on refusal."""

    rpc: RpcClient
    address: str
    span: int = 2_000
    max_span: int = 50_000
    target_logs: int = 4_000  # a range with more logs than this makes the next one shorter (the batch size)

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
            if len(logs) > self.target_logs:
                self.span = max(1, (to - start + 1) * self.target_logs // len(logs))
            elif to - start + 1 >= self.span and len(logs) < self.target_logs // 2:
                self.span = min(self.max_span, self.span * 2)
            return to, logs


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
        self._workers = [threading.Thread(target=self._work, name="indexer-fetch", daemon=True)
                         for _ in range(fetcher.rpc.pacer.max_concurrency)]
        for worker in self._workers:
            worker.start()

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
        wanted = min(self._ahead, 2 * self._fetcher.rpc.pacer.limit)
        while self._next <= self._end and len(self._pending) < wanted:
            first, last = self._next, min(self._end, self._next + self._fetcher.span - 1)
            future: concurrent.futures.Future[FetchedRange] = concurrent.futures.Future()
            self._tasks.put((first, last, future))
            self._pending.append((first, future))
            self._next = last + 1

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
