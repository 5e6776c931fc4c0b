"""The snapshot a client gets first: every record of the active deployment, and the seq it is at.

It is read with the position after the deployment's newest change (seq S, records.history) in
one consistent read (PostgreSQL: a REPEATABLE READ transaction; SQLite in WAL: one read
transaction), streamed in chunks from a thread, so memory stays bounded whatever the number of
records. Every snapshot message carries S, and `snapshot.complete` ends it with the position: from
then on the client can resume with `?since=<position>`.

Each snapshot holds a database connection and its transaction while the client takes it: it waits
for a slot (records.ws.limits.SnapshotSlot), and must be taken by a deadline that grows with its
size (SnapshotDeadline), past which it is closed with 1008 and everything it held is freed.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import cast

import orjson
from django.conf import settings
from django.db import connection

from records.history import NO_HISTORY
from records.kinds import KINDS, RecordKind
from records.metrics import WS_MESSAGES
from records.models import Deployment
from records.selectors import (
    DeploymentFilter,
    ListQuery,
    active_deployment,
    head_position,
    record_bodies,
)
from records.snapshot import end_snapshot_within, read_snapshot
from records.ws.limits import POLICY_VIOLATION, Refusal, SnapshotSlot
from records.ws.messages import (
    MessageBatch,
    SnapshotComplete,
    SnapshotCounts,
    SnapshotMessage,
    encode,
    snapshot_type,
)
from records.ws.outbox import Send

SNAPSHOT_CHUNK = 500  # snapshot records per read from the database thread
# Snapshot bytes per send: a send returns once the server's buffer is below 64 KiB (daphne_bend,
# patch 2), so at most about twice this waits in it, and a close frame (a client too slow) reaches
# the client after that much, not after a whole chunk.
SNAPSHOT_PIECE_BYTES = 64 * 1024


class SnapshotDeadline:
    """When a client must have taken a snapshot's first `size` bytes: BOUNTY_WS_SNAPSHOT_BASE_SECONDS
    after the snapshot started, plus those bytes at BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND. So
    the deadline grows with the snapshot, and a client slower than the rate falls behind it and is
    closed long before the whole snapshot's deadline (monotonic clock)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.base: int = settings.BOUNTY_WS_SNAPSHOT_BASE_SECONDS
        self.rate: int = settings.BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND

    def at(self, size: int) -> float:
        return self.start + self.base + size / self.rate

    def refusal(self) -> Refusal:
        return Refusal(POLICY_VIOLATION, f"snapshot taken slower than {self.rate} bytes/s")


class SnapshotReader:
    """Every record of the active deployment as snapshot messages, and the seq they are current
    at, from one consistent read. All its methods run in one thread, the snapshot's own while it
    holds its slot (the transaction belongs to that thread's database connection). The
    transaction ends by the deadline of what has been read, even if the thread or process gets
    stuck (records.snapshot.end_snapshot_within): the client's deadline is never later, since it
    has been sent no more than was read."""

    def __init__(self, deadline: SnapshotDeadline) -> None:
        self.position = NO_HISTORY  # where its client resumes after it
        self.deadline = deadline
        self.read_bytes = 0
        self.closed = False
        self._messages: Iterator[bytes] = iter(())
        self._snapshot = ExitStack()  # the read transaction, from open() to close()
        self._counts = cast(SnapshotCounts, dict.fromkeys((kind.resource for kind in KINDS), 0))

    def open(self, framed: bool) -> list[tuple[MessageBatch, int]]:
        """Opens the read transaction and returns the first chunk (`next_chunk`), so that a small
        snapshot is read, and closed, in one call."""
        self._snapshot.enter_context(read_snapshot())
        self._end_by_deadline()
        deployment = active_deployment()
        if deployment is not None:
            self.position = head_position(deployment.pk)
            self._messages = itertools.chain.from_iterable(self._kind(deployment, kind) for kind in KINDS)
        self._messages = itertools.chain(self._messages, self._complete())
        return self.next_chunk(framed)

    def _end_by_deadline(self) -> None:
        end_snapshot_within(self.deadline.at(self.read_bytes) - time.monotonic())

    def _kind(self, deployment: Deployment, kind: RecordKind) -> Iterator[bytes]:
        query = ListQuery(kind=kind, descending=False, deployments=DeploymentFilter(
            chain_id=deployment.chain_id, contract_address=deployment.contract_address))
        type_ = snapshot_type(kind)
        for body in record_bodies(query, chunk_size=SNAPSHOT_CHUNK * 4):  # the records' stored JSON
            self._counts[kind.resource] += 1
            yield encode(SnapshotMessage(type=type_, payload=orjson.Fragment(body), snapshot=True,
                                         seq=self.position.seq))

    def _complete(self) -> Iterator[bytes]:
        yield encode(SnapshotComplete(type="snapshot.complete", payload=self._counts, seq=self.position.seq,
                                      position=str(self.position)))

    def next_chunk(self, framed: bool) -> list[tuple[MessageBatch, int]]:
        """The next SNAPSHOT_CHUNK messages (`framed`: their frames made too) in pieces of about
        SNAPSHOT_PIECE_BYTES, each with its size in bytes. The chunk that reaches the end closes the
        reader (`closed`): a small snapshot needs no call after `open`, each one a wait for a thread
        and then for the event loop while the snapshot holds its slot."""
        pieces: list[tuple[MessageBatch, int]] = []
        texts: list[bytes] = []
        size = 0
        count = 0
        for text in itertools.islice(self._messages, SNAPSHOT_CHUNK):
            texts.append(text)
            size += len(text)
            count += 1
            if size >= SNAPSHOT_PIECE_BYTES:
                pieces.append(self._piece(texts, framed))
                texts, size = [], 0
        if texts:
            pieces.append(self._piece(texts, framed))
        if count < SNAPSHOT_CHUNK:
            self.close()
        elif pieces:
            self._end_by_deadline()
        return pieces

    def _piece(self, texts: list[bytes], framed: bool) -> tuple[MessageBatch, int]:
        batch = MessageBatch(texts)
        size = len(batch.frames) if framed else sum(map(len, texts))  # frames made here, off the event loop
        self.read_bytes += size
        WS_MESSAGES.inc(len(batch))
        return batch, size

    def close(self) -> None:
        """Ends the read transaction and closes the thread's database connection; `closed` once
        done (called again: nothing)."""
        if self.closed:
            return
        try:
            self._snapshot.close()
        finally:
            try:
                connection.close()
            finally:
                self.closed = True


async def stream_snapshot(send: Send, *, framed: bool, address: str) -> int:
    """Sends the snapshot through `send` (`framed`: to a server that takes frames) once a snapshot
    slot of the client's `address` is free (records.ws.limits.SnapshotSlot); returns the first seq
    the client has not seen. Refusal (1008) when the client takes it slower than its deadline."""
    loop = asyncio.get_running_loop()
    async with SnapshotSlot(address):
        deadline = SnapshotDeadline()
        with _reader_threads.one() as thread:
            reader = SnapshotReader(deadline)
            sent = 0
            try:
                pending = loop.run_in_executor(thread, reader.open, framed)
                while True:
                    pieces = await pending
                    end = reader.closed  # by the call that returned: none other is in flight
                    if not end:
                        pending = loop.run_in_executor(thread, reader.next_chunk, framed)  # read ahead one chunk
                    for piece, size in pieces:
                        sent += size
                        try:
                            async with asyncio.timeout(deadline.at(sent) - time.monotonic()):
                                await send(piece)
                        except TimeoutError:
                            raise deadline.refusal() from None
                    if end:
                        break
            finally:
                if not reader.closed:
                    # The thread runs one call at a time: the close waits for a read in flight.
                    await asyncio.shield(loop.run_in_executor(thread, reader.close))
    return reader.position.seq + 1


class _ReaderThreads:
    """The process's snapshot threads, kept from one snapshot to the next; a snapshot has one to
    itself while it holds its slot, so there are never more than the process's snapshot readers.
    A thread started for each snapshot, and joined after it, held up the event loop each time
    until the OS had run the thread: on a loaded machine tens of milliseconds a snapshot, every
    handshake and message of the process waiting meanwhile."""

    def __init__(self) -> None:
        self._idle: list[ThreadPoolExecutor] = []

    @contextmanager
    def one(self) -> Iterator[ThreadPoolExecutor]:
        thread = self._idle.pop() if self._idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="ws-snapshot")
        try:
            yield thread
        finally:
            self._idle.append(thread)


_reader_threads = _ReaderThreads()
