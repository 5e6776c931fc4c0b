"""The threads a web process's websocket side reads the database on: lanes of their own, never
Channels' one thread.

Channels runs every `database_sync_to_async` call of a process on a single thread, in order, and
closes (returns to the pool) and health-checks the thread's connection around each call: under a
reconnect storm of thousands of clients, the live feed's reads queued behind every client's resume
and the pool's empty health query took a quarter of that thread's time (docs/operations.md,
Restarts). So the websocket side reads on lanes:

- `FEED`: one thread, the process's live feed's alone (records.ws.feed): what clients already
  following are sent never waits behind another client's work. It keeps its one connection (the
  pool holds one for it: bountysite/settings.py), so a wake-up costs its query alone.
- `READS`: BOUNTY_WS_READ_THREADS threads for the rest (a resume older than the feed's memory, the
  snapshot's data version, a replica's questions): bounded, so a storm queues here, on the event
  loop, not in the database pool.

A `READS` thread keeps its connection while it has work queued and gives it back to the pool when
its queue is empty, so a burst reuses one connection (the pool checks a connection it hands out
with an empty query: once per burst, not per call) and an idle lane holds none. A call that fails
with a database error closes its thread's connections: the next call starts on a fresh one. What a
call reads follows the caller's `reading_from` (bountysite.databases): the context is copied into
the thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from django.db import DatabaseError, connections

from records.limits import ws_read_threads

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

# SQLSTATE classes of a server that does not answer: a connection exception (08), or one shutting
# down, crashed or starting (57P01-57P03: "operator intervention", but not 57014, a statement
# cancelled by its timeout). An error of any other class is the statement's, not the connection's.
CONNECTION_LOST = ("08", "57P")
_Work = tuple[Future[Any], contextvars.Context, Callable[[], Any]]


class Lane:
    """A bounded set of daemon threads running database calls for the event loop, in the order
    they are asked."""

    def __init__(self, name: str, threads: Callable[[], int], *, keeps_connection: bool = False) -> None:
        self.name = name
        self.keeps_connection = keeps_connection
        self._threads = threads  # read when the lane first runs: settings are read when applied
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._started = 0
        self._start_lock = threading.Lock()

    async def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(*args, **kwargs)` on one of the lane's threads, awaited on the event loop."""
        done: Future[T] = Future()
        self._start()
        self._queue.put((done, contextvars.copy_context(), functools.partial(call, *args, **kwargs)))
        return await asyncio.wrap_future(done)

    def _start(self) -> None:
        if self._started:
            return
        with self._start_lock:
            while self._started < self._threads():
                self._started += 1
                # Daemon threads: a process told to stop does not wait for a read in flight
                # (bountysite.daphne_shutdown).
                threading.Thread(target=self._serve, name=f"{self.name}-{self._started}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            done, context, call = self._queue.get()
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(self._run(context, call))
                except BaseException as error:  # handed to the caller, as an executor does
                    done.set_exception(error)
            if not self.keeps_connection and self._queue.empty():
                connections.close_all()  # idle: its connections go back to the pool


    def _run(self, context: contextvars.Context, call: Callable[[], T]) -> T:
        """The call; one that fails with a database error on a connection kept from an earlier
        call (the server restarted, or a failover, since) runs once more on a fresh one, as the
        pool's check would have found it broken before handing it out."""
        kept = any(connection.connection is not None for connection in connections.all(initialized_only=True))
        try:
            return context.run(call)
        except DatabaseError as error:
            connections.close_all()
            sqlstate = getattr(error.__cause__, "sqlstate", None)
            if not kept or (sqlstate is not None and not sqlstate.startswith(CONNECTION_LOST)):
                raise
        try:
            return context.run(call)
        except DatabaseError:
            connections.close_all()
            raise


FEED = Lane("ws-feed", lambda: 1, keeps_connection=True)
READS = Lane("ws-read", ws_read_threads)


class Shared(Generic[K, T]):
    """One read for every caller asking the same thing meanwhile: the first caller's read is
    awaited by the others (each through a shield: a caller that goes away cancels nothing)."""

    def __init__(self) -> None:
        self._reading: dict[K, asyncio.Task[T]] = {}

    async def get(self, key: K, read: Callable[[], Awaitable[T]]) -> T:
        task = self._reading.get(key)
        if task is None:
            task = self._reading[key] = asyncio.ensure_future(read())
            task.add_done_callback(lambda _: self._reading.pop(key, None))
        return await asyncio.shield(task)
