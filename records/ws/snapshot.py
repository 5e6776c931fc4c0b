"""The snapshot a client gets first: every record of the active deployment, and the seq it is at.

It is read with the position after the deployment's newest change (seq S, records.history) in
one consistent read (PostgreSQL: a REPEATABLE READ transaction; SQLite in WAL: one read
transaction) into a spool (records.spools), framed once: the frames of every message, a chunk at
a time, so memory stays bounded whatever the number of records. Every client that connects while
the data version is the same is sent that spool, each at its own pace, holding no database
connection. Every snapshot message carries S, and `snapshot.complete` ends it with the position:
from then on the client can resume with `?since=<position>`.

A client address is sent at most BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT snapshots at once
(records.limits.SnapshotSlot); a snapshot must be taken by a deadline that grows with its size
(SnapshotDeadline), past which it is closed with 1008.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import orjson

from bountysite.databases import read_connection
from records.history import NO_DATA, NO_HISTORY, DataVersion, Position
from records.kinds import KINDS
from records.lanes import READS, Shared
from records.limits import SnapshotSlot, snapshot_pace, snapshot_readers, snapshot_wait_seconds
from records.metrics import WS_MESSAGES, WS_SNAPSHOTS_SENDING
from records.models import Deployment
from records.reads import read_async
from records.selectors import (
    DeploymentFilter,
    ListQuery,
    active_deployment,
    data_version,
    head_position,
    record_bodies,
)
from records.snapshot import read_snapshot
from records.spools import Producers, Spool, SpoolCutOff, Spools, SpoolUnavailable, SpoolWriter, hand, open_reading
from records.ws.closes import POLICY_VIOLATION, TRY_AGAIN_LATER, Refusal
from records.ws.messages import (
    MessageBatch,
    SnapshotComplete,
    SnapshotCounts,
    SnapshotMessage,
    encode,
    snapshot_type,
    text_frame,
)
from records.ws.outbox import Send

SNAPSHOT_CHUNK = 500  # snapshot records per read from the database
# Frames written to the spool at a time: where a piece sent to a client may end. A piece is about
# records.spools.PIECE_BYTES (64 KiB): a send returns once the server's buffer is below 64 KiB
# (bountysite.daphne_ws, Backpressure), so at most about twice that waits in it, and a close frame (a client too
# slow) reaches the client after that much.
SPOOL_WRITE_BYTES = 16 * 1024


class SnapshotDeadline:
    """When a client must have taken a snapshot's first `size` bytes: BOUNTY_WS_SNAPSHOT_BASE_SECONDS
    after the snapshot started, plus those bytes at BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND. So
    the deadline grows with the snapshot, and a client slower than the rate falls behind it and is
    closed long before the whole snapshot's deadline (monotonic clock)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.base, self.rate = snapshot_pace()

    def at(self, size: int) -> float:
        return self.start + self.base + size / self.rate

    def refusal(self) -> Refusal:
        return Refusal(POLICY_VIOLATION, f"snapshot taken slower than {self.rate} bytes/s")


def _current_version() -> DataVersion:
    """The active deployment's data version (records.selectors.data_version): what a snapshot
    spool is current for."""
    return _version_of(active_deployment())


def _version_of(deployment: Deployment | None) -> DataVersion:
    return NO_DATA if deployment is None else data_version(deployment)


def _spool_snapshot(spool: SpoolWriter) -> tuple[DataVersion, Position]:
    """Writes the snapshot's frames into its spool from one consistent read; returns the version
    it was read at and the position the client resumes from after it."""
    position = NO_HISTORY
    counts = cast(SnapshotCounts, dict.fromkeys((kind.resource for kind in KINDS), 0))
    frames: list[bytes] = []
    size = 0

    def add(text: bytes, force: bool = False) -> None:
        nonlocal size
        frame = text_frame(text)
        frames.append(frame)
        size += len(frame)
        if size >= SPOOL_WRITE_BYTES or force:
            spool.write(b"".join(frames), messages=len(frames))
            frames.clear()
            size = 0

    try:
        with read_snapshot(within=spool.deadline - time.monotonic(), statements_within=spool.statements_within):
            deployment = active_deployment()
            version = _version_of(deployment)
            if deployment is not None:
                position = head_position(deployment.pk)
                for kind in KINDS:
                    query = ListQuery(kind=kind, descending=False, deployments=DeploymentFilter(
                        chain_id=deployment.chain_id, contract_address=deployment.contract_address))
                    type_ = snapshot_type(kind)
                    for body in record_bodies(query, chunk_size=SNAPSHOT_CHUNK * 4):  # the records' stored JSON
                        counts[kind.resource] += 1
                        add(encode(SnapshotMessage(type=type_, payload=orjson.Fragment(body), snapshot=True,
                                                   seq=position.seq)))
    finally:
        read_connection().close()  # the thread's connection goes back at once, not when the thread next reads
    add(encode(SnapshotComplete(type="snapshot.complete", payload=counts, seq=position.seq, position=str(position))),
        force=True)
    return version, position


# The snapshots (records.spools): each read from the database once per data version into a spool,
# BOUNTY_WS_SNAPSHOT_READERS at a time per process, then sent from it at each client's pace.
_SNAPSHOTS = Spools("snapshot", Producers(snapshot_readers))
_ANSWER = "snapshot"
_starting: Shared[DataVersion, Spool] = Shared()  # the snapshot thread's run, by version


async def _snapshot_spool() -> Spool:
    """The spool of the current snapshot: one already made, one being made (waited for, on the
    event loop), or one made now on a snapshot thread, read from a replica, or from the primary if
    it fails (records.reads). Refusal (1013) if none is ready within
    BOUNTY_WS_SNAPSHOT_WAIT_SECONDS (a production goes on for the next client) or the process's
    spools have no room."""
    wait = snapshot_wait_seconds()
    end = time.monotonic() + wait
    return await read_async(lambda: _snapshot_spool_until(end, wait))


async def _snapshot_spool_until(end: float, wait: int) -> Spool:
    try:
        async with asyncio.timeout(max(0.0, end - time.monotonic())):
            version = await READS.run(_current_version)
            if (spool := _SNAPSHOTS.ready(_ANSWER, version)) is not None:
                return spool
            pending = _SNAPSHOTS.pending(_ANSWER, version)
            if pending is not None:
                made = await asyncio.shield(asyncio.wrap_future(pending))
                if hand(made):
                    return made
            # One snapshot thread for every client asking meanwhile (a thread started per waiting
            # client before the first production was registered was a thread per client in a storm).
            started: list[bool] = []

            def start() -> asyncio.Future[Spool]:
                started.append(True)
                return _reader_threads.run(_SNAPSHOTS.get, _ANSWER, version, _spool_snapshot,
                                           max(0.0, end - time.monotonic()))

            made = await _starting.get(version, start)
            if started or hand(made):  # its maker's is handed to it already
                return made
            return await asyncio.shield(start())
    except TimeoutError:
        raise Refusal(TRY_AGAIN_LATER, f"no snapshot was ready within {wait} s; try again later") from None
    except SpoolUnavailable as refusal:
        raise Refusal(TRY_AGAIN_LATER, refusal.reason) from None


async def stream_snapshot(send: Send, *, framed: bool, client: str) -> int:
    """Sends the snapshot through `send` (`framed`: to a server that takes frames) once a snapshot
    slot of its `client` is free (records.limits.SnapshotSlot); returns the first seq
    the client has not seen. Refusal: 1013 when no snapshot is ready in time, 1008 when the client
    takes it slower than its deadline."""
    async with SnapshotSlot(client):
        spool = await _snapshot_spool()
        try:
            reading = open_reading(spool)
        except SpoolCutOff:
            raise Refusal(TRY_AGAIN_LATER, "the snapshot was dropped before it was sent; try again") from None
        try:
            with WS_SNAPSHOTS_SENDING.track_inprogress():
                deadline = SnapshotDeadline()
                sent = 0
                for offset, length, count in spool.pieces():
                    try:
                        batch = MessageBatch.of_frames(spool.read(offset, length), count)
                    except SpoolCutOff:
                        raise Refusal(TRY_AGAIN_LATER, "the snapshot's spool was dropped for room; try again") from None
                    sent += length
                    try:
                        async with asyncio.timeout(deadline.at(sent) - time.monotonic()):
                            await send(batch)
                    except TimeoutError:
                        raise deadline.refusal() from None
                    WS_MESSAGES.inc(count)
        finally:
            reading.close()
    position: Position = spool.about
    return position.seq + 1


class _ReaderThreads:
    """The process's snapshot threads, kept from one snapshot to the next: a thread is idle again
    once its call returns (not when its client stops waiting: the snapshot is still being made,
    for the next client), and at most BOUNTY_WS_SNAPSHOT_READERS idle ones are kept. A thread
    started for each snapshot, and joined after it, held up the event loop each time until the OS
    had run the thread: on a loaded machine tens of milliseconds a snapshot, every handshake and
    message of the process waiting meanwhile."""

    def __init__(self) -> None:
        self._idle: list[ThreadPoolExecutor] = []

    def run(self, call: Callable[..., Spool], *args: object) -> asyncio.Future[Spool]:
        thread = self._idle.pop() if self._idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="ws-snapshot")
        done = thread.submit(contextvars.copy_context().run, call, *args)  # reading where the caller reads
        done.add_done_callback(lambda _: self._idle_again(thread))
        return asyncio.wrap_future(done)

    def _idle_again(self, thread: ThreadPoolExecutor) -> None:
        if len(self._idle) < snapshot_readers():
            self._idle.append(thread)
        else:
            thread.shutdown(wait=False)


_reader_threads = _ReaderThreads()
