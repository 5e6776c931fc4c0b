"""The snapshot a client gets first: every record of the active deployment, and the seq it is at.

It is read with the deployment's `last_seq` S in one consistent read (PostgreSQL: a REPEATABLE
READ transaction; SQLite in WAL: one read transaction), streamed in chunks from a thread, so
memory stays bounded whatever the number of records. Every snapshot message carries S, and
`snapshot.complete` ends it: from then on the client can resume with `?since=`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import cast

import orjson
from django.db import connection

from records.kinds import KINDS, RecordKind
from records.metrics import WS_MESSAGES
from records.models import Deployment
from records.selectors import (
    DeploymentFilter,
    ListQuery,
    active_deployment,
    last_seq,
    record_bodies,
)
from records.snapshot import read_snapshot
from records.ws.messages import (
    MessageBatch,
    SnapshotComplete,
    SnapshotCounts,
    SnapshotMessage,
    encode,
    snapshot_type,
)
from records.ws.outbox import Send, TooSlow

SNAPSHOT_CHUNK = 500  # snapshot records per read from the database thread
SNAPSHOT_READERS = 8  # concurrent snapshot reads per process (each holds a database connection)
SNAPSHOT_STALL_SECONDS = 30  # a client that takes longer to accept a snapshot chunk is too slow

class SnapshotReader:
    """Every record of the active deployment as snapshot messages, and the seq they are current
    at, from one consistent read. All its methods run in one dedicated thread (the transaction
    belongs to that thread's database connection)."""

    def __init__(self) -> None:
        self.last_seq = 0
        self._messages: Iterator[bytes] = iter(())
        self._snapshot = ExitStack()  # the read transaction, from open() to close()
        self._counts = cast(SnapshotCounts, dict.fromkeys((kind.resource for kind in KINDS), 0))

    def open(self) -> None:
        self._snapshot.enter_context(read_snapshot())
        deployment = active_deployment()
        if deployment is not None:
            self.last_seq = last_seq(deployment.pk)
            self._messages = itertools.chain.from_iterable(self._kind(deployment, kind) for kind in KINDS)
        self._messages = itertools.chain(self._messages, self._complete())

    def _kind(self, deployment: Deployment, kind: RecordKind) -> Iterator[bytes]:
        query = ListQuery(kind=kind, descending=False, deployments=DeploymentFilter(
            chain_id=deployment.chain_id, contract_address=deployment.contract_address))
        type_ = snapshot_type(kind)
        for body in record_bodies(query, chunk_size=SNAPSHOT_CHUNK * 4):  # the records' stored JSON
            self._counts[kind.resource] += 1
            yield encode(SnapshotMessage(type=type_, payload=orjson.Fragment(body), snapshot=True,
                                         seq=self.last_seq))

    def _complete(self) -> Iterator[bytes]:
        yield encode(SnapshotComplete(type="snapshot.complete", payload=self._counts, seq=self.last_seq))

    def next_chunk(self, framed: bool) -> MessageBatch:
        """The next SNAPSHOT_CHUNK messages (`framed`: their frames made too); empty at the end."""
        batch = MessageBatch(list(itertools.islice(self._messages, SNAPSHOT_CHUNK)))
        if framed:
            batch.frames  # noqa: B018 (made here, in the reader's thread, rather than on the event loop)
        WS_MESSAGES.inc(len(batch))
        return batch

    def close(self) -> None:
        try:
            self._snapshot.close()
        finally:
            connection.close()


_readers: asyncio.Semaphore | None = None


async def stream_snapshot(send: Send, *, framed: bool) -> int:
    """Sends the snapshot through `send` (`framed`: to a server that takes frames); returns the
    first seq the client has not seen."""
    global _readers
    if _readers is None:
        _readers = asyncio.Semaphore(SNAPSHOT_READERS)
    loop = asyncio.get_running_loop()
    async with _readers:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ws-snapshot") as thread:
            reader = SnapshotReader()
            pending: asyncio.Future[MessageBatch] | None = None
            try:
                await loop.run_in_executor(thread, reader.open)
                pending = loop.run_in_executor(thread, reader.next_chunk, framed)
                while chunk := await pending:
                    pending = loop.run_in_executor(thread, reader.next_chunk, framed)  # read ahead one chunk
                    try:
                        async with asyncio.timeout(SNAPSHOT_STALL_SECONDS):
                            await send(chunk)
                    except TimeoutError:
                        raise TooSlow from None
                pending = None
            finally:
                # The thread runs one call at a time: the close waits for a read in flight.
                await asyncio.shield(loop.run_in_executor(thread, reader.close))
    return reader.last_seq + 1
