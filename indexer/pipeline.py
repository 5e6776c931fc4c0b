"""The pipeline's plumbing between the stages: reading ahead of the commits (`ReadAhead`, in a
thread or in forked processes), committing on a thread of its own (`BatchWriter`), the records a
catch-up keeps between batches (`RecordMemory`), and what a forked process needs of its own
(database connections) or must not do (collect garbage while the heap it inherited is shared).
How a range's logs are cut into batches is the fetch stage's (indexer.fetch.split_logs).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from django.db import connection, connections

from indexer.errors import IndexerError
from indexer.sessions import database_let_go, join_or_let_go
from indexer.store import record_tables
from records.kinds import Kind

STOP_PATIENCE = 0.5  # seconds a stopping indexer waits for its reader to end before killing it


_Work = TypeVar("_Work")


class BatchWriter(Generic[_Work]):
    """Commits prepared batches in order on a thread of its own (with a database connection of
    its own) while the caller applies the next one: the database's work on one batch overlaps
    the Python work on the next. One batch waits at most. After a failure the batches behind it
    are dropped and the failure is raised to the caller, whose memory of the records is void."""

    def __init__(self, commit: Callable[[_Work], None]) -> None:
        self._commit = commit
        self._queue: queue.Queue[_Work | None] = queue.Queue(maxsize=1)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="indexer-writer", daemon=True)
        self._thread.start()

    def submit(self, prepared: _Work) -> None:
        self._raise()
        self._queue.put(prepared)

    def close(self) -> None:
        """Waits for the batches submitted to be committed, and raises the first failure; unless a
        stop lets go of the database meanwhile (indexer.sessions): a writer still waiting for it
        then is left to end with the process."""
        while True:
            try:
                self._queue.put(None, timeout=0.05)
                break
            except queue.Full:  # the writer waits for the database with a batch behind it
                if database_let_go():
                    return
        join_or_let_go(self._thread)
        if not self._thread.is_alive():
            self._raise()

    def _raise(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        try:
            while (prepared := self._queue.get()) is not None:
                try:
                    if self._failure is None:
                        self._commit(prepared)
                except BaseException as exc:  # raised in the caller's thread
                    self._failure = exc
        finally:
            connection.close()


_INHERITED_CONNECTIONS: list[Any] = []


def database_connections_of_our_own() -> None:
    """In a forked process: new database connections in place of the inherited ones. Those are
    the parent's: they stay referenced here and are never closed (closing one would end the
    parent's session, on the socket both hold), and the new ones are not pooled (the pool and
    its connections are the parent's too)."""
    for alias in connections:
        inherited = connections[alias]
        _INHERITED_CONNECTIONS.append(inherited)
        options = {name: value for name, value in inherited.settings_dict.get("OPTIONS", {}).items() if name != "pool"}
        connections[alias] = type(inherited)({**inherited.settings_dict, "OPTIONS": options}, alias)


@contextlib.contextmanager
def collections_between_batches(*, collect_at_end: bool = True) -> Iterator[None]:
    """Python's automatic garbage collection off during a catch-up: a batch allocates hundreds of
    thousands of objects and the automatic collections scanned the records kept in memory over
    and over (a quarter of a backfill's time), while batches leave no cyclic garbage (reference
    counting frees it all). The caller collects the young generations every so many batches, for
    what retries and errors may leave, and once more at the end (a full collection scanned every
    long-lived object for a tenth of a second), unless the process exits then: a forked reader,
    whose last collection (every record of the catch-up, a quarter of a second) the indexer
    would wait for. The oldest generation is left to the automatic collections."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if collect_at_end:
            gc.collect(1)


@dataclass
class RecordMemory:
    """Records as the last committed batch left them, carried to the next batch of a catch-up:
    a backfill changes records soon after creating them, and reading them back costs more than
    applying the events."""

    # Each batch's RecordStore (indexer.store) works on these tables: by kind, then by on-chain ID.
    records: dict[Kind, dict[int, Any]] = field(default_factory=record_tables)

    def size(self) -> int:
        return sum(len(table) for table in self.records.values())

    def clear(self) -> None:
        for table in self.records.values():
            table.clear()


class _Ranged(Protocol):
    @property
    def to(self) -> int: ...


_Item = TypeVar("_Item", bound=_Ranged)


class ReadAhead(Generic[_Item]):
    """Reads batches ahead while the caller commits the ones before, so that the node's work and
    the decoding overlap the database's. At most `depth` batches wait, so memory stays bounded
    however far behind the indexer is. Iterating yields the batches in order up to `safe`; an
    error of the reader is raised there; leaving the block stops the reader.

    The reader is a thread, or with `in_process` a process forked from this one (which first
    calls `on_start` there): decoding is Python, and a thread would share this process's one
    interpreter lock with the applying, so a bulk backfill reads in a process of its own, and
    prepares its batches in another (`Historical._bulk`: the items are then `Prepared`).
    Its items come through a pipe, pickled (indexer.events keeps that cheap); a semaphore bounds
    how many are on their way. The process exits once this one has left the block, or died."""

    def __init__(self, read: Callable[[int], Iterator[_Item]], first: int, safe: int, depth: int,
                 stop: threading.Event, *, in_process: bool = False,
                 on_start: Callable[[], None] = lambda: None) -> None:
        self._read = read
        self._first = first
        self._safe = safe
        self._stop = stop
        self._on_start = on_start
        self._in_process = in_process
        depth = max(1, depth)
        if in_process:
            context = multiprocessing.get_context("fork")
            self._receiver, self._sender = context.Pipe(duplex=False)
            self._slots = context.BoundedSemaphore(depth)
            self._closed: Any = context.Event()
            self._parent = os.getpid()
            # Not a daemon, which may not fork (a bulk backfill's reader has a reader of its own):
            # `__exit__` ends it, and it ends itself once its parent has died (`_put`).
            self._worker: Any = context.Process(target=self._run, name="indexer-read-ahead", daemon=False)
        else:
            self._queue: queue.Queue[_Item | BaseException | None] = queue.Queue(maxsize=depth)
            self._closed = threading.Event()
            self._worker = threading.Thread(target=self._run, name="indexer-read-ahead", daemon=True)

    def __enter__(self) -> Iterator[_Item]:
        if not self._in_process:
            self._worker.start()
            return self._batches()
        # The process inherits this one's heap copy-on-write: its garbage collections must not
        # scan what it inherited (touching each object copies its page: a third of a second at
        # the start of a backfill), so it starts with all of it in the permanent generation.
        gc.freeze()
        try:
            self._worker.start()
        finally:
            gc.unfreeze()
        return self._batches()

    def __exit__(self, *exc_info: object) -> None:
        self._closed.set()  # a reader waiting to put sees it within its timeout
        stopping = self._stop.is_set()
        if not self._in_process:
            # A daemon thread: when the indexer stops, one still waiting for the node's answer is
            # left to end with the process.
            self._worker.join(STOP_PATIENCE if stopping else None)
            return
        if stopping and self._worker.is_alive():  # it stops as this one does (run_indexer's handler)
            self._worker.terminate()
        deadline = time.monotonic() + (STOP_PATIENCE if stopping else 30)
        while self._worker.is_alive() and time.monotonic() < deadline:
            if self._receiver.poll(0.05):  # unblocks a reader in the middle of sending
                with contextlib.suppress(EOFError, OSError):
                    self._receiver.recv()
                self._slots.release()
        if self._worker.is_alive():  # stuck in a call to the node: its work is not needed any more
            self._worker.kill()
        self._worker.join()
        self._receiver.close()

    # ---------------------------------------------------------------- the reader's side

    def _run(self) -> None:
        start = self._first
        try:
            self._on_start()
            while start <= self._safe and not self._closed.is_set() and not self._stop.is_set():
                batches = self._read(start)
                try:
                    for batch in batches:
                        if not self._put(batch):
                            return
                        start = batch.to + 1
                finally:  # a reader of its own (a bulk backfill's preparer) ends before this process
                    close = getattr(batches, "close", None)
                    if close is not None:
                        close()
        except BaseException as exc:  # raised in the caller
            self._put(exc)
            return
        self._put(None)

    def _put(self, item: _Item | BaseException | None) -> bool:
        while not self._closed.is_set():
            if not self._in_process:
                try:
                    self._queue.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            if os.getppid() != self._parent:  # the indexer died
                return False
            if self._slots.acquire(timeout=0.1):
                try:
                    self._sender.send(item)
                except (pickle.PicklingError, TypeError, AttributeError) as exc:
                    self._sender.send(IndexerError(f"the reader process could not send {item!r}: {exc}"))
                return True
        return False

    # ---------------------------------------------------------------- the caller's side

    def _get(self) -> _Item | BaseException | None:
        if self._stop.is_set():  # the batches still on their way are not committed
            return None
        if not self._in_process:
            while True:
                try:
                    return self._queue.get(timeout=0.1)
                except queue.Empty:
                    if self._stop.is_set():
                        return None
        while not self._receiver.poll(0.1):
            if self._stop.is_set():
                return None
            if not self._worker.is_alive() and not self._receiver.poll():
                raise IndexerError(f"the reader process exited with code {self._worker.exitcode}")
        item: _Item | BaseException | None = self._receiver.recv()
        self._slots.release()
        return item

    def _batches(self) -> Iterator[_Item]:
        while (item := self._get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
