"""The process's one reader of the change log, fanning the changes out to every client.

One `LiveFeed` per server process reads the change log (seq gap-free per deployment) past its
cursor -- one query per wake-up for the whole process, never per client -- and puts the messages
in every subscribed client's bounded `Outbox` as one `MessageBatch`, encoded and framed once for all.
It wakes on the channel-layer message the indexer sends after each commit
(records.changes.notify_changes; with Redis it crosses processes) and polls besides: every
BOUNTY_WS_POLL_MS while no announcement can reach it, which alone carries the embedded default
(SQLite, no Redis), where the in-memory layer cannot reach another process, and every feed while
Redis cannot be reached; once a second while they do, for one lost. The log is read by seq
either way, so an outage of Redis costs no message and reorders none.

Every read goes on from the position of the last change read (records.history), and only while
the change log still vouches for it: a process whose database was restored, promoted or replaced
under it closes its clients (HistoryChanged) instead of streaming another history's changes on.

A client joins the feed at the seq after its snapshot (or after `since`): it reads the seqs it
misses from the database, the last stretch under the feed's lock, so no seq is lost or delivered
twice. A `resync` entry (a bulk backfill changed records without an entry per change) reaches its
clients like any other message; then each of them gets a new snapshot and joins again (`Resync`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any, cast

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from bountysite.databases import PRIMARY
from bountysite.redis_reach import FAILURES, REDIS, RETRY_SECONDS
from records.changes import CHANGES_GROUP, MessageType
from records.history import MAX_SEQ, Position
from records.lanes import FEED, READS, Shared
from records.limits import recent_messages, ws_backlog
from records.metrics import WS_MESSAGES, WS_RESUMES, WS_SLOWEST_QUEUE
from records.reads import read_on_lane
from records.replicas import REPLICAS
from records.selectors import (
    Change,
    active_deployment_id,
    changes_after,
    changes_between,
    genesis_position,
    head_position,
)
from records.ws.closes import INTERNAL_ERROR, Refusal
from records.ws.messages import LiveMessage, MessageBatch, encode, text_frame
from records.ws.outbox import Outbox, Send
from records.ws.recent import RecentChanges, Remembered

logger = logging.getLogger(__name__)

READ_CHUNK = 1_000  # change-log rows per query
ANNOUNCED_POLL_SECONDS = 1.0  # the feed's poll while the indexer's announcements reach it


class Resync(Exception):
    """The client was sent a `resync` message: it gets a new snapshot next."""


class ChangesGone(Refusal):
    """The change log no longer holds seqs a reader needs: pruned meanwhile (indexer.changelog).
    Its clients are closed (1011, saying so) and, reconnecting with their position, get a snapshot."""

    def __init__(self, first: int) -> None:
        super().__init__(INTERNAL_ERROR, f"the change log no longer holds seq {first}; reconnect with your position")
        self.first = first


class HistoryChanged(ChangesGone):
    """The change log no longer continues the history the feed was reading: the database was
    restored from a backup, a standby promoted, or another database put in its place. Its clients
    are closed (1011, saying so) and, reconnecting with their position, get a snapshot where the
    histories part."""

    def __init__(self, position: Position) -> None:
        Refusal.__init__(self, INTERNAL_ERROR, f"the service's change history changed after seq {position.seq} "
                                               "(a restore or failover); reconnect with your position")
        self.first = position.seq + 1


class Changes(list[tuple[int, bytes, bytes]]):
    """(seq, message text, its frame) of consecutive live messages, ending at the first `resync`
    among them. The frames are made with the texts, in the database thread, off the event loop."""

    resync: bool = False
    last: Position | None = None  # the position after the last of them
    deployment_id = 0  # whose changes they are

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.digests: list[str] = []  # of each change, in order (records.history)
        self.resync_seqs: set[int] = set()  # the seqs of `resync` messages among them

    def batch(self) -> MessageBatch:
        return MessageBatch([text for _, text, _ in self], b"".join(frame for _, _, frame in self))

    def remembered(self) -> list[Remembered]:
        """The messages as the feed's memory keeps them (records.ws.recent)."""
        return [Remembered(seq, digest, text, frame, seq in self.resync_seqs)
                for (seq, text, frame), digest in zip(self, self.digests, strict=True)]

    @classmethod
    def of(cls, remembered: list[Remembered]) -> Changes:
        changes = cls((entry.seq, entry.text, entry.frame) for entry in remembered)
        changes.digests = [entry.digest for entry in remembered]
        changes.resync_seqs = {entry.seq for entry in remembered if entry.resync}
        changes.resync = bool(changes.resync_seqs)
        changes.last = Position(remembered[-1].seq, remembered[-1].digest) if remembered else None
        return changes


def read_changes(deployment_id: int, first: int, last: int) -> Changes:
    """The live messages of seqs first..last (at most READ_CHUNK of them), in order, through the
    first `resync`. ChangesGone if the log holds later seqs but no longer `first`."""
    rows = changes_between(deployment_id, first, last, READ_CHUNK)
    if rows and rows[0].seq != first:
        raise ChangesGone(first)
    return _messages(deployment_id, rows)


def read_after(deployment_id: int, after: Position) -> Changes:
    """The live messages after `after` (at most READ_CHUNK of them), in order, through the first
    `resync`. HistoryChanged if this change log cannot vouch for `after`."""
    rows = changes_after(deployment_id, after, MAX_SEQ, READ_CHUNK)
    if rows is None:
        raise HistoryChanged(after)
    return _messages(deployment_id, rows)


def _learnt(changes: Changes) -> dict[int, int]:
    """What a database that gave `changes` holds: the deployment's seqs through the last of them."""
    return {changes.deployment_id: changes.last.seq} if changes.last is not None else {}


def read_newest(deployment_id: int, last: int, count: int) -> Changes:
    """The live messages of the newest `count` seqs through `last` that the log still holds, in
    order, `resync`s included (`Changes.resync` is not set)."""
    rows = changes_between(deployment_id, max(1, last - count + 1), last, count)
    return _messages(deployment_id, rows, through_resync=True)


def _messages(deployment_id: int, rows: list[Change], *, through_resync: bool = False) -> Changes:
    changes = Changes()
    changes.deployment_id = deployment_id
    for row in rows:
        text = encode(LiveMessage(type=cast(MessageType, row.type), payload=row.payload, seq=row.seq,
                                  position=str(row.position)))
        changes.append((row.seq, text, text_frame(text)))
        changes.digests.append(row.digest)
        if row.type == MessageType.RESYNC:
            changes.resync_seqs.add(row.seq)
            if not through_resync:
                changes.resync = True
                break
    changes.last = rows[len(changes) - 1].position if changes else None
    return changes


async def resume_point(since: str) -> int | None:
    """The first seq to send a client whose last position is `since`, as the database vouches for
    it: when this history holds that position (records.history) and every change after it; None
    when it needs a snapshot instead (a position of another history, pruned, or no position the
    service hands out). It is asked of a replica that holds the position (waiting for one to
    replay it, within BOUNTY_REPLICA_WAIT_MS), or of the primary. `LiveFeed.resume_point` asks the
    feed's memory first."""
    position = Position.parse(since)
    if position is None:
        return None
    deployment_id = await read_on_lane(READS, active_deployment_id)
    if deployment_id is None:
        return None
    # Through the seq after it: the genesis is vouched for by the first change while it is held.
    vouched = await read_on_lane(READS, changes_after, deployment_id, position, position.seq + 1, 0,
                                 floor={deployment_id: position.seq}) is not None
    return position.seq + 1 if vouched else None


class LiveFeed:
    """The process's one reader of the change log, fanning out to every subscribed Outbox."""

    def __init__(self) -> None:
        self.deployment_id: int | None = None
        self.cursor: Position | None = None  # the position of the newest change fanned out
        self.announced = 0  # the newest seq the indexer announced (records.changes.notify_changes)
        self.listening = False  # announcements reach the feed (a channel layer across processes answers)
        self._primary_asked = 0.0  # when the feed last asked the primary its head, without announcements
        self.subscribers: set[Outbox] = set()
        self.recent = RecentChanges()  # what it fanned out last (records.ws.recent)
        self._resumes: Shared[str, int | None] = Shared()  # resumes the database answers, by position
        self._stretches: Shared[tuple[int, int, int], Changes] = Shared()  # older stretches, by seqs
        self.lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run()), asyncio.create_task(self._listen())]

    async def resume_point(self, since: str) -> int | None:
        """The first seq to send a client resuming from `since` (module `resume_point`): from the
        feed's memory when it reaches that position, which costs the database nothing; otherwise
        asked of the database once for every client resuming from it meanwhile."""
        self.start()
        position = Position.parse(since)
        if position is None:
            WS_RESUMES.labels("none").inc()
            return None
        if self.deployment_id is None:
            async with self.lock:
                if self.deployment_id is None:
                    await self._resolve()
        if self.recent.vouches(position):
            WS_RESUMES.labels("memory").inc()
            return position.seq + 1
        start = await self._resumes.get(since, functools.partial(resume_point, since))
        WS_RESUMES.labels("database" if start is not None else "none").inc()
        return start

    async def subscribe(self, outbox: Outbox, send: Send) -> None:
        """Brings `outbox` from its next_seq up to the feed and adds it to the subscribers.

        What the feed remembers (records.ws.recent) is put in the outbox at once; long gaps (a slow
        snapshot, an old `since`) are sent from the database without the lock, each stretch read
        once for every client that needs it meanwhile; only the last stretch, at most what one
        wake-up reads, is read under the lock."""
        self.start()
        while True:
            async with self.lock:
                if self.deployment_id is None:
                    await self._resolve()
                if self.deployment_id is None or self.cursor is None or outbox.next_seq > self.cursor.seq:
                    self.subscribers.add(outbox)
                    return
                remembered = self.recent.from_seq(outbox.next_seq)
                if remembered is not None or self.cursor.seq - outbox.next_seq < min(READ_CHUNK, outbox.bound):
                    if remembered is not None:
                        rows = Changes.of(remembered)
                    else:  # under the lock no replica is waited for: the feed's readers wait on it
                        rows = await read_on_lane(FEED, read_changes, self.deployment_id, outbox.next_seq,
                                                  self.cursor.seq, floor={self.deployment_id: self.cursor.seq},
                                                  wait=False, trusted=True)
                        if not rows:  # seqs up to the cursor were there when the feed read them
                            raise ChangesGone(outbox.next_seq)
                    if rows:
                        outbox.put(rows[0][0], rows.batch())
                    if rows.resync:
                        outbox.fail(Resync())
                    else:
                        self.subscribers.add(outbox)
                    return
                deployment_id, last = self.deployment_id, self.cursor.seq
            stretch = (deployment_id, outbox.next_seq, last)
            rows = await self._stretches.get(stretch, functools.partial(self._read_stretch, *stretch))
            if not rows:  # seqs up to `last` were there when the feed read them
                raise ChangesGone(outbox.next_seq)
            await send(rows.batch())
            WS_MESSAGES.inc(len(rows))
            if rows.resync:
                raise Resync
            outbox.next_seq = rows[-1][0] + 1

    async def _read_stretch(self, deployment_id: int, first: int, last: int) -> Changes:
        return await read_on_lane(READS, read_changes, deployment_id, first, last, floor={deployment_id: last},
                                  trusted=True)

    def unsubscribe(self, outbox: Outbox) -> None:
        self.subscribers.discard(outbox)

    async def _holding(self, seq: int) -> str:
        """A database that holds the change `seq` (records.replicas): a replica that does, or does
        within BOUNTY_REPLICA_WAIT_MS, or the primary."""
        assert self.deployment_id is not None
        source = await REPLICAS.at_least_async({self.deployment_id: seq}, settings.BOUNTY_REPLICA_WAIT_SECONDS,
                                               trusted=True, lane=FEED)
        return source or PRIMARY

    async def _resolve(self) -> None:
        # Both read before either is set: a client's stream cancelled between the reads (its
        # client gone) must not leave a deployment without a cursor, which no read would ever move.
        source = REPLICAS.any()
        deployment_id = await read_on_lane(FEED, active_deployment_id, source=source)
        if deployment_id is not None:
            if self.subscribers:  # subscribers waiting for a new deployment need it from its first seq
                self._forget(await read_on_lane(FEED, genesis_position, deployment_id, source=source))
            else:  # its newest changes, remembered for the clients that resume after a restart
                head = await read_on_lane(FEED, head_position, deployment_id, source=source)
                # One more than it keeps: the oldest is forgotten, its position the memory's base.
                newest = await read_on_lane(FEED, read_newest, deployment_id, head.seq,
                                            recent_messages()[0] + 1, source=source)
                self._forget(head, newest.remembered() if newest and newest[-1][0] == head.seq else [])
        self.deployment_id = deployment_id

    def _forget(self, cursor: Position, remembered: list[Remembered] | None = None) -> None:
        """The feed goes on from `cursor`, remembering only `remembered` (messages through it)."""
        self.cursor = cursor
        messages, size = recent_messages()
        self.recent.reset(None if remembered else cursor, max_messages=messages, max_bytes=size)
        self.recent.extend(remembered or [])

    async def _run(self) -> None:
        poll: float = settings.BOUNTY_WS_POLL_SECONDS
        while True:
            try:
                # While the indexer's announcements reach it, the poll is only a safety net for one
                # lost: every 50 ms it was 20 reads a second of an idle process, each a transaction.
                async with asyncio.timeout(max(poll, ANNOUNCED_POLL_SECONDS) if self.listening else poll):
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
        except ChangesGone as gone:  # pruned past the feed, or another history: its clients missed messages
            logger.error("%s; closing the websocket clients that needed it", gone)
            async with self.lock:
                for outbox in self.subscribers:
                    outbox.fail(gone)
                self.subscribers.clear()
                head = await read_on_lane(FEED, head_position, self.deployment_id or 0, source=PRIMARY)
                self._forget(head)
                self.announced = 0  # announced in the history before
                REPLICAS.streaming(self.deployment_id or 0, head.seq)

    async def _read_on(self) -> None:
        """Fans out the changes after the cursor, which the change log must still vouch for: a
        database restored, promoted or replaced under the process holds another history, whose
        changes are never sent on from a position of the one before (HistoryChanged).

        They are read from a replica that holds the next change when more were announced (waiting
        for one to replay it, within BOUNTY_REPLICA_WAIT_MS), or else from the primary; on a poll with none
        announced, from a replica that holds the cursor, if one does (records.replicas). While no
        announcements come (no Redis), the primary is asked its newest change every
        BOUNTY_REPLICA_WAIT_MS instead, so that a lagging replica delays a change no longer."""
        if self.deployment_id is None:
            async with self.lock:
                if self.deployment_id is None:  # a client may have resolved it meanwhile
                    await self._resolve()
        if self.deployment_id is None or self.cursor is None:
            return
        deployment_id, cursor = self.deployment_id, self.cursor.seq
        await self._ask_primary_unless_announced(deployment_id, cursor)
        target = self.announced
        if target > cursor:  # the wait for a replica to hold the next change, without the lock
            source: str | None = await self._holding(cursor + 1)
        elif REPLICAS.replicas and not any(replica.in_use for replica in REPLICAS.replicas):
            source = PRIMARY
        else:
            source = await REPLICAS.at_least_async({deployment_id: cursor}, 0, or_primary=False, trusted=True)
        if source is None:  # no replica holds the cursor yet: nothing newer there
            return
        async with self.lock:
            if self.deployment_id != deployment_id or self.cursor is None or self.cursor.seq < cursor:
                return  # moved meanwhile (another history): the next wake-up reads on
            while rows := await read_on_lane(FEED, read_after, self.deployment_id, self.cursor, source=source,
                                             learn=_learnt):
                slice_size = max(1, min(READ_CHUNK, ws_backlog() // 2))
                for start in range(0, len(rows), slice_size):
                    part = Changes(rows[start : start + slice_size])
                    batch = part.batch()  # one for every client
                    for outbox in self.subscribers:
                        outbox.put(part[0][0], batch)
                    await asyncio.sleep(0)  # let the clients' senders drain before the next slice
                self.cursor = rows.last or self.cursor
                self.recent.extend(rows.remembered())
                REPLICAS.streaming(self.deployment_id, self.cursor.seq)
                if rows.resync:  # every client gets a new snapshot, and joins the feed again after it
                    for outbox in self.subscribers:
                        outbox.fail(Resync())
                    self.subscribers.clear()
                    return
                if len(rows) < READ_CHUNK:
                    break
            if source == PRIMARY and self.cursor.seq < target and self.announced == target:
                self.announced = self.cursor.seq  # announced in another history: the primary lacks it
            if self.announced > self.cursor.seq:  # more announced: the next as soon as a replica holds it
                self._wake.set()

    async def _ask_primary_unless_announced(self, deployment_id: int, cursor: int) -> None:
        """Without announcements, the primary's newest change stands for one, every
        BOUNTY_REPLICA_WAIT_MS (one short read of the primary)."""
        if self.listening or not REPLICAS.replicas:
            return
        now = time.monotonic()
        if now - self._primary_asked < max(settings.BOUNTY_REPLICA_WAIT_SECONDS, settings.BOUNTY_WS_POLL_SECONDS):
            return
        self._primary_asked = now
        head = await read_on_lane(FEED, head_position, deployment_id, source=PRIMARY)
        if head.seq > cursor:
            self.announced = max(self.announced, head.seq)

    def _announce(self, message: dict[str, Any]) -> None:
        """Wakes the feed for the change the indexer announced: its replica must hold that seq."""
        seq = message.get("seq")
        if (isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= MAX_SEQ
                and message.get("deployment") == self.deployment_id):
            self.announced = max(self.announced, seq)
        self._wake.set()

    async def _listen(self) -> None:
        """Wakes the feed on each indexer commit announced on the channel layer. Cancelled, it ends
        even where the Redis call under way swallowed the cancellation and fails later on its own
        (seen when an event loop closes with the feed's tasks): a task still asked to stop is not
        taken for a Redis outage and retried for ever."""
        layer = get_channel_layer()
        if layer is None:
            return
        channel = await layer.new_channel()
        while True:
            try:
                await layer.group_add(CHANGES_GROUP, channel)  # again each round: group membership expires
                self.listening = not isinstance(layer, InMemoryChannelLayer)  # which no indexer reaches
                REDIS.answered()
                for _ in range(60):
                    try:
                        async with asyncio.timeout(60):
                            message = await layer.receive(channel)
                        self._announce(message)
                    except TimeoutError:
                        pass
                    _stop_if_cancelled()
            except FAILURES as error:  # Redis is away: the poll alone carries the feed meanwhile
                _stop_if_cancelled()
                self.listening = False
                REDIS.record(error)
                await asyncio.sleep(RETRY_SECONDS)
            except Exception:
                _stop_if_cancelled()
                self.listening = False
                logger.exception("the websocket feed lost the channel layer; polling meanwhile")
                await asyncio.sleep(RETRY_SECONDS)


def _stop_if_cancelled() -> None:
    """Raises CancelledError in a task asked to stop whose cancellation a call swallowed."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


_feed: LiveFeed | None = None


def process_feed() -> LiveFeed:
    """The server process's feed, made (and its gauge bound) by the first client."""
    global _feed
    if _feed is None:
        feed = _feed = LiveFeed()
        # Read by /metrics on another thread: list() copies the set without letting the event loop in.
        WS_SLOWEST_QUEUE.set_function(lambda: max((outbox.queued for outbox in list(feed.subscribers)), default=0))
    return _feed
