"""The live side of the websocket `/ws/events` (docs/api.md, The websocket /ws/events).

Every message comes from committed rows, so nothing is ever sent before the indexer's commit:

- A snapshot is read with the deployment's `last_seq` S in one consistent read (PostgreSQL:
  a REPEATABLE READ transaction; SQLite in WAL: one read transaction), streamed in chunks from a
  thread, so memory stays bounded whatever the number of records.
- One `LiveFeed` per server process reads the change log (`ChangeLogEntry`, seq gap-free per
  deployment) past its cursor -- one query per wake-up for the whole process, never per
  client -- and fans the messages out to every client's bounded `Outbox`. It wakes on a
  channel-layer message the indexer sends after each commit (`notify_changes`; with Redis it
  crosses processes) and polls every BOUNTY_WS_POLL_MS besides, which alone carries the embedded
  default (SQLite, no Redis), where the in-memory layer cannot reach another process.
- A client joins the feed at S+1 (or at `since`+1): it reads the seqs it misses from the
  database, the last stretch under the feed's lock, so no seq is lost or delivered twice.
- Every snapshot message carries S, and `snapshot.complete` ends the snapshot: from then on the
  client can resume with `?since=` whatever it last saw.
- A `resync` entry (a bulk backfill changed records without an entry per change) reaches its
  clients like any other message, and then each of them gets a new snapshot on the same
  connection and joins the feed again after it (`Resync`).

Each message is encoded once, as a complete websocket frame (a server's frames are not masked, so
the same bytes suit every client), and a client's pending messages leave in one write
(bountysite/daphne_frames.py): the cost of a burst grows with changes plus clients, not with
changes times clients.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Literal, TypedDict, cast

import orjson
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.models import Min

from indexer.models import ChangeLogEntry, SyncState
from records.metrics import WS_MESSAGES, WS_SLOWEST_QUEUE
from records.models import Deployment
from records.representation import JsonRecord
from records.selectors import (
    DeploymentFilter,
    ListQuery,
    Resource,
    active_deployment,
    read_snapshot,
    record_bodies,
)

logger = logging.getLogger(__name__)

GROUP = "records.changes"  # the channel-layer group of the server processes' feeds
READ_CHUNK = 1_000  # change-log rows per query
SNAPSHOT_CHUNK = 500  # snapshot records per read from the database thread
SNAPSHOT_READERS = 8  # concurrent snapshot reads per process (each holds a database connection)
SNAPSHOT_STALL_SECONDS = 30  # a client that takes longer to accept a snapshot chunk is too slow

MessageType = Literal[
    "bounty.created", "submission.created", "dispute.created", "dispute.resolved", "dispute.cancelled",
    "bounty.finalized", "bounty.refunded", "submission.refunded", "bounty.updated", "submission.updated",
    "dispute.updated", "bounty.removed", "submission.removed", "dispute.removed", "resync",
]
SnapshotType = Literal["bounty.created", "submission.created", "dispute.created"]
RESYNC: MessageType = "resync"  # a bulk backfill's changes, not logged one by one: a new snapshot follows


class LiveMessage(TypedDict):
    type: MessageType
    payload: JsonRecord
    seq: int


class SnapshotMessage(TypedDict):
    type: SnapshotType
    payload: orjson.Fragment  # the record's stored JSON (records.representation.record_body)
    snapshot: Literal[True]
    seq: int  # the change-log seq the snapshot is current at


class SnapshotCounts(TypedDict):
    bounties: int
    submissions: int
    disputes: int


class SnapshotComplete(TypedDict):
    """After the snapshot's last record: from here on `seq` is a resume point (`?since=`)."""

    type: Literal["snapshot.complete"]
    payload: SnapshotCounts
    seq: int


Send = Callable[[bytes], Awaitable[None]]  # sends websocket text frames (one or more, concatenated)
# Writes frames at once if the socket can take them now (open, not held back); False otherwise.
WriteNow = Callable[[bytes], bool]


def text_frame(data: bytes) -> bytes:
    """UTF-8 text as one unmasked, unfragmented websocket text frame (RFC 6455 section 5.2)."""
    size = len(data)
    if size < 126:
        header = bytes((0x81, size))
    elif size < 1 << 16:
        header = bytes((0x81, 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((0x81, 127)) + size.to_bytes(8, "big")
    return header + data


def frame_texts(frames: bytes) -> Iterator[str]:
    """The texts of concatenated frames made by `text_frame`."""
    position = 0
    while position < len(frames):
        size, position = frames[position + 1], position + 2
        if size == 126:
            size, position = int.from_bytes(frames[position:position + 2], "big"), position + 2
        elif size == 127:
            size, position = int.from_bytes(frames[position:position + 8], "big"), position + 8
        yield frames[position:position + size].decode()
        position += size


def encode(message: LiveMessage | SnapshotMessage | SnapshotComplete) -> bytes:
    """The message's frame."""
    return text_frame(orjson.dumps(message))


class TooSlow(Exception):
    """The client reads its messages slower than they come (close with 1008)."""


# ---------------------------------------------------------------------------- database reads


def _deployment_id() -> int | None:
    deployment = active_deployment()
    return deployment.pk if deployment is not None else None


def _last_seq(deployment_id: int) -> int:
    return SyncState.objects.filter(deployment_id=deployment_id).values_list("last_seq", flat=True).first() or 0


class Resync(Exception):
    """The client was sent a `resync` message: it gets a new snapshot next."""


class ChangesGone(Exception):
    """The change log no longer holds seqs a reader needs: pruned meanwhile (indexer.changelog).
    Its clients are closed (1011) and, reconnecting with `since`, get a snapshot."""

    def __init__(self, first: int) -> None:
        super().__init__(f"the change log no longer holds seq {first}")
        self.first = first


class Changes(list[tuple[int, bytes]]):
    """(seq, frame) of consecutive live messages, ending at the first `resync` among them, if any."""

    resync: bool = False


def read_changes(deployment_id: int, first: int, last: int) -> Changes:
    """The frames of the live messages of seqs first..last (at most READ_CHUNK of them), in order,
    through the first `resync`. ChangesGone if the log holds later seqs but no longer `first`."""
    rows = (ChangeLogEntry.objects.filter(deployment_id=deployment_id, seq__gte=first, seq__lte=last)
            .order_by("seq").values_list("seq", "type", "payload")[:READ_CHUNK])
    if rows and rows[0][0] != first:
        raise ChangesGone(first)
    changes = Changes()
    for seq, kind, payload in rows:
        changes.append((seq, encode(LiveMessage(type=cast(MessageType, kind), payload=payload, seq=seq))))
        if kind == RESYNC:
            changes.resync = True
            break
    return changes


def resume_point(since: int) -> int | None:
    """The first seq to send a client that saw every change up to `since`, when the change log
    still holds all those after it; None when it needs a snapshot instead."""
    deployment_id = _deployment_id()
    if deployment_id is None or since < 0:
        return None
    last = _last_seq(deployment_id)
    if since > last:
        return None
    if since < last:
        oldest = ChangeLogEntry.objects.filter(deployment_id=deployment_id).aggregate(v=Min("seq"))["v"]
        if oldest is None or oldest > since + 1:
            return None
    return since + 1


_SNAPSHOT_KINDS: list[tuple[Resource, SnapshotType]] = [
    ("bounties", "bounty.created"),
    ("submissions", "submission.created"),
    ("disputes", "dispute.created"),
]


class SnapshotReader:
    """Every record of the active deployment as snapshot messages, and the seq they are current
    at, from one consistent read. All its methods run in one dedicated thread (the transaction
    belongs to that thread's database connection)."""

    def __init__(self) -> None:
        self.last_seq = 0
        self._messages: Iterator[bytes] = iter(())
        self._snapshot = ExitStack()  # the read transaction, from open() to close()
        self._counts = SnapshotCounts(bounties=0, submissions=0, disputes=0)

    def open(self) -> None:
        self._snapshot.enter_context(read_snapshot())
        deployment = active_deployment()
        if deployment is not None:
            self.last_seq = _last_seq(deployment.pk)
            self._messages = itertools.chain.from_iterable(self._kind(deployment, *kind) for kind in _SNAPSHOT_KINDS)
        self._messages = itertools.chain(self._messages, self._complete())

    def _kind(self, deployment: Deployment, resource: Resource, kind: SnapshotType) -> Iterator[bytes]:
        query = ListQuery(resource=resource, descending=False, deployments=DeploymentFilter(
            chain_id=deployment.chain_id, contract_address=deployment.contract_address))
        for body in record_bodies(query, chunk_size=SNAPSHOT_CHUNK * 4):  # the records' stored JSON
            self._counts[resource] += 1
            yield encode(SnapshotMessage(type=kind, payload=orjson.Fragment(body), snapshot=True, seq=self.last_seq))

    def _complete(self) -> Iterator[bytes]:
        yield encode(SnapshotComplete(type="snapshot.complete", payload=self._counts, seq=self.last_seq))

    def next_chunk(self) -> bytes:
        """The frames of the next SNAPSHOT_CHUNK messages; empty at the end."""
        frames = list(itertools.islice(self._messages, SNAPSHOT_CHUNK))
        WS_MESSAGES.inc(len(frames))
        return b"".join(frames)

    def close(self) -> None:
        try:
            self._snapshot.close()
        finally:
            connection.close()


_snapshot_slots: asyncio.Semaphore | None = None


async def stream_snapshot(send: Send) -> int:
    """Sends the snapshot through `send`; returns the first seq the client has not seen."""
    global _snapshot_slots
    if _snapshot_slots is None:
        _snapshot_slots = asyncio.Semaphore(SNAPSHOT_READERS)
    loop = asyncio.get_running_loop()
    async with _snapshot_slots:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ws-snapshot") as thread:
            reader = SnapshotReader()
            pending: asyncio.Future[bytes] | None = None
            try:
                await loop.run_in_executor(thread, reader.open)
                pending = loop.run_in_executor(thread, reader.next_chunk)
                while chunk := await pending:
                    pending = loop.run_in_executor(thread, reader.next_chunk)  # read ahead one chunk
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


# ---------------------------------------------------------------------------- the live feed


class Outbox:
    """One client's bounded queue of live messages; `next_seq` is the first it has not been given.

    It takes frames in the batches the feed puts (bytes shared with every other client). With
    `write_now` (the server's, bountysite/daphne_frames.py) a batch goes straight to the socket when
    nothing is queued before it and the socket takes it, with no task switch to the client's sender;
    otherwise it is queued and the sender gets everything pending at once."""

    def __init__(self, next_seq: int, on_overflow: Callable[[], None], write_now: WriteNow | None = None) -> None:
        self.next_seq = next_seq
        self.write_now = write_now
        self.bound: int = settings.BOUNTY_WS_MAX_BACKLOG
        self.on_overflow = on_overflow
        self.overflowed = False
        self.failure: Exception | None = None
        self._batches: deque[bytes] = deque()
        self._count = 0  # messages in _batches
        self._ready = asyncio.Event()

    def put(self, first_seq: int, frames: Sequence[bytes], joined: bytes | None = None) -> None:
        """Gives the client the frames of seqs first_seq, first_seq + 1, ... past `next_seq`;
        `joined` is b"".join(frames), when the caller has made it for all clients."""
        skip = self.next_seq - first_seq
        if skip >= len(frames) or self.overflowed:
            return
        if skip > 0:
            frames, joined = frames[skip:], None
        if joined is None:
            joined = b"".join(frames)
        # Straight to the socket only with nothing queued: the sender writes what it takes from
        # the queue without waiting in between, so it never holds older frames unwritten.
        if self._batches or self.write_now is None or not self.write_now(joined):
            if self._count + len(frames) > self.bound:
                # The client's sender is stuck waiting for the socket: tell the consumer right away.
                self.overflowed = True
                self._batches.clear()
                self.on_overflow()
            else:
                self._batches.append(joined)
                self._count += len(frames)
            self._ready.set()
        self.next_seq = first_seq + max(skip, 0) + len(frames)
        if not self.overflowed:
            WS_MESSAGES.inc(len(frames))

    @property
    def queued(self) -> int:
        """Messages waiting for the client's sender."""
        return self._count

    def fail(self, error: Exception) -> None:
        """Ends the client's stream: `get` raises `error` from now on."""
        self.failure = error
        self._ready.set()

    async def get(self) -> bytes:
        """The frames of every message pending, waiting for one if there is none."""
        while not self._batches and not self.overflowed and self.failure is None:
            self._ready.clear()
            await self._ready.wait()
        if self.overflowed:
            raise TooSlow
        if not self._batches and self.failure is not None:  # what was put before the failure goes first
            raise self.failure
        frames = self._batches.popleft() if len(self._batches) == 1 else b"".join(self._batches)
        self._batches.clear()
        self._count = 0
        return frames


class LiveFeed:
    """The process's one reader of the change log, fanning out to every subscribed Outbox."""

    def __init__(self) -> None:
        self.deployment_id: int | None = None
        self.cursor = 0  # the newest seq fanned out
        self.subscribers: set[Outbox] = set()
        self.lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run()), asyncio.create_task(self._listen())]

    async def subscribe(self, outbox: Outbox, send: Send) -> None:
        """Brings `outbox` from its next_seq up to the feed and adds it to the subscribers.

        Long gaps (a slow snapshot, an old `since`) are sent straight from the database without
        the lock; only the last stretch, at most what one wake-up reads, is read under it."""
        self.start()
        while True:
            async with self.lock:
                if self.deployment_id is None:
                    await self._resolve()
                if self.deployment_id is None or outbox.next_seq > self.cursor:
                    self.subscribers.add(outbox)
                    return
                if self.cursor - outbox.next_seq < min(READ_CHUNK, outbox.bound):
                    rows = await database_sync_to_async(read_changes)(self.deployment_id, outbox.next_seq,
                                                                      self.cursor)
                    if not rows:  # seqs up to the cursor were there when the feed read them
                        raise ChangesGone(outbox.next_seq)
                    outbox.put(rows[0][0], [frame for _, frame in rows])
                    if rows.resync:
                        outbox.fail(Resync())
                    else:
                        self.subscribers.add(outbox)
                    return
                deployment_id, last = self.deployment_id, self.cursor
            rows = await database_sync_to_async(read_changes)(deployment_id, outbox.next_seq, last)
            if not rows:  # seqs up to `last` were there when the feed read them
                raise ChangesGone(outbox.next_seq)
            await send(b"".join(frame for _, frame in rows))
            WS_MESSAGES.inc(len(rows))
            if rows.resync:
                raise Resync
            outbox.next_seq = rows[-1][0] + 1

    def unsubscribe(self, outbox: Outbox) -> None:
        self.subscribers.discard(outbox)

    async def _resolve(self) -> None:
        self.deployment_id = await database_sync_to_async(_deployment_id)()
        if self.deployment_id is not None:
            # Subscribers waiting for a new deployment need it from its first seq.
            self.cursor = 0 if self.subscribers else await database_sync_to_async(_last_seq)(self.deployment_id)

    async def _run(self) -> None:
        poll: float = settings.BOUNTY_WS_POLL_SECONDS
        while True:
            try:
                async with asyncio.timeout(poll):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._advance()
            except Exception:
                logger.exception("the websocket feed could not read the change log; retrying")

    async def _advance(self) -> None:
        try:
            await self._read_on()
        except ChangesGone as gone:  # pruned past the feed: its clients missed messages
            logger.error("%s; closing the websocket clients that needed it", gone)
            async with self.lock:
                for outbox in self.subscribers:
                    outbox.fail(gone)
                self.subscribers.clear()
                self.cursor = await database_sync_to_async(_last_seq)(self.deployment_id or 0)

    async def _read_on(self) -> None:
        async with self.lock:
            if self.deployment_id is None:
                await self._resolve()
                if self.deployment_id is None:
                    return
            if not self.subscribers:
                self.cursor = await database_sync_to_async(_last_seq)(self.deployment_id)
                return
            while rows := await database_sync_to_async(read_changes)(self.deployment_id, self.cursor + 1,
                                                                     2**63 - 1):
                slice_size = max(1, min(READ_CHUNK, settings.BOUNTY_WS_MAX_BACKLOG // 2))
                for start in range(0, len(rows), slice_size):
                    part = rows[start : start + slice_size]
                    frames = [frame for _, frame in part]
                    joined = b"".join(frames)
                    for outbox in self.subscribers:
                        outbox.put(part[0][0], frames, joined)
                    self.cursor = part[-1][0]
                    await asyncio.sleep(0)  # let the clients' senders drain before the next slice
                if rows.resync:  # every client gets a new snapshot, and joins the feed again after it
                    for outbox in self.subscribers:
                        outbox.fail(Resync())
                    self.subscribers.clear()
                    return
                if len(rows) < READ_CHUNK:
                    return

    async def _listen(self) -> None:
        """Wakes the feed on each indexer commit announced on the channel layer."""
        layer = get_channel_layer()
        if layer is None:
            return
        channel = await layer.new_channel()
        while True:
            try:
                await layer.group_add(GROUP, channel)  # again each round: group membership expires
                for _ in range(60):
                    try:
                        async with asyncio.timeout(60):
                            await layer.receive(channel)
                        self._wake.set()
                    except TimeoutError:
                        pass
            except Exception:
                logger.exception("the websocket feed lost the channel layer; polling meanwhile")
                await asyncio.sleep(5)


feed = LiveFeed()
# Read by /metrics on another thread: list() copies the set without letting the event loop in.
WS_SLOWEST_QUEUE.set_function(lambda: max((outbox.queued for outbox in list(feed.subscribers)), default=0))


def notify_changes() -> None:
    """Wakes the websocket feeds of every server process; the indexer calls it after each commit.

    Only an optimisation: the feeds poll anyway. The in-memory layer of the embedded default
    reaches no other process, so nothing is sent there."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return
    try:
        async_to_sync(layer.group_send)(GROUP, {"type": "changes.committed"})
    except Exception:
        logger.warning("could not notify the websocket feeds; they will see the change at their next poll",
                       exc_info=True)


# ---------------------------------------------------------------------------- one client's stream


async def run_stream(since: int | None, send: Send, on_too_slow: Callable[[], None],
                     write_now: WriteNow | None = None) -> None:
    """Sends one client the snapshot (or what it missed since `since`), then live messages until
    cancelled (through `write_now` when the server offers it). A client too slow to read is
    reported through `on_too_slow`."""
    start = await database_sync_to_async(resume_point)(since) if since is not None else None
    while True:
        if start is None:
            try:
                start = await stream_snapshot(send)
            except TooSlow:
                on_too_slow()
                return
        outbox = Outbox(start, on_too_slow, write_now)
        try:
            await feed.subscribe(outbox, send)
            while True:
                await send(await outbox.get())
        except TooSlow:
            return
        except Resync:  # it was sent the resync message: the new snapshot follows it
            start = None
        finally:
            feed.unsubscribe(outbox)
