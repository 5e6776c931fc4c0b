"""The process's one reader of the change log, fanning the changes out to every client.

One `LiveFeed` per server process reads the change log (seq gap-free per deployment) past its
cursor -- one query per wake-up for the whole process, never per client -- and puts the messages
in every subscribed client's bounded `Outbox` as one `MessageBatch`, encoded and framed once for all.
It wakes on the channel-layer message the indexer sends after each commit
(records.changes.notify_changes; with Redis it crosses processes) and polls every
BOUNTY_WS_POLL_MS besides, which alone carries the embedded default (SQLite, no Redis), where the
in-memory layer cannot reach another process, and every feed while Redis cannot be reached: the
log is read by seq either way, so an outage of Redis costs no message and reorders none.

A client joins the feed at the seq after its snapshot (or after `since`): it reads the seqs it
misses from the database, the last stretch under the feed's lock, so no seq is lost or delivered
twice. A `resync` entry (a bulk backfill changed records without an entry per change) reaches its
clients like any other message; then each of them gets a new snapshot and joins again (`Resync`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from bountysite.redis_reach import FAILURES, REDIS, RETRY_SECONDS
from records.changes import CHANGES_GROUP, MessageType
from records.metrics import WS_MESSAGES, WS_SLOWEST_QUEUE
from records.selectors import active_deployment_id, changes_between, last_seq, oldest_seq
from records.ws.messages import LiveMessage, MessageBatch, encode, text_frame
from records.ws.outbox import Outbox, Send

logger = logging.getLogger(__name__)

READ_CHUNK = 1_000  # change-log rows per query


class Resync(Exception):
    """The client was sent a `resync` message: it gets a new snapshot next."""


class ChangesGone(Exception):
    """The change log no longer holds seqs a reader needs: pruned meanwhile (indexer.changelog).
    Its clients are closed (1011) and, reconnecting with `since`, get a snapshot."""

    def __init__(self, first: int) -> None:
        super().__init__(f"the change log no longer holds seq {first}")
        self.first = first


class Changes(list[tuple[int, bytes, bytes]]):
    """(seq, message text, its frame) of consecutive live messages, ending at the first `resync`
    among them. The frames are made with the texts, in the database thread, off the event loop."""

    resync: bool = False

    def batch(self) -> MessageBatch:
        return MessageBatch([text for _, text, _ in self], b"".join(frame for _, _, frame in self))


def read_changes(deployment_id: int, first: int, last: int) -> Changes:
    """The live messages of seqs first..last (at most READ_CHUNK of them), in order, through the
    first `resync`. ChangesGone if the log holds later seqs but no longer `first`."""
    rows = changes_between(deployment_id, first, last, READ_CHUNK)
    if rows and rows[0].seq != first:
        raise ChangesGone(first)
    changes = Changes()
    for seq, kind, payload in rows:
        text = encode(LiveMessage(type=cast(MessageType, kind), payload=payload, seq=seq))
        changes.append((seq, text, text_frame(text)))
        if kind == MessageType.RESYNC:
            changes.resync = True
            break
    return changes


def resume_point(since: int) -> int | None:
    """The first seq to send a client that saw every change up to `since`, when the change log
    still holds all those after it; None when it needs a snapshot instead."""
    deployment_id = active_deployment_id()
    if deployment_id is None or since < 0:
        return None
    last = last_seq(deployment_id)
    if since > last:
        return None
    if since < last:
        oldest = oldest_seq(deployment_id)
        if oldest is None or oldest > since + 1:
            return None
    return since + 1


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
                    outbox.put(rows[0][0], rows.batch())
                    if rows.resync:
                        outbox.fail(Resync())
                    else:
                        self.subscribers.add(outbox)
                    return
                deployment_id, last = self.deployment_id, self.cursor
            rows = await database_sync_to_async(read_changes)(deployment_id, outbox.next_seq, last)
            if not rows:  # seqs up to `last` were there when the feed read them
                raise ChangesGone(outbox.next_seq)
            await send(rows.batch())
            WS_MESSAGES.inc(len(rows))
            if rows.resync:
                raise Resync
            outbox.next_seq = rows[-1][0] + 1

    def unsubscribe(self, outbox: Outbox) -> None:
        self.subscribers.discard(outbox)

    async def _resolve(self) -> None:
        self.deployment_id = await database_sync_to_async(active_deployment_id)()
        if self.deployment_id is not None:
            # Subscribers waiting for a new deployment need it from its first seq.
            self.cursor = 0 if self.subscribers else await database_sync_to_async(last_seq)(self.deployment_id)

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
                self.cursor = await database_sync_to_async(last_seq)(self.deployment_id or 0)

    async def _read_on(self) -> None:
        async with self.lock:
            if self.deployment_id is None:
                await self._resolve()
                if self.deployment_id is None:
                    return
            if not self.subscribers:
                self.cursor = await database_sync_to_async(last_seq)(self.deployment_id)
                return
            while rows := await database_sync_to_async(read_changes)(self.deployment_id, self.cursor + 1,
                                                                     2**63 - 1):
                slice_size = max(1, min(READ_CHUNK, settings.BOUNTY_WS_MAX_BACKLOG // 2))
                for start in range(0, len(rows), slice_size):
                    part = Changes(rows[start : start + slice_size])
                    batch = part.batch()  # one for every client
                    for outbox in self.subscribers:
                        outbox.put(part[0][0], batch)
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
                await layer.group_add(CHANGES_GROUP, channel)  # again each round: group membership expires
                REDIS.answered()
                for _ in range(60):
                    try:
                        async with asyncio.timeout(60):
                            await layer.receive(channel)
                        self._wake.set()
                    except TimeoutError:
                        pass
            except FAILURES as error:  # Redis is away: the poll alone carries the feed meanwhile
                REDIS.record(error)
                await asyncio.sleep(RETRY_SECONDS)
            except Exception:
                logger.exception("the websocket feed lost the channel layer; polling meanwhile")
                await asyncio.sleep(RETRY_SECONDS)


_feed: LiveFeed | None = None


def process_feed() -> LiveFeed:
    """The server process's feed, made (and its gauge bound) by the first client."""
    global _feed
    if _feed is None:
        feed = _feed = LiveFeed()
        # Read by /metrics on another thread: list() copies the set without letting the event loop in.
        WS_SLOWEST_QUEUE.set_function(lambda: max((outbox.queued for outbox in list(feed.subscribers)), default=0))
    return _feed
